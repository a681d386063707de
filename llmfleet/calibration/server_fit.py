"""One server's own correction, fitted on its benchmark runs (`llmfleet calibrate --bench`).

The shipped constants are fitted over many servers and benchmarks; a user's server differs
from their average by its own kernels, host CPU, client and network. The correction is four
factors on the terms of the step model (`perf.step.Correction`), chosen because each is a
separate physical cost that benchmark runs expose separately, and each carries over to
prompt lengths and loads the runs did not try:

- `memory` scales HBM time: the decode step of a small batch (TPOT at low concurrency);
- `compute` scales tensor time: prefill (TTFT grows with the prompt; mixed steps);
- `overhead` scales host time per step and per running sequence (TPOT as the batch grows);
- `ttft_overhead` scales the request handling before the first token (TTFT of a short
  prompt at light load).

A factor moves only where the runs identify it (`identify`: one prompt length cannot tell
prefill compute from the fixed request cost), and only as far as they ask: each is pulled
toward 1 (the shipped constants) with the spread of the shipped band, held out by source,
as its prior, against a run-to-run noise of a few per cent. The TTFT factors are fitted on
low-load TTFT only (at a higher load TTFT is mostly queueing, which the step factors set).
The band is each prompt length predicted by the factors fitted on the other lengths."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from llmfleet.calibration.bench import BenchRun
from llmfleet.calibration.measurements import LOW_LOAD_REQUESTS, SHORT_PROMPT_TOKENS
from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data
from llmfleet.errors import BenchError, CalibrationError, LlmfleetError
from llmfleet.perf.replica import EngineName, PredictRequest, run_predict_with
from llmfleet.perf.step import Correction

FACTORS = ("memory", "compute", "overhead", "ttft_overhead")
# The metrics a run's error is measured on: each is a mean `vllm bench serve` prints.
METRICS = ("ttft_ms", "itl_ms", "output_tokens_per_s")
# No factor leaves [1/5, 5]: beyond that the server is not the one described (another GPU,
# another precision), which the runs' model and the flags given should have said.
BOUNDS = (math.log(0.2), math.log(5.0))


class Server(Data):
    """What a server is, as `llmfleet predict` takes it: the model, the GPU, the parallelism,
    the precision and the engine's flags (the load comes from each run)."""

    model: str = Field(description="Catalog id, or the path of the config.json given.")
    hf_repo: str | None = Field(
        default=None, description="The checkpoint served (needed when model is a config.json)."
    )
    engine: EngineName = "vllm"
    engine_version: str | None = None
    gpu: str
    tensor_parallel_size: int = Field(default=1, ge=1)
    precision: str = "bf16"
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_model_len: int | None = Field(default=None, gt=0)
    max_num_seqs: int | None = Field(default=None, gt=0)
    max_num_batched_tokens: int | None = Field(default=None, gt=0)
    enforce_eager: bool = False
    speculative_method: Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"] | None = None
    num_speculative_tokens: int | None = Field(default=None, ge=1, le=10)
    acceptance_rate: float | None = Field(default=None, gt=0, lt=1)
    draft_model: str | None = None

    @property
    def label(self) -> str:
        return (
            f"{self.model} on {self.gpu} TP {self.tensor_parallel_size}, {self.precision}, "
            f"KV {self.kv_cache_dtype}"
        )


def request_for(server: Server, run: BenchRun) -> PredictRequest:
    """The run as `llmfleet predict` takes it: the server, and the load the client put on it."""
    concurrency = request_rate = None
    if run.request_rate is not None:
        request_rate = run.request_rate  # open loop; a concurrency cap beside it is looser
    elif run.max_concurrency is not None:
        concurrency = float(run.max_concurrency)
    fields = server.model_dump(exclude={"hf_repo"})
    return PredictRequest(
        **fields,
        input_tokens=max(1, round(run.input_tokens)),
        output_tokens=max(1, round(run.output_tokens)),
        concurrency=concurrency,
        request_rate=request_rate,
        num_requests=run.num_prompts,
        output_lengths="sharegpt" if run.spread_outputs else "fixed",
    )


def model_names(server: Server) -> dict[str, str]:
    """The model ids a run of this server may carry, lower-cased, each with the precision it
    serves ("" where any): the catalog id, its repository and aliases, its published
    checkpoints; with a config.json, only the --hf-repo given."""
    if server.model.endswith(".json"):
        if server.hf_repo is None:
            raise CalibrationError(
                f"--model {server.model}: a config.json does not say which checkpoint the "
                "runs served; give --hf-repo ORG/NAME (the model_id the runs carry)"
            )
        return {server.hf_repo.lower(): ""}
    entry = model_facts.model_entry(server.model, "--model")
    names = {n.lower(): "" for n in (entry.id, entry.hf_repo, *entry.aliases)}
    if server.hf_repo:
        names[server.hf_repo.lower()] = ""
    for ckpt in model_facts.checkpoints():  # a quantized checkpoint may also be an alias
        if ckpt.model == entry.id and ckpt.hf_repo.lower() != entry.hf_repo.lower():
            names[ckpt.hf_repo.lower()] = ckpt.precision
    return names


def check_runs(server: Server, runs: Sequence[BenchRun]) -> None:
    """Every run is of this server's model (a local path is taken by its last component, as
    `vllm serve /models/ORG-NAME` writes it), at its precision where the checkpoint says."""
    names = model_names(server)
    for run in runs:
        given = run.model_id.lower().rstrip("/")
        tail = given.rsplit("/", 1)[-1]
        hit = names.get(given)
        if hit is None:
            hit = next((p for n, p in names.items() if n.rsplit("/", 1)[-1] == tail), None)
        if hit is None:
            raise BenchError(
                f"{run.label}: model_id {run.model_id!r} is not the server's model "
                f"{server.model} (its runs carry one of: {', '.join(sorted(names))}); "
                "calibrate each model on its own runs, or, if it is a checkpoint of "
                f"{server.model} (a re-quantized copy), give --hf-repo {run.model_id}"
            )
        if hit and hit != server.precision:
            raise BenchError(
                f"{run.label}: model_id {run.model_id!r} is the {hit} checkpoint of "
                f"{server.model}, but --precision is {server.precision}; give --precision {hit}"
            )


@dataclass(frozen=True)
class Observed:
    """One run as the fit sees it: the request `predict` takes and the means measured."""

    label: str
    request: PredictRequest
    measured: dict[str, float]


def observe(server: Server, runs: Sequence[BenchRun]) -> list[Observed]:
    return [Observed(r.label, request_for(server, r), r.measured) for r in runs]


def predict_run(
    run: Observed,
    consts: Constants,
    correction: Correction,
    config: dict[str, object] | None = None,
) -> dict[str, float]:
    """The run's predicted means (under the names its measured means have)."""
    req = run.request
    server = f"{req.model} on {req.gpu} TP {req.tensor_parallel_size}"
    try:
        p = run_predict_with(req, consts, config, correction)
    except LlmfleetError as e:
        raise CalibrationError(f"{run.label}: {server} cannot be predicted: {e}") from None
    if not p.fits:
        raise CalibrationError(
            f"{run.label}: llmfleet predicts {server} cannot hold one request of "
            f"{req.input_tokens} + {req.output_tokens} tokens, yet the run completed them; "
            "check --gpu-memory-utilization, --max-model-len and --gpu"
        )
    out = {"itl_ms": p.itl_ms, "output_tokens_per_s": p.output_tokens_per_s, "ttft_ms": p.ttft_ms}
    return {k: v for k, v in out.items() if v is not None and v > 0}


# Each factor, the metric whose shipped band is its prior's spread, and what identifies it.
PRIOR_METRIC = {
    "memory": "itl_ms", "overhead": "itl_ms", "compute": "ttft_ms", "ttft_overhead": "ttft_ms",
}
TTFT_FACTORS = ("compute", "ttft_overhead")
DECODE_FACTORS = ("memory", "overhead")
RUN_NOISE = 0.05
"""Two benchmark runs of one server differ by a few per cent: the spread of a run's log
error the fit expects (`MIN_BAND` below is the same figure)."""
Z90 = 1.2816  # the normal quantile of 0.9: p10-p90 spans 2 x Z90 standard deviations
LENGTH_STEP = 1.5
"""Runs whose mean prompts differ by less than this factor are one prompt length (a
random-range ratio draws lengths around the nominal)."""
SWEEP_SPAN = 4.0
"""A batch sweep: runs with a TPOT at concurrencies at least this far apart."""


@dataclass(frozen=True)
class Identified:
    """Which factors the runs identify (fitted) and which they cannot (held at 1), and why."""

    fitted: dict[str, str]
    held: dict[str, str]


def _concurrency(run: Observed) -> float | None:
    return run.request.concurrency


def _low_load(run: Observed) -> bool:
    c = _concurrency(run)
    return c is not None and c <= LOW_LOAD_REQUESTS


def prompt_lengths(runs: Sequence[Observed]) -> list[list[Observed]]:
    """The runs grouped by prompt length (means within LENGTH_STEP of the group's first)."""
    groups: list[list[Observed]] = []
    for run in sorted(runs, key=lambda r: r.request.input_tokens):
        if groups and run.request.input_tokens < groups[-1][0].request.input_tokens * LENGTH_STEP:
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def identify(runs: Sequence[Observed]) -> Identified:
    """What each factor needs to be told apart from the others: prefill compute, low-load
    TTFT at two or more prompt lengths (one length cannot separate it from the fixed
    request cost); request handling, a short prompt at low load; HBM time, a low-load TPOT;
    host time per step and sequence, TPOT over a batch sweep."""
    fitted, held = {}, {}
    low_ttft = [r for r in runs if _low_load(r) and "ttft_ms" in r.measured]
    lengths = prompt_lengths(low_ttft)
    if len(lengths) >= 2:
        fitted["compute"] = f"low-load TTFT at {len(lengths)} prompt lengths"
    else:
        held["compute"] = (
            "needs low-load TTFT (at most 4 in flight) at two or more prompt lengths; the runs "
            f"have {len(lengths)}"
        )
    short = [r for r in low_ttft if r.request.input_tokens <= SHORT_PROMPT_TOKENS]
    if short:
        fitted["ttft_overhead"] = f"TTFT of {len(short)} short-prompt low-load run(s)"
    else:
        held["ttft_overhead"] = (
            f"needs a short prompt (at most {SHORT_PROMPT_TOKENS:,} tokens) at low load (at most "
            f"{LOW_LOAD_REQUESTS} in flight)"
        )
    tpot = [r for r in runs if "itl_ms" in r.measured and _concurrency(r) is not None]
    if any(_low_load(r) for r in tpot):
        fitted["memory"] = "TPOT at low load"
    else:
        held["memory"] = f"needs a TPOT at low load (at most {LOW_LOAD_REQUESTS} in flight)"
    levels = [c for r in tpot if (c := _concurrency(r)) is not None]
    if levels and max(levels) >= SWEEP_SPAN * min(levels):
        fitted["overhead"] = f"TPOT over a batch sweep ({min(levels):g}-{max(levels):g})"
    else:
        held["overhead"] = f"needs TPOT over a batch sweep (concurrencies {SWEEP_SPAN:g}x apart)"
    return Identified(fitted, held)


def fit_correction(
    runs: Sequence[Observed],
    consts: Constants,
    config: dict[str, object] | None = None,
) -> Correction:
    """The factors that bring these runs' predictions closest to what they measured, each
    moving only where the runs identify it (`identify`) and pulled toward 1 by the spread
    of the shipped band (leave one source out): HBM and host time on every run's TPOT and
    throughput, then prefill compute and request handling on low-load TTFT only, then HBM
    and host time again under those."""
    ident = identify(runs)
    logs = dict.fromkeys(FACTORS, 0.0)
    decode = [f for f in DECODE_FACTORS if f in ident.fitted]
    ttft = [f for f in TTFT_FACTORS if f in ident.fitted]
    low = [r for r in runs if _low_load(r)]
    for group, on, metrics in (
        (decode, runs, ("itl_ms", "output_tokens_per_s")),
        (ttft, low, ("ttft_ms",)),
        (decode, runs, ("itl_ms", "output_tokens_per_s")),
    ):
        if group and on:
            logs.update(_fit(group, logs, on, metrics, consts, config))
    return as_correction([logs[f] for f in FACTORS])


def _prior_sigma(factor: str, consts: Constants, architecture: str | None = None) -> float:
    """How far a factor may move before the runs must insist: the shipped band's spread of
    its metric (of the server's GPU architecture), as a log standard deviation."""
    metric = PRIOR_METRIC[factor]
    lo = consts.ratio(metric, "p10", architecture)
    hi = consts.ratio(metric, "p90", architecture)
    return max(math.log(hi / lo) / (2 * Z90), RUN_NOISE) if hi > lo > 0 else 0.25


def _fit(
    factors: Sequence[str],
    start: dict[str, float],
    runs: Sequence[Observed],
    metrics: Sequence[str],
    consts: Constants,
    config: dict[str, object] | None,
) -> dict[str, float]:
    # scipy takes a quarter of a second to import; only a fit needs it.
    from scipy.optimize import least_squares

    arch = hardware.gpu(runs[0].request.gpu).architecture if runs else None
    sigmas = [_prior_sigma(f, consts, arch) for f in factors]

    def residuals(x: Any, /) -> list[float]:
        logs = {**start, **dict(zip(factors, (float(v) for v in x), strict=True))}
        correction = as_correction([logs[f] for f in FACTORS], digits=None)
        out = []
        for run in runs:
            pred, measured = predict_run(run, consts, correction, config), run.measured
            out += [
                math.log(pred[m] / measured[m]) / RUN_NOISE
                for m in metrics
                if m in pred and m in measured
            ]
        return out + [v / s for v, s in zip(x, sigmas, strict=True)]

    lo, hi = BOUNDS
    x0 = [start[f] for f in factors]
    n = len(factors)
    result = least_squares(residuals, x0, bounds=([lo] * n, [hi] * n), max_nfev=100)
    return dict(zip(factors, (float(v) for v in result.x), strict=True))


def as_correction(log_factors: Sequence[float], digits: int | None = 4) -> Correction:
    """Factors from their logs, rounded for the file (unrounded while fitting: rounding would
    hide the finite-difference steps the fit takes)."""
    factors = [math.exp(v) for v in log_factors]
    if digits is not None:
        factors = [float(f"{v:.{digits}g}") for v in factors]
    return Correction(**dict(zip(FACTORS, factors, strict=True)))


def run_ratios(
    runs: Sequence[Observed],
    consts: Constants,
    correction: Correction,
    config: dict[str, object] | None = None,
) -> list[dict[str, float]]:
    """Per run, measured / predicted of each metric it measured."""
    out = []
    for run in runs:
        pred, measured = predict_run(run, consts, correction, config), run.measured
        out.append({m: measured[m] / pred[m] for m in METRICS if m in pred and m in measured})
    return out


def held_out_ratios(
    runs: Sequence[Observed],
    consts: Constants,
    config: dict[str, object] | None = None,
) -> list[dict[str, float]]:
    """Per run, measured / predicted with the correction fitted on the runs of the other
    prompt lengths: runs at one length share its errors, so a run held out beside its
    siblings would flatter the fit. Empty with runs at one length (the shipped band then
    stands)."""
    lengths = prompt_lengths(runs)
    if len(lengths) < 2:
        return []
    out = []
    for k, group in enumerate(lengths):
        rest = [r for j, g in enumerate(lengths) if j != k for r in g]
        out += run_ratios(group, consts, fit_correction(rest, consts, config), config)
    return out


def median_ape(ratios: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per metric, the median absolute percentage error of predicted against measured."""
    by: dict[str, list[float]] = {}
    for r in ratios:
        for m, ratio in r.items():
            by.setdefault(m, []).append(abs(1 / ratio - 1) * 100)
    return {m: round(statistics.median(v), 2) for m, v in sorted(by.items())}


MIN_BAND = 0.05
"""The band from a user's residuals is never narrower than measured/predicted in
[0.95, 1.05]: two benchmark runs of one server differ by a few per cent, and a handful of
runs cannot show a tighter spread than that."""


def band(ratios: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric, p10 and p90 of the held-out measured / predicted ratios (nearest rank, as
    the shipped band takes them), widened to include [1 - MIN_BAND, 1 + MIN_BAND]."""
    by: dict[str, list[float]] = {}
    for r in ratios:
        for m, ratio in r.items():
            by.setdefault(m, []).append(ratio)
    out = {}
    for m, values in sorted(by.items()):
        values.sort()
        n = len(values)
        p10, p90 = values[int(0.1 * (n - 1))], values[math.ceil(0.9 * (n - 1))]
        out[m] = {
            "p10": round(min(p10, 1 - MIN_BAND), 4),
            "p90": round(max(p90, 1 + MIN_BAND), 4),
        }
    return out
