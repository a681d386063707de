"""The day loop: arrivals, the replica pools and the control loops, one step at a time.

Method (the figures' honesty rests on it): time advances in steps of `STEP_S` seconds; in
each, a region's Ready replicas advance as one fluid at the step's arrival rate on the plan's
step-time model (`engine.Pool`), and every `autoscaling.polling_interval_s` the autoscaler
reads the signals and Karpenter places the pods (`control`). Requests are counted from
Poisson draws but not followed one by one: a step's share inside the SLO comes from the
prompt-length distribution and the analytic waits (`engine.inside_share`). Regions share
nothing once DNS re-routing is laid out (`traffic.demand`), so each runs its own loop.
`events` runs replicas request by request for short windows; its difference from this
model is the method's stated error (docs/simulate.md, `benchmarks/simulate_bench.py`). The
day starts after `WARMUP_S` at the profile's rate, with the replicas the autoscaler holds
at the first step's rate already serving."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from operator import mul

import numpy as np

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.simulate.control import SIGNAL_WINDOW_S, RegionControl
from llmfleet.simulate.engine import Pool, ReplicaModel, inside_share, replica_models
from llmfleet.simulate.scenario import DAY_S, Scenario
from llmfleet.simulate.traffic import demand, poisson_counts, routing

STEP_S = 2.5
"""Seconds per step: it divides every period the loops run on (Route 53 checks 10 or 30 s,
KEDA 15 s, probes 10 s, the ALB 15 s, a minute), and the fluid's implicit step makes its
steady state exact at any length (the events run agrees as well at 1, 2 and 5 s)."""
WARMUP_S = 1800


@dataclass(frozen=True)
class RegionDay:
    """One region's day, per step (warm-up dropped)."""

    served: np.ndarray  # arrivals that reached the region's Ready replicas
    failed: np.ndarray  # arrivals that failed: sent to it lost, or no Ready replica
    dropped: np.ndarray  # requests in flight when the region was lost
    inside: np.ndarray  # expected requests inside the SLO
    share: np.ndarray  # share of served arrivals inside the SLO
    itl_ok: np.ndarray  # the step's token gap (or TPOT) meets the ITL target
    ready: np.ndarray  # Ready replicas (taking traffic)
    replicas: np.ndarray  # the Deployment's replicas (the HPA's count)
    nodes: np.ndarray  # GPU nodes running (billed)
    starting: np.ndarray  # pods not yet serving
    queued: np.ndarray  # per replica, the backlog at the step's end
    batch: np.ndarray  # per replica, running sequences
    lost: np.ndarray  # the region is lost (bool)
    launches: int  # Karpenter node launches over the day


@dataclass(frozen=True)
class DayRun:
    scenario: Scenario
    step_s: float
    t_s: np.ndarray  # each step's start, seconds after midnight
    regions: dict[str, RegionDay]
    models: dict[str, ReplicaModel]
    detection_s: float | None
    ttl_s: float


def run_day(
    plan: CapacityPlan,
    fleet: FleetPlan,
    scenario: Scenario,
    models: dict[str, ReplicaModel] | None = None,
    only: Collection[str] | None = None,
) -> DayRun:
    """The day of every region (or `only` these: regions share nothing once routing is laid
    out, so one region's day is the same alone)."""
    models = models or replica_models(plan, fleet)
    t_s = np.arange(-WARMUP_S, DAY_S, STEP_S)
    need = demand(plan, fleet, scenario, t_s)
    rng = np.random.default_rng(scenario.seed)
    names = [r.region for r in fleet.regions]
    served = {n: poisson_counts(rng, need.served[n], STEP_S) for n in names}
    failed = {n: poisson_counts(rng, need.failed[n], STEP_S) for n in names}
    keep = slice(int(WARMUP_S / STEP_S), len(t_s))
    loss = scenario.loss
    days = {}
    for k, rp in enumerate(fleet.regions):
        n = rp.region
        if only is not None and n not in only:
            continue
        lost_at = None
        if loss is not None and loss.region == n:
            lost_at = int(np.searchsorted(t_s, loss.at_s))
        gauges = np.random.default_rng([scenario.seed, k])
        days[n] = _region_day(
            plan, rp, models[n], t_s, need.served[n], served[n], failed[n], lost_at, gauges,
            keep,
        )
    route = routing(fleet)
    return DayRun(scenario, STEP_S, t_s[keep], days, models, route.detection_s, route.ttl_s)


def _region_day(
    plan: CapacityPlan,
    rp: RegionPlan,
    model: ReplicaModel,
    t_s: np.ndarray,
    rate: np.ndarray,
    served: np.ndarray,
    failed: np.ndarray,
    lost_at: int | None,
    gauges: np.random.Generator,
    keep: slice,
) -> RegionDay:
    slo = plan.slo
    steps = len(t_s)
    times, rates, counts = t_s.tolist(), rate.tolist(), served.tolist()
    sized = rp.predicted.requests_per_s * (1 - plan.headroom)
    rc = RegionControl.start(rp, times[0], math.ceil(rates[0] / sized - 1e-9))
    pool = Pool(model, STEP_S, slo.percentile)
    trace = pool.trace
    poll = max(1, int(round(rp.autoscaling.polling_interval_s / STEP_S)))
    window = int(SIGNAL_WINDOW_S / STEP_S)
    scrapes = max(1, SIGNAL_WINDOW_S // rp.autoscaling.polling_interval_s)  # avg_over_time
    ready_rec, replicas_rec, nodes_rec = [0] * steps, [0] * steps, [0] * steps
    batch_rec = [0.0] * steps
    noserve = np.zeros(steps)
    dropped = np.zeros(steps)
    ready, change = rc.serving(times[0]), _next_change(rc, times[0])
    for idx in range(steps):
        t = times[idx]
        if idx == lost_at:
            dropped[idx] = (pool.running + pool.queued) * ready
            rc.lose()
            pool.clear()
            ready, change = 0, math.inf
        if t >= change:
            ready, change = rc.serving(t), _next_change(rc, t)
        if ready > 0:
            pool.advance(rates[idx], ready)
        else:
            pool.skip()
            noserve[idx] = counts[idx]
        if idx % poll == 0 and not rc.lost:
            lo = max(0, idx - window + 1)
            arrived = counts[lo:idx + 1]
            total = sum(arrived)
            wait = sum(map(mul, arrived, trace.mean_wait_s[lo:idx + 1])) / total if total else 0
            ttft = sum(map(mul, arrived, trace.ttft_p_s[lo:idx + 1])) / total if total else 0
            rc.poll(t, {
                "rate": total / ((idx + 1 - lo) * STEP_S),
                "waiting": float(gauges.negative_binomial(ready, 1 / (1 + pool.waiting))),
                "kv_usage": float(gauges.poisson(pool.running * ready * scrapes)) / scrapes
                * model.context_tokens / model.kv_cache_tokens,
                "queue_wait": wait * ready,
                "ttft": ttft * ready,
            })
            ready, change = rc.serving(t), _next_change(rc, t)
        ready_rec[idx] = ready
        replicas_rec[idx] = len(rc.pods)
        nodes_rec[idx] = len(rc.nodes)
        batch_rec[idx] = pool.running
    share, itl_ok = inside_share(model, trace)
    got = served - noserve
    ready_a, replicas_a = np.array(ready_rec, dtype=float), np.array(replicas_rec, dtype=float)
    lost = np.zeros(steps, dtype=bool)
    if lost_at is not None:
        lost[lost_at:] = True
    return RegionDay(
        served=got[keep],
        failed=(failed + noserve)[keep],
        dropped=dropped[keep],
        inside=(got * share)[keep],
        share=share[keep],
        itl_ok=itl_ok[keep],
        ready=ready_a[keep],
        replicas=replicas_a[keep],
        nodes=np.array(nodes_rec, dtype=float)[keep],
        starting=(replicas_a - ready_a)[keep],
        queued=np.asarray(trace.backlog)[keep],
        batch=np.array(batch_rec)[keep],
        lost=lost[keep],
        launches=rc.launches,
    )


def _next_change(rc: RegionControl, t: float) -> float:
    """When the next pod starts serving (inf: none is starting)."""
    pending = [p.serves_at for p in rc.pods if p.serves_at > t]
    return min(pending) if pending else math.inf
