"""The plan's traffic: fleet-wide rates, token lengths, conversations and their reuse, and the
day's shape the cost is averaged over."""

from __future__ import annotations

import math
from statistics import NormalDist

from pydantic import Field, model_validator

from llmfleet.data import Data
from llmfleet.perf.prefix_cache import max_turns, mean_turn_index, new_tokens_per_turn
from llmfleet.perf.queueing import length_at_percentile, length_sigma


class TokenLength(Data):
    """Tokens per request. A lognormal through the mean and the highest percentile given
    gives any other percentile (`at_percentile`)."""

    mean: int = Field(gt=0, description="Mean tokens per request.")
    p95: int | None = Field(
        default=None, gt=0, description="95th percentile; defaults to the mean."
    )
    p99: int | None = Field(
        default=None,
        gt=0,
        description="99th percentile; fitted from the mean and p95 when absent.",
    )

    @model_validator(mode="after")
    def _percentiles_ordered(self) -> TokenLength:
        if self.p95 is not None and self.p95 < self.mean:
            raise ValueError(f"p95 ({self.p95}) is below the mean ({self.mean}); give p95 >= mean")
        if self.p99 is not None and self.p99 < max(self.mean, self.p95 or 0):
            raise ValueError(
                f"p99 ({self.p99}) is below the mean or p95 ({self.mean}, {self.p95}); "
                "give p99 >= p95 >= mean"
            )
        return self

    @property
    def p95_or_mean(self) -> int:
        return self.p95 if self.p95 is not None else self.mean

    @property
    def sigma(self) -> float:
        """Sigma of the lognormal through the mean and the highest percentile given."""
        return length_sigma(self.mean, self.p95, self.p99)

    def at_percentile(self, percentile: float) -> int:
        """Tokens at a percentile (50-100): the value given for it, else the lognormal."""
        return length_at_percentile(self.mean, self.p95, self.p99, percentile)

    def share_above(self, tokens: int) -> float:
        """Share of requests longer than `tokens` (the lognormal; 0 or 1 when fixed)."""
        sigma = self.sigma
        if sigma == 0:
            return 1.0 if self.mean > tokens else 0.0
        mu = math.log(self.mean) - sigma * sigma / 2
        return 1 - NormalDist().cdf((math.log(tokens) - mu) / sigma)


class Traffic(Data):
    peak_requests_per_s: float = Field(gt=0, description="Fleet-wide peak request rate.")
    trough_requests_per_s: float = Field(gt=0, description="Fleet-wide trough request rate.")
    input_tokens: TokenLength = Field(
        description="Prompt tokens per request: {mean, p95, p99}; p95 and p99 optional (a "
        "lognormal through the mean and the highest percentile given supplies the others)."
    )
    output_tokens: TokenLength = Field(
        description="Output tokens per request, as input_tokens."
    )
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        description="Leading tokens every request carries unchanged (a system prompt, tool "
        "definitions), counted inside input_tokens: each replica's prefix cache holds them "
        "once and no prefill computes them again (docs/prefix-caching.md).",
        examples=[1200],
    )
    turns: float = Field(
        default=1,
        ge=1,
        le=1000,
        description="Requests arrive in conversations of this many turns on average, each "
        "prompt resending the conversation so far (input_tokens stays the whole prompt): a "
        "turn's earlier context is cached on the replica that served the turn before, as "
        "far as the balancing sends it back there (edge.balancing) and the pool keeps it.",
        examples=[4],
    )
    think_time_s: float = Field(
        default=60,
        gt=0,
        le=86400,
        description="Mean seconds from one turn's answer to the conversation's next prompt "
        "(exponentially distributed): a conversation's cache survives only if the pool "
        "turns over slower than this. The default, 60 s, is an assumption for people "
        "reading an answer and typing (no published distribution was found); agents that "
        "call tools between turns wait seconds: give yours. Applies with turns above 1.",
        examples=[20],
    )

    @model_validator(mode="after")
    def _trough_below_peak(self) -> Traffic:
        if self.trough_requests_per_s > self.peak_requests_per_s:
            raise ValueError(
                f"trough_requests_per_s ({self.trough_requests_per_s}) exceeds "
                f"peak_requests_per_s ({self.peak_requests_per_s})"
            )
        return self

    @model_validator(mode="after")
    def _conversations_fit_the_prompt(self) -> Traffic:
        """The shared prefix and the resent turns are parts of the mean prompt, so they
        must fit inside it with at least one new token per turn."""
        mean, output = self.input_tokens.mean, self.output_tokens.mean
        shared = self.shared_prefix_tokens
        if shared >= mean:
            raise ValueError(
                f"traffic.shared_prefix_tokens ({shared}) is not below input_tokens.mean "
                f"({mean}): the shared prefix is part of every prompt, which also carries "
                f"the request's own tokens; give at most {mean - 1}, or the whole prompts' "
                "mean in input_tokens"
            )
        if new_tokens_per_turn(mean, output, shared, self.turns) < 1:
            most = max_turns(mean, output, shared)
            raise ValueError(
                f"traffic.turns ({self.turns:g}) does not fit input_tokens.mean ({mean}): "
                f"each turn resends the answers before it (output_tokens.mean {output}) "
                f"after the shared prefix ({shared}), so {self.turns:g} turns need a mean "
                f"prompt of more than {shared + (mean_turn_index(self.turns) - 1) * output:,.0f}"
                f" tokens; give turns of at most {most:g}, or the whole prompts' mean in "
                "input_tokens"
            )
        if "think_time_s" in self.model_fields_set and self.turns == 1:
            raise ValueError(
                f"traffic.think_time_s ({self.think_time_s:g}) is the time between a "
                "conversation's turns, and traffic.turns is 1: give turns above 1, or "
                "remove think_time_s"
            )
        return self


class DayProfile(Data):
    """The day's traffic shape the daily cost is averaged over (an assumption: state yours)."""

    peak_hours: float = Field(default=8, ge=0, le=24, description="Hours a day at the peak.")
    trough_hours: float = Field(default=8, ge=0, le=24, description="Hours a day at the trough.")

    @model_validator(mode="after")
    def _a_day(self) -> DayProfile:
        if self.peak_hours + self.trough_hours > 24:
            raise ValueError(
                f"peak_hours + trough_hours = {self.peak_hours + self.trough_hours:g} > 24"
            )
        return self

    @property
    def ramp_hours(self) -> float:
        """The rest of the day, costed halfway between trough and peak."""
        return 24 - self.peak_hours - self.trough_hours
