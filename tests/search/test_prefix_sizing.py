"""The search sizes with what the prefix cache holds (search.prefix_hold): a prompt's
prefill computes only its uncached tokens, so traffic that shares a prefix needs fewer
replicas, by the physics, and the FleetPlan's replica record carries the cache it assumed.

ONE_REGION: Llama-3.1-8B, 6 req/s at the peak, prompts of mean 1,000 tokens (p95 3,000),
outputs of mean 250; TTFT p95 800 ms, TPOT p95 50 ms; one g6e.xlarge (L40S) a replica."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from plans import ONE_REGION

from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.replica_record import hold_of
from llmfleet.perf.prefix_cache import history_tokens
from llmfleet.plan.stacks import parse_plan
from llmfleet.search.prefix_hold import CacheHold, conversations_of
from llmfleet.search.replica_slo import workload_of

CONVERSATIONS = {"shared_prefix_tokens": 400, "turns": 4, "think_time_s": 30}


def _plan(balancing: str | None = None, **traffic: Any) -> dict[str, Any]:
    d = copy.deepcopy(ONE_REGION)
    d["traffic"].update(traffic)
    if balancing:
        d["edge"] = {"balancing": balancing}
    return d


@pytest.fixture(scope="module")
def fleets() -> dict[str, FleetPlan]:
    return {
        "none": build_fleet_plan(parse_plan(_plan())),
        "shared": build_fleet_plan(parse_plan(_plan(shared_prefix_tokens=400))),
        "conversations": build_fleet_plan(parse_plan(_plan(**CONVERSATIONS))),
        "prefix_aware": build_fleet_plan(parse_plan(_plan("prefix_aware", **CONVERSATIONS))),
    }


def test_a_shared_prefix_raises_a_replicas_capacity_and_conversations_halve_the_fleet(
    fleets,
) -> None:
    """Without reuse a replica holds the SLOs to 5.73 req/s: 6 req/s with 20 % headroom
    need 2. A 400-token shared prefix computes 40 % fewer prompt tokens: 7.45 req/s a
    replica (2 still, 7.2 > 7.45 / 1.2... the headroom rounds up); with 4-turn
    conversations besides, 54 % of each prompt is cached and one replica carries 7.2."""
    cap = {k: fp.regions[0].replica.capacity_requests_per_s for k, fp in fleets.items()}
    assert cap["none"] == pytest.approx(5.73, abs=0.01)
    assert cap["shared"] == pytest.approx(7.45, abs=0.01)
    assert cap["conversations"] == pytest.approx(7.79, abs=0.01)
    assert fleets["none"].gpus.desired == 2
    assert fleets["conversations"].gpus.desired == 1
    assert fleets["conversations"].monthly_cost_usd < fleets["none"].monthly_cost_usd


def test_a_plan_without_reuse_records_no_cache(fleets) -> None:
    assert fleets["none"].regions[0].replica.prefix_cache is None


def test_the_record_says_how_much_of_a_prompt_it_expects_cached_and_why(fleets) -> None:
    """Least outstanding over the 2 replicas the first pass deploys: a turn finds its
    conversation's replica half the time; the 400 shared tokens plus 28 % of the history
    make 540 of 1,000 tokens cached."""
    r = fleets["conversations"].regions[0]
    pc = r.replica.prefix_cache
    assert pc is not None
    assert (pc.balancing, pc.replicas_assumed) == ("least_outstanding", 2)
    assert pc.same_replica_probability == 0.5
    assert pc.shared_prefix_cached_tokens == 400
    assert pc.cached_tokens_per_prompt == pytest.approx(540, abs=1)
    assert pc.hit_rate == pytest.approx(0.54, abs=0.005)
    assert any(x.startswith("prefix cache: 540 of a mean prompt's 1,000 tokens") for x in
               r.reasons)


def test_prefix_aware_balancing_finds_more_of_each_conversation(fleets) -> None:
    lo = fleets["conversations"].regions[0].replica.prefix_cache
    pa = fleets["prefix_aware"].regions[0].replica.prefix_cache
    assert lo is not None and pa is not None
    assert pa.same_replica_probability > lo.same_replica_probability
    assert pa.history_hit_rate > lo.history_hit_rate
    assert pa.hit_rate > lo.hit_rate


def test_the_hit_rate_assumes_at_least_the_replicas_deployed(fleets) -> None:
    """Round robin finds a conversation less often over more replicas: the first pass's
    count (at the shared-prefix-only rate, the lower) is never below the final one."""
    for fp in fleets.values():
        for r in fp.regions:
            if r.replica.prefix_cache is not None:
                assert r.replica.prefix_cache.replicas_assumed >= r.replicas.desired


def test_the_record_rebuilds_the_workload_the_search_sized(fleets) -> None:
    fp = fleets["conversations"]
    plan = parse_plan(_plan(**CONVERSATIONS))
    hold = hold_of(fp.regions[0].replica)
    assert hold is not None
    w = workload_of(plan, hold)
    assert w.prompts.cached is not None
    assert w.shared_kv_tokens == 400


def test_a_cached_prefix_is_not_computed_and_its_chunks_start_after_it() -> None:
    """Single-turn traffic with a 400-token shared prefix: a prompt computes 400 fewer
    tokens, starting at position 400. The plan's lognormal of whole prompts (mean 1,000,
    p95 3,000) puts 30 % of them under 400 tokens: those are cached whole but the last
    token, which vLLM always computes. Of a mean admitted prompt of 967 tokens E[max(L -
    400, 1)] = 615 are computed (4 million draws of the lognormal below max_model_len); the
    bins give it within 1 %."""
    plan = parse_plan(_plan(shared_prefix_tokens=400))
    plain = workload_of(plan)
    w = workload_of(plan, CacheHold(400.0, 0.0))
    tokens = w.prompts.tokens
    assert np.array_equal(w.prompts.computed, np.where(tokens > 400, tokens - 400, 1.0))
    assert np.array_equal(w.prompts.offsets, np.minimum(tokens - 1, 400.0))
    assert plain.prompts.mean == pytest.approx(967, rel=0.01)
    assert w.prompts.computed_mean == pytest.approx(615, rel=0.01)
    assert w.prompts.weights.sum() == pytest.approx(plain.prompts.weights.sum())


def test_a_history_hit_splits_each_prompt_into_a_hit_and_a_miss() -> None:
    """4 turns of u new tokens: a 3,000-token prompt resends 3,000 - u - 400 tokens of
    history; at a 25 % hit rate a quarter of its weight computes only u tokens, the rest
    3,000 - 400."""
    plan = parse_plan(_plan(**CONVERSATIONS))
    w = workload_of(plan, CacheHold(400.0, 0.25))
    n = len(w.prompts.tokens) // 2
    k = int(np.argmin(abs(w.prompts.tokens[:n] - 3000)))
    length = w.prompts.tokens[k]
    history = history_tokens(conversations_of(plan), np.array([length]))[0]
    assert w.prompts.computed[k] == pytest.approx(length - 400 - history)
    assert w.prompts.computed[n + k] == pytest.approx(length - 400)
    assert w.prompts.weights[k] == pytest.approx(0.25 * w.prompts.weights[k] * 4)
