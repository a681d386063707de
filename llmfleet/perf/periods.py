"""An engine's token periods by running batch, computed once and read at every load.

vLLM runs token periods: in each, every running sequence gets a token and what is left of a
scheduled batch's token budget (`max_num_batched_tokens`) goes to prompt chunks, packed
first come first served. A pipeline keeps a microbatch per stage in flight, each with its own
budget, and one prompt may have a chunk in each (vLLM's scheduler advances a prompt when it
schedules it), so a lone prompt gets `pipeline` chunks a period; every data-parallel rank runs
its own scheduler, so `lanes` prompts are prefilled side by side. A period that carries a
chunk lasts longer and stalls every running stream for that long.

`Table` holds, by running batch, a period without a chunk and one whose batches carry full
chunks; per prompt-length bin, a lone prompt's own chunked prefill and the work it puts on
its lane when periods are packed, at a few batches; and the spread of the periods a prompt's
chunks make (a chunk late in a long prompt attends to more of it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmfleet.perf.elementwise import Num, emax
from llmfleet.perf.step import StepModel, step_times
from llmfleet.perf.workload import ServedTraffic

TABLE_POINTS = 33
"""Running batches at which an engine's periods are computed (linear between)."""
PREFILL_POINTS = 5
"""Running batches at which each prompt bin's prefill is computed (linear between)."""
CHUNK_POINTS = 4
"""Starts at which a prompt's full chunks' periods are computed."""


@dataclass(frozen=True)
class Engine:
    """One replica's engine as vLLM is configured: `slots` running sequences (max_num_seqs
    of every rank together), `budget_tokens` a scheduled batch carries, the KV pool."""

    step_model: StepModel
    slots: int
    budget_tokens: int
    kv_cache_tokens: int
    prefills: bool = True  # False: a disaggregated decode engine (the KV arrives computed)
    decodes: bool = True  # False: a disaggregated prefill engine (it stops at the 1st token)

    @property
    def lanes(self) -> int:
        """Prompts prefilled side by side: each data-parallel rank runs its own scheduler."""
        return self.step_model.parallel.dp

    @property
    def pipeline(self) -> int:
        """Batches in flight per rank: a microbatch per pipeline stage, each with a chunk of
        the prompt being prefilled; a running sequence decodes once a period."""
        return self.step_model.parallel.pp

    @property
    def batches(self) -> int:
        """Scheduled batches a period across the replica: the decodes split over them."""
        return self.lanes * self.pipeline

    @property
    def tokens_per_period(self) -> float:
        """Tokens a stream gets a period (> 1 with speculative decoding)."""
        spec = self.step_model.speculation
        return spec.tokens_per_step if spec else 1.0


def chunk_at(engine: Engine, batch: Num) -> Num:
    """Prompt tokens a scheduled batch carries beside its share of `batch` decodes."""
    return emax(engine.budget_tokens - batch / engine.batches, 1.0)


@dataclass(frozen=True)
class Table:
    """An engine's periods by running batch d = 0..cap, and each prompt bin's prefill."""

    engine: Engine
    workload: ServedTraffic
    cap: int  # slots, or fewer when the KV pool holds fewer running contexts
    decode_s: np.ndarray  # a period without a chunk, by batch
    mixed_s: np.ndarray  # a period whose batches carry full chunks, by batch
    prefill_batches: np.ndarray
    own_s: np.ndarray  # (prefill batches, bins): a lone prompt's chunked prefill
    work_s: np.ndarray  # (prefill batches, bins): its lane's time when periods are packed
    work_mean_s: np.ndarray  # by prefill batch: an admitted prompt's mean work
    work_cv2: np.ndarray  # by prefill batch: the work's squared coefficient of variation
    period_lengths: np.ndarray  # (prefill batches, bins, CHUNK_POINTS + 1): its chunks'
    # periods less a full period at the mean start (the last column: its partial one, or nan)
    period_weights: np.ndarray  # (prefill batches, bins, CHUNK_POINTS + 1): periods each
    # stands for
    ranks_mixed_s: np.ndarray  # (lanes, cap + 1): a period with k = 1..lanes data-parallel
    # ranks carrying a chunk each (the others' pass the shared experts)
    rank_offsets: np.ndarray  # (prefill batches, lanes): with k ranks carrying chunks, how
    # much longer the slowest rank's chunk makes the period than one chunk's mean (later
    # chunks attend to more of their prompt)

    @property
    def stall_s(self) -> float:
        """The longest period a chunk makes at any running batch (every data-parallel rank
        carrying one): the longest token gap."""
        late = np.nanmax(self.period_lengths) if self.engine.prefills else 0.0
        return float(self.ranks_mixed_s[-1][1:].max()) + max(0.0, float(late))

    def decode_at(self, batch: float) -> float:
        return interp_batch(self.decode_s, batch)

    def mixed_at(self, batch: float) -> float:
        return interp_batch(self.mixed_s, batch)

    def prefill_weights(self, batch: float) -> tuple[int, float]:
        """(index, weight) that read a by-prefill-batch array at a running batch: values[j] x
        (1 - w) + values[j + 1] x w."""
        xs = self.prefill_batches
        if len(xs) == 1 or batch <= xs[0]:
            return 0, 0.0
        if batch >= xs[-1]:
            return len(xs) - 1, 0.0
        j = int(np.searchsorted(xs, batch, side="right")) - 1
        return j, float((batch - xs[j]) / (xs[j + 1] - xs[j]))

    def by_prefill_batch(self, values: np.ndarray, batch: float | tuple[int, float]
                         ) -> np.ndarray:
        """A by-prefill-batch array (or table of bins) read at a running batch (or at the
        weights `prefill_weights` gave for it)."""
        j, w = batch if isinstance(batch, tuple) else self.prefill_weights(batch)
        if w == 0.0:
            return np.asarray(values[j])
        return np.asarray(values[j] * (1 - w) + values[j + 1] * w)


def interp_batch(values: np.ndarray, batch: float) -> float:
    """A by-batch array read at a fractional batch."""
    top = len(values) - 1
    if batch >= top:
        return float(values[top])
    if batch <= 0:
        return float(values[0])
    k = int(batch)
    w = batch - k
    return float(values[k] * (1 - w) + values[k + 1] * w)


class _Queries:
    """Steps a table needs, gathered so that `step_times` computes them in one pass."""

    def __init__(self) -> None:
        self.decode: list[np.ndarray] = []
        self.prefill: list[np.ndarray] = []
        self.start: list[np.ndarray] = []
        self.others: list[np.ndarray] = []
        self.size = 0

    def add(self, decode: object, prefill: object, start: object, others: object = 0.0
            ) -> slice:
        d, c, s, o = np.broadcast_arrays(np.asarray(decode, float), np.asarray(prefill, float),
                                         np.asarray(start, float), np.asarray(others, float))
        self.decode.append(d.ravel())
        self.prefill.append(c.ravel())
        self.start.append(s.ravel())
        self.others.append(o.ravel())
        at = slice(self.size, self.size + d.size)
        self.size += d.size
        return at

    def run(self, step_model: StepModel, context: float) -> np.ndarray:
        return step_times(step_model, np.concatenate(self.decode), context,
                          np.concatenate(self.prefill), np.concatenate(self.start),
                          np.concatenate(self.others))


def table_for(engine: Engine, workload: ServedTraffic, points: int | None = TABLE_POINTS) -> Table:
    """The engine's table (`points`: batches computed, the rest linear between; None: all)."""
    sm, ctx = engine.step_model, workload.context_tokens
    cap = max(1, min(engine.slots, workload.sequences_in(engine.kv_cache_tokens)))
    every = np.arange(cap + 1, dtype=float)
    at = every if points is None or points > cap else np.unique(
        np.concatenate([[0.0, 1.0], np.linspace(0, cap, points).round()])
    )
    start = workload.prompts.mean_start
    # A prompt's prefill computes what its cache lacks, its chunks after the cached prefix.
    tokens, weights = workload.prompts.computed, workload.prompts.weights
    offsets = workload.prompts.offsets
    pre_at = _prefill_batches(cap if engine.decodes else 0)
    q = _Queries()
    decode_at = q.add(np.maximum(at, 1.0), 0.0, 0.0)
    lanes = engine.lanes
    chunks = chunk_at(engine, at)
    ranks_at = [q.add(at, chunks, start, (k - 1) * chunks) for k in range(1, lanes + 1)]
    prefill_at = _prefill_queries(q, engine, pre_at, tokens, start, offsets)
    times = q.run(sm, ctx)
    decode = times[decode_at]
    ranks = np.array([times[r] for r in ranks_at])
    if not engine.prefills:
        ranks = np.repeat(decode[None, :], lanes, axis=0)
    if len(at) != len(every):
        decode = np.interp(every, at, decode)
        ranks = np.array([np.interp(every, at, row) for row in ranks])
    mixed = ranks[0]
    own, work, lengths, counts = _prefill_parts(times, prefill_at, engine, pre_at, tokens)
    if not engine.prefills:
        own, work = np.zeros_like(own), np.zeros_like(work)
        lengths, counts = np.zeros_like(lengths), np.zeros_like(counts)
    w = weights / max(float(weights.sum()), 1e-12)
    m1 = work @ w
    m2 = (work * work) @ w
    offsets = np.array([_slowest_of(lengths[j], counts[j] * weights[:, None], lanes)
                        for j in range(len(pre_at))])
    return Table(
        engine=engine,
        workload=workload,
        cap=cap,
        decode_s=np.asarray(decode, dtype=float),
        mixed_s=np.asarray(mixed, dtype=float),
        prefill_batches=pre_at,
        own_s=own,
        work_s=work,
        work_mean_s=m1,
        work_cv2=np.maximum(m2 / np.maximum(m1 * m1, 1e-300) - 1, 0.0),
        period_lengths=lengths,
        period_weights=counts,
        ranks_mixed_s=np.asarray(ranks, dtype=float),
        rank_offsets=offsets,
    )


def _prefill_batches(cap: int) -> np.ndarray:
    """The running batches a table computes prefill at: none and one (a step's fixed costs
    start with the first decode), then geometric to the cap (a chunk is the budget less the
    batch, and a prompt's work goes as its inverse)."""
    if cap <= 1:
        return np.arange(cap + 1, dtype=float)
    return np.unique(np.concatenate([[0.0], np.geomspace(1, cap, PREFILL_POINTS - 1).round()]))


def _slowest_of(lengths: np.ndarray, weights: np.ndarray, lanes: int) -> np.ndarray:
    """For k = 1..lanes ranks each carrying a chunk drawn from the chunks' periods (offsets
    from the mean-start period, weighted): E[the longest of k] less E[one]."""
    x = np.nan_to_num(lengths.ravel(), nan=0.0)
    p = np.where(np.isnan(lengths.ravel()), 0.0, weights.ravel())
    if p.sum() <= 0:
        return np.zeros(lanes)
    order = np.argsort(x)
    x, p = x[order], p[order] / p.sum()
    cdf = np.cumsum(p)
    below = np.concatenate([[0.0], cdf[:-1]])
    mean = float(x @ p)
    return np.array([float(x @ (cdf**k - below**k)) - mean for k in range(1, lanes + 1)])


def _split(engine: Engine, batches: np.ndarray, prompts: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At each running batch (rows) for each prompt bin (columns): (chunk, a lone prompt's
    tokens a period, full periods, the rest)."""
    k = np.floor(chunk_at(engine, batches))[:, None]
    per = k * engine.pipeline
    full = np.floor(prompts[None, :] / per)
    return k, per, full, prompts[None, :] - full * per


def _prefill_queries(q: _Queries, engine: Engine, batches: np.ndarray, prompts: np.ndarray,
                     mean_start: float, offsets: np.ndarray | float = 0.0) -> tuple[slice, ...]:
    """The steps of each prompt's prefill at each running batch (see `_prefill_parts`):
    `prompts` the tokens each computes, starting at `offsets` (its cached prefix)."""
    k, per, full, rest = _split(engine, batches, prompts)
    d = batches[:, None]
    a = np.broadcast_to(np.asarray(offsets, dtype=float), prompts.shape)[None, :]
    j = (np.arange(CHUNK_POINTS) + 0.5) / CHUNK_POINTS
    return (
        q.add(d, k, a + np.maximum(full * per - k, 0.0) / 2),  # a full period, mean start
        q.add(d, np.minimum(rest, k), a + full * per),  # the partial last period
        q.add(d, k, a + np.maximum(prompts[None, :] / 2 - k / 2, 0.0)),  # packed: its middle
        q.add(d, k, mean_start),  # the table's mixed period
        q.add(d[:, :, None], k[:, :, None],  # spread over its full periods
              a[:, :, None]
              + np.maximum((full * per)[:, :, None] * j - k[:, :, None] / 2, 0.0)),
    )


def _prefill_parts(
    times: np.ndarray, slices: tuple[slice, ...], engine: Engine, batches: np.ndarray,
    prompts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At each running batch (first axis), per prompt bin:
    - its own chunked prefill when alone: `pipeline` chunks a period (one in each microbatch
      in flight), each full period as long as one carrying a chunk at the prompt's mean start
      (a step is linear in its start), then its rest;
    - the time it occupies its lane when periods are packed: its tokens' share of full
      periods, other prompts filling the rest;
    - the periods its chunks make, less a full one at the mean start: CHUNK_POINTS spread over
      its full periods (each standing for its share of them) and its partial last one (nan
      without one), with the periods each stands for."""
    k, per, full, rest = _split(engine, batches, prompts)
    shape = full.shape
    t_full, t_rest, t_middle = (times[s].reshape(shape) for s in slices[:3])
    base = times[slices[3]].reshape(shape[0], 1)  # one a batch
    spread = times[slices[4]].reshape(*shape, CHUNK_POINTS)
    own = full * t_full + np.where(rest > 0, t_rest, 0.0)
    work = prompts[None, :] / per * t_middle
    grid = np.where(full[:, :, None] > 0, spread - base[:, :, None], 0.0)
    last = np.where(rest > 0, t_rest - base, np.nan)[:, :, None]
    lengths = np.concatenate([grid, last], axis=2)
    counts = np.concatenate([np.repeat(full[:, :, None] / CHUNK_POINTS, CHUNK_POINTS, axis=2),
                             (rest > 0).astype(float)[:, :, None]], axis=2)
    return own, work, lengths, counts
