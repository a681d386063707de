"""The simulator checking the plan: headroom carries a spike, warm floors carry a loss once DNS
has moved, the KEDA thresholds hold a steady load; and the report's days for every stack.

Where a shipped plan fails a check for a known reason, the test says why and is expected to
fail (strict: it turns red once the plan is fixed, so the mark goes with the defect)."""

from functools import cache

import numpy as np
import pytest
from plans import make_plan

from llmfleet.data import MinDesiredMax
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import list_stacks, read_plan
from llmfleet.search.region_losses import reroute
from llmfleet.simulate.day import run_day
from llmfleet.simulate.run import report_days, simulate, worst_loss
from llmfleet.simulate.scenario import DayShape, Scenario, Spike, parse_loss

PLAN_DAY = DayShape(profile="plan", peak_hours=8, trough_hours=8)
SATURATED = 0.9
"""Above this share of its SLO-limit rate a replica's batch is nearly always full: arrivals
wait for a slot (the simulation and the request-by-request run agree; docs/simulate.md)."""


def _spike_attainment(plan: CapacityPlan, percent: float) -> float:
    fp = build_fleet_plan(plan)
    spike = Spike(percent=percent, start_s=14 * 3600, minutes=30)
    sim = simulate(plan, fp, Scenario(day=PLAN_DAY, spike=spike), "t")
    minutes = slice(14 * 60, 14 * 60 + 30)
    req = np.array(sim.minutes.requests[minutes])
    inside = np.array(sim.minutes.attainment[minutes]) * req
    return float(inside.sum() / req.sum())


def test_no_headroom_loses_attainment_in_a_spike_that_20_percent_headroom_absorbs() -> None:
    # Llama-3.1-8B on p5.4xlarge (one H100): a replica carries 14.66 req/s at the SLO limit.
    # A 54 req/s peak takes 4 replicas with no headroom (58.6 req/s) and 5 with 20 % (73.3):
    # a +10 % spike (59.4 req/s) overloads the first and fits the second. Headroom 0 itself
    # is refused (it cannot carry any traffic growth during a cold start), so "none" is 1e-6.
    flat = {"traffic.peak_requests_per_s": 54.0, "traffic.trough_requests_per_s": 54.0,
            "startup.traffic_growth_per_min": 1e-9}
    none, some = make_plan(headroom=1e-6, **flat), make_plan(headroom=0.2, **flat)
    assert build_fleet_plan(none).regions[0].replicas.max == 4
    assert build_fleet_plan(some).regions[0].replicas.max == 5
    assert _spike_attainment(none, 10) < 0.5
    assert _spike_attainment(some, 10) >= 0.99


@cache
def _stack(env: str) -> tuple[CapacityPlan, FleetPlan]:
    plan = read_plan(env)
    return plan, build_fleet_plan(plan)


LOSS_STACKS = [env for env in list_stacks() if len(read_plan(env).regions) > 1
               and read_plan(env).dns is not None]


def _strain(plan: CapacityPlan, fp: FleetPlan, lost: str) -> float:
    """The most loaded survivor against its warm replicas at the SLO-limit rate."""
    load, _ = reroute(plan, [lost])
    return max(rps / (fp.region(n).replicas.min * fp.region(n).predicted.requests_per_s)
               for n, rps in load.items())


def _loss_params() -> list[object]:
    out: list[object] = []
    for env in LOSS_STACKS:
        plan, fp = _stack(env)
        lost = worst_loss(plan, fp)
        marks = []
        if lost is not None and _strain(plan, fp, lost) > SATURATED:
            marks.append(pytest.mark.xfail(strict=True, reason=(
                "stage 4 sizes a survivor's warm floor at the SLO-limit rate (the headroom is "
                "spent in a loss), where its batch is full: arrivals queue for a slot"
            )))
        out.append(pytest.param(env, marks=marks, id=env))
    return out


def _after_dns(fp: FleetPlan, sim_checks: list, lost: str) -> list:
    return [c for c in sim_checks if c.check.endswith(f"after {lost} is lost, once DNS moved")]


@pytest.mark.parametrize("env", _loss_params())
def test_warm_floors_hold_the_slo_after_the_worst_loss_once_dns_moved(env) -> None:
    plan, fp = _stack(env)
    days = report_days(plan, fp, fp.name)
    assert days.loss is not None
    lost = worst_loss(plan, fp)
    assert lost is not None
    found = _after_dns(fp, days.loss.checks, lost)
    assert found and all(c.holds for c in found), [c.simulated for c in found]


@pytest.mark.parametrize("env", LOSS_STACKS)
def test_a_warm_floor_with_a_tenth_to_spare_recovers_in_the_plans_time(env) -> None:
    plan, fp = _stack(env)
    lost = worst_loss(plan, fp)
    assert lost is not None
    load, _ = reroute(plan, [lost])
    regions = []
    for rp in fp.regions:
        if rp.region in load:  # warm replicas for the loss at 90 % of the SLO-limit rate
            carries = SATURATED * rp.predicted.requests_per_s
            n = max(rp.replicas.max, -int(-load[rp.region] // carries))
            nodes = -(-n // rp.replicas_per_node)
            rp = rp.model_copy(update={
                "replicas": MinDesiredMax(min=n, desired=n, max=n),
                "nodes": MinDesiredMax(min=nodes, desired=nodes, max=nodes),
                "capacity": rp.capacity.model_copy(
                    update={"floor_nodes": nodes, "ceiling_nodes": nodes}),
            })
        regions.append(rp)
    roomy = fp.model_copy(update={"regions": regions})
    loss = parse_loss(f"{lost}@14:00", [r.region for r in roomy.regions])
    sim = simulate(plan, roomy, Scenario(day=PLAN_DAY, loss=loss), env)
    assert all(c.holds for c in _after_dns(roomy, sim.checks, lost))
    event = sim.events[0]
    assert event.plan_recovery_s is not None and event.recovery_s is not None
    assert event.recovery_s <= event.plan_recovery_s + 2 * sim.step_s


FLOOR_QUEUE_DEPTH = 0.5
"""autoscaling's least queue-depth threshold, "half a request"."""


def _steady(plan: CapacityPlan, fp: FleetPlan, region: str) -> tuple[CapacityPlan, float]:
    """The plan with a flat day: `region` at its floor's replicas less 0.3, at the sized load."""
    rp = fp.region(region)
    sized = rp.predicted.requests_per_s * (1 - plan.headroom)
    rate = (rp.replicas.min - 0.3) * sized / rp.traffic_share
    traffic = plan.traffic.model_copy(
        update={"peak_requests_per_s": rate, "trough_requests_per_s": rate})
    return plan.model_copy(update={"traffic": traffic}), rate


def _changes_after_an_hour(plan: CapacityPlan, fp: FleetPlan, region: str) -> int:
    day = run_day(plan, fp, Scenario(day=PLAN_DAY), only={region}).regions[region]
    settled = day.replicas[int(3600 / 2.5):]
    return int(np.count_nonzero(np.diff(settled)))


def _flap_params() -> list[object]:
    out: list[object] = []
    for env in list_stacks():
        _, fp = _stack(env)
        for rp in fp.regions:
            if rp.replicas.min == rp.replicas.max:
                continue
            depth = next(t.threshold for t in rp.autoscaling.triggers if t.name == "queue-depth")
            marks = []
            if depth <= FLOOR_QUEUE_DEPTH:
                marks.append(pytest.mark.xfail(strict=True, reason=(
                    "queue-depth at the half-request floor: a momentary queue of two requests "
                    "over two replicas asks for four (AverageValue: ceil(2 / 0.5))"
                )))
            out.append(pytest.param(env, rp.region, marks=marks, id=f"{env}-{rp.region}"))
    return out


@pytest.mark.parametrize(("env", "region"), _flap_params())
def test_keda_holds_its_replicas_at_a_steady_load(env, region) -> None:
    plan, fp = _stack(env)
    steady, _ = _steady(plan, fp, region)
    assert _changes_after_an_hour(steady, fp, region) == 0


def test_with_two_requests_per_replica_to_scale_on_the_count_holds(stack_plans) -> None:
    # prod's eu-north-1 (2 to 6 replicas) at 1.7 replicas' sized load: with the plan's
    # half-request queue-depth threshold it flaps; asking two waiting requests per replica
    # before scaling out, it holds 2 all day.
    plan, fp = read_plan("prod"), stack_plans["prod"]
    rp = fp.region("eu-north-1")
    triggers = [t.model_copy(update={"threshold": 2.0}) if t.name == "queue-depth" else t
                for t in rp.autoscaling.triggers]
    calmer = rp.model_copy(
        update={"autoscaling": rp.autoscaling.model_copy(update={"triggers": triggers})})
    fixed = fp.model_copy(update={"regions": [calmer if r.region == rp.region else r
                                              for r in fp.regions]})
    steady, _ = _steady(plan, fp, rp.region)
    assert _changes_after_an_hour(steady, fp, rp.region) > 10
    assert _changes_after_an_hour(steady, fixed, rp.region) == 0


def test_prod_keeps_its_slo_on_a_quiet_day_and_a_spike_and_a_loss_cost_it(stack_plans) -> None:
    plan, fp = read_plan("prod"), stack_plans["prod"]
    days = report_days(plan, fp, fp.name)
    assert days.quiet.attainment >= 0.99
    assert days.loss is not None and "us-east-1 lost at 14:00" in days.loss.scenario
    for day in (days.spike, days.loss):
        assert day.attainment < days.quiet.attainment
        assert day.events and day.events[0].recovery_s is not None
        assert day.recovery_s == day.events[0].recovery_s
