"""What prefix-aware balancing would save (fleetplan.balancing_alternative): a plan whose
traffic shares prefixes but balances by least outstanding requests is searched once more
with a cache-aware router, and a region says what that would cost where it costs less."""

from __future__ import annotations

import copy
import dataclasses

from plans import ONE_REGION

from llmfleet.data import MinDesiredMax
from llmfleet.fleetplan.balancing_alternative import (
    build_balancing_alternative,
    searched_with_router,
)
from llmfleet.fleetplan.fleet import build_fleet_plan, search_setup
from llmfleet.plan.stacks import parse_plan

CONVERSATIONS = {"shared_prefix_tokens": 400, "turns": 4, "think_time_s": 30}


def _plan(**traffic: object):
    d = copy.deepcopy(ONE_REGION)
    d["traffic"].update(traffic)
    return parse_plan(d)


def test_only_traffic_that_shares_prefixes_balanced_blind_is_searched_again() -> None:
    assert searched_with_router(_plan()) is None
    routed = searched_with_router(_plan(**CONVERSATIONS))
    assert routed is not None and routed.edge.balancing == "prefix_aware"
    assert routed.traffic == _plan(**CONVERSATIONS).traffic


def test_a_router_that_saves_nothing_is_not_said() -> None:
    """6 req/s fit one replica either way: no alternative, no reason."""
    fp = build_fleet_plan(_plan(**CONVERSATIONS))
    assert fp.regions[0].balancing_alternative is None
    assert not any(r.startswith("edge.balancing: prefix_aware") for r in fp.regions[0].reasons)


def test_a_router_that_saves_nodes_is_said_with_its_price_and_hit_rate() -> None:
    """14 req/s of 4-turn conversations need 3 L40S nodes either way (decode binds, the
    cache saves prefill); given one node fewer, the region searched with prefix-aware
    balancing is reported with both prices and both hit rates."""
    plan = _plan(peak_requests_per_s=14, **CONVERSATIONS)
    found = search_setup(plan)
    [(choice, _)] = found.choose(plan)
    [routed] = found.with_router(plan, [choice])
    assert routed is not None and choice.nodes.desired == 3
    fewer = dataclasses.replace(routed, nodes=MinDesiredMax(min=1, desired=2, max=2))
    alt = build_balancing_alternative(choice, fewer)
    assert alt is not None
    assert alt.nodes == 2 and alt.monthly_cost_usd < alt.plan_monthly_cost_usd
    assert alt.hit_rate > alt.plan_hit_rate
    assert alt.text.startswith("edge.balancing: prefix_aware (a cache-aware router")
    prices = f"${alt.monthly_cost_usd:,.0f}/month on demand against "
    assert prices + f"${alt.plan_monthly_cost_usd:,.0f}" in alt.text
    assert build_balancing_alternative(choice, routed) is None  # the same 3 nodes
