"""Disaggregated prefill and decode, as plain numbers: a prefill pool computes each prompt's
KV and its first token, the decode pool pulls the KV (vLLM's NixlConnector) and generates the
rest. No prompt chunk ever rides a decode step, so a token gap is one decode step; the price
is a second pool and the KV's trip between them.

- Prefill replica: prompts queue (M/G/1, `perf.queueing`) and are prefilled in steps of up to
  `chunk` tokens with nothing decoding beside them; a prompt's service time is its tokens'
  share of a full step (short prompts share a step), the p-th prompt alone takes its own
  chunks (`prefill_alone_s`).
- KV transfer: the prompt's KV (every layer, `kv_bytes`) crosses the link between the pools'
  nodes, each of the decode replica's GPUs pulling its share over its own share of the link
  (`kv_transfer_s`).
- Decode replica: every step is a decode step of the running batch (`decode_step_s`).
- TTFT at the percentile: queue wait + the prompt's prefill + its KV transfer + the decode
  pool's first step (+ the fitted fixed overhead)."""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.perf.chunked import prefill_s
from llmfleet.perf.parallel import Link
from llmfleet.perf.queueing import prefill_wait
from llmfleet.perf.step import StepModel, step_time


def prefill_alone_s(step_model: StepModel, prompt: int, chunk: int) -> float:
    """A prompt prefilled in chunks of `chunk` tokens on an engine that decodes nothing."""
    return prefill_s(step_model, 0.0, float(prompt), prompt, chunk)


def prefill_token_s(step_model: StepModel, chunk: int, context: float) -> float:
    """Seconds a prefill engine spends per prompt token when its steps are full (`chunk`
    tokens of several prompts, at a mean prefix of `context`)."""
    return step_time(step_model, 0.0, 0.0, float(chunk), context).total_s / chunk


def kv_transfer_s(kv_bytes: float, link: Link, readers: int) -> float:
    """The prompt's KV from the prefill replica to the decode replica: `readers` GPUs (the
    decode replica's TP group) each pull a share over their own share of the link."""
    return link.latency_s + kv_bytes / (link.p2p_b_s * max(1, readers))


def decode_step_s(step_model: StepModel, batch: float, context: float) -> float:
    """A decode pool's step: the running batch, no prompt chunk beside it."""
    return step_time(step_model, batch, context).total_s


@dataclass(frozen=True)
class PrefillLoad:
    """What one prefill replica sees: the mean prompt's service time, the squared coefficient
    of variation of prompt lengths, and the p-th prompt's own latency terms."""

    service_mean_s: float
    cv2: float
    prompt_s: float  # the p-th prompt's prefill
    transfer_s: float  # its KV to the decode pool
    first_step_s: float  # the decode pool's first step
    overhead_s: float

    def ttft_s(self, rho: float, percentile: float) -> float:
        wait = prefill_wait(rho, self.service_mean_s, self.cv2, percentile).percentile_s
        return wait + self.prompt_s + self.transfer_s + self.first_step_s + self.overhead_s

    def capacity_requests_per_s(self, ttft_target_s: float, percentile: float) -> float:
        """Requests/s one prefill replica takes while TTFT at the percentile stays within the
        target (0: not even an idle replica meets it); utilisation by bisection."""
        if self.ttft_s(0.0, percentile) > ttft_target_s:
            return 0.0
        lo, hi = 0.0, 0.999
        if self.ttft_s(hi, percentile) <= ttft_target_s:
            return hi / self.service_mean_s
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.ttft_s(mid, percentile) <= ttft_target_s else (lo, mid)
        return lo / self.service_mean_s
