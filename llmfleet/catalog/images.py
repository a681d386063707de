"""The serving images llmfleet knows (images.csv), each with the facts a deploy and the step
model need: the vLLM release it carries (every rendered flag is checked against the pinned
one) and whether it carries the EFA NCCL plugin (aws-ofi-nccl with libfabric). Without the
plugin NCCL crosses nodes over TCP sockets on the ENA interface and NIXL over UCX's TCP
transport, whatever EFA devices the node has.

An image a user builds (the pinned vLLM image plus the EFA installer) is a row they add,
with its source: the row, not a flag, says what the image carries."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from llmfleet.catalog.vllm_release import VLLM_VERSION

IMAGES = Path(__file__).resolve().parent / "images.csv"


@dataclass(frozen=True)
class ServingImage:
    image: str
    repository: str
    """`{region}` stands for the deploying region (ECR repositories are regional)."""
    tag: str
    registry: str
    """docker-hub (pulled through the ECR cache when the plan has one) or ecr."""
    vllm_version: str
    efa_nccl_plugin: bool
    libfabric: str
    read_on: str
    source: str

    def ref(self, region: str) -> str:
        return f"{self.repository.format(region=region)}:{self.tag}"


@cache
def images() -> dict[str, ServingImage]:
    with IMAGES.open(newline="") as f:
        return {
            row["image"]: ServingImage(
                **{**row, "efa_nccl_plugin": row["efa_nccl_plugin"] == "true"}  # type: ignore[arg-type]
            )
            for row in csv.DictReader(f)
        }


def default_image() -> ServingImage:
    """The pinned vLLM release's upstream image."""
    return next(
        i for i in images().values()
        if i.vllm_version == VLLM_VERSION and i.registry == "docker-hub"
    )


def serving_image(key: str | None) -> ServingImage:
    """The image a plan names (`startup.image`), or the default; KeyError for an unknown key."""
    return default_image() if key is None else images()[key]
