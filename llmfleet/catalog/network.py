"""The network between GPU nodes: EFA interfaces per instance type, whether GPUs reach
them directly (GPUDirect RDMA), and a measured two-node collective (efa.csv, each row with
its source).

A replica may span nodes only where GPUs talk over EFA with GPUDirect RDMA and a two-node
NCCL measurement (or one of the same EFA configuration) gives the latency and bandwidth a
step pays: `multi_node_row`. Elsewhere (no EFA, or EFA staged through host memory as on
g5/g6/g6e) a replica stays inside one node."""

from __future__ import annotations

import csv
from functools import cache

from pydantic import BaseModel, ConfigDict

from llmfleet.catalog.hardware import DATA_DIR, Instance, instances

MULTI_NODE_GPUS_PER_NODE = 8
"""Nodes a replica spans are whole 8-GPU nodes (the LeaderWorkerSet runs one pod per node)."""


class Efa(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    efa_interfaces: int
    efa_gbps: float
    gpudirect_rdma: bool
    collective_latency_us: float | None = None
    collective_busbw_gb_s: float | None = None
    measured_on: str | None = None
    source: str

    @property
    def gb_s_per_gpu(self) -> float:
        """Line rate of one GPU's share of the node's EFA interfaces, GB/s."""
        gpus = instances()[self.instance_type].gpu_count
        return self.efa_gbps / 8 / gpus


@cache
def efa_table() -> dict[str, Efa]:
    with open(DATA_DIR / "efa.csv", newline="") as f:
        rows = [{k: (v if v != "" else None) for k, v in r.items()} for r in csv.DictReader(f)]
    return {e.instance_type: e for e in (Efa.model_validate(r) for r in rows)}


@cache
def allreduce_curve(measured_on: str) -> tuple[tuple[float, float], ...]:
    """(message bytes, seconds) of the two-node all-reduce measured on this instance type
    (efa_allreduce.csv), by message size."""
    with open(DATA_DIR / "efa_allreduce.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["measured_on"] == measured_on]
    return tuple(
        sorted((float(r["message_bytes"]), float(r["time_us"]) * 1e-6) for r in rows)
    )


class Tcp(BaseModel):
    """What crosses a node's primary ENA interface when the serving image has no EFA
    plugin: NCCL over TCP sockets, NIXL over UCX's TCP transport (tcp.csv)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    card_gbps: float
    allreduce_busbw_gb_s: float
    p2p_gb_s: float  # one sender using the whole card
    latency_us: float
    kv_transfer_gb_s: float  # one KV transfer (UCX opens one TCP connection)
    read_on: str
    source: str

    @property
    def p2p_gb_s_per_gpu(self) -> float:
        """One GPU's share of the card when every GPU of the node sends."""
        return self.p2p_gb_s / instances()[self.instance_type].gpu_count


@cache
def tcp_table() -> dict[str, Tcp]:
    with open(DATA_DIR / "tcp.csv", newline="") as f:
        return {r["instance_type"]: Tcp.model_validate(r) for r in csv.DictReader(f)}


def tcp(instance_type: str) -> Tcp | None:
    """The instance type's TCP row (what crosses its nodes without EFA), or None."""
    return tcp_table().get(instance_type)


def efa(instance_type: str) -> Efa | None:
    """The instance type's EFA row, or None without EFA in the catalog."""
    return efa_table().get(instance_type)


def multi_node_row(instance: Instance) -> Efa | None:
    """The EFA row that lets a replica span nodes of this instance type, or None: it needs
    GPUDirect RDMA, a measured collective and whole 8-GPU nodes."""
    row = efa(instance.instance_type)
    if row is None or not row.gpudirect_rdma or row.collective_latency_us is None:
        return None
    if instance.gpu_count != MULTI_NODE_GPUS_PER_NODE:
        return None
    return row


def multi_node_instances() -> list[str]:
    """Instance types a replica may span nodes of, by name."""
    return sorted(n for n, i in instances().items() if multi_node_row(i) is not None)


def why_single_node(instance: Instance) -> str:
    """Why a replica cannot span nodes of this instance type (for error messages)."""
    row = efa(instance.instance_type)
    if row is None:
        return f"{instance.instance_type} has no EFA"
    if not row.gpudirect_rdma:
        return (
            f"{instance.instance_type}'s EFA has no GPUDirect RDMA (GPU traffic is staged "
            "through host memory) and no measured collective"
        )
    return f"{instance.instance_type} has {instance.gpu_count} GPU(s), not a whole 8-GPU node"


def node_for_gpu(gpu: str) -> Instance:
    """The node `predict` assumes for a GPU: the catalog instance with the most of them,
    preferring one a replica may span (then by name)."""
    candidates = [i for i in instances().values() if i.gpu == gpu]
    return min(
        candidates,
        key=lambda i: (-i.gpu_count, multi_node_row(i) is None, i.instance_type),
    )
