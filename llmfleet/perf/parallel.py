"""Parallelism beyond one tensor-parallel group, as plain numbers: how a replica's GPUs are
laid out (pipeline stages, data-parallel attention with expert parallelism, nodes), the
links between them, and what each costs a step.

- Pipeline parallelism (PP stages of TP GPUs): vLLM keeps PP batches in flight, so the
  running sequences split into PP microbatches and every stage works on one of them at a
  time. A sequence's next token needs its microbatch to pass every stage: the token period
  (the step `step_time` returns) is PP stage times of a microbatch, which is the whole
  model's time for one microbatch on one TP group (each GPU still reads its weights once per
  microbatch), stretched by the slowest stage (`stage_imbalance`) plus PP hops of the
  activations (`hop_s`; the last returns the sampled tokens). A prefill chunk rides in one
  microbatch: a cycle grows by 1/PP of what the chunk adds to a microbatch
  (`pipeline_cycle_s`).
- Data-parallel attention with expert parallelism (vLLM `--data-parallel-size N
  --enable-expert-parallel`): each of the DP ranks (TP GPUs each) holds the attention and
  dense weights and its own sequences' KV (MLA's latent is no longer replicated across a TP
  group); the routed experts are spread over EP = TP x DP GPUs. Ranks step together: a MoE
  layer gathers every rank's tokens to the experts' GPUs and scatters the results back
  (`all_to_all_s`, vLLM's default `allgather_reducescatter` backend), and the busiest GPU
  sets the pace (`ep_imbalance`: uniform routing's balls-in-bins excess; real routers skew
  more, EPLB is not modeled).
- Links: inside a node NVLink (or PCIe); between nodes EFA, its latency and bus bandwidth
  from a measured two-node NCCL all-reduce (catalog.network)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from llmfleet.perf.elementwise import emax, emin


@dataclass(frozen=True)
class Link:
    """A collective's cost: a fixed latency per operation and a bandwidth (bytes/s) that
    bytes cross at: an all-reduce's bus bandwidth, or one GPU's share of a point-to-point
    link."""

    name: str  # nvlink | pcie | efa
    latency_s: float
    bus_b_s: float  # all-reduce bus bandwidth (nccl-tests busbw)
    p2p_b_s: float  # one GPU's share for point-to-point and all-gather traffic
    allreduce: tuple[tuple[float, float], ...] = ()  # measured (bytes, seconds), if any


@dataclass(frozen=True)
class Parallel:
    """How a replica's GPUs beyond its TP group are used. tp lives in StepModel; this holds
    the rest. gpus_per_node 0: unknown (the replica is taken to fit one node)."""

    pp: int = 1
    dp: int = 1
    ep: bool = False
    gpus_per_node: int = 0
    inter_node: Link | None = None

    @property
    def plain(self) -> bool:
        return self.pp == 1 and self.dp == 1 and not self.ep

    def ranks(self, tp: int) -> int:
        return tp * self.pp * self.dp

    def nodes(self, tp: int) -> int:
        if self.gpus_per_node <= 0:
            return 1
        return max(1, math.ceil(self.ranks(tp) / self.gpus_per_node))

    def tp_crosses_nodes(self, tp: int) -> bool:
        return self.gpus_per_node > 0 and tp > self.gpus_per_node

    def pp_crosses_nodes(self, tp: int) -> bool:
        return self.nodes(tp) > 1 and not self.tp_crosses_nodes(tp) and self.pp > 1

    def ep_crosses_nodes(self, tp: int) -> bool:
        return self.ep and self.gpus_per_node > 0 and tp * self.dp > self.gpus_per_node

    def ep_size(self, tp: int) -> int:
        return tp * self.dp if self.ep else 1


SINGLE = Parallel()
"""One TP group: no pipeline stages, no data-parallel ranks."""


InterNode = Literal["efa", "tcp"]
"""What crosses between a replica's nodes: EFA (the serving image carries the EFA NCCL plugin)
or NCCL's and NIXL's TCP transports on the node's primary ENA interface."""


def tcp_link(latency_us: float, busbw_gb_s: float, gb_s_per_gpu: float) -> Link:
    """NCCL over TCP sockets between nodes: a collective's latency, an all-reduce's bus
    bandwidth and one GPU's share of the card for point-to-point sends (catalog/tcp.csv)."""
    return Link("tcp", latency_us * 1e-6, busbw_gb_s * 1e9, gb_s_per_gpu * 1e9)


def efa_link(
    latency_us: float,
    busbw_gb_s: float,
    gb_s_per_gpu: float,
    allreduce: tuple[tuple[float, float], ...] = (),
) -> Link:
    """EFA between nodes from a two-node nccl-tests all_reduce: its small-message time (the
    latency of one collective, an upper bound for a point-to-point send), its large-message
    bus bandwidth and, where given, the whole measured curve (an all-reduce's time between
    the measured sizes: `all_reduce_s`); point-to-point traffic gets one GPU's share of the
    node's EFA line rate."""
    return Link("efa", latency_us * 1e-6, busbw_gb_s * 1e9, gb_s_per_gpu * 1e9, allreduce)


def microbatch(decode: float, pp: int) -> float:
    """Sequences per pipeline microbatch: the running batch split PP ways; below PP
    sequences each is a microbatch of its own (stages idle: the pipeline bubble)."""
    return emax(decode / pp, emin(decode, 1.0))


def stage_imbalance(layers: int, pp: int) -> float:
    """The slowest stage over the mean: vLLM splits L layers into PP stages as evenly as it
    can, so one stage holds ceil(L / PP) (the embedding and LM head ride on the end stages,
    counted in the step already)."""
    if pp <= 1:
        return 1.0
    return math.ceil(layers / pp) * pp / layers


def pipeline_cycle_s(plain_s: float, with_chunk_s: float, pp: int) -> float:
    """Token period of a pipeline whose microbatch time is `plain_s` (the whole model, one
    microbatch) when one microbatch also carries a prefill chunk (`with_chunk_s`). Two bounds:
    every stage is busy (PP - 1) plain microbatches and the longer one, each 1/PP of the model
    (plain + (with_chunk - plain) / PP); and the chunk's microbatch must pass all PP stages
    before its next token (with_chunk), while the others queue behind it at each stage. The
    second binds: a pipeline does not hide a chunk's stall, it only makes the microbatch that
    stalls smaller."""
    return emax(plain_s + (with_chunk_s - plain_s) / pp, with_chunk_s)


def hop_s(tokens: float, hidden: int, tp: int, link: Link) -> float:
    """One stage-to-stage send of a microbatch's activations (hidden states and residual,
    16-bit), split across the TP ranks, each over its own share of the link."""
    msg = 2 * tokens * hidden * 2.0
    return link.latency_s + msg / tp / link.p2p_b_s


def all_reduce_s(msg_bytes: float, ranks: int, link: Link) -> float:
    """An all-reduce of `msg_bytes` across `ranks` GPUs: on a link with a measured curve, the
    measured time at that size (log-log between the measured sizes; past the largest, its
    bus bandwidth); else a ring (nccl-tests' bus bandwidth definition: latency +
    2 (n - 1) / n x bytes / busbw). Mid-size messages (64 KiB - 1 MiB, a decode step's)
    take about twice the small-message latency over EFA, which a latency-bandwidth line
    through the ends misses."""
    if ranks <= 1:
        return 0.0
    if link.allreduce:
        return measured_s(link.allreduce, msg_bytes, link.bus_b_s, ranks)
    return link.latency_s + 2 * (ranks - 1) / ranks * msg_bytes / link.bus_b_s


def measured_s(
    curve: tuple[tuple[float, float], ...], msg_bytes: float, bus_b_s: float, ranks: int
) -> float:
    """Time at `msg_bytes` on a measured (bytes, seconds) curve: its first point below it,
    log-log between points, the bus bandwidth beyond the last."""
    if isinstance(msg_bytes, np.ndarray):
        sizes = np.log([b for b, _ in curve])
        times = np.log([s for _, s in curve])
        last_b, last_s = curve[-1]
        inside = np.exp(np.interp(np.log(np.maximum(msg_bytes, 1e-300)), sizes, times))
        beyond = last_s + 2 * (ranks - 1) / ranks * (msg_bytes - last_b) / bus_b_s
        return cast(float, np.where(msg_bytes > last_b, beyond, inside))
    first_b, first_s = curve[0]
    if msg_bytes <= first_b:
        return first_s
    for (b0, s0), (b1, s1) in zip(curve, curve[1:], strict=False):
        if msg_bytes <= b1:
            w = (math.log(msg_bytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return math.exp(math.log(s0) + w * (math.log(s1) - math.log(s0)))
    last_b, last_s = curve[-1]
    return last_s + 2 * (ranks - 1) / ranks * (msg_bytes - last_b) / bus_b_s


def all_to_all_s(global_tokens: float, hidden: int, ep: int, link: Link) -> float:
    """A MoE layer's dispatch and combine with vLLM's allgather_reducescatter: every EP rank
    gathers all ranks' tokens (16-bit hidden states) and reduce-scatters the experts'
    outputs back, each moving (EP - 1) / EP of them over its share of the link."""
    if ep <= 1:
        return 0.0
    moved = (ep - 1) / ep * global_tokens * hidden * 2.0
    return 2 * (link.latency_s + moved / link.p2p_b_s)


def ep_imbalance(assignments: float, ep: int) -> float:
    """The busiest of EP ranks over the mean when `assignments` token-to-expert routings
    spread uniformly over them: the expected maximum of EP binomial counts, mean + sigma x
    sqrt(2 ln EP) (a floor: real routers skew beyond uniform)."""
    if ep <= 1:
        return 1.0
    if isinstance(assignments, np.ndarray):
        safe = np.maximum(assignments, 1e-300)
        return cast(float, np.where(
            assignments > 0, 1.0 + np.sqrt(2 * math.log(ep) * (ep - 1) / safe), 1.0
        ))
    if assignments <= 0:
        return 1.0
    return 1.0 + math.sqrt(2 * math.log(ep) * (ep - 1) / assignments)


def stage_layers(layers: int, pp: int) -> int:
    """Layers the fullest stage holds (its KV and weights set the memory)."""
    return math.ceil(layers / pp)


def weights_per_gpu(
    shared_b: float,
    expert_b: float,
    embed_b: float,
    lm_head_b: float,
    layers: int,
    tp: int,
    parallel: Parallel,
) -> float:
    """Weight bytes on the fullest GPU. `shared_b`: what every token reads (attention, dense
    MLPs, shared experts, the embedding and an untied LM head, `lm_head_b`; 0 when tied),
    `expert_b`: the routed experts. With EP the experts spread over TP x DP GPUs; with PP the
    fullest stage holds ceil(L / PP) layers and one end: the embedding (first stage) or the
    LM head (last; a tied one is a copy of the embedding)."""
    experts = expert_b / parallel.ep_size(tp) if parallel.ep else expert_b / tp
    if parallel.pp <= 1:
        return shared_b / tp + experts
    share = stage_layers(layers, parallel.pp) / layers
    body = (shared_b - embed_b - lm_head_b) / tp
    end = max(embed_b, lm_head_b) / tp
    return body * share + end + experts * share
