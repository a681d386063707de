"""A cold start, term by term, each with its source; and what is derived from it: the
startup probe's budget, Karpenter's consolidateAfter (the scale-up lead time) and whether
the headroom carries the traffic growth of one cold start.

Weights path (one per region): an S3 bucket in the region holds the checkpoint, staged
once; every pod streams it with vLLM's `--load-format runai_streamer` straight into GPU
memory (no disk copy, no Hugging Face at pod start, no NAT: a gateway endpoint carries S3).
Chosen over instance-store NVMe (empty on every new node: the first pod of each node would
still download) and FSx for Lustre (a file system per region billed by the hour, for a
read-once load that S3 serves at NIC speed)."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.weights import account_of, weights_bucket, weights_prefix
from llmfleet.search.choice import Choice
from llmfleet.search.levers import served
from llmfleet.units import GIB


class ColdStartTerm(Data):
    name: str
    seconds: float
    source: str


class ColdStart(Data):
    """From a pending pod with no node to a ready replica."""

    weights_uri: str = Field(description="Where every pod streams the weights from.")
    load_format: str
    terms: list[ColdStartTerm]
    node_s: float = Field(description="Node launch and join: absent when a slot is free.")
    container_s: float = Field(
        description="Container start to ready: what the startup probe times."
    )
    total_s: float = Field(description="Node + image pull + container: the scale-up lead time.")
    startup_budget_s: int = Field(description="The startup probe's failures x period.")
    consolidate_after_s: int = Field(
        description="Karpenter waits this long before removing an empty node (>= total_s)."
    )
    rollout_timeout_s: int = Field(
        description="How long `pulumi up` waits for the Deployment to become ready "
        "(pulumi.com/timeoutSeconds): a node launch, the image pull and the whole startup "
        "budget. A crash loop fails the update at this deadline instead of passing unseen."
    )
    growth_during_cold_start: float = Field(
        description="Traffic growth during one cold start, as a share of the peak."
    )
    headroom_carries_growth: bool


KAITO = "kaito-project/kaito#2325 (measured: vLLM 0.25.1, Qwen 27B on one A100, 16 min cold start)"
NODE_LAUNCH_S = 284 + 126
"""Node provisioning (284 s) and initialisation until the node is ready (126 s) [KAITO]."""
IMAGE_PULL_GB_PER_S = 5.60 / 101
"""kaito's 5.60 GB image pulled in 101 s [KAITO]."""
IMAGE_GB = 10.0
"""vLLM-class CUDA images: ~10 GB (karpenter-provider-aws#7414, consolidation during 10 GB
image pulls; deploy-landscape: 10-20 GB). vllm/vllm-openai's own size was not measured here."""
BOOTSTRAP_S = 74 + 21
"""Container start to weight loading: framework bootstrap and engine pre-load [KAITO]."""
ENGINE_START_S = 195
"""Weights loaded to HTTP server up: engine init, compile, CUDA graphs, warm-up [KAITO]."""
S3_STREAM_GIB_PER_S = 3.51
"""Run:ai Model Streamer from S3 on a g5.12xlarge (40 Gbps): 3.51 GiB/s
(run-ai/runai-model-streamer docs/src/benchmarks.md)."""
S3_SHARE_OF_NIC = S3_STREAM_GIB_PER_S / (40e9 / 8 / GIB)
"""That rate is 75 % of the 40 Gbps NIC; slower NICs are scaled by it, faster ones are not
credited beyond the measured rate."""
STARTUP_PERIOD_S = 10
PROBE_MARGIN = 1.5
"""The startup probe allows 1.5x the predicted container start: the terms come from other
hardware and models than the plan's."""
LOAD_FORMAT = "runai_streamer"


def weights_uri(choice: Choice) -> str:
    """Where the served checkpoint (the precision the search chose) sits in the region: its
    revision's prefix in the region's bucket (`fleetplan.weights`)."""
    plan = choice.plan
    bucket = weights_bucket(plan.name, choice.region.name, account_of(plan))
    repo = served(plan, choice.model, choice.served_levers).hf_repo
    return f"s3://{bucket}/{weights_prefix(repo, plan.model.revision)}"


def stream_gib_per_s(choice: Choice) -> float:
    """What one pod streams at: the node's NIC share, split among the replicas that start on
    the node together."""
    nic_gib_s = choice.instance.sustained_network_gbps * 1e9 / 8 / GIB
    return min(S3_STREAM_GIB_PER_S, nic_gib_s * S3_SHARE_OF_NIC) / choice.replicas_per_node


def build_cold_start(choice: Choice, weights_gib: float) -> ColdStart:
    """A replica's cold start. One that spans N nodes needs N nodes at once: they launch
    together (the term is the same), and each streams its share of the weights (its pipeline
    stage, or its ranks' shards) at its own NIC's rate."""
    rate = stream_gib_per_s(choice)
    image_s = IMAGE_GB / IMAGE_PULL_GB_PER_S
    nodes = choice.nodes_per_replica
    per_node_gib = weights_gib / nodes
    weights_s = per_node_gib / rate
    launch = "node launch and join" if nodes == 1 else f"{nodes} nodes launch and join together"
    share = "" if nodes == 1 else f" per node (1/{nodes} of {weights_gib:.1f} GiB)"
    terms = [
        ColdStartTerm(name=launch, seconds=NODE_LAUNCH_S, source=KAITO),
        ColdStartTerm(
            name=f"image pull ({IMAGE_GB:g} GB at {IMAGE_PULL_GB_PER_S * 1000:.0f} MB/s)",
            seconds=round(image_s, 1),
            source=f"{KAITO}; image size: karpenter-provider-aws#7414",
        ),
        ColdStartTerm(name="vLLM bootstrap", seconds=BOOTSTRAP_S, source=KAITO),
        ColdStartTerm(
            name=f"weights {per_node_gib:.1f} GiB{share} from S3 at {rate:.2f} GiB/s "
            "(runai_streamer)",
            seconds=round(weights_s, 1),
            source="run-ai/runai-model-streamer docs/src/benchmarks.md (S3: 3.51 GiB/s, 40 Gbps)",
        ),
        ColdStartTerm(
            name="engine start: compile, CUDA-graph capture, warm-up",
            seconds=ENGINE_START_S,
            source=KAITO,
        ),
    ]
    container_s = BOOTSTRAP_S + weights_s + ENGINE_START_S
    total_s = NODE_LAUNCH_S + image_s + container_s
    probes = math.ceil(container_s * PROBE_MARGIN / STARTUP_PERIOD_S)
    budget_s = probes * STARTUP_PERIOD_S
    growth = choice.plan.startup.traffic_growth_per_min * total_s / 60
    return ColdStart(
        weights_uri=weights_uri(choice),
        load_format=LOAD_FORMAT,
        terms=terms,
        node_s=NODE_LAUNCH_S,
        container_s=round(container_s, 1),
        total_s=round(total_s, 1),
        startup_budget_s=budget_s,
        consolidate_after_s=math.ceil(total_s / 60) * 60,
        rollout_timeout_s=math.ceil((NODE_LAUNCH_S + image_s + budget_s) / 60) * 60,
        growth_during_cold_start=round(growth, 4),
        headroom_carries_growth=growth <= choice.plan.headroom,
    )
