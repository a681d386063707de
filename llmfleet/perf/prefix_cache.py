"""The physics of a prefix-cache hit: how much of a prompt a replica already holds, and so
how many prompt tokens its prefill must still compute.

vLLM caches prompt and output KV blocks by the hash of the tokens before them (automatic
prefix caching, on by default): a finished request's blocks stay in the pool, evictable
least recently used first, and a later prompt that starts with the same tokens reuses them.
Two kinds of reuse matter for chat and agent traffic:

- the shared prefix (`shared_prefix_tokens` S: a system prompt, tool definitions) that
  every request carries: touched by every request, it stays cached once on every replica
  whatever the balancing, as long as the pool holds it;
- a conversation's earlier turns: turn k resends everything before it, so the replica that
  served an earlier turn j holds the context through it, C_j = S + j (u + o) tokens (u new
  user tokens per turn, o output tokens per turn). It is reused only if turn k lands on
  that replica and the context was not evicted while the user thought.

The traffic. `input_tokens` is the whole prompt, so with T turns the new tokens per turn u
follow from the mean prompt: turn k's prompt is S + k u + (k - 1) o; over the requests of
T-turn conversations the mean turn index is k_bar = E[L (L + 1)] / (2 E[L]) (T itself,
fractional, is a mix of floor(T)- and ceil(T)-turn conversations with mean T), so
u = (prompt_mean - S - (k_bar - 1) o) / k_bar. With every earlier turn cached the uncached
part of a prompt is u.

Where a turn lands (the same-replica probability q, per earlier turn, independently):
- round robin and least outstanding requests spread turns without regard to the cache:
  q = 1 / N over N replicas;
- prefix-aware balancing (a router that sends a prompt to the replica holding its longest
  prefix) keeps a conversation where its previous turn ran, except when the router's load
  balance forces the request to the least loaded replica (share f) and, with R router
  replicas that each learn only the prefixes they routed themselves, when another router
  routed the earlier turn: q = a + (1 - a) / N with a = (1 - f) / R. The router uses the
  prefix only when it covers more than `match_threshold` of the prompt; below it q = 1 / N.
Turn k then finds the context of the most recent earlier turn j that ran on its replica,
with probability q (1 - q)^(k - 1 - j).

Eviction (LRU). The KV pool not held by running sequences holds the cached blocks. New
blocks enter it at the rate requests bring tokens the cache lacks, lambda (uncached + o)
per replica, so a block not touched again is evicted after the turnover time
tau = (pool - running tokens) / (lambda (uncached + o)) (LRU on data written once turns
over like a FIFO). A conversation's context survives an idle spell of n think times
(exponential, mean `think_time_s`) with probability P(Gamma(n, think) < tau). The
uncached tokens raise the inflow and the inflow shortens tau: the two are solved together
(bisection on tau).

Imbalance. The router balances by its own count of requests in flight per replica: when
max - min exceeds an absolute threshold and max exceeds a relative one times min, every
request goes to the least loaded replica. `forced_share` estimates how often that happens
when the in-flight counts are independent Poisson draws (`imbalance_share`), a lower
bound where long conversations pile onto one replica.

Plain numbers in, no plan types: `search` and `fleetplan` call it with the traffic, the
replica's pool and load and the balancing the plan asks for (docs/prefix-caching.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Balancing = Literal["round_robin", "least_outstanding", "prefix_aware"]

CACHE_THRESHOLD = 0.3
"""vllm-router's default `--cache-threshold`: the prefix must cover more than 30 % of the
prompt for the router to follow it."""
BALANCE_REL_THRESHOLD = 1.5
"""vllm-router's default `--balance-rel-threshold`."""
ROUTER_REPLICAS = 2
"""One per zone of two: a drained or lost router leaves the other serving."""
HEADROOM_DEFAULT = 0.20
"""The plan's default headroom (`CapacityPlan.headroom`), which the router's imbalance
threshold reads (`balance_abs_threshold`): `predict`, without a plan, assumes it."""
BISECTION_STEPS = 200
"""Halvings of the turnover interval: far below a millisecond of turnover for any pool."""


@dataclass(frozen=True)
class Conversations:
    """The traffic as the cache sees it (tokens are means per request)."""

    prompt_mean_tokens: float
    output_mean_tokens: float
    shared_prefix_tokens: float = 0.0
    turns: float = 1.0
    think_time_s: float = 60.0


@dataclass(frozen=True)
class PrefixCache:
    """What a replica's prefix cache saves, per prompt, at a load."""

    cached_tokens_per_prompt: float
    uncached_tokens_per_prompt: float
    hit_rate: float
    """Cached share of the prompt tokens (vLLM's prefix cache hits / queries)."""
    ideal_cached_tokens_per_prompt: float
    """With every earlier turn on the same replica and nothing evicted."""
    shared_prefix_tokens: float
    shared_prefix_cached: bool
    new_tokens_per_turn: float
    same_replica_probability: float
    """q: an earlier turn ran on the replica this turn lands on."""
    turnover_s: float
    """tau: how long an untouched cached block stays in the pool."""
    survival_probability: float
    """A conversation's context outlives one think time in the pool."""
    history_hit_rate: float
    """Cached history (beyond the shared prefix) over what an ideal cache would hold."""
    history_demand_kv_tokens: float
    """KV tokens per replica that keeping every conversation between turns would take."""
    cache_kv_tokens: float
    """KV tokens per replica the cache occupies: the shared prefix plus what the free pool
    holds of the conversations between turns."""

    def cached_tokens_of(self, prompt_tokens: float) -> float:
        """Expected cached tokens of one prompt of this length (e.g. the p99 prompt): the
        shared prefix, plus the history hit rate of the history a prompt this long carries
        (all but its new tokens)."""
        s = self.shared_prefix_tokens
        shared = min(s, prompt_tokens) if self.shared_prefix_cached else 0.0
        history = max(0.0, prompt_tokens - self.new_tokens_per_turn - s)
        return shared + self.history_hit_rate * history


def turn_mix(turns: float) -> list[tuple[int, float]]:
    """(turn index k, share of requests at k) for conversations of `turns` turns on average:
    floor(turns) and ceil(turns) turns mixed to that mean, each conversation k = 1..L."""
    if turns < 1:
        raise ValueError(f"turns must be at least 1, not {turns}")
    low = math.floor(turns)
    high_weight = turns - low
    lengths = [(low, 1.0 - high_weight)] + ([(low + 1, high_weight)] if high_weight > 0 else [])
    requests = sum(length * weight for length, weight in lengths)
    counts: dict[int, float] = {}
    for length, weight in lengths:
        for k in range(1, length + 1):
            counts[k] = counts.get(k, 0.0) + weight
    return [(k, count / requests) for k, count in sorted(counts.items())]


def mean_turn_index(turns: float) -> float:
    """k_bar: the mean turn index of a request (T-turn conversations: (T + 1) / 2)."""
    return sum(k * share for k, share in turn_mix(turns))


def new_tokens_per_turn(
    prompt_mean_tokens: float, output_mean_tokens: float, shared_prefix_tokens: float,
    turns: float,
) -> float:
    """u: the tokens a turn adds to the conversation besides the answer before it, from the
    mean whole prompt (S + k u + (k - 1) o at turn k). Negative when the mean prompt is too
    short to hold that many turns' answers (`max_turns`)."""
    k_bar = mean_turn_index(turns)
    return (prompt_mean_tokens - shared_prefix_tokens - (k_bar - 1) * output_mean_tokens) / k_bar


def max_turns(
    prompt_mean_tokens: float, output_mean_tokens: float, shared_prefix_tokens: float
) -> float:
    """The most turns (to 0.01, rounded down) whose mean prompt still leaves at least one
    new token per turn: u falls as turns grow, so bisect (1 when not even one turn fits)."""

    def fits(turns: float) -> bool:
        return new_tokens_per_turn(
            prompt_mean_tokens, output_mean_tokens, shared_prefix_tokens, turns) >= 1

    if not fits(1.0):
        return 1.0
    low, high = 1.0, 2.0
    while fits(high):
        low, high = high, high * 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return math.floor(low * 100) / 100


def same_replica_probability(
    balancing: Balancing, replicas: int, router_replicas: int = 1, forced_share: float = 0.0
) -> float:
    """q: an earlier turn of the conversation ran on the replica this turn lands on (before
    the router's match threshold, `prefix_cache` applies it per turn)."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    spread = 1.0 / replicas
    if balancing != "prefix_aware":
        return spread
    if router_replicas < 1 or not 0 <= forced_share <= 1:
        raise ValueError(
            f"router_replicas >= 1 and 0 <= forced_share <= 1, not {router_replicas}, "
            f"{forced_share}"
        )
    kept = (1.0 - forced_share) / router_replicas
    return kept + (1.0 - kept) * spread


def survival(idle_think_times: int, turnover_s: float, think_time_s: float) -> float:
    """P(the sum of n exponential think times < tau): a context untouched for n think times
    is still in the pool (LRU keeps a block for tau after its last use)."""
    if math.isinf(turnover_s):
        return 1.0
    if turnover_s <= 0:
        return 0.0
    x = turnover_s / think_time_s
    term, below = math.exp(-x), 0.0
    for i in range(idle_think_times):
        below += term
        term *= x / (i + 1)
    return max(0.0, 1.0 - below)


def _turn_history(
    k: int,
    u: float,
    c: Conversations,
    q_of: dict[bool, float],
    match_threshold: float,
    turnover_s: float,
) -> tuple[float, float]:
    """Turn k's chance of finding an earlier context of its conversation on its replica,
    and the expected context tokens it finds (the shared prefix included): the most recent
    earlier turn j there, q (1 - q)^(k - 1 - j), if it survived k - j think times."""
    s, o = c.shared_prefix_tokens, c.output_mean_tokens
    prompt = s + k * u + (k - 1) * o
    found = tokens = 0.0
    not_yet = 1.0
    for j in range(k - 1, 0, -1):
        context = s + j * (u + o)
        q = q_of[context / prompt > match_threshold]
        alive = not_yet * q * survival(k - j, turnover_s, c.think_time_s)
        found += alive
        tokens += alive * context
        not_yet *= 1 - q
    return found, tokens


def _context_between_turns(mix: list[tuple[int, float]], u: float, c: Conversations) -> float:
    """Mean context a conversation holds while its user thinks (after turn k, before turn
    k + 1), weighted by how many conversations reach turn k + 1."""
    share = dict(mix)
    weights = [(k, share.get(k + 1, 0.0)) for k, _ in mix]
    total = sum(w for _, w in weights)
    if total == 0:
        return c.shared_prefix_tokens
    return sum(w * (c.shared_prefix_tokens + k * (u + c.output_mean_tokens))
               for k, w in weights) / total


def prefix_cache(
    c: Conversations,
    *,
    balancing: Balancing,
    replicas: int,
    requests_per_s_per_replica: float,
    kv_pool_tokens: float,
    running_kv_tokens: float,
    router_replicas: int = 1,
    forced_share: float = 0.0,
    match_threshold: float = 0.0,
) -> PrefixCache:
    """The cached and uncached prompt tokens of a replica under its load.

    kv_pool_tokens: the replica's KV pool (vLLM's "GPU KV cache size"); running_kv_tokens:
    what its running sequences hold, the shared prefix counted once (`running_kv_tokens`);
    router_replicas, forced_share, match_threshold: the prefix-aware router's (ignored for
    the other balancings)."""
    if c.prompt_mean_tokens <= 0 or c.output_mean_tokens < 0:
        raise ValueError(
            f"prompt_mean_tokens must be above 0 and output_mean_tokens at least 0, not "
            f"{c.prompt_mean_tokens:g} and {c.output_mean_tokens:g}"
        )
    if c.think_time_s <= 0:
        raise ValueError(f"think_time_s must be above 0, not {c.think_time_s:g}")
    s, o = c.shared_prefix_tokens, c.output_mean_tokens
    u = new_tokens_per_turn(c.prompt_mean_tokens, o, s, c.turns)
    if not 0 <= s < c.prompt_mean_tokens or u <= 0:
        raise ValueError(
            f"a mean prompt of {c.prompt_mean_tokens:g} tokens cannot hold a shared prefix of "
            f"{s:g} tokens and {c.turns:g} turns of {o:g} output tokens each"
        )
    free_tokens = kv_pool_tokens - max(running_kv_tokens, s)
    shared_cached = s > 0 and free_tokens >= 0
    shared = s if shared_cached else 0.0
    history_free = max(0.0, free_tokens)
    q = same_replica_probability(balancing, replicas, router_replicas, forced_share)
    spread = 1.0 / replicas
    q_of = {True: q if balancing == "prefix_aware" else spread, False: spread}
    mix = turn_mix(c.turns)
    ideal_history = sum(share * (k - 1) * (u + o) for k, share in mix)

    def cached_at(turnover_s: float) -> float:
        """Mean cached tokens per prompt if an untouched block lives turnover_s."""
        total = 0.0
        for k, share in mix:
            found, tokens = _turn_history(k, u, c, q_of, match_threshold, turnover_s)
            total += share * (shared + tokens - s * found)  # its prefix is `shared`'s
        return total if history_free > 0 or shared_cached else 0.0

    rate = requests_per_s_per_replica
    if rate <= 0:
        turnover = math.inf
    elif c.turns == 1 or history_free == 0:
        turnover = history_free / (rate * (c.prompt_mean_tokens - shared + o))
    else:  # tau = free / inflow(tau): the inflow falls as tau (and the hits) grow
        low, high = 0.0, history_free / (rate * (u + o))
        for _ in range(BISECTION_STEPS):
            mid = (low + high) / 2
            inflow = rate * (c.prompt_mean_tokens - cached_at(mid) + o)
            low, high = (mid, high) if mid * inflow < history_free else (low, mid)
        turnover = (low + high) / 2
    cached = cached_at(turnover)
    idle_conversations = rate * (1 - 1 / c.turns) * c.think_time_s
    demand = idle_conversations * max(0.0, _context_between_turns(mix, u, c) - s)
    return PrefixCache(
        cached_tokens_per_prompt=cached,
        uncached_tokens_per_prompt=c.prompt_mean_tokens - cached,
        hit_rate=cached / c.prompt_mean_tokens,
        ideal_cached_tokens_per_prompt=s + ideal_history,
        shared_prefix_tokens=s,
        shared_prefix_cached=shared_cached,
        new_tokens_per_turn=u,
        same_replica_probability=q,
        turnover_s=turnover,
        survival_probability=survival(1, turnover, c.think_time_s),
        history_hit_rate=(cached - shared) / ideal_history if ideal_history > 0 else 0.0,
        history_demand_kv_tokens=demand,
        cache_kv_tokens=shared + min(demand, history_free),
    )


def history_tokens(c: Conversations, prompt_tokens: np.ndarray) -> np.ndarray:
    """Per prompt length, the earlier turns it resends: all but its shared prefix and its
    new tokens (none with single-turn traffic)."""
    if c.turns <= 1:
        return np.zeros_like(prompt_tokens, dtype=float)
    s = c.shared_prefix_tokens
    u = new_tokens_per_turn(c.prompt_mean_tokens, c.output_mean_tokens, s, c.turns)
    return np.maximum(prompt_tokens - u - s, 0.0)


def running_kv_tokens(
    running_sequences: float, mean_context_tokens: float, shared_prefix_tokens: float
) -> float:
    """KV tokens running sequences hold: their own tokens, the shared prefix once (its
    blocks are shared by every sequence that carries it)."""
    if running_sequences <= 0:
        return 0.0
    own = max(0.0, mean_context_tokens - shared_prefix_tokens)
    return running_sequences * own + shared_prefix_tokens


def imbalance_share(
    replicas: int, in_flight_per_replica: float, abs_threshold: int, rel_threshold: float
) -> float:
    """How often a router that balances by its own in-flight counts finds its replicas
    imbalanced (max - min > abs_threshold and max > rel_threshold x min), with each
    replica's count an independent Poisson draw of mean `in_flight_per_replica`: the share
    of requests its load balance sends to the least loaded replica instead of the cache."""
    if replicas < 2 or in_flight_per_replica <= 0:
        return 0.0
    m = in_flight_per_replica
    top = int(m + 12 * math.sqrt(m) + abs_threshold + 12)
    pmf = [math.exp(-m)]
    for i in range(1, top + 1):
        pmf.append(pmf[-1] * m / i)
    cdf, acc = [], 0.0
    for p in pmf:
        acc += p
        cdf.append(min(acc, 1.0))

    def f(i: int) -> float:
        return 0.0 if i < 0 else cdf[min(i, top)]

    n = replicas
    share = 0.0
    first = max(0, int(m - 12 * math.sqrt(m)))  # a minimum below this has no weight
    for low in range(first, top + 1):
        for high in range(low + abs_threshold + 1, top + 1):
            if high <= rel_threshold * low:
                continue
            # P(min = low, max = high) of n iid draws (inclusion-exclusion on the range)
            p = ((f(high) - f(low - 1)) ** n - (f(high) - f(low)) ** n
                 - (f(high - 1) - f(low - 1)) ** n + (f(high - 1) - f(low)) ** n)
            share += p
    return min(1.0, max(0.0, share))


def balance_abs_threshold(max_num_seqs: int, headroom: float, router_replicas: int) -> int:
    """The router's `--balance-abs-threshold`: a replica running max_num_seqs x headroom more
    requests than its least loaded peer is at the slots the headroom keeps free; each of R
    routers sees 1/R of the requests."""
    return max(1, math.floor(max_num_seqs * headroom / router_replicas))
