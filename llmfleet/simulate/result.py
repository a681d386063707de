"""What a simulated day reports (`llmfleet simulate --json`): attainment overall, per region
and per minute; each violation with its cause; replicas and nodes over time; the day's cost;
each event's recovery beside the plan's estimate; and the checks where the day contradicts
the plan's steady-state figures (`checks`).

A request is inside the SLO when its TTFT and its token gap (or TPOT) meet the targets; a
request sent to a lost region, to a region with no Ready replica, or in flight when its
region was lost, is outside. A step of a region is violated when the share of its requests
inside falls below the SLO's percentile (99 % for p99); violated steps less than
`MERGE_GAP_S` apart form one violation, named for the cause of most of its requests
outside:

- `region_lost`: in flight when the region was lost;
- `detection`: sent to the lost region before Route 53 and the resolvers moved them
  (health checks x threshold, then the TTL); `no_failover` without a global name;
- `no_ready_replica`: the region had no Ready replica;
- `token_gap`: the step's longest token gap (or TPOT) missed the ITL target;
- `kv_exhaustion`: the KV pool, not max_num_seqs, capped the batch and requests waited;
- `cold_start`: replicas the autoscaler asked for were still starting;
- `at_max_replicas`: the region ran its plan's maximum and still fell short;
- `autoscaler_lag`: below its maximum, nothing starting: KEDA had not asked for more yet
  (its poll, the queries' 2-minute window, the thresholds).

An event's recovery is the time from its start to the end of the last violation (any region)
in the chain of violations, less than `HOLD_S` apart, that begins by the event's end plus
`HOLD_S`; 0 when the event causes none; null when the chain runs to midnight."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.costs import DAYS_PER_MONTH
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.cost import billed_usd_per_hour
from llmfleet.simulate.day import DayRun, RegionDay
from llmfleet.simulate.scenario import DAY_S, clock

MERGE_GAP_S = 60.0
HOLD_S = 300.0
MINUTE_S = 60
CAUSES = (
    "region_lost",
    "detection",
    "no_failover",
    "no_ready_replica",
    "token_gap",
    "kv_exhaustion",
    "cold_start",
    "at_max_replicas",
    "autoscaler_lag",
)


class Minutes(Data):
    """One value per minute of the day (1,440), from 00:00."""

    requests: list[int]
    attainment: list[float | None] = Field(description="None: no requests that minute.")


class RegionMinutes(Minutes):
    replicas: list[int] = Field(description="The Deployment's replicas at the minute's end.")
    ready: list[int] = Field(description="Ready replicas taking traffic at the minute's end.")
    nodes: list[int] = Field(description="GPU nodes billed at the minute's end.")


class RegionResult(Data):
    region: str
    requests: int
    requests_outside_slo: int
    failed_requests: int = Field(
        description="Sent to it lost, to no Ready replica, or in flight when it was lost."
    )
    attainment: float | None
    replicas_min: int
    replicas_max: int
    nodes_min: int
    nodes_max: int
    node_launches: int
    node_hours: float
    cost_usd: float = Field(description="Its GPU nodes over the day, as the plan prices them.")
    plan_cost_usd: float = Field(
        description="The plan's GPU cost of one day over its day profile (costs.gpu_day_profile "
        "/ days per month)."
    )
    minutes: RegionMinutes


class Violation(Data):
    region: str
    start: str = Field(description="HH:MM[:SS] the first violated step began.")
    start_s: float
    seconds: float
    cause: str = Field(description="One of: " + ", ".join(CAUSES) + ".")
    requests: int
    requests_outside_slo: int


class EventResult(Data):
    kind: str = Field(description="spike or loss.")
    label: str
    start: str
    recovery_s: float | None = Field(
        description="From the event's start until no region is violated (null: not by midnight)."
    )
    plan_recovery_s: float | None
    plan_basis: str = Field(description="Where the plan's estimate comes from.")


class Check(Data):
    check: str
    plan: str
    simulated: str
    holds: bool


class Simulation(Data):
    """A simulated day of a FleetPlan."""

    stack: str
    scenario: str
    events_text: list[str] = Field(description="The day's events, in words.")
    seed: int
    day_profile: str
    peak_hours: float
    trough_hours: float
    spike: str | None
    loss: str | None
    method: str
    step_s: float
    slo: str
    itl: str = Field(
        default="token_gap",
        description="The plan's slo.itl (token_gap or tpot): what a violation's cause "
        "`token_gap` measured (the cause keeps its name in JSON; the text shows this).",
    )
    attainment_target: float = Field(description="The SLO's percentile as a share.")
    requests: int
    requests_outside_slo: int
    attainment: float
    regions: list[RegionResult]
    minutes: Minutes
    violations: list[Violation]
    events: list[EventResult]
    recovery_s: float | None = Field(
        description="The slowest event's recovery (0 without events; null: not by midnight)."
    )
    cost_usd: float
    plan_cost_usd: float
    checks: list[Check] = Field(
        description="Where the day agrees with the plan's steady-state figures, and where not."
    )


METHOD = (
    "fluid replicas in {step:g} s steps on the plan's step-time model, Poisson counts, "
    "analytic queue waits (prefill lane M/G/1, batch-slot birth-death chain), the deployed "
    "KEDA/HPA, Karpenter, cold-start, ALB and Route 53 loops; error against a request-by-"
    "request run in docs/simulate.md"
)


def usd_per_hour(plan: CapacityPlan, rp: RegionPlan, nodes: float) -> float:
    """GPU nodes running `nodes` at once, billed as the plan bills them
    (`search.cost.billed_usd_per_hour`, the rules the plan's costs apply)."""
    cap = next(r for r in plan.regions if r.name == rp.region).capacity
    return billed_usd_per_hour(
        cap, nodes, rp.price_usd_per_hour, rp.capacity.price_usd_per_hour,
        rp.capacity.floor_nodes,
    )


def _requests(day: RegionDay) -> np.ndarray:
    total: np.ndarray = day.served + day.failed + day.dropped
    return total


def _causes(day: RegionDay, rp: RegionPlan, run: DayRun, kv_bound: bool, cap: int) -> np.ndarray:
    """Per step, the index into CAUSES of why requests fell outside."""
    n = len(day.served)
    out = np.full(n, CAUSES.index("autoscaler_lag"))
    rules = [
        (day.replicas >= rp.replicas.max, "at_max_replicas"),
        (day.starting > 0, "cold_start"),
        (kv_bound & (day.batch >= cap - 0.5) & (day.queued > 1e-6), "kv_exhaustion"),
        (~day.itl_ok, "token_gap"),
        ((day.ready == 0) & ~day.lost & (day.failed > 0), "no_ready_replica"),
        (day.lost & (day.failed > 0),
         "detection" if run.detection_s is not None else "no_failover"),
        (day.dropped > 0, "region_lost"),
    ]
    for mask, cause in rules:  # later rules win
        out = np.where(mask, CAUSES.index(cause), out)
    return out


def _runs(mask: np.ndarray, step_s: float, gap_s: float) -> list[tuple[int, int]]:
    """Index ranges [start, end) of True runs, merged when less than `gap_s` apart."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    runs: list[tuple[int, int]] = []
    start = prev = int(idx[0])
    limit = max(1, int(round(gap_s / step_s)))
    for i in idx[1:].tolist():
        if i - prev > limit:
            runs.append((start, prev + 1))
            start = i
        prev = i
    runs.append((start, prev + 1))
    return runs


def violations_of(
    run: DayRun, fleet: FleetPlan, target: float
) -> tuple[list[Violation], np.ndarray]:
    """Every region's violations, and per step whether any region was violated."""
    out: list[Violation] = []
    any_bad = np.zeros(len(run.t_s), dtype=bool)
    for rp in fleet.regions:
        day, model = run.regions[rp.region], run.models[rp.region]
        req = _requests(day)
        bad = (req > 0) & (day.inside < target * req - 1e-9)
        any_bad |= bad
        causes = _causes(day, rp, run, model.kv_bound, model.batch_cap)
        outside = req - day.inside
        for a, b in _runs(bad, run.step_s, MERGE_GAP_S):
            weight = np.bincount(causes[a:b], weights=outside[a:b], minlength=len(CAUSES))
            out.append(
                Violation(
                    region=rp.region,
                    start=clock(run.t_s[a]),
                    start_s=float(run.t_s[a]),
                    seconds=float((b - a) * run.step_s),
                    cause=CAUSES[int(np.argmax(weight))],
                    requests=int(round(req[a:b].sum())),
                    requests_outside_slo=int(round(outside[a:b].sum())),
                )
            )
    out.sort(key=lambda v: (v.start_s, v.region))
    return out, any_bad


def recovery_after(any_bad: np.ndarray, run: DayRun, start_s: float, end_s: float) -> float | None:
    """Seconds from `start_s` until the chain of violations it starts is over (see module)."""
    runs = _runs(any_bad, run.step_s, HOLD_S)
    t0 = run.t_s[0]
    chain_end: float | None = None
    for a, b in runs:
        begin, finish = t0 + a * run.step_s, t0 + b * run.step_s
        if finish <= start_s:
            continue
        if begin > end_s + HOLD_S:
            break
        chain_end = finish
    if chain_end is None:
        return 0.0
    if chain_end >= DAY_S:
        return None
    return round(chain_end - start_s, 1)


def _minute_sums(values: np.ndarray, per: int) -> np.ndarray:
    sums: np.ndarray = values.reshape(-1, per).sum(axis=1)
    return sums


def _at_minute_end(values: np.ndarray, per: int) -> list[int]:
    return [int(v) for v in values.reshape(-1, per)[:, -1]]


def _share(inside: np.ndarray, requests: np.ndarray) -> list[float | None]:
    return [None if r <= 0 else round(min(1.0, i / r), 5) for i, r in zip(
        inside.tolist(), requests.tolist(), strict=True)]


def summarise(
    plan: CapacityPlan, fleet: FleetPlan, run: DayRun, stack: str, checks: list[Check],
    events: list[EventResult], violations: list[Violation],
) -> Simulation:
    slo = plan.slo
    target = slo.percentile / 100
    per = int(round(MINUTE_S / run.step_s))
    regions = []
    total_req = total_in = 0.0
    fleet_req = np.zeros(len(run.t_s) // per)
    fleet_in = np.zeros_like(fleet_req)
    for rp in fleet.regions:
        day = run.regions[rp.region]
        req = _requests(day)
        minute_req, minute_in = _minute_sums(req, per), _minute_sums(day.inside, per)
        fleet_req += minute_req
        fleet_in += minute_in
        cost_steps = np.array([usd_per_hour(plan, rp, float(n)) for n in day.nodes])
        requests, inside = float(req.sum()), float(day.inside.sum())
        total_req += requests
        total_in += inside
        regions.append(
            RegionResult(
                region=rp.region,
                requests=int(round(requests)),
                requests_outside_slo=int(round(requests - inside)),
                failed_requests=int(round(float((day.failed + day.dropped).sum()))),
                attainment=round(inside / requests, 6) if requests else None,
                replicas_min=int(day.replicas.min()),
                replicas_max=int(day.replicas.max()),
                nodes_min=int(day.nodes.min()),
                nodes_max=int(day.nodes.max()),
                node_launches=day.launches,
                node_hours=round(float(day.nodes.sum()) * run.step_s / 3600, 2),
                cost_usd=round(float(cost_steps.sum()) * run.step_s / 3600, 2),
                plan_cost_usd=round(rp.costs.gpu_day_profile / DAYS_PER_MONTH, 2),
                minutes=RegionMinutes(
                    requests=[int(round(v)) for v in minute_req],
                    attainment=_share(minute_in, minute_req),
                    replicas=_at_minute_end(day.replicas, per),
                    ready=_at_minute_end(day.ready, per),
                    nodes=_at_minute_end(day.nodes, per),
                ),
            )
        )
    recoveries = [e.recovery_s for e in events]
    sc = run.scenario
    return Simulation(
        stack=stack,
        scenario=sc.label(),
        events_text=sc.events(),
        seed=sc.seed,
        day_profile=sc.day.profile,
        peak_hours=sc.day.peak_hours,
        trough_hours=sc.day.trough_hours,
        spike=None if sc.spike is None else
        f"{sc.spike.percent:+g}% at {clock(sc.spike.start_s)} for {sc.spike.minutes} min",
        loss=None if sc.loss is None else f"{sc.loss.region} at {clock(sc.loss.at_s)}",
        method=METHOD.format(step=run.step_s),
        step_s=run.step_s,
        slo=f"TTFT <= {slo.ttft_ms:g} ms and {slo.itl} <= {slo.itl_ms:g} ms at "
        f"p{slo.percentile:g}",
        itl=slo.itl,
        attainment_target=target,
        requests=int(round(total_req)),
        requests_outside_slo=int(round(total_req - total_in)),
        attainment=round(total_in / total_req, 6) if total_req else 1.0,
        regions=regions,
        minutes=Minutes(
            requests=[int(round(v)) for v in fleet_req], attainment=_share(fleet_in, fleet_req)
        ),
        violations=violations,
        events=events,
        recovery_s=None if any(r is None for r in recoveries) else max(
            [float(r) for r in recoveries if r is not None], default=0.0),
        cost_usd=round(sum(r.cost_usd for r in regions), 2),
        plan_cost_usd=round(sum(r.plan_cost_usd for r in regions), 2),
        checks=checks,
    )
