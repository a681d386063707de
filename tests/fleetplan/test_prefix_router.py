"""edge.balancing prefix_aware in the FleetPlan and the rendered files: the router, its
flags, what the ALB targets, and plans without it rendering as before."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from plans import LONG_PROMPT, ONE_REGION, plan_dict

from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.prefix_router import ROUTER_FLAGS
from llmfleet.outputs.render import region_files
from llmfleet.perf.prefix_cache import BALANCE_REL_THRESHOLD
from llmfleet.plan.stacks import parse_plan

CONVERSATIONS = {"shared_prefix_tokens": 400, "turns": 4, "think_time_s": 30}


def _plan(balancing: str | None, **traffic: Any) -> dict[str, Any]:
    d = copy.deepcopy(ONE_REGION)
    d["traffic"].update(traffic)
    if balancing is not None:
        d["edge"] = {"balancing": balancing}
    return d


@pytest.fixture(scope="module")
def fleets() -> dict[str, FleetPlan]:
    return {
        "default": build_fleet_plan(parse_plan(_plan(None))),
        "least_outstanding": build_fleet_plan(parse_plan(_plan("least_outstanding"))),
        "prefix_aware": build_fleet_plan(parse_plan(_plan("prefix_aware", **CONVERSATIONS))),
    }


def test_least_outstanding_renders_exactly_as_a_plan_that_never_names_it(fleets) -> None:
    default, named = fleets["default"], fleets["least_outstanding"]
    files = region_files(default, default.regions[0])
    assert files == region_files(named, named.regions[0])
    assert not [f for f in files if "prefix-router" in f]
    assert default.regions[0].prefix_router is None


def test_prefix_aware_sends_the_api_to_the_router_and_health_to_the_engines(fleets) -> None:
    fp = fleets["prefix_aware"]
    r = fp.regions[0]
    assert r.prefix_router is not None and r.entry_point is not None
    assert (r.entry_point.paths, r.entry_point.health_paths) == (["/v1"], ["/health"])
    assert r.entry_point.capacity_target == "health"
    files = region_files(fp, r)
    api = files["us-east-1/ingress.yaml"]
    assert "name: chat-one-router" in api and "healthcheck-path: /readiness" in api
    health = files["us-east-1/ingress-health.yaml"]
    assert "name: chat-one\n" in health and "healthcheck-path: /health" in health
    # the engines admit the router's pods on their serving port
    assert "app.kubernetes.io/component: prefix-router" in files["us-east-1/networkpolicy.yaml"]


def test_the_routers_flags_are_ones_both_of_its_command_lines_accept(fleets) -> None:
    router = fleets["prefix_aware"].regions[0].prefix_router
    assert router is not None
    flags = [a for a in router.args if a.startswith("--")]
    assert set(flags) <= set(ROUTER_FLAGS)
    assert router.args[router.args.index("--policy") + 1] == "cache_aware"
    # it watches only its own namespace, for the engines' own labels
    assert router.args[router.args.index("--service-discovery-namespace") + 1] == "chat-one"
    assert "app.kubernetes.io/component=inference" in router.args


def test_the_imbalance_threshold_is_the_headrooms_slots_per_router(fleets) -> None:
    r = fleets["prefix_aware"].regions[0]
    router = r.prefix_router
    assert router is not None
    expected = math.floor(r.serving.vllm.max_num_seqs * 0.20 / router.replicas)
    assert router.balance_abs_threshold == expected
    args = router.args
    assert args[args.index("--balance-abs-threshold") + 1] == str(expected)
    assert args[args.index("--balance-rel-threshold") + 1] == f"{BALANCE_REL_THRESHOLD:g}"


def test_the_router_keeps_more_of_each_conversation_cached_than_the_alb() -> None:
    """24 req/s of 4-turn conversations over the region's 4 replicas (at 6 req/s the cache
    lets one replica serve them all, where any balancing keeps every turn)."""
    fp = build_fleet_plan(parse_plan(_plan("prefix_aware", peak_requests_per_s=24,
                                           **CONVERSATIONS)))
    assert fp.regions[0].replicas.desired == 4
    router = fp.regions[0].prefix_router
    assert router is not None
    assert router.with_router.hit_rate > router.without_router.hit_rate
    assert router.with_router.same_replica_probability > router.without_router.\
        same_replica_probability
    # the shared prefix alone is 400 of 1000 tokens: both balancings cache at least it
    assert router.without_router.cached_tokens_per_prompt >= 400


def test_a_disaggregated_region_keeps_its_own_router() -> None:
    d = plan_dict(**LONG_PROMPT)
    d["edge"] = {**d.get("edge", {}), "balancing": "prefix_aware"}
    d.setdefault("dns", ONE_REGION["dns"])
    fp = build_fleet_plan(parse_plan(d))
    region = fp.regions[0]
    assert region.disaggregation is not None  # LONG_PROMPT splits prefill and decode
    assert region.prefix_router is None
    assert "--prefill-policy" in region.disaggregation.router.args
