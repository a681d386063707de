"""`simulate`: a FleetPlan's day under a scenario, summarised with its checks against the
plan (`simulated_day`: the plan's own FleetPlan's); and the days the report shows
(`report_days`): a quiet day, the default spike and the worst single-region loss. Each day
is kept on disk (`disk_memo`) by the plan, the FleetPlan and the scenario (`day_of`), so the
`simulate` command and the report read the same day back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from llmfleet import disk_memo
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan, plan_parts
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.region_losses import reroute
from llmfleet.simulate.checks import checks, cost_check, events
from llmfleet.simulate.day import run_day
from llmfleet.simulate.engine import ReplicaModel, not_simulated, replica_models
from llmfleet.simulate.prefix_check import prefix_checks
from llmfleet.simulate.result import Simulation, summarise, violations_of
from llmfleet.simulate.scenario import (
    DEFAULT_LOSS_AT,
    DEFAULT_SPIKE_AT,
    DEFAULT_SPIKE_MINUTES,
    DEFAULT_SPIKE_PERCENT,
    Scenario,
    parse_day,
    parse_loss,
    parse_spike,
)


def simulate(
    plan: CapacityPlan,
    fleet: FleetPlan,
    scenario: Scenario,
    stack: str,
    models: dict[str, ReplicaModel] | None = None,
) -> Simulation:
    run = run_day(plan, fleet, scenario, models)
    target = plan.slo.percentile / 100
    violations, any_bad = violations_of(run, fleet, target)
    event_list = events(plan, fleet, run, any_bad)
    found = checks(plan, fleet, run, event_list, violations)
    result = summarise(plan, fleet, run, stack, found, event_list, violations)
    if scenario.spike is None and scenario.loss is None and scenario.day.profile == "plan":
        found = [*found, cost_check(result.cost_usd, result.plan_cost_usd),
                 *prefix_checks(plan, fleet)]
        result = result.model_copy(update={"checks": found})
    return result


def day_of(plan: CapacityPlan, fleet: FleetPlan, scenario: Scenario, stack: str) -> Simulation:
    """`simulate`, memoised on disk (`disk_memo`) by the plan, the FleetPlan's JSON and the
    scenario: a day is seeded, so the same inputs give the same day. `stack` only labels the
    day (`simulate` names the stack, the report the fleet), so it is not in the key."""
    return _memoised_day(_fleet_parts(plan, fleet), plan, fleet, scenario, stack, None)


def _fleet_parts(plan: CapacityPlan, fleet: FleetPlan) -> list[str | bytes]:
    """A day's key but its scenario (serialising a FleetPlan takes a while: once a report)."""
    return [*plan_parts(plan), fleet.model_dump_json()]


def _memoised_day(
    parts: list[str | bytes],
    plan: CapacityPlan,
    fleet: FleetPlan,
    scenario: Scenario,
    stack: str,
    models: Callable[[], dict[str, ReplicaModel]] | None,
) -> Simulation:
    """`day_of` with its key's fleet part given; `models`: the fleet's replica models, asked
    for only on a miss (the report's three days build them once)."""
    day = disk_memo.memoised("simulation", [*parts, scenario.model_dump_json()], lambda: simulate(
        plan, fleet, scenario, stack, None if models is None else models()))
    return day if day.stack == stack else day.model_copy(update={"stack": stack})


def simulated_day(plan: CapacityPlan, scenario: Scenario, stack: str) -> Simulation:
    """`simulate` of the plan's own FleetPlan (`build_fleet_plan`), by `day_of`: `simulate`
    run again, or after `render` (whose quiet day is `simulate`'s default scenario), reads
    its day back."""
    return day_of(plan, build_fleet_plan(plan), scenario, stack)


def worst_loss(plan: CapacityPlan, fleet: FleetPlan) -> str | None:
    """The single-region loss that loads a survivor most against what its maximum replicas
    carry at the SLO-limit rate (ties: the larger share lost); None with one region."""
    best: tuple[float, float, str] | None = None
    for rp in fleet.regions:
        if len(fleet.regions) < 2:
            return None
        load, _ = reroute(plan, [rp.region])
        strain = max(
            rps / (fleet.region(name).replicas.max * fleet.region(name).predicted.requests_per_s)
            for name, rps in load.items()
        )
        key = (round(strain, 9), rp.traffic_share, rp.region)
        if best is None or key[:2] > best[:2]:
            best = key
    return None if best is None else best[2]


@dataclass(frozen=True)
class ReportDays:
    quiet: Simulation
    spike: Simulation
    loss: Simulation | None


def report_days(plan: CapacityPlan, fleet: FleetPlan, stack: str) -> ReportDays:
    """The report's days: quiet, the default spike, the worst single-region loss (seed 0),
    each by `day_of`: render, and its tests, ask for the same days again and again, and the
    quiet day is the one `simulate` gives by default."""
    day = parse_day("plan", plan.day_profile)
    spike = parse_spike(f"{DEFAULT_SPIKE_PERCENT:g}@{DEFAULT_SPIKE_AT}", DEFAULT_SPIKE_MINUTES)
    lost = worst_loss(plan, fleet)
    names = [r.region for r in fleet.regions]
    loss = parse_loss(f"{lost}@{DEFAULT_LOSS_AT}", names) if lost else None
    parts, models = _fleet_parts(plan, fleet), cache(lambda: replica_models(plan, fleet))

    def on(scenario: Scenario) -> Simulation:
        return _memoised_day(parts, plan, fleet, scenario, stack, models)

    return ReportDays(
        quiet=on(Scenario(day=day)),
        spike=on(Scenario(day=day, spike=spike)),
        loss=None if loss is None else on(Scenario(day=day, loss=loss)),
    )


def report_simulation(plan: CapacityPlan, fleet: FleetPlan, stack: str) -> ReportDays | str:
    """What the report shows of the simulator: its days, or why the fleet is not simulated
    (`not_simulated`)."""
    return not_simulated(fleet) or report_days(plan, fleet, stack)
