"""A region's serving replicas as a fluid on the plan's own SLO model.

Each region's Ready replicas share its arrivals evenly, so one "per replica" state stands for
all of them. A replica's steady state at a rate is the plan's own: `perf.latency.at_rate` on
the engine of its replica record (`fleetplan.replica_record.table_of`: the step model, slots,
budget and KV pool the search sized), tabulated at RATE_POINTS rates up to the highest rate
the replica keeps up with. What the fluid adds is time:

- a backlog: above that rate the excess queues (num_requests_waiting), and drains at it once
  the rate falls; an arrival waits for the backlog ahead of it on top of the steady waits;
- the running batch follows its steady value with the lag of a request's life;
- per step, the share of arrivals inside the SLO is the steady model's (TTFT over every
  prompt length with the lane's and the slots' waits, less the backlog's wait from the
  target), times whether the token gaps at the percentile meet the ITL target (with
  `slo.itl: tpot`, the share of requests whose TPOT does).

So the plan and the simulated day agree at any steady load by construction; a day differs
where the load moves faster than the autoscaler, Karpenter and cold starts follow it, or
where it exceeds what the replicas keep up with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.replica_record import table_of
from llmfleet.perf.latency import Point, at_rate, saturation_rate
from llmfleet.perf.periods import Table
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.replica_slo import slo_of

RATE_POINTS = 128
"""Rates per replica at which the steady state is tabulated (linear between)."""
LONGEST_WAIT_S = 3600.0


@dataclass(frozen=True)
class ReplicaModel:
    """What one replica of a region does at a steady rate, tabulated."""

    region: str
    table: Table
    percentile: float
    rates: np.ndarray  # requests/s per replica, 0 .. saturation
    saturation_rate: float  # the highest rate the lane and the slots keep up with
    running: np.ndarray  # mean sequences decoding, by rate
    mean_wait_s: np.ndarray  # mean wait before a prompt's first chunk, by rate
    ttft_p_s: np.ndarray  # TTFT at the percentile, by rate
    inside: np.ndarray  # share of arrivals inside every SLO, by rate (no backlog)
    itl_ok: np.ndarray  # the token gaps (or TPOTs) meet the ITL target, by rate
    points: list[Point]  # the steady replica at each rate (TTFT under a backlog)
    ttft_s: float
    itl_s: float
    itl: str

    @property
    def context_tokens(self) -> float:
        return self.table.workload.context_tokens

    @property
    def kv_cache_tokens(self) -> int:
        return self.table.engine.kv_cache_tokens

    @property
    def batch_cap(self) -> int:
        return self.table.cap

    @property
    def kv_bound(self) -> bool:
        """The KV pool, not max_num_seqs, caps the batch."""
        return self.table.cap < self.table.engine.slots

    @property
    def life_s(self) -> float:
        """A request's decoding time at the saturation rate (the batch's lag)."""
        w = self.table.workload
        return max(w.output_mean - 1, 1.0) / self.table.engine.tokens_per_period * float(
            self.table.decode_s[self.table.cap])

    def index(self, rate: float) -> int:
        """The tabulated rate nearest `rate` (at most the saturation rate)."""
        step = self.saturation_rate / (RATE_POINTS - 1)
        j = int(rate / step + 0.5) if step > 0 else 0
        return min(j, RATE_POINTS - 1)


def replica_model(plan: CapacityPlan, rp: RegionPlan, table: Table) -> ReplicaModel:
    slo = plan.slo
    p = slo.percentile
    target = slo_of(plan)
    top = saturation_rate(table, p)
    rates = np.linspace(0.0, top, RATE_POINTS)
    points = [at_rate(table, max(r, 1e-9), p) for r in rates]
    itl_ok, inside = [], []
    for pt in points:
        if slo.itl == "tpot":
            itl_share = 1.0 - pt.tpot_over(target.itl_s)
            ok = itl_share >= 1 - target.tail - 1e-9
        else:
            ok = pt.gap_over(target.itl_s) <= target.tail + 1e-9
            itl_share = 1.0 if ok and pt.stall_s <= target.max_stall_s * (1 + 1e-9) else 0.0
        itl_ok.append(ok)
        inside.append((1.0 - pt.ttft_over(target.ttft_s)) * itl_share)
    return ReplicaModel(
        region=rp.region,
        table=table,
        percentile=p,
        rates=rates,
        saturation_rate=top,
        running=np.array([pt.running for pt in points]),
        mean_wait_s=np.array([pt.lane.wait_chance * pt.lane.wait_s
                              + pt.slot_full_chance * pt.slot_wait_s for pt in points]),
        ttft_p_s=np.array([min(pt.ttft_at(), LONGEST_WAIT_S) for pt in points]),
        inside=np.array(inside),
        itl_ok=np.array(itl_ok),
        points=points,
        ttft_s=target.ttft_s,
        itl_s=target.itl_s,
        itl=slo.itl,
    )


def not_simulated(fleet: FleetPlan) -> str | None:
    """Why the fleet cannot be simulated, or None: a disaggregated region (a prefill pool,
    the KV's transfer and a decode pool) is not modelled; its replicas are not one engine."""
    split = [rp.region for rp in fleet.regions if rp.disaggregation is not None]
    if not split:
        return None
    return (
        f"{', '.join(split)} serve{'s' if len(split) == 1 else ''} disaggregated (a prefill "
        "and a decode pool); the simulator models colocated replicas only (prefill chunked "
        "beside decode on one engine). Set allowed.disaggregated: false to simulate the "
        "colocated fleet"
    )


def replica_models(plan: CapacityPlan, fleet: FleetPlan) -> dict[str, ReplicaModel]:
    why = not_simulated(fleet)
    if why is not None:
        raise PlanError("allowed.disaggregated", plan.allowed.disaggregated, why)
    model = resolve_model(plan)
    return {
        rp.region: replica_model(plan, rp, table_of(rp.replica, plan, model))
        for rp in fleet.regions
    }


@dataclass
class Trace:
    """Per step, what `inside_share` and the autoscaler's windowed signals need."""

    rate: list[int] = field(default_factory=list)  # index into the model's rates
    backlog_wait_s: list[float] = field(default_factory=list)  # the backlog's, per arrival
    backlog: list[float] = field(default_factory=list)  # per replica, at the step's end
    mean_wait_s: list[float] = field(default_factory=list)  # queue time of a step's arrival
    ttft_p_s: list[float] = field(default_factory=list)  # TTFT at the percentile


class Pool:
    """The Ready replicas of one region as a fluid (per replica `running` and `queued`)."""

    def __init__(self, model: ReplicaModel, step_s: float, percentile: float) -> None:
        self.model = model
        self.step_s = step_s
        self.percentile = percentile
        self.running = 0.0
        self.queued = 0.0
        self.trace = t = Trace()
        self._log: tuple[Callable[[Any], None], ...] = (
            t.rate.append, t.backlog_wait_s.append, t.backlog.append, t.mean_wait_s.append,
            t.ttft_p_s.append,
        )
        # The latest step's gauges, per replica (what vLLM's metrics would show).
        self.waiting = 0.0  # mean requests waiting (num_requests_waiting)
        self.kv_usage = 0.0

    def clear(self) -> None:
        """The replicas are gone (a lost region): nothing runs or waits."""
        self.running = self.queued = 0.0

    def advance(self, rate: float, replicas: int) -> None:
        """One step at `rate` requests/s spread over `replicas` Ready replicas (> 0)."""
        m, dt = self.model, self.step_s
        lam = rate / replicas
        top = m.saturation_rate
        q = self.queued
        served = min(lam + q / dt, top)
        queued = max(0.0, q + (lam - served) * dt)
        self.queued = queued
        j = m.index(min(served, top))
        ahead = (q + queued) / 2
        wait = min(LONGEST_WAIT_S, ahead / top) if ahead > 1e-9 else 0.0
        steady = float(m.running[j])
        life = m.life_s
        self.running += (steady - self.running) * dt / (life + dt)
        mean_wait = float(m.mean_wait_s[j])
        self.waiting = queued + lam * mean_wait
        self.kv_usage = self.running * m.context_tokens / m.kv_cache_tokens
        log = self._log
        log[0](j)
        log[1](wait)
        log[2](queued)
        log[3](wait + mean_wait)
        log[4](wait + float(m.ttft_p_s[j]))

    def skip(self) -> None:
        """A step without Ready replicas: nothing is served (its arrivals fail)."""
        log = self._log
        log[0](0)
        for append in log[1:]:
            append(0.0)
        self.waiting = self.kv_usage = 0.0


def inside_share(model: ReplicaModel, trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the share of its arrivals inside every SLO, and whether the step's token
    gaps (or TPOTs) meet the ITL target."""
    j = np.asarray(trace.rate, dtype=int)
    share = model.inside[j].copy()
    waits = np.asarray(trace.backlog_wait_s)
    for k in np.flatnonzero(waits > 0):
        pt = model.points[int(j[k])]
        ttft_ok = 1.0 - pt.ttft_over(model.ttft_s - float(waits[k]))
        itl = model.inside[int(j[k])] / max(1.0 - pt.ttft_over(model.ttft_s), 1e-12)
        share[k] = ttft_ok * min(1.0, itl)
    return np.clip(share, 0.0, 1.0), model.itl_ok[j]
