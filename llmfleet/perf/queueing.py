"""Queues, as plain numbers: the lognormal length distributions a plan gives, the chance a
prompt waits and how its wait's tail decays (Erlang C, Cramer-Lundberg), the sum of two waits,
and the running batch a rate settles at (Little's law).

A wait here is an atom at zero and, with some chance, an exponential tail: the M/G/c queue of
prompts waits with Erlang C's chance and its tail decays at the rate the Cramer-Lundberg
equation gives for the prompts' own work (a few long prompts slow it far more than their
mean suggests); a slot freeing in a full engine is the other wait."""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

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


def erlang_c(servers: int, load: float) -> float:
    """The chance an arrival waits in an M/M/c queue with `servers` and offered load `load`
    (rate x service; utilisation load / servers < 1)."""
    if servers == 1:
        return load
    b = 1.0
    for k in range(1, servers + 1):  # Erlang B by its recursion
        b = load * b / (k + load * b)
    rho = load / servers
    return b / (1 - rho + rho * b)


def any_busy(servers: int, load: float) -> float:
    """The chance at least one of `servers` is busy (M/M/c, offered load `load`)."""
    if servers == 1:
        return load
    rho = load / servers
    terms = sum(load**k / math.factorial(k) for k in range(servers))
    idle = 1 / (terms + load**servers / (math.factorial(servers) * (1 - rho)))
    return 1 - idle


def lundberg_decay(rate: float, service_s: np.ndarray, weights: np.ndarray) -> float:
    """The rate at which an M/G/1 queue's wait tail decays, P(W > t) ~ exp(-g t): the root
    g > 0 of rate x (E[exp(g S)] - 1) = g (Cramer-Lundberg), the service S over weighted bins
    (0 when the queue is unstable). Newton's method on log E[exp(g S)] - log(1 + g / rate),
    convex in g (a cumulant generating function less a concave one) and nearly linear far
    from the root, from the root of the generating function's quadratic part: every higher
    moment only adds to it, so that start is above the root and Newton descends to it."""
    mean = float(service_s @ weights)
    rho = rate * mean
    if rho >= 1 or mean <= 0:
        return 0.0
    top = float(service_s.max())
    second = float((service_s * service_s) @ weights)
    g = min(2 * (1 - rho) / (rate * second), 700 / top)
    for _ in range(100):
        ex = np.exp(g * service_s)
        m = float(ex @ weights)
        f = math.log(m) - math.log1p(g / rate)
        slope = float((service_s * ex) @ weights) / m - 1 / (rate + g)
        if slope <= 0:  # at or below the minimum: the root is above (not reached from above)
            g *= 2
            continue
        step = f / slope
        g -= step
        if abs(step) <= 1e-9 * g:
            break
    return max(g, 1e-300)


def cramer_lundberg_constant(
    rate: float, service_s: np.ndarray, weights: np.ndarray, decay: float
) -> float:
    """C of an M/G/1 wait's tail, P(W > t) ~ C exp(-decay t): (1 - rho) / (rate x E[S e^(g
    S)] - 1); the chance to wait at all, rho, when the tail is exponential."""
    rho = rate * float(service_s @ weights)
    slope = rate * float((service_s * np.exp(decay * service_s)) @ weights) - 1
    return (1 - rho) / slope if slope > 0 else rho


def wait_tail(x: np.ndarray, p1: float, m1: float, p2: float, m2: float,
              shift1: float | np.ndarray = 0.0) -> np.ndarray:
    """P(W1 + W2 > x) for x >= 0, each W an atom at 0 and, with chance p, exponential with
    mean m (W1's exponential after a fixed `shift1`: what waiting adds beyond the wait
    itself); the convolution's closed form."""

    def over(y: np.ndarray, rate: float) -> np.ndarray:
        out: np.ndarray = np.where(y > 0, np.exp(-rate * np.maximum(y, 0.0)), 1.0)
        return out

    zeros = np.zeros_like(x, dtype=float)
    p1 = p1 if m1 > 0 else 0.0
    p2 = p2 if m2 > 0 else 0.0
    e1 = over(x - shift1, 1 / m1) if p1 > 0 else zeros
    e2 = over(x, 1 / m2) if p2 > 0 else zeros
    out: np.ndarray = p1 * (1 - p2) * e1 + p2 * (1 - p1) * e2
    if p1 > 0 and p2 > 0:
        r1, r2 = 1 / m1, 1 / m2
        y = np.maximum(x - shift1, 0.0)
        f1, f2 = np.exp(-r1 * y), np.exp(-r2 * y)
        if abs(r2 - r1) <= 1e-9 * max(r1, r2):
            both = (1 + r1 * y) * f1
        else:
            both = (r2 * f1 - r1 * f2) / (r2 - r1)
        out = out + p1 * p2 * np.where(x > shift1, both, 1.0)
    return out


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
