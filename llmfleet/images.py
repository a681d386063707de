"""The vLLM image reference a region's pods pull: through the region's ECR pull-through
cache of Docker Hub when the plan names the account (nodes then pull from ECR, whose layers
come through the VPC's S3 gateway endpoint, not the NAT gateways, and a Docker Hub outage
or rate limit does not stop a scale-up), pinned by digest when the plan gives one.

llmfleet cannot read a digest offline and never invents one: without
`startup.image_digest` the image is pinned by its release tag only (the report says so).
"""

from __future__ import annotations

from llmfleet.catalog.vllm_release import vllm_release
from llmfleet.plan_capacity import Startup

ECR_PREFIX = "docker-hub"
"""Repository prefix of the pull-through cache rule (components.weights)."""
DOCKER_HUB = "registry-1.docker.io"


def image_ref(startup: Startup, region: str) -> str:
    image = str(vllm_release()["image"])  # vllm/vllm-openai:v0.33.0
    if startup.ecr_account_id:
        registry = f"{startup.ecr_account_id}.dkr.ecr.{region}.amazonaws.com"
        image = f"{registry}/{ECR_PREFIX}/{image}"
    return f"{image}@{startup.image_digest}" if startup.image_digest else image


def image_notes(startup: Startup) -> list[str]:
    notes = []
    if not startup.image_digest:
        notes.append("image pinned by tag only: give startup.image_digest to pin the digest")
    if not startup.ecr_account_id:
        notes.append(
            "image pulled from Docker Hub through the NAT gateways: give "
            "startup.ecr_account_id to pull through the region's ECR cache"
        )
    return notes
