"""The replica shapes the search tries on an instance type: tensor parallelism inside a node
(as before), and beyond it pipeline stages across nodes, tensor parallelism across nodes and,
for MoE models, data-parallel attention with expert parallelism.

- TP 1, 2, 4, 8 inside one node (a node hosts GPUs / TP replicas).
- MoE: TP t x DP (node / t) with the experts over the whole node (EP = the node's GPUs),
  t in 1, 2, 4: the KV pool is no longer replicated across a TP group (MLA's latent) and
  each rank keeps its own sequences.
- Where a replica may span nodes (catalog.network: EFA with GPUDirect RDMA): TP = a node x
  PP 2 and PP 4 (vLLM's recommended layout for a model larger than a node), TP across two
  nodes, and for MoE DP over two nodes with EP 16.

Speculative decoding is tried on single-group shapes only (its drafter runs beside one TP
group). What crosses between nodes travels as the pods get it (`inter_node`): EFA only where
the serving image carries the EFA NCCL plugin, else TCP sockets on the ENA interface."""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.catalog import network
from llmfleet.catalog.hardware import Instance
from llmfleet.catalog.images import serving_image
from llmfleet.perf.architecture import Arch
from llmfleet.perf.layout import layout_problem, parallel_for
from llmfleet.perf.parallel import InterNode, Parallel

TP_DEGREES = (1, 2, 4, 8)
PP_NODES = (2, 4)
"""Pipeline stages across nodes the search tries (one stage per node)."""
DP_TP = (1, 2, 4)
"""TP per data-parallel rank the search tries for MoE models."""


@dataclass(frozen=True)
class Shape:
    """How one replica uses GPUs: TP per group, PP stages, DP ranks, experts over EP."""

    tp: int
    pp: int = 1
    dp: int = 1
    ep: bool = False

    @property
    def ranks(self) -> int:
        """GPUs of one replica."""
        return self.tp * self.pp * self.dp

    @property
    def plain(self) -> bool:
        """One TP group (what the search tried before it had shapes)."""
        return self.pp == 1 and self.dp == 1 and not self.ep

    @property
    def ep_size(self) -> int:
        return self.tp * self.dp if self.ep else 1

    @property
    def label(self) -> str:
        if self.plain:
            return f"TP {self.tp}"
        parts = [f"TP {self.tp}"]
        if self.pp > 1:
            parts.append(f"PP {self.pp}")
        if self.dp > 1:
            parts.append(f"DP {self.dp}")
        text = " x ".join(parts)
        return text + (f" (EP {self.ep_size})" if self.ep else "")

    def replicas_per_node(self, gpus_per_node: int) -> int:
        """Replicas one node hosts (1 when a replica spans nodes)."""
        return max(1, gpus_per_node // self.ranks)

    def nodes_per_replica(self, gpus_per_node: int) -> int:
        """Nodes one replica spans (1 when it fits a node)."""
        return max(1, self.ranks // gpus_per_node)

    def parallel(self, instance: Instance, inter_node: InterNode = "efa") -> Parallel:
        return parallel_for(instance, self.tp, self.pp, self.dp, self.ep, inter_node)

    def problem(self, arch: Arch, instance: Instance) -> str | None:
        """Why this shape cannot run the model on nodes of `instance`, or None."""
        found = layout_problem(arch, instance, self.tp, self.pp, self.dp, self.ep)
        return found[1] if found else None


def inter_node(image: str | None) -> InterNode:
    """What crosses a plan's nodes: EFA where its serving image (`startup.image`, catalog
    images.csv) carries the EFA NCCL plugin, else TCP."""
    return "efa" if serving_image(image).efa_nccl_plugin else "tcp"


def shapes(arch: Arch, instance: Instance) -> list[Shape]:
    """Every shape the search tries for this model on this instance type, plainest first."""
    gpn = instance.gpu_count
    out = [Shape(tp) for tp in TP_DEGREES if tp <= gpn]
    if arch.is_moe:
        out += [Shape(tp, dp=gpn // tp, ep=True) for tp in DP_TP if tp < gpn and gpn % tp == 0]
    if network.multi_node_row(instance) is not None:
        out += [Shape(gpn, pp=nodes) for nodes in PP_NODES]
        out.append(Shape(2 * gpn))
        if arch.is_moe:
            out.append(Shape(1, dp=2 * gpn, ep=True))
    return out
