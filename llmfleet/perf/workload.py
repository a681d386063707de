"""What one replica serves and must meet, as the SLO model reads it: the prompt lengths (in
quantile bins of the plan's lognormal, without those vLLM refuses), the output lengths, and
the targets at a percentile, in seconds. Plain numbers; `search.replica_slo` builds them
from a plan."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from llmfleet.perf.prefix_cache import Conversations, history_tokens

QUANTILE_EDGES = (
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.975,
    0.98, 0.985, 0.99, 0.9925, 0.995, 0.9975, 0.999, 0.9995, 1.0,
)
"""Prompt-length bins by probability, finer in the tail where a percentile SLO is decided."""
OUTPUT_EDGES = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 1.0)
"""Output-length bins for TPOT: a short answer's TPOT varies most (few gaps, a long prompt's
chunks among them)."""


@dataclass(frozen=True)
class Prompts:
    """The prompt lengths a replica serves: quantile bins of a lognormal through the plan's
    mean and percentiles, without those vLLM refuses (longer than max_model_len - 1)."""

    tokens: np.ndarray  # a bin's length (its middle quantile)
    weights: np.ndarray  # chance of each bin among all requests (sums to 1 - refused)
    refused: float  # share of prompts longer than the limit
    mean: float  # mean admitted prompt
    cached: np.ndarray | None = None  # tokens of a bin's prompt the replica's cache holds

    @property
    def admitted(self) -> float:
        return 1.0 - self.refused

    @property
    def computed(self) -> np.ndarray:
        """Tokens a bin's prefill computes: those the prefix cache does not hold."""
        return self.tokens if self.cached is None else self.tokens - self.cached

    @property
    def offsets(self) -> np.ndarray | float:
        """Where a bin's computed tokens start in its context (after its cached prefix)."""
        return 0.0 if self.cached is None else self.cached

    @property
    def computed_mean(self) -> float:
        """Mean tokens an admitted prompt's prefill computes."""
        if self.cached is None:
            return self.mean
        return float(self.computed @ self.weights) / max(self.admitted, 1e-12)

    @property
    def mean_start(self) -> float:
        """Mean context position a prefill chunk starts at (half the prompt uncached)."""
        if self.cached is None:
            return self.mean / 2
        return self.mean - self.computed_mean / 2


def prompts_of(mean: float, sigma: float, limit: int) -> Prompts:
    """Bins of the lognormal with this mean and sigma (sigma 0: every prompt `mean`), those
    above `limit` tokens refused."""
    if sigma <= 0:
        refused = 1.0 if mean > limit else 0.0
        n = np.array([float(min(mean, limit))])
        return Prompts(n.round(), np.array([1.0 - refused]), refused, float(n[0]))
    mu = math.log(mean) - sigma * sigma / 2
    unit = NormalDist()
    z = (math.log(limit) - mu) / sigma
    admitted = unit.cdf(z)
    edges = np.unique(np.append(np.minimum(QUANTILE_EDGES, admitted), admitted))
    weights = np.diff(edges)
    keep = weights > 0
    mids = ((edges[:-1] + edges[1:]) / 2)[keep]
    tokens = np.array(
        [min(float(limit), math.exp(mu + sigma * unit.inv_cdf(q))) for q in mids]
    ).round()
    # The admitted (truncated) lognormal's mean.
    m1 = math.exp(mu + sigma**2 / 2) * unit.cdf(z - sigma) / max(admitted, 1e-12)
    return Prompts(np.maximum(tokens, 1.0), weights[keep], 1.0 - admitted, m1)


def output_bins(mean: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, weights) of the output lengths' lognormal in OUTPUT_EDGES bins."""
    if sigma <= 0:
        return np.array([float(mean)]), np.array([1.0])
    mu = math.log(mean) - sigma * sigma / 2
    unit = NormalDist()
    edges = np.array(OUTPUT_EDGES)
    mids = (edges[:-1] + edges[1:]) / 2
    lengths = np.array([max(1.0, math.exp(mu + sigma * unit.inv_cdf(q))) for q in mids])
    return lengths, np.diff(edges)


def with_cache(prompts: Prompts, shared_tokens: float, history_tokens_of: np.ndarray,
               history_hit_rate: float) -> Prompts:
    """The bins with what the prefix cache holds of them: every prompt its first
    `shared_tokens` (the shared prefix, when the pool holds it), and with chance
    `history_hit_rate` the history it carries (`history_tokens_of`: a bin's earlier turns)
    or none of it. Each bin splits in two (a hit and a miss of its history), so a
    percentile of TTFT reads the misses' full prefills rather than a mean saving; vLLM
    recomputes at least a prompt's last token."""
    h = min(max(history_hit_rate, 0.0), 1.0)
    shared = np.minimum(shared_tokens, prompts.tokens)
    hit = np.minimum(shared + history_tokens_of, prompts.tokens - 1.0)
    miss = np.minimum(shared, prompts.tokens - 1.0)
    return Prompts(
        tokens=np.concatenate([prompts.tokens, prompts.tokens]),
        weights=np.concatenate([prompts.weights * h, prompts.weights * (1 - h)]),
        refused=prompts.refused,
        mean=prompts.mean,
        cached=np.maximum(np.concatenate([hit, miss]), 0.0),
    )


@dataclass(frozen=True)
class ServedTraffic:
    """What one replica serves, as plain numbers."""

    prompts: Prompts
    output_mean: float
    output_sigma: float  # of the output lengths' lognormal (0: fixed)
    shared_kv_tokens: float = 0.0  # a prefix every running sequence shares: held once

    @property
    def context_tokens(self) -> float:
        """KV a running sequence holds on average, i + E[o^2] / (2 E[o]): a sequence holds
        its prompt plus half its output, weighted by how long it runs."""
        return self.prompts.mean + self.output_mean * math.exp(self.output_sigma**2) / 2

    def sequences_in(self, kv_tokens: float) -> int:
        """Running contexts a pool of `kv_tokens` holds, the shared prefix's blocks once."""
        s = self.shared_kv_tokens
        return int((kv_tokens - s) // max(self.context_tokens - s, 1.0))

    @property
    def output_cv2(self) -> float:
        """Squared coefficient of variation of the output lengths (a decode's duration)."""
        return math.exp(self.output_sigma**2) - 1


def with_prefix_cache(plain: ServedTraffic, conversations: Conversations, shared_tokens: float,
                      history_hit_rate: float) -> ServedTraffic:
    """`plain` as a replica's prefix cache holds it (`with_cache` over its bins, each bin's
    history from the conversations), the shared prefix's KV held once; `plain` itself when
    the cache holds nothing."""
    if shared_tokens <= 0 and history_hit_rate <= 0:
        return plain
    p = plain.prompts
    prompts = with_cache(p, shared_tokens, history_tokens(conversations, p.tokens),
                         history_hit_rate)
    return ServedTraffic(prompts, plain.output_mean, plain.output_sigma, shared_tokens)


@dataclass(frozen=True)
class SloTargets:
    """The targets, in seconds, at a percentile (0-100)."""

    percentile: float
    ttft_s: float
    itl_s: float
    max_stall_s: float
    itl: str = "token_gap"  # or tpot: a request's mean time per output token

    @property
    def tail(self) -> float:
        """The share of requests (or token gaps) allowed outside a target."""
        return 1 - self.percentile / 100
