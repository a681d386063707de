"""The rollout: the order `pulumi up` reaches an environment's regions, canary first, and
the gate between the canary and the rest.

The canary is the first region of `rollout.order` (default: the smallest traffic share, so
a bad change reaches the fewest users). It passes when its replicas are Ready within its
predicted cold start (`RegionPlan.cold_start.total_s`: node launch, image pull, weights,
engine start) and, after `bake_s`, none of its fast SLO burn-rate alerts fires. `bake_s` is
the longest a canary that slows every request takes to fire that alert: the long window must
reach the alert's limit (burn rate x error budget of it), then the alert's `for` must hold."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.alerts import BURN_WINDOWS, AlertRule
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.plan.schema import CapacityPlan

SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class RolloutPlan(Data):
    order: list[str] = Field(description="Regions in deploy order; the first is the canary.")
    canary: str
    gate_alerts: list[str] = Field(
        description="The canary's alerts that stop the rollout when they fire (fast SLO "
        "burn rates)."
    )
    bake_s: int = Field(
        description="How long the canary runs before its alerts are read: the longest a "
        "change that slows every request takes to fire them."
    )
    reasons: list[str]


def duration_s(text: str) -> float:
    """A Prometheus duration such as 5m or 1h, in seconds."""
    return float(text[:-1]) * SECONDS[text[-1]]


def rollout_order(plan: CapacityPlan) -> list[str]:
    """rollout.order, else by traffic share, smallest first (ties in the plan's order)."""
    if plan.rollout.order is not None:
        return list(plan.rollout.order)
    return [r.name for r in sorted(plan.regions, key=lambda r: r.traffic_share)]


def fast_burn_alerts(region: RegionPlan) -> list[AlertRule]:
    tier = BURN_WINDOWS[0][0]
    return [r for r in region.alerts.rules if r.name.endswith(f"BudgetBurn{tier}")]


def bake_s(region: RegionPlan, rules: list[AlertRule]) -> int:
    """Long window x the share of bad events that fires the alert, plus its `for`, rounded up
    to a minute: a change that slows every request fires it within this."""
    if not rules:
        return 0
    _, burn, long_window, _, _ = BURN_WINDOWS[0]
    limit = burn * region.alerts.error_budget
    worst = max(limit * duration_s(long_window) + duration_s(r.for_duration) for r in rules)
    return math.ceil(worst / 60) * 60


def build_rollout(plan: CapacityPlan, regions: list[RegionPlan]) -> RolloutPlan:
    order = rollout_order(plan)
    canary = next(r for r in regions if r.region == order[0])
    ready_s = math.ceil(canary.cold_start.total_s)
    ready = f"its replicas Ready within {ready_s} s (the predicted cold start)"
    if len(order) == 1:
        return RolloutPlan(
            order=order, canary=canary.region, gate_alerts=[], bake_s=0,
            reasons=[f"one region ({canary.region}): one stack deploys it whole, {ready}"],
        )
    rules = fast_burn_alerts(canary)
    bake = bake_s(canary, rules)
    how = "as rollout.order lists them" if plan.rollout.order else (
        "smallest traffic share first (rollout.order unset)"
    )
    reasons = [
        f"regions deploy one at a time, {how}: {' -> '.join(order)}, then the global stack "
        "(DNS)",
        f"canary {canary.region} ({canary.traffic_share:.0%} of traffic) must have {ready} "
        "and none of "
        + (", ".join(r.name for r in rules) or "its alerts")
        + f" firing after {bake} s; every later region must have {ready.split(' within')[0]} "
        "within its own cold start",
    ]
    if canary.traffic_share == 0:
        reasons.append(
            f"the canary {canary.region} serves no traffic (a failover standby): its burn-rate "
            "alerts cannot fire, so the gate checks readiness only"
        )
    return RolloutPlan(
        order=order, canary=canary.region, gate_alerts=[r.name for r in rules], bake_s=bake,
        reasons=reasons,
    )
