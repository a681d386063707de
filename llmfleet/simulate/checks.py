"""A simulated day against the plan: each event's recovery beside the plan's estimate, and the
checks where the day contradicts the plan's steady-state figures.

The plan's estimates: a loss recovers in its scenario's `recovery_s` (detection + TTL, plus
a cold start where a warm floor is short); a spike, in 0 s when the replicas the plan runs at
that hour carry it at the SLO-limit rate (its headroom), in one cold start
(`cold_start.total_s`) when the region's maximum does, and not before it ends otherwise.

Checks (each `holds` or not): every region inside the SLO at its peak and over the day's
quiet hours (outside events), and, where it scales, without a violation while replicas start
(the plan says its headroom carries the growth of one cold start); each loss's recovery
within the plan's and the survivors' warm floors inside the SLO for the hour after DNS
moved; each spike's recovery within the plan's estimate; on a quiet day of the plan's
profile, no more node launches than the plan's one rise a day, and the day's GPU cost within
10 % of the plan's."""

from __future__ import annotations

import math

import numpy as np

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.region_losses import reroute
from llmfleet.simulate.day import DayRun
from llmfleet.simulate.result import (
    Check,
    EventResult,
    Violation,
    recovery_after,
)
from llmfleet.simulate.scenario import DAY_S, clock
from llmfleet.simulate.traffic import fleet_rate, level

COST_TOLERANCE = 0.10
AFTER_DNS_S = 3600.0


def events(plan: CapacityPlan, fleet: FleetPlan, run: DayRun, any_bad: np.ndarray) -> list[
        EventResult]:
    sc = run.scenario
    out = []
    if sc.spike is not None:
        estimate, basis = spike_estimate(plan, fleet, run)
        out.append(
            EventResult(
                kind="spike",
                label=f"{sc.spike.percent:+g} % for {sc.spike.minutes} min",
                start=clock(sc.spike.start_s),
                recovery_s=recovery_after(any_bad, run, sc.spike.start_s, sc.spike.end_s),
                plan_recovery_s=estimate,
                plan_basis=basis,
            )
        )
    if sc.loss is not None:
        estimate, basis = loss_estimate(fleet, sc.loss.region)
        end = sc.loss.at_s + (estimate or 0.0)
        out.append(
            EventResult(
                kind="loss",
                label=f"{sc.loss.region} lost",
                start=clock(sc.loss.at_s),
                recovery_s=recovery_after(any_bad, run, sc.loss.at_s, end),
                plan_recovery_s=estimate,
                plan_basis=basis,
            )
        )
    return out


def loss_estimate(fleet: FleetPlan, region: str) -> tuple[float | None, str]:
    scenario = next((s for s in fleet.resilience.scenarios if s.lost == [region]), None)
    if fleet.resilience.recovery is None:
        return None, "no global name (plan.dns): the plan re-routes nothing"
    rec = fleet.resilience.recovery
    if scenario is None:
        return float(rec.worst_s), "the plan's worst recovery (this loss is not one it sizes for)"
    seconds = scenario.recovery_s
    return (None if seconds is None else float(seconds)), (
        f"resilience: detection {rec.detection_s} s + TTL {rec.ttl_s} s"
        + (f" + cold start {rec.cold_start_s} s (a warm floor is short)"
           if scenario.cold_start else "; warm floors carry the load")
    )


def spike_estimate(plan: CapacityPlan, fleet: FleetPlan, run: DayRun) -> tuple[float | None, str]:
    spike = run.scenario.spike
    assert spike is not None
    base = float(fleet_rate(plan, np.array([spike.start_s]), run.scenario.day)[0])
    worst: float | None = 0.0
    notes = []
    for rp in fleet.regions:
        limit = rp.predicted.requests_per_s
        rate = base * rp.traffic_share
        spiked = rate * (1 + spike.percent / 100)
        sized = limit * (1 - plan.headroom)
        running = min(max(math.ceil(rate / sized - 1e-9), rp.replicas.min), rp.replicas.max)
        if spiked <= running * limit:
            continue
        if spiked <= rp.replicas.max * limit:
            seconds = rp.cold_start.total_s
            notes.append(f"{rp.region}: new replicas, one cold start ({seconds:g} s)")
            worst = None if worst is None else max(worst, seconds)
        else:
            notes.append(
                f"{rp.region}: {spiked:.3g} req/s is more than its {rp.replicas.max} replicas "
                f"carry at the SLO-limit rate ({rp.replicas.max * limit:.3g}): not before the "
                "spike ends"
            )
            worst = None
    basis = "; ".join(notes) if notes else (
        "the replicas running at that hour carry it at the SLO-limit rate (the headroom)"
    )
    return worst, basis


def _event_mask(run: DayRun, event_list: list[EventResult]) -> np.ndarray:
    """Steps inside an event's span: its start until it recovered (or midnight)."""
    mask = np.zeros(len(run.t_s), dtype=bool)
    sc = run.scenario
    starts = {"spike": sc.spike.start_s if sc.spike else None,
              "loss": sc.loss.at_s if sc.loss else None}
    for e in event_list:
        start = starts[e.kind]
        assert start is not None
        span = e.recovery_s if e.recovery_s is not None else DAY_S
        end = max(start + span, start + (sc.spike.minutes * 60 if e.kind == "spike" and sc.spike
                                         else 0))
        mask |= (run.t_s >= start) & (run.t_s < end)
    return mask


def _attainment(run: DayRun, region: str, mask: np.ndarray) -> tuple[float, int]:
    day = run.regions[region]
    req = (day.served + day.failed + day.dropped)[mask]
    total = float(req.sum())
    return (float(day.inside[mask].sum()) / total if total else 1.0), int(round(total))


def checks(
    plan: CapacityPlan,
    fleet: FleetPlan,
    run: DayRun,
    event_list: list[EventResult],
    violations: list[Violation],
) -> list[Check]:
    slo = plan.slo
    target = slo.percentile / 100
    quiet = ~_event_mask(run, event_list)
    at_peak = quiet & (level(run.t_s, run.scenario.day) >= 0.999)
    out = []
    for rp in fleet.regions:
        p = rp.predicted
        if at_peak.any():
            share, n = _attainment(run, rp.region, at_peak)
            out.append(Check(
                check=f"{rp.region} inside the SLO at its peak",
                plan=f"TTFT {p.ttft_ms:.0f} ms, ITL {p.itl_ms:.1f} ms at p{slo.percentile:g} "
                f"with {rp.peak_requests_per_s:g} req/s on {rp.replicas.desired} replicas",
                simulated=f"{share:.3%} of {n:,} requests inside",
                holds=share >= target,
            ))
        share, n = _attainment(run, rp.region, quiet)
        mine = [v for v in violations if v.region == rp.region
                and quiet[np.searchsorted(run.t_s, v.start_s)]]
        causes = sorted({v.cause for v in mine})
        out.append(Check(
            check=f"{rp.region} inside the SLO outside the events",
            plan=f"p{slo.percentile:g} holds at every load up to the peak",
            simulated=f"{share:.3%} of {n:,} requests inside"
            + (f"; violations from {', '.join(causes)}" if causes else ""),
            holds=share >= target,
        ))
        cold = [v for v in mine if v.cause == "cold_start"]
        if rp.cold_start.headroom_carries_growth and rp.replicas.min < rp.replicas.max:
            out.append(Check(
                check=f"{rp.region}'s headroom carries the traffic's growth during a cold start",
                plan=f"{plan.headroom:.0%} headroom carries "
                f"{rp.cold_start.growth_during_cold_start:.1%} growth during one "
                f"{rp.cold_start.total_s:g} s cold start",
                simulated=f"{len(cold)} violations while replicas started "
                f"({sum(v.seconds for v in cold):g} s, "
                f"{sum(v.requests_outside_slo for v in cold):,} requests outside)"
                if cold else "no violation while replicas started",
                holds=not cold,
            ))
    for e in event_list:
        # Holds when the plan promised nothing (it says so in plan_basis) or within two steps.
        holds = e.plan_recovery_s is None or (
            e.recovery_s is not None and e.recovery_s <= e.plan_recovery_s + 2 * run.step_s
        )
        out.append(Check(
            check=f"recovery after the {e.kind} at {e.start} ({e.label})",
            plan="none promised" if e.plan_recovery_s is None else f"{e.plan_recovery_s:g} s",
            simulated="not by midnight" if e.recovery_s is None else f"{e.recovery_s:g} s",
            holds=holds,
        ))
    loss = run.scenario.loss
    if loss is not None and run.detection_s is not None:
        moved = loss.at_s + run.detection_s + run.ttl_s
        window = (run.t_s >= moved) & (run.t_s < moved + AFTER_DNS_S)
        load, absorbed = reroute(plan, [loss.region])
        for a in absorbed:
            rp = fleet.region(a.absorbed_by)
            share, n = _attainment(run, rp.region, window)
            out.append(Check(
                check=f"{rp.region}'s warm floor after {loss.region} is lost, once DNS moved",
                plan=f"{rp.replicas.min} warm replicas carry {load[rp.region]:g} req/s at "
                f"{rp.predicted.requests_per_s:g} req/s each (the SLO-limit rate)",
                simulated=f"{share:.3%} of {n:,} requests inside in the hour after "
                f"{clock(moved)}",
                holds=share >= target,
            ))
    if run.scenario.spike is None and loss is None and run.scenario.day.profile == "plan":
        for rp in fleet.regions:
            day = run.regions[rp.region]
            planned = rp.nodes.desired - rp.nodes.min
            out.append(Check(
                check=f"{rp.region} node launches",
                plan=f"{planned} a day (one rise from the trough's {rp.nodes.min} to the "
                f"peak's {rp.nodes.desired} nodes)",
                simulated=f"{day.launches} launches; replicas {int(day.replicas.min())}-"
                f"{int(day.replicas.max())}, {_reversals(day.replicas)} changes of direction",
                holds=day.launches <= planned,
            ))
    return out


def _reversals(replicas: np.ndarray) -> int:
    """How often the replica count turned from rising to falling or back."""
    moves = np.sign(np.diff(replicas))
    moves = moves[moves != 0]
    return int(np.count_nonzero(np.diff(moves))) if len(moves) > 1 else 0


def cost_check(run_cost: float, plan_cost: float) -> Check:
    return Check(
        check="GPU cost of the day",
        plan=f"${plan_cost:,.0f} (the day profile: ramps costed halfway)",
        simulated=f"${run_cost:,.0f}",
        holds=abs(run_cost - plan_cost) <= COST_TOLERANCE * plan_cost,
    )
