"""`simulate` checks what a prefix-heavy plan claims (#32): the region's replicas at its
peak behind its balancing, conversations over per-replica caches, against the replica
record's hit rate and the TTFT target."""

from __future__ import annotations

import copy

from plans import ONE_REGION

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import parse_plan
from llmfleet.simulate.prefix_check import prefix_checks


def test_a_plan_without_reuse_has_no_prefix_check() -> None:
    plan = parse_plan(copy.deepcopy(ONE_REGION))
    assert prefix_checks(plan, build_fleet_plan(plan)) == []


def test_the_simulated_cache_holds_what_the_plan_sized_with() -> None:
    """4-turn conversations with a 400-token shared prefix behind prefix-aware routing: the
    plan sized 62 % of prompt tokens cached (assuming the 2 replicas of its first pass);
    its one replica finds more, and TTFT p95 stays under 800 ms."""
    d = copy.deepcopy(ONE_REGION)
    d["traffic"].update(shared_prefix_tokens=400, turns=4, think_time_s=30)
    d["edge"] = {"balancing": "prefix_aware"}
    plan = parse_plan(d)
    fleet = build_fleet_plan(plan)
    [check] = prefix_checks(plan, fleet)
    assert check.check == "us-east-1's prefix cache at its peak"
    assert check.plan.startswith("61.6% of prompt tokens cached (prefix_aware over 1")
    assert check.holds
