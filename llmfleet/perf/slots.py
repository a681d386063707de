"""The wait for a batch slot: how often an arrival finds every slot (max_num_seqs, or what the
KV pool holds) taken, and how long it then waits for one.

The slots taken are a birth-death chain on d = 0..slots: arrivals at the rate, each taken
slot freed after its holder's own prefill and its (output - 1) / tokens-a-period periods of
d sequences (more sequences, longer periods; periods that carry a chunk a share `busy` of
the time). Its stationary chance that an arrival finds every slot taken is exact for that
chain; an arrival that finds them taken waits, beyond the cap, as for a server that completes
at the full engine's rate. The search cuts `max_num_seqs` to the fewest slots at which that
chance stays within 1 - p (`slots_needed`), and TTFT counts the wait."""

from __future__ import annotations

import numpy as np

from llmfleet.perf.lanes import lane_periods
from llmfleet.perf.periods import Table


def lane_by_batch(table: Table, admitted_rate: float, cap: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(the share of time a period carries chunks, that period's mean length) with d = 1..cap
    sequences running: the lane's load at that batch (a larger batch leaves a smaller chunk,
    and a period with it lasts longer, so the same prompts keep the lane busier)."""
    d = np.arange(1, cap + 1, dtype=float)
    if table.engine.lanes == 1:
        work = np.interp(d, table.prefill_batches, table.work_mean_s)
        return np.minimum(admitted_rate * work, 1.0), table.mixed_s[1:cap + 1]
    points = np.unique(np.linspace(1, cap, min(cap, 17)).round())
    at = [lane_periods(table, admitted_rate, float(x)) for x in points]
    busy = np.interp(d, points, [lp.busy for lp in at])
    mixed = np.interp(d, points, [lp.mixed_s for lp in at])
    return busy, mixed


def completions(table: Table, busy: float | np.ndarray, own_mean_s: float, cap: int,
                mixed: np.ndarray | None = None) -> np.ndarray:
    """Completion rate with d = 1..cap slots taken: each holds its slot for its own prefill
    and (output - 1) / tokens a period periods of d sequences, a share `busy` of the time
    (by batch, or one share for all) carrying chunks (periods of `mixed`, by default the
    table's)."""
    e, w = table.engine, table.workload
    d = np.arange(1, cap + 1, dtype=float)
    tm = table.mixed_s[1:cap + 1] if mixed is None else mixed
    period = 1 / (busy / tm + (1 - busy) / table.decode_s[1:cap + 1])
    hold = own_mean_s + max(w.output_mean - 1, 1e-9) / e.tokens_per_period * period
    mu: np.ndarray = d / hold
    return mu


def completion_at(table: Table, busy: float, own_mean_s: float, slots: int) -> float:
    """The completion rate with `slots` slots taken."""
    return float(completions(table, busy, own_mean_s, slots)[-1])


def chain_weights(table: Table, rate: float, own_mean_s: float, cap: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(the stationary weights of d = 0..cap slots taken, unnormalised, and the completion
    rates at d = 1..cap).

    Arrivals take slots at `rate`; slots free at mu(d), the lane's share of time at d
    carrying chunks. The lane also modulates mu: while it is busy every period carries a
    chunk and completions slow from mu_idle(d) to mu_busy(d), in busy periods long enough to
    matter (an M/G/1 queue's busy time grows with variance rate rate x E[S^2] for prompt work
    S). That adds (mu_idle - mu_busy)^2 x rate x E[S^2] to the chain's diffusion, which the
    chain takes as an equal extra rate up and down (its drift unchanged): near the lane's
    saturation the batch swings far wider than arrivals and completions alone make it."""
    busy, mixed = lane_by_batch(table, rate, cap)
    mu = completions(table, busy, own_mean_s, cap, mixed)
    idle = completions(table, 0.0, own_mean_s, cap)
    full = completions(table, 1.0, own_mean_s, cap, mixed)
    d = np.arange(1, cap + 1, dtype=float)
    work = np.interp(d, table.prefill_batches, table.work_mean_s)
    cv2 = np.interp(d, table.prefill_batches, table.work_cv2)
    second = work * work * (1 + cv2) / table.engine.lanes
    extra = (idle - full) ** 2 * rate * second / 2
    up = np.concatenate([[rate], rate + extra[:-1]])  # d - 1 -> d
    down = mu + extra  # d -> d - 1
    log_w = np.concatenate([[0.0], np.cumsum(np.log(np.maximum(up, 1e-300))
                                             - np.log(np.maximum(down, 1e-300)))])
    weight: np.ndarray = np.exp(log_w - float(log_w.max()))
    return weight, mu


def slot_chain(
    table: Table, rate: float, busy: float, own_mean_s: float, slots: int | None = None
) -> tuple[float, float]:
    """(the chance an arrival finds every slot taken, the completion rate with every slot
    taken) of the chain on d = 0..slots (the table's cap by default)."""
    cap = table.cap if slots is None else max(1, min(slots, table.cap))
    if rate <= 0:
        return 0.0, float(completions(table, busy, own_mean_s, cap)[-1])
    weight, mu = chain_weights(table, rate, own_mean_s, cap)
    at_cap = float(mu[-1])
    if rate >= at_cap:
        return 1.0, at_cap
    r = rate / at_cap
    beyond = float(weight[-1]) * r / (1 - r)  # the requests waiting beyond the cap
    chance = (float(weight[-1]) + beyond) / (float(weight.sum()) + beyond)
    return min(1.0, max(0.0, chance)), at_cap


def slots_needed(table: Table, rate: float, busy: float, own_mean_s: float,
                 tail: float) -> int:
    """The fewest slots at which an arrival finds them all taken at most `tail` of the time
    (the table's cap when even it is taken more often)."""
    if rate <= 0:
        return 1
    weight, _ = chain_weights(table, rate, own_mean_s, table.cap)
    total = np.cumsum(weight)[1:]
    # Truncated at n slots: w(n) / W(n); 1 where every state below n has underflowed.
    full = np.divide(weight[1:], total, out=np.ones_like(total), where=total > 0)
    ok = np.nonzero(full <= tail)[0]
    return int(ok[0]) + 1 if len(ok) else table.cap
