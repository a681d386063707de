"""The steady state of chunked prefill: a share of steps carries a prompt chunk, which
stalls every running stream; and a prompt prefilled chunk by chunk."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmfleet.perf.step import StepModel, step_time


@dataclass(frozen=True)
class MixedSteps:
    """Steady state of chunked prefill: a share of steps carries a full prefill chunk.

    A request adds `input` prefill tokens per `output` decode steps, so with D running
    decodes and chunks of C tokens a share f = D * input / (output * C) of steps carries
    a chunk. The mean step (what a request's TPOT averages to) mixes the two step times.
    """

    decode_only_s: float
    mixed_s: float
    mixed_share: float
    tokens_per_step: float = 1.0  # > 1 with speculative decoding

    @property
    def mean_s(self) -> float:
        f = min(1.0, self.mixed_share)
        return f * self.mixed_s + (1 - f) * self.decode_only_s

    @property
    def mean_token_s(self) -> float:
        """A stream's mean time per output token (the step over the tokens it yields)."""
        return self.mean_s / self.tokens_per_step

    @property
    def longest_gap_s(self) -> float:
        """The longest gap between two tokens of a stream: a step that carries a prefill
        chunk stalls every running stream at once. Once more than 1 - p of steps carry one
        it is also the gap at percentile p over all gaps; below that it is still a stall a
        user sees, so the token-gap SLO holds it to the target (counted conservatively).
        With speculation a step's accepted tokens arrive together: the gap is still a step."""
        return self.mixed_s if self.mixed_share > 0 else self.decode_only_s

    @property
    def residual_s(self) -> float:
        """The mean time left in the step that is running when a request arrives: vLLM admits
        a new request only between steps. Arrivals fall in a step with probability in
        proportion to its length, so a renewal process's mean residual, E[S^2] / (2 E[S]),
        over decode-only and mixed steps (a mixed step is the likelier to be met)."""
        f = min(1.0, self.mixed_share)
        second = f * self.mixed_s**2 + (1 - f) * self.decode_only_s**2
        return second / (2 * self.mean_s)

    def arrival_wait_s(self, running: float) -> float:
        """A Poisson arrival's mean wait for the step under way, with `running` requests on
        average: the engine is busy with probability 1 - exp(-running) (Poisson in number)."""
        return (1 - math.exp(-running)) * self.residual_s

    def others(self, decode: float) -> MixedSteps:
        """The steps a request sees after its first token: they carry the prefill chunks of
        the other running requests, not its own (that is in its TTFT), so a share
        (D - 1) / D of the mixed steps; one request alone decodes undisturbed."""
        share = self.mixed_share * max(0.0, decode - 1) / max(decode, 1.0)
        return MixedSteps(self.decode_only_s, self.mixed_s, share, self.tokens_per_step)

    def tpot_percentile_s(self, output_tokens: int, percentile: float) -> float:
        """A request's mean inter-token time at a percentile: binomial count of mixed steps."""
        f = min(1.0, self.mixed_share)
        z = _normal_quantile(percentile / 100)
        mixed_steps = output_tokens * f + z * math.sqrt(output_tokens * f * (1 - f))
        share = min(1.0, mixed_steps / output_tokens)
        step = self.decode_only_s + share * (self.mixed_s - self.decode_only_s)
        return step / self.tokens_per_step


def mixed_steps(
    step_model: StepModel, decode: float, input_tokens: int, output_tokens: int, chunk: float
) -> MixedSteps:
    ctx = input_tokens + output_tokens / 2
    t_d = step_time(step_model, decode, ctx).total_s
    t_m = step_time(step_model, decode, ctx, chunk, input_tokens / 2).total_s
    per_step = step_model.speculation.tokens_per_step if step_model.speculation else 1.0
    # A request spends output / per_step steps, so its prompt rides on fewer of them.
    share = decode * input_tokens * per_step / (output_tokens * chunk)
    return MixedSteps(t_d, t_m, share, per_step)


def prefill_s(
    step_model: StepModel, decode: float, context: float, prompt: int, chunk: int
) -> float:
    """Time to prefill one prompt in chunks of `chunk` tokens beside `decode` running sequences.

    Chunk j starts at j * chunk and attends causally from there: the full chunks' starts
    average (full - 1) * chunk / 2, the last (partial) chunk starts at full * chunk, so the
    attention adds up to the unchunked prompt's (prompt^2 / 2 per layer and head dimension).
    A step's attention and prefix read are linear in the start, so the mean start is exact."""
    full, rest = divmod(prompt, chunk)
    t = 0.0
    if full:
        t += full * step_time(step_model, decode, context, chunk, (full - 1) * chunk / 2).total_s
    if rest:
        t += step_time(step_model, decode, context, rest, full * chunk).total_s
    return t


def _normal_quantile(p: float) -> float:
    """Standard normal quantile."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)
