"""Prefix caches behind a balancer, request by request: N replicas, each with its own
vLLM prefix cache, serving conversations that one balancing policy spreads over them. It
measures what `perf.prefix_cache` predicts in closed form (the hit rate, the load each
replica gets) and, through `events.serve` with each prompt's cached tokens, what the hits
do to TTFT and the token gaps.

The traffic (plain numbers, `ConversationTraffic`). Conversations start as a Poisson
process at rate lambda / T (lambda the fleet's request rate, a constant or one value per
second; T the mean turns), so the turns they bring arrive at lambda on average. A
conversation has floor(T) or ceil(T) turns, mixed to mean T (`prefix_cache.turn_mix`'s
mix). Turn k's prompt is S + u_1 + ... + u_k + o_1 + ... + o_(k-1): the shared prefix S,
every user message so far and every answer before it. The answers o_i are the
conversation's own output lengths, drawn from the plan's output lognormal (mean and sigma);
the user messages u_i from a lognormal of mean u = `prefix_cache.new_tokens_per_turn` (the
u that makes the mean prompt the plan's) and the plan's prompt sigma, so a single-turn
plan without a shared prefix gets the plan's own prompt lengths. After an answer the user
thinks an exponential time (mean `think_time_s`) and sends the next turn.

When an answer ends. The next turn's arrival needs the end of the answer before it, which
needs the replica's queue. The routing pass first takes a service time per request of
TTFT + o x ITL from the step model at the running batch Little's law gives at the
replica's rate (`_service_guess`); with `latency` the replicas then serve what they were
sent (`events.serve`), each request's end (its TTFT plus its output at its measured time
per output token) replaces the guess, and the routing runs again on those ends, with the
same conversations, think times and lengths (`passes` rounds, 2 by default: the guess
and one measured round). Think times (tens of seconds) dwarf a few seconds' error in an
answer's end, so the hit rate hardly moves between rounds; the in-flight counts the
balancers read do.

Where a turn lands (`balancing`):
- round_robin: replica i mod N in arrival order;
- least_outstanding: the replica with the fewest requests in flight across the fleet (the
  ALB's least outstanding requests; ties at random);
- prefix_aware: vllm-router's cache_aware policy. A request meets one of R router replicas
  at random; each router knows only what it routed: per conversation the longest prompt
  it sent and where, and to which replicas it sent anything (they hold the shared prefix).
  When its own in-flight counts are imbalanced (max - min > the absolute threshold and
  max > the relative one x min) it sends the request to its least loaded replica (counted
  as forced); otherwise to the replica holding the longest prefix of the prompt if that
  covers more than `cache_threshold` of it (ties: the least loaded), else to its least
  loaded replica (vllm-router picks the replica with the smallest tree there; the least
  loaded stands for it). Where several replicas hold the longest prefix (the shared one)
  the least loaded of them takes it (vllm-router takes one tenant of the matched node).
  The routers start knowing nothing: a shared prefix over the threshold of every first
  turn keeps new conversations on the replicas a router has sent anything to, and only the
  load balance opens another (the hot spot a popular prefix makes). The router's tree
  keeps what it learned (vllm-router trims it only past `--max-tree-size`), so it may send
  a turn to a replica that has since evicted it.

The replica's cache (`_Cache`), at a conversation's granularity: vLLM caches full blocks
of 16 tokens (its default block size) by the hash of everything before them, so a cached
prefix is the shared prefix S (one entry, every request touches it) followed by the
longest context of this conversation the replica still holds. A prompt finds
floor(min(found, prompt - 1) / 16) x 16 tokens (vLLM recomputes at least the last prompt
token). After the turn the replica holds the conversation's context through its answer
(prompt + output), touched when the answer ends: while the turn runs its blocks are its
sequence's, out of the free pool and safe from eviction. The pool the cache may use is
the KV pool less what the running sequences hold (`running_kv_tokens`, a given mean, as
`perf.prefix_cache` takes it: by default Little's running batch at the replica's rate).
Eviction is least recently used, and inside a conversation's context tail first: vLLM
frees a finished request's blocks in reverse order, so a context loses its last blocks
before its first. A data-parallel replica's ranks each have their own cache: here one
pool stands for the replica.

The hit rate is vLLM's prefix-cache hit rate over the requests arriving after the warm-up:
cached prompt tokens over prompt tokens."""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from llmfleet.perf.periods import Engine
from llmfleet.perf.prefix_cache import (
    BALANCE_REL_THRESHOLD,
    CACHE_THRESHOLD,
    Balancing,
    new_tokens_per_turn,
    running_kv_tokens,
)
from llmfleet.perf.step import step_time
from llmfleet.simulate.events import serve

BLOCK_TOKENS = 16
"""vLLM's default KV block size: only full blocks are cached and found."""
ABS_THRESHOLD = 64
"""vllm-router's default `--balance-abs-threshold` (`fleetplan.prefix_router` sets its own
from the plan; pass it in `RouterSettings`)."""
SHARED = -1
"""The shared prefix's key in a replica's cache (conversations are 0, 1, ...)."""


@dataclass(frozen=True)
class ConversationTraffic:
    """The plan's traffic as plain numbers: whole-prompt and output lengths (means and
    lognormal sigmas), the shared prefix S, mean turns T and the mean think time."""

    prompt_mean_tokens: float
    output_mean_tokens: float
    prompt_sigma: float = 0.0
    output_sigma: float = 0.0
    shared_prefix_tokens: int = 0
    turns: float = 1.0
    think_time_s: float = 60.0

    @property
    def new_tokens_per_turn(self) -> float:
        return new_tokens_per_turn(self.prompt_mean_tokens, self.output_mean_tokens,
                                   self.shared_prefix_tokens, self.turns)


@dataclass(frozen=True)
class RouterSettings:
    """vllm-router's cache_aware policy: its replicas and thresholds (used by prefix_aware
    balancing only)."""

    replicas: int = 1
    cache_threshold: float = CACHE_THRESHOLD
    abs_threshold: int = ABS_THRESHOLD
    rel_threshold: float = BALANCE_REL_THRESHOLD


@dataclass(frozen=True)
class ConversationRequests:
    """Every request of the simulated conversations, flat (conversation by conversation,
    turn by turn): what stays the same across routing rounds."""

    start_s: np.ndarray  # per conversation: its first turn's arrival
    first: np.ndarray  # per conversation: its first request's index
    conversation: np.ndarray  # per request
    turn: np.ndarray  # per request, 1..L
    prompt: np.ndarray  # per request: S + its user messages + the answers before it
    output: np.ndarray  # per request
    think_after_s: np.ndarray  # per request: the user's think time after its answer
    last: np.ndarray  # per request: the conversation's last turn


def conversations(
    traffic: ConversationTraffic, rate_per_s: np.ndarray, rng: np.random.Generator,
    max_model_len: int | None = None,
) -> ConversationRequests:
    """Conversations starting as Poisson arrivals at rate_per_s[s] / T in second s, as their
    requests."""
    t = traffic
    u = t.new_tokens_per_turn
    s = t.shared_prefix_tokens
    if u < 1 or not 0 <= s < t.prompt_mean_tokens:
        raise ValueError(
            f"a mean prompt of {t.prompt_mean_tokens:g} tokens cannot hold a shared prefix of "
            f"{s} tokens and {t.turns:g} turns of {t.output_mean_tokens:g} output tokens")
    counts = rng.poisson(np.asarray(rate_per_s, float) / t.turns)
    starts = np.concatenate([k + np.sort(rng.random(c)) for k, c in enumerate(counts)]) \
        if counts.sum() else np.zeros(0)
    n_conv = len(starts)
    low = math.floor(t.turns)
    lengths = low + (rng.random(n_conv) < t.turns - low).astype(np.int64)
    n = int(lengths.sum())
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if n_conv \
        else np.zeros(0, np.int64)
    conversation = np.repeat(np.arange(n_conv), lengths)
    turn = np.arange(n) - np.repeat(first, lengths) + 1
    limit = max_model_len if max_model_len is not None else 2**31
    user = _lognormal(rng, u, t.prompt_sigma, n)
    output = np.clip(_lognormal(rng, t.output_mean_tokens, t.output_sigma, n), 1, limit)
    # prompt_k = S + sum(u_1..u_k) + sum(o_1..o_(k-1)): cumulative within each conversation
    before = np.cumsum(user + output) - output
    base = np.repeat(before[first] - user[first], lengths) if n else before
    prompt = (s + before - base).astype(np.int64)
    last = np.zeros(n, dtype=bool)
    if n:
        last[first + lengths - 1] = True
    return ConversationRequests(starts, first, conversation, turn, prompt, output.astype(np.int64),
                         rng.exponential(t.think_time_s, n), last)


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, n: int) -> np.ndarray:
    if sigma == 0:
        return np.full(n, max(1, round(mean)), dtype=np.int64)
    mu = math.log(mean) - sigma * sigma / 2
    return np.maximum(1, np.rint(rng.lognormal(mu, sigma, n))).astype(np.int64)


class _Cache:
    """One replica's prefix cache: the shared prefix and each conversation's context (tokens
    beyond the shared prefix), least recently used first, within `capacity` tokens."""

    def __init__(self, capacity: float, shared: int) -> None:
        self.capacity = max(0.0, capacity)
        self.shared = shared
        self.entries: OrderedDict[int, int] = OrderedDict()
        self.total = 0

    def lookup(self, conversation: int, prompt: int) -> int:
        """Prompt tokens found: whole blocks of the prefix held, short of the last token."""
        s = self.shared
        found = self.entries.get(SHARED, 0) if s else 0
        if found >= s:
            found += min(self.entries.get(conversation, 0), prompt - s)
        usable = min(found, prompt - 1)
        return max(0, usable // BLOCK_TOKENS * BLOCK_TOKENS)

    def hold(self, conversation: int) -> None:
        """A turn of the conversation runs: the blocks it found are its sequence's (out of
        the free pool until it ends); the shared prefix is touched."""
        self.total -= self.entries.pop(conversation, 0)
        if SHARED in self.entries:
            self.entries.move_to_end(SHARED)

    def keep(self, conversation: int, context: int) -> None:
        """The turn ended: its blocks return to the free pool, the most recently used, the
        shared prefix last (vLLM frees a request's blocks last first, so its first blocks
        are evicted last); evict what overflows."""
        for key, tokens in ((conversation, context - self.shared), (SHARED, self.shared)):
            if tokens <= 0:
                continue
            self.total += tokens - self.entries.pop(key, 0)
            self.entries[key] = tokens
        while self.total > self.capacity:
            key, tokens = next(iter(self.entries.items()))
            excess = int(math.ceil(self.total - self.capacity))
            if tokens > excess:  # its last blocks go first
                self.entries[key] = tokens - excess
                self.total -= excess
            else:
                del self.entries[key]
                self.total -= tokens


class _InFlight:
    """Requests in flight per replica as one balancer counts them."""

    def __init__(self, replicas: int) -> None:
        self.count = np.zeros(replicas, dtype=np.int64)
        self.ends: list[tuple[float, int]] = []

    def at(self, t: float) -> np.ndarray:
        while self.ends and self.ends[0][0] <= t:
            _, r = heapq.heappop(self.ends)
            self.count[r] -= 1
        return self.count

    def add(self, replica: int, end: float) -> None:
        self.count[replica] += 1
        heapq.heappush(self.ends, (end, replica))


def _least(count: np.ndarray, among: np.ndarray, rng: np.random.Generator) -> int:
    """The least loaded of `among` (ties at random)."""
    loads = count[among]
    ties = among[loads == loads.min()]
    return int(ties[0]) if len(ties) == 1 else int(rng.choice(ties))


@dataclass(frozen=True)
class Routed:
    """One routing round: each request's arrival, replica, router, cached tokens."""

    arrival_s: np.ndarray  # NaN: after the simulated window
    replica: np.ndarray
    router: np.ndarray
    cached: np.ndarray
    forced: np.ndarray  # prefix_aware: sent to the least loaded by the load balance


def route(
    c: ConversationRequests,
    service_s: np.ndarray,
    *,
    balancing: Balancing,
    replicas: int,
    cache_tokens: float,
    shared_prefix_tokens: int,
    router: RouterSettings,
    until_s: float,
    rng: np.random.Generator,
) -> Routed:
    """Every request in arrival order: where it lands and what that replica's cache holds
    of it. A turn arrives `think_after_s` after the end (arrival + service_s) of the one
    before; requests arriving after `until_s` are dropped with the rest of their
    conversation."""
    n = len(c.prompt)
    arrival = np.full(n, np.nan)
    replica = np.full(n, -1, dtype=np.int64)
    by = np.zeros(n, dtype=np.int64)
    cached = np.zeros(n, dtype=np.int64)
    forced = np.zeros(n, dtype=bool)
    caches = [_Cache(cache_tokens, shared_prefix_tokens) for _ in range(replicas)]
    everyone = np.arange(replicas)
    fleet = _InFlight(replicas)
    routers = [_InFlight(replicas) for _ in range(router.replicas)]
    learned: list[dict[int, tuple[int, int]]] = [{} for _ in range(router.replicas)]
    sent_any = [np.zeros(replicas, dtype=bool) for _ in range(router.replicas)]
    s = shared_prefix_tokens
    arriving, ending = 1, 0  # at the same time an answer's end comes first
    queue = [(float(t), arriving, int(i)) for t, i in zip(c.start_s, c.first, strict=True)]
    heapq.heapify(queue)
    turn = 0
    while queue:
        t, kind, i = heapq.heappop(queue)
        if kind == ending:
            caches[replica[i]].keep(int(c.conversation[i]), int(c.prompt[i] + c.output[i]))
            if not c.last[i]:
                heapq.heappush(queue, (t + float(c.think_after_s[i]), arriving, i + 1))
            continue
        if t > until_s:
            continue
        conv, prompt = int(c.conversation[i]), int(c.prompt[i])
        if balancing == "round_robin":
            to = turn % replicas
        elif balancing == "least_outstanding":
            to = _least(fleet.at(t), everyone, rng)
        else:
            k = int(rng.integers(router.replicas)) if router.replicas > 1 else 0
            by[i] = k
            count = routers[k].at(t)
            high, low = int(count.max()), int(count.min())
            if high - low > router.abs_threshold and high > router.rel_threshold * low:
                to = _least(count, everyone, rng)
                forced[i] = True
            else:
                match = np.where(sent_any[k], s, 0)
                mine = learned[k].get(conv)
                if mine is not None:
                    match[mine[1]] = max(match[mine[1]], mine[0])
                best = int(match.max())
                if best > router.cache_threshold * prompt:
                    to = _least(count, everyone[match == best], rng)
                else:
                    to = _least(count, everyone, rng)
            routers[k].add(to, t + service_s[i])
            learned[k][conv] = (prompt, to)
            sent_any[k][to] = True
        turn += 1
        end = t + float(service_s[i])
        fleet.add(to, end)
        arrival[i], replica[i] = t, to
        cached[i] = caches[to].lookup(conv, prompt)
        caches[to].hold(conv)
        heapq.heappush(queue, (end, ending, i))
    return Routed(arrival, replica, by, cached, forced)


def _service_guess(
    engine: Engine, traffic: ConversationTraffic, rate_per_replica: float
) -> tuple[float, float, float]:
    """TTFT, the token period and the running batch at a replica's mean rate: the decode
    step at the batch Little's law gives (rate x output x period, solved by iteration), a
    whole mean prompt prefilled in budget-sized chunks beside it."""
    sm = engine.step_model
    o = traffic.output_mean_tokens
    context = traffic.prompt_mean_tokens + o / 2
    running = 1.0
    for _ in range(30):
        period = step_time(sm, running, context).total_s
        running = min(float(engine.slots), max(1.0, rate_per_replica * o * period))
    period = step_time(sm, running, context).total_s
    prompt = traffic.prompt_mean_tokens
    chunk = min(prompt, float(engine.budget_tokens))
    chunks = math.ceil(prompt / engine.budget_tokens)
    ttft = chunks * step_time(sm, running, context, chunk, 0.0).total_s + sm.ttft_overhead_s
    return ttft, period, running


@dataclass(frozen=True)
class PrefixFleetSummary:
    """What the lead's checks read: the measured window's figures."""

    hit_rate: float
    requests: int
    requests_per_replica: list[int]
    forced_share: float
    ttft_s: float  # at the percentile (NaN without latency)
    itl_s: float  # the longest token gap of a request at the percentile
    tpot_s: float  # time per output token at the percentile
    percentile: float


@dataclass(frozen=True)
class PrefixFleetRun:
    """Every request of a run (`measured`: it arrived after the warm-up and inside the
    window), where it ran, what it found cached and, with latency, how it was served."""

    replicas: int
    arrival_s: np.ndarray
    conversation: np.ndarray
    turn: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    replica: np.ndarray
    router: np.ndarray
    cached_tokens: np.ndarray
    forced: np.ndarray
    measured: np.ndarray
    ttft_s: np.ndarray  # NaN: refused, or run without latency
    longest_gap_s: np.ndarray
    tpot_s: np.ndarray
    cache_tokens: float  # the pool each replica's cache had

    @property
    def hit_rate(self) -> float:
        """Cached prompt tokens over prompt tokens (vLLM's prefix-cache hit rate)."""
        m = self.measured
        total = self.prompt_tokens[m].sum()
        return float(self.cached_tokens[m].sum() / total) if total else 0.0

    @property
    def requests_per_replica(self) -> np.ndarray:
        return np.bincount(self.replica[self.measured], minlength=self.replicas)

    @property
    def imbalance(self) -> float:
        """The busiest replica's requests over the mean."""
        counts = self.requests_per_replica
        return float(counts.max() / counts.mean()) if counts.sum() else 1.0

    @property
    def forced_share(self) -> float:
        m = self.measured
        return float(self.forced[m].mean()) if m.any() else 0.0

    def _at(self, values: np.ndarray, percentile: float) -> float:
        v = values[self.measured]
        if len(v) == 0 or np.isnan(self.ttft_s[self.measured]).all():
            return math.nan
        v = np.where(np.isnan(v), np.inf, v)  # a refused request is over any target
        return float(np.quantile(v, percentile / 100, method="inverted_cdf"))

    def summary(self, percentile: float = 99.0) -> PrefixFleetSummary:
        return PrefixFleetSummary(
            hit_rate=self.hit_rate,
            requests=int(self.measured.sum()),
            requests_per_replica=[int(x) for x in self.requests_per_replica],
            forced_share=self.forced_share,
            ttft_s=self._at(self.ttft_s, percentile),
            itl_s=self._at(self.longest_gap_s, percentile),
            tpot_s=self._at(self.tpot_s, percentile),
            percentile=percentile,
        )


def simulate_prefix_fleet(
    engine: Engine,
    traffic: ConversationTraffic,
    *,
    rate_per_s: float | np.ndarray,
    replicas: int,
    balancing: Balancing,
    router: RouterSettings | None = None,
    duration_s: float = 900.0,
    warmup_s: float | None = None,
    kv_pool_tokens: float | None = None,
    running_tokens: float | None = None,
    max_model_len: int | None = None,
    latency: bool = True,
    passes: int = 2,
    seed: int = 0,
) -> PrefixFleetRun:
    """N replicas behind one balancer serving conversations for `duration_s` seconds.

    rate_per_s: the fleet's requests per second, constant or one value per second (its
    length then sets the window); kv_pool_tokens: each replica's KV pool (default the
    engine's); running_tokens: what its running sequences hold, the rest is the cache's
    (default `prefix_cache.running_kv_tokens` of Little's running batch); warm-up: requests
    arriving before it fill the caches and queues but are not measured (default two mean
    conversation lives plus a minute, at most half the window). latency: serve each
    replica's requests with their cached tokens (`events.serve`) for TTFT and token gaps,
    and route again on the measured answer ends (`passes` routing rounds in all)."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    router = router or RouterSettings()
    if router.replicas < 1:
        raise ValueError(f"router replicas must be at least 1, not {router.replicas}")
    t = traffic
    rates = np.asarray(rate_per_s, dtype=float)
    if rates.ndim == 0:
        rates = np.full(int(math.ceil(duration_s)), float(rates))
    window = float(len(rates))
    rng = np.random.default_rng(seed)
    c = conversations(t, rates, rng, max_model_len)
    per_replica = float(rates.mean()) / replicas
    ttft, period, running = _service_guess(engine, t, per_replica)
    service = ttft + c.output * period
    pool = float(kv_pool_tokens if kv_pool_tokens is not None else engine.kv_cache_tokens)
    held = running_tokens if running_tokens is not None else running_kv_tokens(
        running, t.prompt_mean_tokens + t.output_mean_tokens / 2, t.shared_prefix_tokens)
    cache = pool - held
    if warmup_s is None:
        warmup_s = min(window / 2, 2 * (t.turns - 1) * t.think_time_s + 60.0)
    n = len(c.prompt)
    ttft_s, gap_s, tpot_s = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    rounds = max(1, passes) if latency else 1
    for round_ in range(rounds):
        routed = route(c, service, balancing=balancing, replicas=replicas, cache_tokens=cache,
                       shared_prefix_tokens=t.shared_prefix_tokens, router=router,
                       until_s=window, rng=np.random.default_rng([seed, round_]))
        if not latency:
            break
        ttft_s, gap_s, tpot_s = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        for r in range(replicas):
            mine = np.flatnonzero(routed.replica == r)
            mine = mine[np.argsort(routed.arrival_s[mine], kind="stable")]
            if len(mine) == 0:
                continue
            got = serve(engine, routed.arrival_s[mine], c.prompt[mine], c.output[mine],
                        max_model_len, routed.cached[mine])
            ttft_s[mine], gap_s[mine], tpot_s[mine] = got.ttft_s, got.longest_gap_s, got.tpot_s
        answered = ttft_s + np.maximum(c.output - 1, 0) * tpot_s
        service = np.where(np.isnan(answered), service, answered)
    seen = ~np.isnan(routed.arrival_s)
    measured = seen & (np.nan_to_num(routed.arrival_s) >= warmup_s)
    keep = np.flatnonzero(seen)
    return PrefixFleetRun(
        replicas=replicas,
        arrival_s=routed.arrival_s[keep],
        conversation=c.conversation[keep],
        turn=c.turn[keep],
        prompt_tokens=c.prompt[keep],
        output_tokens=c.output[keep],
        replica=routed.replica[keep],
        router=routed.router[keep],
        cached_tokens=routed.cached[keep],
        forced=routed.forced[keep],
        measured=measured[keep],
        ttft_s=ttft_s[keep],
        longest_gap_s=gap_s[keep],
        tpot_s=tpot_s[keep],
        cache_tokens=cache,
    )
