"""What a replica is predicted to do at the region's peak, what stops its load, its memory,
and its latency and throughput against the load it serves (the report's chart data).

The search sizes each replica to its SLO-limit rate (`search.operating_point`); a reviewer
asks how close the peak is to that edge. `batch_curve` evaluates the same SLO model on the
region's own engine (its replica record) at loads from a tenth of that rate to beyond it, so
the chart passes through the FleetPlan's operating point."""

from __future__ import annotations

import math

from pydantic import Field, computed_field

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data
from llmfleet.perf.disagg import Pair
from llmfleet.perf.latency import Point, at_rate
from llmfleet.perf.periods import Table
from llmfleet.search.binding_constraint import batch_bound
from llmfleet.search.choice import Choice
from llmfleet.search.disagg import pair_at
from llmfleet.search.operating_point import MAX_BATCH
from llmfleet.search.replica_slo import ttft_prompt_tokens


class Predicted(Data):
    """Per replica, at the region's peak load unless a name says otherwise."""

    ttft_ms: float = Field(
        description="TTFT at the SLO percentile at the peak load per replica: of the "
        "distribution over every prompt length of request handling, the queue and slot waits "
        "and the prompt's own chunked prefill (refused prompts count against it)."
    )
    ttft_prompt_tokens: int = Field(
        description="The prompt at the SLO percentile of the input lengths (what a reviewer "
        "compares TTFT with; TTFT at the percentile is over every prompt length)."
    )
    itl_at_percentile_ms: float = Field(
        description="ITL at the SLO percentile as slo.itl defines it: the token gap at the "
        "percentile of every gap (token_gap_at_percentile_ms), or a request's TPOT at it "
        "(tpot_ms); `predict`'s mean_itl_ms is a mean instead."
    )
    token_gap_at_percentile_ms: float = Field(
        description="The gap between two tokens of a stream at the SLO percentile of every "
        "gap of every stream (vLLM's benchmark `itl`)."
    )
    longest_stall_ms: float = Field(
        description="The longest gap a prompt chunk makes (slo.max_stall_ms bounds it)."
    )
    token_gap_ms: float = Field(
        description="Alias of longest_stall_ms: the longest gap between two tokens of a stream."
    )
    tpot_ms: float = Field(description="A request's mean time per output token at the percentile.")
    decode_only_itl_ms: float = Field(description="Gap between tokens in a step without prefill.")
    mixed_step_ms: float = Field(
        description="Gap in a step that carries a full prompt chunk (at the prompts' middle)."
    )
    mixed_step_share: float = Field(
        description="Share of token gaps (steps) that carry a prompt chunk."
    )
    mixed_time_share: float = Field(
        description="Share of time a step carries a prompt chunk: the prefill lane's load "
        "(a step with a chunk lasts longer, so this exceeds mixed_step_share)."
    )
    running_sequences: float = Field(description="Mean sequences decoding at the peak load.")
    slot_full_chance: float = Field(
        description="Chance an arrival finds every batch slot (max_num_seqs) taken at the peak."
    )
    queue_wait_ms: float = Field(
        description="Mean wait before a prompt's first chunk (the prefill lane and a slot)."
    )
    refused_share: float = Field(
        description="Share of prompts longer than max_model_len - 1 (vLLM refuses them; they "
        "count against the SLO's 1 - p)."
    )
    output_tokens_per_s: float = Field(
        description="Output tokens/s one replica sustains inside the SLOs."
    )
    requests_per_s: float = Field(description="Requests/s one replica sustains inside the SLOs.")
    requests_per_s_at_peak: float = Field(description="Requests/s each replica serves at the peak.")
    requests_per_s_in_loss: float = Field(
        description="Requests/s one replica carries when a region loss has spent the headroom: "
        "its SLO-limit rate (requests_per_s), at which an arrival already finds every slot "
        "taken no more often than 1 - p/100."
    )
    kv_cache_tokens: int = Field(description="KV capacity of a replica, as vLLM logs it.")
    max_concurrency: float = Field(description="Sequences of max_model_len the KV pool holds.")
    ranges: dict[str, tuple[float, float]] = Field(
        description="Per metric, where the measured value is expected (p10-p90 of the "
        "calibration's held-out measured/predicted ratios; of the plan's calibration file "
        "for this server where one covers it)."
    )
    calibration: str | None = Field(
        default=None,
        description="The plan's calibration file whose factors and band apply to this "
        "region's server (None: the shipped constants and their held-out band).",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def itl_ms(self) -> float:
        """Alias of itl_at_percentile_ms (the key before #31; docs/cli.md#aliases)."""
        return self.itl_at_percentile_ms


class Memory(Data):
    gpu_total_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token: float


class BatchPoint(Data):
    """One replica at a load: what the SLO model predicts (the report's chart)."""

    requests_per_s: float = Field(description="Requests/s the replica serves.")
    running: float = Field(description="Mean sequences decoding at that load.")
    itl_at_percentile_ms: float | None = Field(
        description="ITL at the SLO percentile as slo.itl defines it; None: the replica "
        "cannot keep up."
    )
    ttft_ms: float | None = Field(description="TTFT at the percentile; None: it cannot keep up.")
    output_tokens_per_s: float = Field(description="Output tokens/s at that load.")
    operating: bool = Field(default=False, description="The SLO-limit rate the search sized.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def batch(self) -> float:
        """Alias of running (the key before #31, which read like max_num_seqs)."""
        return self.running

    @computed_field  # type: ignore[prop-decorator]
    @property
    def itl_ms(self) -> float | None:
        """Alias of itl_at_percentile_ms (the key before #31; docs/cli.md#aliases)."""
        return self.itl_at_percentile_ms


def _round(x: float, nd: int = 2) -> float:
    return round(x, nd)


class Binding(Data):
    """What stops a replica's load at its SLO-limit rate, and by how much: the constraint a
    1 % higher rate breaks, and what a lone request already costs of each SLO. `text` is the
    one line the report and `llmfleet diff` show."""

    constraint: str = Field(
        description="ttft, itl (the token gap or TPOT at the percentile), stall (the longest "
        "gap), slots (an arrival would find max_num_seqs taken too often), kv_cache (the pool "
        "holds no more slots), prefill (the prefill lane cannot keep up) or max_batch."
    )
    batch: int = Field(description="max_num_seqs of the whole replica (alias of slots).")
    slots: int = Field(description="Running sequences the replica admits (max_num_seqs x DP).")
    running: float = Field(description="Mean sequences decoding at the SLO-limit rate.")
    chunk_tokens: int = Field(description="Prompt tokens a step carries beside its decodes.")
    slo_ms: float | None = Field(description="The binding SLO's target (None: not an SLO).")
    next_ms: float | None = Field(
        description="The binding SLO's figure at a 1 % higher rate (over slo_ms; None: no "
        "finite figure, the queue would not settle)."
    )
    lone_prompt_ttft_ms: float = Field(
        description="TTFT of the SLO percentile's prompt alone on an idle replica."
    )
    lone_itl_ms: float = Field(description="ITL (as slo.itl reads it) of one sequence alone.")
    kv_sequences: int = Field(description="Running sequences the KV pool holds (capped at "
                              "max_num_seqs).")
    text: str


def _over(value_ms: float, slo_ms: float) -> str:
    """A value just over the SLO, with as many decimals as it takes to show it is over (a
    value without bound where the queue would not settle)."""
    if not math.isfinite(value_ms):
        return "beyond any bound (the queue would not settle)"
    for decimals in range(4):
        if round(value_ms, decimals) > slo_ms:
            return f"{value_ms:.{decimals}f} ms"
    return f"{value_ms:.4f} ms"


def build_binding(choice: Choice) -> Binding:
    plan, inst, s = choice.plan, choice.instance, choice.sizing
    b = batch_bound(plan, s)
    p, slo = f"p{plan.slo.percentile:g}", plan.slo
    on = f"on {inst.gpu} {choice.layout.label}"
    itl_name = f"token gap {p}" if slo.itl == "token_gap" else f"TPOT {p}"
    rate = s.capacity_requests_per_s
    more = f"1 % more load ({rate * 1.01:.3g} req/s per replica)"
    slo_ms = next_ms = None
    if b.constraint == "ttft":
        slo_ms, next_ms = slo.ttft_ms, b.ttft_next_ms
        text = (
            f"TTFT binds: {more} would take TTFT {p} to {_over(next_ms or 0.0, slo_ms)}, "
            f"over the {slo_ms:g} ms SLO; a lone {p} prompt ({ttft_prompt_tokens(plan):,} "
            f"tokens) already takes {b.lone_prompt_ttft_ms:.0f} ms of it {on} "
            f"({b.lone_prompt_ttft_ms / slo_ms:.0%})"
        )
    elif b.constraint == "itl":
        slo_ms, next_ms = slo.itl_ms, b.itl_next_ms
        text = (
            f"ITL binds: {more} would take the {itl_name} to {_over(next_ms, slo_ms)}, over the "
            f"{slo_ms:g} ms SLO; one sequence alone already takes {b.lone_itl_ms:.1f} ms of "
            f"it {on} ({b.lone_itl_ms / slo_ms:.0%}, with {b.chunk_tokens}-token chunks)"
        )
    elif b.constraint == "slots":
        text = (
            f"the slots bind: at {more} an arrival would find all {b.slots} running "
            f"sequences (max_num_seqs) taken more often than 1 - {p}, and the slots the KV "
            "pool holds beyond them would let a burst stretch every token gap"
        )
    elif b.constraint == "prefill":
        text = (
            f"prefill binds: at {more} the prefill lane {on} could not keep up with the "
            f"prompts ({b.chunk_tokens}-token chunks), and they would queue without bound"
        )
    elif b.constraint == "kv_cache":
        text = (
            f"the KV pool binds: {s.memory.kv_cache_tokens:,} tokens {on} hold "
            f"{b.kv_sequences} running sequences; at {more} an arrival would find them all "
            f"taken more often than 1 - {p}"
        )
    else:
        text = f"the batch is at llmfleet's cap of {MAX_BATCH} sequences, inside the SLOs"
    return Binding(
        constraint=b.constraint,
        batch=b.slots,
        slots=b.slots,
        running=_round(b.running, 2),
        chunk_tokens=b.chunk_tokens,
        slo_ms=slo_ms,
        next_ms=None if next_ms is None or not math.isfinite(next_ms) else _round(next_ms, 3),
        lone_prompt_ttft_ms=_round(b.lone_prompt_ttft_ms, 1),
        lone_itl_ms=_round(b.lone_itl_ms, 2),
        kv_sequences=b.kv_sequences,
        text=text,
    )


def at_peak(choice: Choice) -> tuple[Point, Pair | None]:
    """The replica at the region's peak (a disaggregated region: its decode pool, and the
    pair of pools at their peak rates)."""
    plan, s = choice.plan, choice.sizing
    per_replica = choice.peak_requests_per_s_per_replica
    if choice.prefill is not None:
        per_prefill = choice.peak_requests_per_s / choice.prefill.replicas.desired
        pair = pair_at(choice, per_replica, per_prefill)
        return pair.decode, pair
    return at_rate(s.point.table, per_replica, plan.slo.percentile), None


def build_predicted(choice: Choice, consts: Constants) -> Predicted:
    """Per replica at the region's peak; ranges from the calibration's held-out errors."""
    plan, s = choice.plan, choice.sizing
    o = plan.traffic.output_tokens.mean
    point, pair = at_peak(choice)
    ttft_s = pair.ttft_at() if pair else point.ttft_at()
    itl_ms = point.itl_s(plan.slo.itl) * 1000
    lane = pair.prefill.lane if pair else point.lane
    values = {
        "ttft_ms": ttft_s * 1000,
        "itl_ms": itl_ms,
        "output_tokens_per_s": s.capacity_requests_per_s * o,
        "kv_cache_tokens": float(s.memory.kv_cache_tokens),
    }
    covered = choice.calibration

    arch = hardware.gpu(choice.instance.gpu).architecture

    def ratio(metric: str, quantile: str) -> float:
        own = covered.ratio(metric, quantile) if covered else None
        return own if own is not None else consts.ratio(metric, quantile, arch)

    ranges = {
        k: (_round(v * ratio(k, "p10"), 1), _round(v * ratio(k, "p90"), 1))
        for k, v in sorted(values.items())
    }
    return Predicted(
        ttft_ms=_round(ttft_s * 1000, 1),
        ttft_prompt_tokens=ttft_prompt_tokens(plan),
        itl_at_percentile_ms=_round(itl_ms, 2),
        token_gap_at_percentile_ms=_round(point.gap_s * 1000, 2),
        longest_stall_ms=_round(point.stall_s * 1000, 2),
        token_gap_ms=_round(point.stall_s * 1000, 2),
        tpot_ms=_round(point.tpot_s * 1000, 2),
        decode_only_itl_ms=_round(point.decode_s * 1000, 2),
        mixed_step_ms=_round(point.mixed_s * 1000, 2),
        mixed_step_share=_round(point.mixed_gap_share, 4),
        mixed_time_share=_round(point.mixed_time_share, 4),
        running_sequences=_round(point.running, 2),
        slot_full_chance=_round(point.slot_full_chance, 5),
        queue_wait_ms=_round((lane.wait_chance * lane.wait_s
                              + point.slot_full_chance * point.slot_wait_s) * 1000, 2),
        refused_share=_round(point.table.workload.prompts.refused, 6),
        output_tokens_per_s=_round(s.capacity_requests_per_s * o, 1),
        requests_per_s=_round(s.capacity_requests_per_s, 3),
        requests_per_s_at_peak=_round(choice.peak_requests_per_s_per_replica, 3),
        requests_per_s_in_loss=_round(s.loss_requests_per_s, 3),
        kv_cache_tokens=s.memory.kv_cache_tokens,
        max_concurrency=_round(s.memory.max_concurrency),
        ranges=ranges,
        calibration=covered.path if covered else None,
    )


def build_memory(choice: Choice) -> Memory:
    mem = choice.sizing.memory
    return Memory(
        gpu_total_gib=_round(mem.total_gib),
        weights_gib_per_gpu=_round(mem.weights_gib_per_gpu),
        activation_gib=_round(mem.activation_gib),
        non_torch_gib=_round(mem.non_torch_gib),
        kv_cache_gib_per_gpu=_round(mem.kv_cache_gib_per_gpu),
        kv_bytes_per_token=mem.kv_bytes_per_token,
    )


CURVE_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2)
"""Loads of the chart's curve, as shares of the SLO-limit rate."""


def batch_point(table: Table, kind: str, percentile: float, rate: float,
                operating: bool = False) -> BatchPoint:
    """One replica of `table` serving `rate` requests/s."""
    pt = at_rate(table, rate, percentile)
    tokens = rate * table.workload.prompts.admitted * table.workload.output_mean
    if not pt.stable:
        return BatchPoint(requests_per_s=round(rate, 4), running=round(pt.running, 2),
                          itl_at_percentile_ms=None, ttft_ms=None,
                          output_tokens_per_s=round(tokens, 1), operating=operating)
    ttft = pt.ttft_at()
    return BatchPoint(
        requests_per_s=round(rate, 4),
        running=round(pt.running, 2),
        itl_at_percentile_ms=round(pt.itl_s(kind) * 1000, 2),
        ttft_ms=round(ttft * 1000, 1) if math.isfinite(ttft) else None,
        output_tokens_per_s=round(tokens, 1),
        operating=operating,
    )


def build_batch_curve(choice: Choice) -> list[BatchPoint]:
    """The curve the report draws for one region: its replica from a tenth of its SLO-limit
    rate to beyond it (a disaggregated region: its decode pool)."""
    s, slo = choice.sizing, choice.plan.slo
    return [
        batch_point(s.point.table, slo.itl, slo.percentile,
                    share * s.capacity_requests_per_s, operating=share == 1.0)
        for share in CURVE_SHARES
    ]
