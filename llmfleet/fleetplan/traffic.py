"""Where the traffic should go: what a request-per-second costs in each region, and where
moving a region's share to a cheaper one within a latency budget would save enough to say.

The traffic split is the plan's input (`regions[].traffic_share`); llmfleet does not move
it, it says what moving it would do. A region's marginal cost of one more request per second
is its chosen configuration at the SLO: a node's price over the requests/s its replicas
carry with the plan's headroom. Moving all of region A's users to region B is costed with
each region's chosen configuration kept: replicas for the new shares with the plan's
headroom, raised for the region losses the plan survives (`search.region_losses`: with one
loss survived, B already keeps a warm floor for A's users and A keeps one for B's, so a move
can save little), packed on nodes at each region's price. The search could choose other
configurations for the new split; plan it to know. A's users then pay the detour on their
first token: a new connection's TCP and TLS handshakes and the request, one round trip each
over the great-circle distance at fibre speed (`catalog.geo`). A move is worth saying when
it saves at least MIN_SAVING_SHARE of the fleet's monthly GPU cost; it is advised when its
detour fits the budget: `routing.latency_budget_ms`, else what B's predicted TTFT leaves
under the SLO."""

from __future__ import annotations

from pydantic import Field

from llmfleet.catalog import geo
from llmfleet.data import Data
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.cost import on_demand_monthly_usd
from llmfleet.search.region_losses import loss_demands
from llmfleet.search.replicas import deployed_replicas, nodes_for

MIN_SAVING_SHARE = 0.05
"""A shift is reported when it saves at least this share of the fleet's monthly GPU cost."""


class RegionEconomy(Data):
    region: str
    traffic_share: float
    peak_requests_per_s: float
    monthly_cost_usd: float
    usd_per_month_per_request_per_s: float | None = Field(
        description="The region's monthly cost at the peak over its peak requests/s (None: "
        "a standby without traffic)."
    )
    marginal_usd_per_month_per_request_per_s: float = Field(
        description="One more request/s here: a node's monthly price over what its replicas "
        "carry inside the SLOs with the plan's headroom."
    )


class TrafficShift(Data):
    from_region: str
    to_region: str
    traffic_share: float = Field(description="The share of the fleet's traffic moved.")
    requests_per_s: float
    saves_usd_per_month: float
    saves_share: float = Field(description="Of the fleet's monthly GPU cost at the peak.")
    distance_km: float
    added_ttft_ms: float = Field(description="A new connection's detour (3 round trips).")
    budget_ms: float
    within_budget: bool
    text: str


class TrafficAdvice(Data):
    regions: list[RegionEconomy]
    min_saving_share: float
    shifts: list[TrafficShift] = Field(
        description="Per region with traffic, the most saving move worth saying (if any)."
    )
    notes: list[str]


def marginal_usd(rp: RegionPlan, headroom: float) -> float:
    """A node's month over the requests/s it carries: its replicas' (a replica that spans
    `nodes_per_replica` nodes, that share of one) with the headroom."""
    replicas = rp.replicas_per_node / rp.nodes_per_replica
    carried = replicas * rp.predicted.requests_per_s * (1 - headroom)
    return on_demand_monthly_usd(1, rp.price_usd_per_hour) / carried


def build_traffic_advice(plan: CapacityPlan, regions: list[RegionPlan]) -> TrafficAdvice | None:
    """None for a single region or failover routing (one region serves everyone)."""
    if len(regions) < 2 or plan.routing.policy != "latency":
        return None
    fleet_usd = sum(r.billed_monthly_cost_usd for r in regions)
    economy = [
        RegionEconomy(
            region=r.region,
            traffic_share=r.traffic_share,
            peak_requests_per_s=r.peak_requests_per_s,
            monthly_cost_usd=r.billed_monthly_cost_usd,
            usd_per_month_per_request_per_s=round(
                r.billed_monthly_cost_usd / r.peak_requests_per_s, 2
            )
            if r.peak_requests_per_s > 0
            else None,
            marginal_usd_per_month_per_request_per_s=round(marginal_usd(r, plan.headroom), 2),
        )
        for r in regions
    ]
    shifts = []
    for a in regions:
        options = [_shift(plan, regions, a, b, fleet_usd) for b in regions if b is not a]
        worth = [s for s in options if s is not None]
        if worth:
            shifts.append(max(worth, key=lambda s: (s.within_budget, s.saves_usd_per_month)))
    cheapest = min(economy, key=lambda e: e.marginal_usd_per_month_per_request_per_s)
    dearest = max(economy, key=lambda e: e.marginal_usd_per_month_per_request_per_s)
    ratio = (
        dearest.marginal_usd_per_month_per_request_per_s
        / cheapest.marginal_usd_per_month_per_request_per_s
    )
    notes = [
        f"one more request/s costs ${cheapest.marginal_usd_per_month_per_request_per_s:,.0f}"
        f"/month in {cheapest.region} and ${dearest.marginal_usd_per_month_per_request_per_s:,.0f}"
        f" in {dearest.region} ({ratio:.1f}x)",
        "a move is costed with each region's chosen configuration, its headroom and the warm "
        "floors for the losses the plan survives; change regions[].traffic_share and plan "
        "again for the search's own figure",
    ]
    if not shifts:
        notes.append(
            f"no move of one region's users to another saves {MIN_SAVING_SHARE:.0%} of the "
            "fleet's cost"
            + (
                ": each region is sized to carry the users of a lost region, so fewer users of "
                "its own change little"
                if plan.survive_region_losses
                else ""
            )
        )
    return TrafficAdvice(
        regions=economy, min_saving_share=MIN_SAVING_SHARE, shifts=shifts, notes=notes
    )


def fleet_usd_at_shares(
    plan: CapacityPlan, regions: list[RegionPlan], shares: dict[str, float]
) -> float:
    """The fleet's monthly GPU cost at the peak with these traffic shares, each region on
    its chosen configuration (replicas with headroom, raised for the losses it survives)."""
    moved = plan.model_copy(
        update={
            "regions": [
                r.model_copy(update={"traffic_share": shares[r.name]}) for r in plan.regions
            ]
        }
    )
    loads = loss_demands(moved)
    total = 0.0
    for region, rp in zip(moved.regions, regions, strict=True):
        replicas = deployed_replicas(
            moved, region, rp.predicted.requests_per_s, loads, rp.predicted.requests_per_s_in_loss
        )
        nodes = nodes_for(replicas, rp.replicas_per_node, rp.nodes_per_replica)
        total += on_demand_monthly_usd(nodes.desired, rp.price_usd_per_hour)
    return total


def _shift(
    plan: CapacityPlan, regions: list[RegionPlan], a: RegionPlan, b: RegionPlan, fleet_usd: float
) -> TrafficShift | None:
    """Moving all of `a`'s users to `b`, if it saves MIN_SAVING_SHARE of the fleet."""
    rps = a.peak_requests_per_s
    if rps <= 0:
        return None
    shares = {r.name: r.traffic_share for r in plan.regions}
    now = fleet_usd_at_shares(plan, regions, shares)
    shares[b.region] += shares[a.region]
    shares[a.region] = 0.0
    saves = now - fleet_usd_at_shares(plan, regions, shares)
    if saves < MIN_SAVING_SHARE * fleet_usd:
        return None
    km = geo.distance_km(a.region, b.region)
    added = geo.first_token_detour_ms(a.region, b.region)
    given = plan.routing.latency_budget_ms
    budget = given if given is not None else max(0.0, plan.slo.ttft_ms - b.predicted.ttft_ms)
    source = (
        "routing.latency_budget_ms"
        if given is not None
        else f"what {b.region}'s predicted TTFT ({b.predicted.ttft_ms:,.0f} ms) leaves under "
        f"the {plan.slo.ttft_ms:g} ms SLO"
    )
    within = added <= budget
    text = (
        f"moving {a.region}'s {a.traffic_share:.0%} of the traffic ({rps:g} req/s) to "
        f"{b.region} would save about ${saves:,.0f}/month ({saves / fleet_usd:.0%} of the "
        f"fleet's GPUs at the peak) and add about {added:,.0f} ms to its users' first token "
        f"({geo.HANDSHAKE_ROUND_TRIPS + 1} round trips over {km:,.0f} km at fibre speed): "
        + (
            f"within the {budget:,.0f} ms budget ({source})"
            if within
            else f"over the {budget:,.0f} ms budget ({source})"
        )
    )
    return TrafficShift(
        from_region=a.region,
        to_region=b.region,
        traffic_share=a.traffic_share,
        requests_per_s=round(rps, 4),
        saves_usd_per_month=round(saves, 2),
        saves_share=round(saves / fleet_usd, 4),
        distance_km=round(km, 0),
        added_ttft_ms=round(added, 1),
        budget_ms=round(budget, 1),
        within_budget=within,
        text=text,
    )
