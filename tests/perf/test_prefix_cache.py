"""perf.prefix_cache: worked numbers, one behaviour each (docs/prefix-caching.md)."""

import math

import pytest

from llmfleet.perf.prefix_cache import (
    Conversations,
    imbalance_share,
    max_turns,
    mean_turn_index,
    new_tokens_per_turn,
    prefix_cache,
    running_kv_tokens,
    same_replica_probability,
    survival,
)

NO_EVICTION = {"requests_per_s_per_replica": 1.0, "kv_pool_tokens": 1e12, "running_kv_tokens": 0}
FIVE_TURNS = Conversations(prompt_mean_tokens=800, output_mean_tokens=100, turns=5)
"""Five-turn conversations, 100-token answers, no shared prefix: the mean turn index is 3, so
800 = 3 u + 2 x 100 gives u = 200 new tokens a turn; turn k's prompt is 300 k - 100 and
the context after turn j is 300 j."""


def test_a_shared_prefix_is_cached_once_per_replica_whatever_the_balancing():
    # One-turn requests of 1500 tokens, 1000 of them a system prompt every request carries.
    single = Conversations(prompt_mean_tokens=1500, output_mean_tokens=300,
                           shared_prefix_tokens=1000)
    for balancing in ("least_outstanding", "prefix_aware"):
        r = prefix_cache(single, balancing=balancing, replicas=8, **NO_EVICTION)
        assert (r.cached_tokens_per_prompt, r.uncached_tokens_per_prompt) == (1000, 500)
        assert r.hit_rate == pytest.approx(2 / 3)
        assert r.cache_kv_tokens == 1000  # held once, not per request
    assert r.cached_tokens_of(3000) == 1000  # a p99 prompt of one turn: the prefix only


def test_the_mean_prompt_gives_the_new_tokens_of_each_turn():
    assert mean_turn_index(5) == 3
    assert new_tokens_per_turn(800, 100, 0, 5) == 200
    assert mean_turn_index(1) == 1 and new_tokens_per_turn(800, 100, 0, 1) == 800
    assert max_turns(800, 100, 0) == pytest.approx(16.81)


def test_least_outstanding_finds_a_turn_on_the_same_replica_one_time_in_n():
    # 4 replicas, q = 1/4 for each earlier turn, nothing evicted: turn k finds the context of
    # its most recent earlier turn j there with probability 1/4 (3/4)^(k-1-j):
    #   turn 2: 300/4 = 75
    #   turn 3: 600/4 + 300 x 3/16 = 206.25
    #   turn 4: 900/4 + 600 x 3/16 + 300 x 9/64 = 379.6875
    #   turn 5: 1200/4 + 900 x 3/16 + 600 x 9/64 + 300 x 27/256 = 584.765625
    # mean over the five turns: 1245.703125 / 5 = 249.140625 of 800 tokens.
    r = prefix_cache(FIVE_TURNS, balancing="least_outstanding", replicas=4, **NO_EVICTION)
    assert r.same_replica_probability == 0.25
    assert r.cached_tokens_per_prompt == pytest.approx(249.140625)
    assert r.hit_rate == pytest.approx(0.31142578125)
    assert r.ideal_cached_tokens_per_prompt == 600  # 800 - u: all but the new message


def test_prefix_aware_balancing_with_one_router_keeps_every_turn_where_its_cache_is():
    r = prefix_cache(FIVE_TURNS, balancing="prefix_aware", replicas=4, **NO_EVICTION)
    assert r.cached_tokens_per_prompt == pytest.approx(600)
    assert r.uncached_tokens_per_prompt == pytest.approx(200)  # only the new message
    assert r.hit_rate == pytest.approx(0.75)


def test_router_replicas_and_forced_moves_lose_affinity():
    # 4 replicas, 2 routers that each learn only their own prefixes, 10% forced away:
    # a = 0.9 / 2 = 0.45 kept, the rest lands on the same replica by chance 1/4:
    # q = 0.45 + 0.55 / 4 = 0.5875.
    assert same_replica_probability("prefix_aware", 4, router_replicas=2, forced_share=0.1) \
        == pytest.approx(0.5875)
    assert same_replica_probability("round_robin", 4, router_replicas=2) == 0.25


def test_a_prefix_under_the_routers_match_threshold_is_routed_as_if_unseen():
    # Turn k's previous context covers 300 (k-1) / (300 k - 100) of its prompt: 0.5 at turn 2,
    # 0.857 at turn 5. Below a 0.9 threshold the router balances by load alone: every turn is
    # spread as by least outstanding requests.
    r = prefix_cache(FIVE_TURNS, balancing="prefix_aware", replicas=4, match_threshold=0.9,
                     **NO_EVICTION)
    assert r.cached_tokens_per_prompt == pytest.approx(249.140625)


def test_a_conversation_survives_only_if_the_pool_turns_over_slower_than_its_user_thinks():
    # Two-turn conversations on one replica: u = 400, o = 200, so the mean prompt is
    # 1.5 x 400 + 0.5 x 200 = 700 and turn 2 reuses the 600-token context of turn 1 if it
    # survives: cached = 300 s per prompt. 1 request/s brings 700 - 300 s + 200 new tokens/s
    # into a free pool of 54,000 tokens, so it turns over in tau = 54,000 / (900 - 300 s),
    # and a 60 s think time survives with s = 1 - exp(-tau / 60). Iterating by hand from
    # s = 0.9: tau 85.7 -> s 0.760 -> tau 80.4 -> s 0.738 -> tau 79.57 -> s 0.7341 -> ...
    two = Conversations(prompt_mean_tokens=700, output_mean_tokens=200, turns=2,
                        think_time_s=60)
    r = prefix_cache(two, balancing="prefix_aware", replicas=1, requests_per_s_per_replica=1.0,
                     kv_pool_tokens=64_000, running_kv_tokens=10_000)
    assert r.turnover_s == pytest.approx(79.45, abs=0.05)
    assert r.survival_probability == pytest.approx(1 - math.exp(-r.turnover_s / 60))
    assert r.survival_probability == pytest.approx(0.7338, abs=5e-4)
    assert r.cached_tokens_per_prompt == pytest.approx(300 * r.survival_probability)
    # the fixed point: the free pool is exactly what the inflow fills in tau
    inflow = 1.0 * (700 - r.cached_tokens_per_prompt + 200)
    assert r.turnover_s * inflow == pytest.approx(54_000, rel=1e-6)


def test_survival_over_several_think_times_is_a_gamma_tail():
    # Two exponential think times of mean 60 s inside a 120 s turnover: 1 - e^-2 (1 + 2).
    assert survival(2, 120, 60) == pytest.approx(1 - math.exp(-2) * 3)
    assert survival(1, math.inf, 60) == 1.0 and survival(1, 0, 60) == 0.0


def test_a_pool_the_running_sequences_fill_caches_nothing():
    single = Conversations(prompt_mean_tokens=1500, output_mean_tokens=300,
                           shared_prefix_tokens=1000)
    r = prefix_cache(single, balancing="prefix_aware", replicas=2, requests_per_s_per_replica=1,
                     kv_pool_tokens=20_000, running_kv_tokens=25_000)
    assert not r.shared_prefix_cached
    assert r.cached_tokens_per_prompt == 0 and r.uncached_tokens_per_prompt == 1500


def test_running_sequences_hold_the_shared_prefix_once():
    # 10 sequences of 3,000 tokens, 1,000 of them the shared system prompt.
    assert running_kv_tokens(10, 3000, 1000) == 10 * 2000 + 1000
    assert running_kv_tokens(0, 3000, 1000) == 0


def test_the_conversations_between_turns_are_the_caches_demand():
    # 1 request/s a replica, 4 in 5 followed by another turn 60 s later (Little's law: 48
    # conversations between turns), holding 300, 600, 900 or 1,200 tokens (mean 750).
    r = prefix_cache(FIVE_TURNS, balancing="prefix_aware", replicas=4, **NO_EVICTION)
    assert r.history_demand_kv_tokens == pytest.approx(48 * 750)
    assert r.cache_kv_tokens == pytest.approx(36_000)


def test_imbalance_by_independent_poisson_counts_matches_a_two_replica_sum():
    # Two replicas, 1 request in flight each on average, thresholds 0 and 1.5: imbalanced
    # when the larger count j exceeds the smaller i and 1.5 i: P = sum 2 p_i p_j.
    p = [math.exp(-1) / math.factorial(k) for k in range(40)]
    by_hand = sum(2 * p[i] * p[j] for i in range(40) for j in range(i + 1, 40) if j > 1.5 * i)
    assert imbalance_share(2, 1.0, 0, 1.5) == pytest.approx(by_hand, rel=1e-9)


def test_the_routers_default_thresholds_almost_never_trip_at_moderate_load():
    # vllm-router's defaults (64 apart and 1.5x) against 30 requests in flight per replica
    # over 8 replicas: the Poisson spread (sd 5.5) never reaches 64.
    assert imbalance_share(8, 30, 64, 1.5) < 1e-9
    assert imbalance_share(8, 10, 5, 1.5) > 0.5


def test_more_replicas_never_raise_the_hit_rate_of_cache_blind_balancing():
    rates = [prefix_cache(FIVE_TURNS, balancing="least_outstanding", replicas=n,
                          **NO_EVICTION).hit_rate for n in (1, 2, 4, 8, 16)]
    assert rates == sorted(rates, reverse=True)
    assert rates[0] == pytest.approx(0.75)  # one replica holds every turn


def test_a_larger_pool_never_caches_less():
    cached = [prefix_cache(FIVE_TURNS, balancing="prefix_aware", replicas=4,
                           requests_per_s_per_replica=2, kv_pool_tokens=pool,
                           running_kv_tokens=5000).cached_tokens_per_prompt
              for pool in (6_000, 20_000, 60_000, 200_000)]
    assert cached == sorted(cached)


def test_traffic_that_cannot_be_conversations_is_an_error_not_a_number():
    with pytest.raises(ValueError, match="cannot hold a shared prefix of 700"):
        prefix_cache(Conversations(600, 100, shared_prefix_tokens=700),
                     balancing="least_outstanding", replicas=2, **NO_EVICTION)
