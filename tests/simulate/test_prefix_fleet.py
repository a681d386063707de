"""Prefix caches behind a balancer, request by request (`simulate.prefix_fleet`), and
`events.serve` prefilling only what a prompt's replica has not cached."""

import math

import numpy as np
import pytest
from slo_tables import h100_8b

from llmfleet.perf.periods import Engine
from llmfleet.perf.prefix_cache import Conversations, prefix_cache
from llmfleet.perf.step import step_time
from llmfleet.simulate.events import CHUNK_ROUND, START_ROUND, serve
from llmfleet.simulate.prefix_fleet import (
    ConversationTraffic,
    RouterSettings,
    simulate_prefix_fleet,
)

BALANCINGS = ("round_robin", "least_outstanding", "prefix_aware")


def engine(kv_tokens: int = 10**7) -> Engine:
    """Llama-3.1-8B on one H100: 256 slots, a 2,048-token budget."""
    return Engine(h100_8b(), 256, 2048, kv_tokens)


def up(n: int) -> int:
    return math.ceil(n / CHUNK_ROUND) * CHUNK_ROUND


def down(n: int) -> int:
    return n // START_ROUND * START_ROUND


# --- serve with cached prompt tokens ---


def test_a_cached_prefix_leaves_prefill_the_rest_from_where_it_ends() -> None:
    e = engine()
    sm = e.step_model
    alone = serve(e, np.array([0.0]), np.array([2000]), np.array([2]))
    hit = serve(e, np.array([0.0]), np.array([2000]), np.array([2]), cached=np.array([1536]))
    # 2,000 tokens in one chunk from position 0, against 464 from position 1,536
    whole = step_time(sm, 0, 0.0, float(up(2000)), 0.0).total_s + sm.ttft_overhead_s
    rest = step_time(sm, 0, 0.0, float(up(464)), float(down(1536))).total_s + sm.ttft_overhead_s
    assert alone.ttft_s[0] == pytest.approx(whole)
    assert hit.ttft_s[0] == pytest.approx(rest)
    handling = sm.ttft_overhead_s  # the API server's part is the same
    assert hit.ttft_s[0] - handling < 0.5 * (alone.ttft_s[0] - handling)


def test_the_uncached_rest_is_chunked_from_the_cached_offset() -> None:
    e = engine()
    sm = e.step_model
    prompt = 2 * e.budget_tokens - 30  # 4,066 tokens, 1,000 cached: 3,066 to compute
    got = serve(e, np.array([0.0]), np.array([prompt]), np.array([2]), cached=np.array([1000]))
    first = step_time(sm, 0, 0.0, float(e.budget_tokens), float(down(1000)))  # 1,000-3,048
    second = step_time(sm, 0, 0.0, float(up(3066 - 2048)), float(down(1000 + 2048)))
    assert got.ttft_s[0] == pytest.approx(first.total_s + second.total_s + sm.ttft_overhead_s)


def test_a_wholly_cached_prompt_still_computes_its_last_token() -> None:
    e = engine()
    sm = e.step_model
    got = serve(e, np.array([0.0]), np.array([1000]), np.array([2]), cached=np.array([1000]))
    last = step_time(sm, 0, 0.0, float(up(1)), float(down(999))).total_s + sm.ttft_overhead_s
    assert got.ttft_s[0] == pytest.approx(last)


def test_no_cached_tokens_serve_exactly_as_before() -> None:
    e = engine(200_000)
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.random(300) * 20)
    prompts = rng.integers(100, 6000, 300)
    outputs = rng.integers(1, 400, 300)
    a = serve(e, arrivals, prompts, outputs)
    b = serve(e, arrivals, prompts, outputs, cached=np.zeros(300, dtype=np.int64))
    assert np.array_equal(a.ttft_s, b.ttft_s, equal_nan=True)
    assert np.array_equal(a.period_s, b.period_s)


# --- the fleet's caches and balancing ---


@pytest.mark.parametrize("balancing", BALANCINGS)
def test_single_turns_hit_only_the_shared_prefix(balancing) -> None:
    # 1,000-token prompts whose first 512 every request shares: once each replica has
    # seen one, every prompt finds those 512 (32 blocks) and nothing else: 51.2 %
    traffic = ConversationTraffic(1000, 100, shared_prefix_tokens=512, turns=1)
    run = simulate_prefix_fleet(engine(), traffic, rate_per_s=4.0, replicas=3,
                                balancing=balancing, duration_s=300, latency=False)
    assert run.measured.sum() > 800
    assert (run.cached_tokens[run.measured] == 512).all()
    assert run.hit_rate == pytest.approx(0.512)


TWO_TURNS = ConversationTraffic(1000, 200, turns=2, think_time_s=30)
"""Turn 1: 600 new tokens (u = (1,000 - 0.5 x 200) / 1.5), then a 200-token answer;
turn 2: 600 + 200 + 600 = 1,400 tokens, whose first 800 (50 blocks) turn 1 left cached
where it ran. Ideal: every turn 2 finds them, 800 of 2,000 prompt tokens, 40 %."""


@pytest.mark.parametrize("balancing", ["round_robin", "least_outstanding"])
def test_spreading_balancers_find_the_last_turn_one_time_in_n(balancing) -> None:
    run = simulate_prefix_fleet(engine(), TWO_TURNS, rate_per_s=8.0, replicas=4,
                                balancing=balancing, duration_s=900, latency=False)
    second = run.measured & (run.turn == 2)
    assert set(np.unique(run.cached_tokens[second])) == {0, 800}
    found = (run.cached_tokens[second] == 800).mean()
    assert found == pytest.approx(1 / 4, abs=0.03)  # about 3,000 second turns: sd 0.008
    assert run.hit_rate == pytest.approx(0.25 * 0.4, abs=0.012)


def test_one_prefix_aware_router_keeps_each_conversation_on_its_replica() -> None:
    run = simulate_prefix_fleet(engine(), TWO_TURNS, rate_per_s=8.0, replicas=4,
                                balancing="prefix_aware", duration_s=900, latency=False)
    second = run.measured & (run.turn == 2)
    assert (run.cached_tokens[second] == 800).all()  # 600 / 1,400 known: over 0.3
    assert run.forced_share == 0.0
    ideal = prefix_cache(Conversations(1000, 200, 0, 2, 30), balancing="prefix_aware",
                         replicas=4, requests_per_s_per_replica=2.0, kv_pool_tokens=1e12,
                         running_kv_tokens=0).ideal_cached_tokens_per_prompt / 1000
    assert ideal == pytest.approx(0.4)
    assert run.hit_rate == pytest.approx(ideal, abs=0.01)  # the window's turn mix
    assert run.imbalance < 1.1


def test_two_routers_each_know_half_the_conversations() -> None:
    # a turn meets the router that routed the last one half the time; the other router
    # knows only the shared prefix (none here) and sends it anywhere: 1/2 + 1/2 x 1/4
    run = simulate_prefix_fleet(engine(), TWO_TURNS, rate_per_s=8.0, replicas=4,
                                balancing="prefix_aware", router=RouterSettings(replicas=2),
                                duration_s=900, latency=False)
    second = run.measured & (run.turn == 2)
    assert (run.cached_tokens[second] == 800).mean() == pytest.approx(0.625, abs=0.03)


LONG = ConversationTraffic(2000, 200, shared_prefix_tokens=512, turns=4, think_time_s=60)
"""u = (2,000 - 512 - 1.5 x 200) / 2.5 = 475: turn k is 512 + 475 k + 200 (k - 1) tokens,
1,999.5 on average; the shared prefix is 25.6 % of it, the ideal cache (every earlier turn
kept) 512 + 1.5 x 675 = 1,524.5 tokens, 76.2 %."""


def test_a_tiny_pool_evicts_everything_but_the_shared_prefix() -> None:
    def hit(pool: int) -> float:
        return simulate_prefix_fleet(
            engine(), LONG, rate_per_s=8.0, replicas=2, balancing="prefix_aware",
            duration_s=900, kv_pool_tokens=pool, running_tokens=0, latency=False).hit_rate

    # 2,048 tokens: the shared prefix and the tail of whatever ran last; a conversation's
    # next turn comes a minute and ~240 other requests later
    assert 512 / 1999.5 <= hit(2048) < 0.27
    assert hit(10**7) > 0.75


def test_a_shared_prefix_over_the_threshold_holds_new_conversations_where_it_went() -> None:
    # Every first turn (987 tokens) is 52 % shared prefix, over the 0.3 threshold: the router
    # sends it where it sent the prefix before, and only its load balance (64 more in
    # flight and 1.5x) would send one elsewhere: at ~40 in flight it never does, and one
    # replica serves everything (vllm-router's known hot spot on a popular prefix).
    kw = dict(rate_per_s=16.0, replicas=4, duration_s=600, seed=2, latency=False)
    piled = simulate_prefix_fleet(engine(), LONG, balancing="prefix_aware", **kw)
    counts = piled.requests_per_replica
    assert counts.max() / counts.sum() > 0.9 and piled.forced_share == 0.0
    # a 2-request threshold spreads them, a quarter of requests balanced off their cache
    spread = simulate_prefix_fleet(engine(), LONG, balancing="prefix_aware",
                                   router=RouterSettings(abs_threshold=2), **kw)
    assert spread.imbalance < 1.05 and spread.forced_share > 0.15
    assert spread.hit_rate < piled.hit_rate - 0.05


def test_cached_tokens_cut_ttft_through_serve() -> None:
    # varied prompts: some first turns fall under the threshold and seed every replica
    varied = ConversationTraffic(2000, 200, 0.5, 0.5, 512, 4, 60)
    kw = dict(rate_per_s=16.0, replicas=4, duration_s=400, seed=2)
    kept = simulate_prefix_fleet(engine(), varied, balancing="prefix_aware", **kw)
    spread = simulate_prefix_fleet(engine(), varied, balancing="least_outstanding", **kw)
    assert kept.hit_rate > spread.hit_rate + 0.2 and kept.imbalance < 1.1
    assert not np.isnan(kept.ttft_s[kept.measured]).any()
    assert kept.summary(50).ttft_s < 0.85 * spread.summary(50).ttft_s
    assert kept.summary(99).ttft_s < 0.7 * spread.summary(99).ttft_s


# --- the closed form against the simulation ---

RUNNING = 60_000
"""KV tokens the running sequences hold (the same given mean for both)."""
GRID_TRAFFIC = dict(prompt_mean_tokens=3000, output_mean_tokens=300, prompt_sigma=0.5,
                    output_sigma=0.5, shared_prefix_tokens=1024, turns=4)
POOLS = {"ample": 2.0, "tight": 0.25}
"""The cache's pool beyond the shared prefix, in units of the history demand
(`PrefixCache.history_demand_kv_tokens`: every conversation kept between its turns)."""
GRID = [(balancing, routers, n, pool, think)
        for balancing, routers in (("round_robin", 1), ("least_outstanding", 1),
                                   ("prefix_aware", 1), ("prefix_aware", 2))
        for n in (2, 4) for pool in POOLS for think in (20.0, 90.0)]


@pytest.mark.validation
@pytest.mark.parametrize("balancing,routers,n,pool,think", GRID)
def test_the_closed_form_hit_rate_against_the_simulated_caches(
    balancing, routers, n, pool, think
) -> None:
    """3 requests/s per replica of 4-turn conversations (3,000-token prompts, 1,024 shared,
    300-token answers, lognormal sigma 0.5), one seed. Measured (docs/simulate.md): the
    spreading balancers within 0.025; prefix_aware's closed form above the simulation by
    0.000 to 0.074, most with an ample pool and short think times: its turnover counts a
    block's stay from its last write, while LRU keeps a conversation's re-touched blocks
    for its whole life, so the pool turns over faster than it assumes."""
    traffic = ConversationTraffic(**GRID_TRAFFIC, think_time_s=think)
    conv = Conversations(3000, 300, 1024, 4, think)
    demand = prefix_cache(conv, balancing="prefix_aware", replicas=n,
                          requests_per_s_per_replica=3.0, kv_pool_tokens=1e12,
                          running_kv_tokens=RUNNING).history_demand_kv_tokens
    kv_pool = RUNNING + 1024 + POOLS[pool] * demand
    run = simulate_prefix_fleet(
        engine(int(kv_pool)), traffic, rate_per_s=3.0 * n, replicas=n, balancing=balancing,
        router=RouterSettings(replicas=routers), duration_s=1800 if think > 50 else 900,
        running_tokens=RUNNING, latency=False, seed=1)
    model = prefix_cache(conv, balancing=balancing, replicas=n, requests_per_s_per_replica=3.0,
                         kv_pool_tokens=kv_pool, running_kv_tokens=RUNNING,
                         router_replicas=routers, forced_share=run.forced_share,
                         match_threshold=0.3)
    gap = model.hit_rate - run.hit_rate
    if balancing == "prefix_aware":
        assert -0.01 <= gap <= 0.08
    else:
        assert abs(gap) <= 0.03
