"""Arrivals per region through the day: the diurnal curve from the plan's trough to its peak,
the spike, and where a lost region's users go while DNS moves them.

The curve (`level`): a plateau at the peak for `peak_hours` centred on 14:00, one at the
trough for `trough_hours` centred on 02:00, and between them raised-cosine ramps,
trough + (peak - trough) x (1 - cos(pi x)) / 2 for x from 0 to 1 across the ramp: the rate
and its slope are continuous (a step only when the plateaus fill the day). Its mean is the
plan's own costing of the day (`fleetplan.costs`: the ramp hours halfway), so the simulated
day and the plan's day profile carry the same requests.

A lost region's users keep going to it until Route 53 has failed its health check
`failure_threshold` times `health_check_interval_s` apart (`detection_s`); from then the
resolvers that cached its answer drop it evenly over the record's TTL, so the share still
sent there falls linearly to 0 at detection + TTL (the plan's recovery time). Those requests
fail. The rest go where `search.region_losses.reroute` sends them (latency routing: the
nearest survivor; failover: the secondary). Without a global name nothing re-routes.

Arrivals are Poisson: each (destination, second) draws its count from a seeded generator in a
fixed order, so a seed gives the same day everywhere."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.region_losses import reroute
from llmfleet.simulate.scenario import DAY_S, PEAK_CENTRE_H, DayShape, Scenario

Float = np.ndarray


def level(t_s: Float, day: DayShape) -> Float:
    """Where the rate sits between trough (0) and peak (1) at each time of day (seconds)."""
    h = np.mod(np.asarray(t_s, dtype=float) / 3600.0, 24.0)
    p, tr = day.peak_hours, day.trough_hours
    ramp = (24.0 - p - tr) / 2
    # Hours since the trough plateau ended (the morning ramp begins there).
    trough_end = (PEAK_CENTRE_H - 12.0) + tr / 2
    x = np.mod(h - trough_end, 24.0)
    out = np.zeros_like(x)
    if ramp > 0:
        up = x < ramp
        out[up] = (1 - np.cos(np.pi * x[up] / ramp)) / 2
    at_peak = (x >= ramp) & (x < ramp + p)
    out[at_peak] = 1.0
    down = (x >= ramp + p) & (x < 2 * ramp + p)
    if ramp > 0:
        out[down] = (1 + np.cos(np.pi * (x[down] - ramp - p) / ramp)) / 2
    return out


def fleet_rate(plan: CapacityPlan, t_s: Float, day: DayShape) -> Float:
    """Fleet-wide requests/s at each time (before spikes and losses)."""
    lo, hi = plan.traffic.trough_requests_per_s, plan.traffic.peak_requests_per_s
    return lo + (hi - lo) * level(t_s, day)


@dataclass(frozen=True)
class RouteState:
    """How a loss moves users: when DNS starts moving them and how long resolvers hold on."""

    detection_s: float | None  # None: no global name, nothing re-routes
    ttl_s: float

    def moved(self, since_loss_s: Float) -> Float:
        """Share of a lost region's users already sent elsewhere, by seconds since the loss."""
        if self.detection_s is None:
            return np.zeros_like(since_loss_s)
        if self.ttl_s <= 0:
            return (since_loss_s >= self.detection_s).astype(float)
        return np.clip((since_loss_s - self.detection_s) / self.ttl_s, 0.0, 1.0)

    @property
    def recovery_s(self) -> float | None:
        return None if self.detection_s is None else self.detection_s + self.ttl_s


def routing(fleet: FleetPlan) -> RouteState:
    rec = fleet.resilience.recovery
    if rec is None:
        return RouteState(None, 0.0)
    return RouteState(float(rec.detection_s), float(rec.ttl_s))


@dataclass(frozen=True)
class Demand:
    """Requests/s per region and step: `served` reach a live region, `failed` go to a lost
    one (or, with no global name, have nowhere to go)."""

    t_s: Float  # the start of each step, seconds since midnight (negative: warm-up)
    served: dict[str, Float]
    failed: dict[str, Float]


def demand(
    plan: CapacityPlan, fleet: FleetPlan, scenario: Scenario, t_s: Float
) -> Demand:
    """Request rates per region at the start of each step."""
    base = fleet_rate(plan, t_s, scenario.day)
    spike = scenario.spike
    if spike is not None:
        tod = np.mod(t_s, DAY_S)
        on = (t_s >= 0) & (tod >= spike.start_s) & (tod < spike.end_s)
        base = np.where(on, base * (1 + spike.percent / 100), base)
    served = {r.region: base * r.traffic_share for r in fleet.regions}
    failed = {r.region: np.zeros_like(base) for r in fleet.regions}
    loss = scenario.loss
    if loss is not None:
        since = t_s - loss.at_s
        after = since >= 0
        moved = np.where(after, routing(fleet).moved(since), 0.0)
        gone = served[loss.region]
        _, absorptions = reroute(plan, [loss.region])
        for a in absorptions:
            served[a.absorbed_by] = served[a.absorbed_by] + gone * moved
        failed[loss.region] = np.where(after, gone * (1 - moved), 0.0)
        served[loss.region] = np.where(after, 0.0, gone)
    return Demand(t_s, served, failed)


def poisson_counts(rng: np.random.Generator, rates: Float, step_s: float) -> np.ndarray:
    """Arrivals in each step of `step_s` seconds at these rates."""
    counts: np.ndarray = rng.poisson(np.maximum(rates, 0.0) * step_s).astype(np.int64)
    return counts
