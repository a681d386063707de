"""Disaggregated prefill and decode, as plain numbers: a prefill pool computes each prompt's KV
and its first token, the decode pool pulls the KV (vLLM's NixlConnector) and generates the
rest. No prompt chunk ever rides a decode period, so a token gap is a decode period; the
price is a second pool and the KV's trip between them.

- Prefill replica: an engine that decodes nothing (`Engine(decodes=False)`): prompts queue in
  its lane (M/G/c of their packed work, `perf.latency`) and each is prefilled in chunks of the
  budget.
- KV transfer: the prompt's KV (every layer) crosses the link between the pools' nodes, each
  of the decode replica's GPUs pulling its share over its own share of the link; over TCP
  (no EFA in the serving image) NIXL's UCX transport moves a fraction of what EFA does.
- Decode replica: an engine that prefills nothing (`Engine(prefills=False)`); its slots are a
  birth-death chain as an aggregated replica's.
- TTFT: request handling + the prefill lane's wait + the prompt's own prefill + its KV's
  transfer + the decode pool's first period + the decode slots' wait, as one distribution
  over the prompt lengths."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmfleet.perf.latency import OVER_SLO, Point
from llmfleet.perf.parallel import Link
from llmfleet.perf.queueing import wait_tail
from llmfleet.perf.workload import SloTargets


def kv_transfer_s(kv_bytes: float, link: Link, readers: int) -> float:
    """The prompt's KV from the prefill replica to the decode replica: `readers` GPUs (the
    decode replica's TP group) each pull a share over their own share of the link."""
    return link.latency_s + kv_bytes / (link.p2p_b_s * max(1, readers))


@dataclass(frozen=True)
class Pair:
    """A prefill replica and a decode replica, each at its own rate, and each prompt bin's KV
    transfer between them."""

    prefill: Point  # the prefill replica (running 0: nothing decodes on it)
    decode: Point  # the decode replica
    transfer_s: np.ndarray  # each prompt bin's KV to the decode pool

    @property
    def stable(self) -> bool:
        return self.prefill.lane.stable and self.decode.stable

    @property
    def fixed_s(self) -> float:
        """Request handling, and the decode pool's first period."""
        handling = self.prefill.table.engine.step_model.ttft_overhead_s
        return handling + self.decode.lane.decode_s

    def ttft_over(self, target_s: float) -> float:
        """Share of requests (the refused ones included) whose TTFT exceeds `target_s`."""
        p = self.prefill.table.workload.prompts
        if not self.stable:
            return 1.0
        slack = target_s - self.fixed_s - self.prefill.own_prefill_s - self.transfer_s
        lane, dec = self.prefill.lane, self.decode
        tail = wait_tail(np.maximum(slack, 0.0), lane.wait_chance, lane.wait_s,
                         dec.slot_full_chance, dec.slot_wait_s)
        tail = np.where(slack < 0, 1.0, tail)
        return float(p.refused + tail @ p.weights)

    def ttft_at(self, percentile: float | None = None) -> float:
        """TTFT (s) at a percentile (the decode point's by default)."""
        tail = 1 - (self.decode.percentile if percentile is None else percentile) / 100
        if not self.stable or self.prefill.table.workload.prompts.refused >= tail:
            return math.inf
        own = self.prefill.own_prefill_s + self.transfer_s
        lo, hi = self.fixed_s + float(own.min()), self.fixed_s + float(own.max()) + 0.1
        while self.ttft_over(hi) > tail:
            hi *= 2
            if hi > 1e7:
                return math.inf
        while hi - lo > 1e-5 * hi:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.ttft_over(mid) > tail else (lo, mid)
        return hi

    def itl_s(self, kind: str) -> float:
        return self.decode.itl_s(kind)

    def margin(self, slo: SloTargets) -> float:
        """As `Point.margin`: the decode pool's token gaps, stall and slots, and TTFT over
        both pools."""
        if not self.stable:
            return OVER_SLO
        tail = slo.tail
        dec = self.decode
        over_itl = dec.tpot_over(slo.itl_s) if slo.itl == "tpot" else dec.gap_over(slo.itl_s)
        return max(
            over_itl / tail - 1,
            dec.stall_s / slo.max_stall_s - 1,
            dec.slot_full_chance / tail - 1,
            self.ttft_over(slo.ttft_s) / tail - 1,
        )

    def meets(self, slo: SloTargets) -> bool:
        return self.margin(slo) <= 1e-9
