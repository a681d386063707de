"""The prefill lane as a queue: one function for sizing (TTFT at the SLO percentile) and
for autoscaling (the queue-wait threshold), so the two cannot disagree.

With chunked prefill a prompt waits for the prompts ahead of it to be chunked through. The
lane is an M/G/1 queue whose utilisation rho is the share of steps carrying a prefill chunk
and whose service time is a prompt's chunks x the mixed step time. Pollaczek-Khinchine
gives the mean wait, `rho * S * (1 + cv^2) / (2 * (1 - rho))`; the wait at percentile p
takes the exponential tail of a loaded M/G/1 queue, P(W > t) = rho * exp(-t rho / W_mean)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class PrefillWait:
    mean_s: float
    percentile_s: float


Z_95 = 1.6448536
Z_99 = 2.3263479


def lognormal_sigma(mean: float, quantile: float, z: float) -> float:
    """Sigma of a lognormal with this mean whose quantile at standard score z is `quantile`.

    quantile / mean = exp(z s - s^2 / 2); the smaller root (0 when they are equal; z at most,
    where a lognormal's quantile/mean ratio peaks)."""
    ratio = quantile / mean
    if ratio <= 1:
        return 0.0
    return z - math.sqrt(max(0.0, z * z - 2 * math.log(ratio)))


def length_sigma(mean: int, p95: int | None, p99: int | None) -> float:
    """Sigma of the lognormal through the mean and the highest percentile given (0: fixed)."""
    if p99 is not None:
        return lognormal_sigma(mean, p99, Z_99)
    if p95 is not None:
        return lognormal_sigma(mean, p95, Z_95)
    return 0.0


def length_cv2(mean: int, p95: int) -> float:
    """Squared coefficient of variation of a lognormal with this mean and p95 (0 if equal)."""
    s = lognormal_sigma(mean, p95, Z_95)
    return math.exp(s * s) - 1


def length_at_percentile(
    mean: int, p95: int | None, p99: int | None, percentile: float
) -> int:
    """Tokens at a percentile (50-100) of a request length distribution: the value given
    for that percentile, else a lognormal through the mean and the highest percentile given
    (constant lengths when only the mean is given)."""
    given = {95.0: p95, 99.0: p99}
    if given.get(percentile) is not None:
        return int(given[percentile] or 0)
    if p95 is None and p99 is None:
        return mean
    sigma = length_sigma(mean, p95, p99)
    mu = math.log(mean) - sigma * sigma / 2
    z = NormalDist().inv_cdf(percentile / 100)
    return round(math.exp(mu + z * sigma))


def prefill_wait(rho: float, service_mean_s: float, cv2: float, percentile: float) -> PrefillWait:
    """Mean and percentile (0-100) wait in the prefill lane; infinite when rho >= 1.

    Below the percentile's share of arrivals that wait at all (rho <= 1 - p) the wait at
    the percentile is zero."""
    if rho >= 1:
        return PrefillWait(math.inf, math.inf)
    if rho <= 0:
        return PrefillWait(0.0, 0.0)
    mean = rho * service_mean_s * (1 + cv2) / (2 * (1 - rho))
    p = percentile / 100
    at_p = mean / rho * math.log(rho / (1 - p)) if rho > 1 - p else 0.0
    return PrefillWait(mean, at_p)


def running_batch(
    rate: float,
    output_tokens: int,
    cap: float,
    token_s: Callable[[float], float],
    least: float,
    resolution: float = 0.0,
    halvings: int = 0,
) -> float:
    """The running batch D a request rate settles at: D = rate x output x token time(D)
    (Little's law: each request holds a slot for its output tokens), by bisection on
    [0, cap] until the interval is within `resolution` (or for `halvings` steps); `token_s`
    is evaluated at no less than `least`. The one solver the search and `predict` share.
    Returns the upper end, which meets the rate."""
    lo, hi = 0.0, cap
    step = 0
    while (hi - lo > resolution) if halvings == 0 else (step < halvings):
        mid = (lo + hi) / 2
        if mid < rate * output_tokens * token_s(max(mid, least)):
            lo = mid
        else:
            hi = mid
        step += 1
    return hi
