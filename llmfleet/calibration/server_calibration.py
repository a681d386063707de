"""A calibration file: one server's correction with its provenance, written by `llmfleet
calibrate --bench ... --out FILE` and read by `llmfleet predict --calibration FILE` and by a
stack's `plan.calibration`.

It holds the server it is for, every bench file's path and SHA-256, every run's load and
measured means, the fitted factors, the error before and after on those runs, and the
band a prediction of this server falls in (p10-p90 of measured/predicted, each run
predicted by the factors fitted on the other runs). The runs are kept so the factors can be
fitted again: when the shipped constants change (`llmfleet calibrate --write`), the factors
were relative to the old ones, so a reader refits them from the runs, deterministically,
instead of applying stale numbers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from llmfleet import __version__
from llmfleet.calibration.bench import BenchRun, file_sha256, read_bench
from llmfleet.calibration.server_fit import (
    Server,
    band,
    check_runs,
    fit_correction,
    held_out_ratios,
    identify,
    median_ape,
    observe,
    run_ratios,
)
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data
from llmfleet.errors import CalibrationError
from llmfleet.perf.step import NO_CORRECTION, Correction

FORMAT: Literal["llmfleet-calibration/1"] = "llmfleet-calibration/1"


class BenchFile(Data):
    path: str = Field(description="As given to calibrate (relative paths: to where it ran).")
    sha256: str
    runs: int


class Factors(Data):
    """perf.step.Correction as data."""

    memory: float
    compute: float
    overhead: float
    ttft_overhead: float

    @property
    def correction(self) -> Correction:
        return Correction(self.memory, self.compute, self.overhead, self.ttft_overhead)


class RunRecord(Data):
    """One run's load and means, as read from its bench file (enough to fit again)."""

    file: str
    index: int
    model_id: str
    completed: int
    num_prompts: int
    request_rate: float | None
    max_concurrency: int | None
    duration_s: float
    input_tokens: float
    output_tokens: float
    spread_outputs: bool
    ttft_ms: float
    tpot_ms: float | None
    itl_ms: float | None
    output_tokens_per_s: float
    e2e_latency_ms: float | None

    @property
    def run(self) -> BenchRun:
        return BenchRun(**self.model_dump())


class Errors(Data):
    """Median absolute percentage error per metric over the runs."""

    before: dict[str, float] = Field(description="With the shipped constants alone.")
    after: dict[str, float] = Field(description="With the fitted factors (in sample).")
    held_out: dict[str, float] = Field(
        description="Each prompt length's runs predicted by the factors fitted on the other "
        "lengths (empty with runs at one length)."
    )


class ServerCalibration(Data):
    format: Literal["llmfleet-calibration/1"] = FORMAT
    llmfleet_version: str
    constants_sha256: str = Field(description="The shipped constants the factors are on.")
    server: Server
    files: list[BenchFile]
    factors: Factors
    errors: Errors
    ranges: dict[str, dict[str, float]] = Field(
        description="Per metric, p10 and p90 of measured/predicted, each prompt length "
        "predicted by the factors fitted on the others, never narrower than 0.95-1.05; empty "
        "with runs at one prompt length (the shipped band then stays)."
    )
    runs: list[RunRecord]
    fitted: dict[str, str] = Field(
        default_factory=dict, description="The factors the runs identify, with what does."
    )
    held: dict[str, str] = Field(
        default_factory=dict,
        description="The factors held at 1 (the shipped constants), with what would identify "
        "them.",
    )
    prompt_tokens: tuple[float, float] | None = Field(
        default=None, description="The shortest and longest mean prompt of the runs."
    )
    output_tokens: tuple[float, float] | None = Field(
        default=None, description="The shortest and longest mean output of the runs."
    )

    @property
    def bench_runs(self) -> list[BenchRun]:
        return [r.run for r in self.runs]


def constants_sha256(consts: Constants) -> str:
    text = json.dumps(consts.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def calibrate_server(
    server: Server,
    paths: Sequence[Path],
    consts: Constants,
    config: dict[str, object] | None = None,
) -> ServerCalibration:
    """Read the bench files, check they are this server's model, fit, and say how well."""
    runs: list[BenchRun] = []
    files = []
    for path in paths:
        got = read_bench(path)
        files.append(BenchFile(path=str(path), sha256=file_sha256(path), runs=len(got)))
        runs += got
    check_runs(server, runs)
    return fitted_calibration(server, files, runs, consts, config)


def fitted_calibration(
    server: Server,
    files: list[BenchFile],
    runs: Sequence[BenchRun],
    consts: Constants,
    config: dict[str, object] | None = None,
) -> ServerCalibration:
    observed = observe(server, runs)
    correction = fit_correction(observed, consts, config)
    held = held_out_ratios(observed, consts, config)
    ident = identify(observed)
    prompts = [r.input_tokens for r in runs]
    outputs = [r.output_tokens for r in runs]
    return ServerCalibration(
        llmfleet_version=__version__,
        constants_sha256=constants_sha256(consts),
        server=server,
        files=files,
        factors=Factors(**asdict(correction)),
        errors=Errors(
            before=median_ape(run_ratios(observed, consts, NO_CORRECTION, config)),
            after=median_ape(run_ratios(observed, consts, correction, config)),
            held_out=median_ape(held),
        ),
        ranges=band(held),
        runs=[RunRecord(**asdict(r)) for r in runs],
        fitted=ident.fitted,
        held=ident.held,
        prompt_tokens=(round(min(prompts), 1), round(max(prompts), 1)) if prompts else None,
        output_tokens=(round(min(outputs), 1), round(max(outputs), 1)) if outputs else None,
    )


LENGTH_MARGIN = 1.5
"""A prompt more than this factor outside the runs' shortest and longest is a length the
calibration never saw."""


def untested_length(
    cal: ServerCalibration, prompt_tokens: float, output_tokens: float | None = None
) -> str | None:
    """A warning when a prediction needs a prompt or output length the calibration's runs
    never had, or None. Calibrated on one sweep, the other shapes are where it may not carry:
    prefill compute is untested at another prompt length, and at another output length the
    running batch, and TTFT under load behind it, were never measured (benchmarks/README.md,
    "Calibrated on one sweep")."""
    held = "; ".join(f"{k} held at 1: {v}" for k, v in cal.held.items())
    out = []
    if cal.prompt_tokens is not None:
        lo, hi = cal.prompt_tokens
        if not lo / LENGTH_MARGIN <= prompt_tokens <= hi * LENGTH_MARGIN:
            out.append(
                f"a {prompt_tokens:,.0f}-token prompt is outside the {lo:,.0f}-{hi:,.0f} tokens "
                f"of the calibration's runs: its TTFT there is untested"
                + (f" ({held})" if held else "")
            )
    if cal.output_tokens is not None and output_tokens is not None:
        lo, hi = cal.output_tokens
        if not lo / LENGTH_MARGIN <= output_tokens <= hi * LENGTH_MARGIN:
            out.append(
                f"a {output_tokens:,.0f}-token output is outside the {lo:,.0f}-{hi:,.0f} tokens "
                "of the calibration's runs: the running batch there, and TTFT under load behind "
                "it, are untested"
            )
    return "; ".join(out) or None


def current(
    cal: ServerCalibration, consts: Constants, config: dict[str, object] | None = None
) -> ServerCalibration:
    """The calibration on these constants: as written, or refitted from its runs when it was
    fitted on other constants."""
    if cal.constants_sha256 == constants_sha256(consts):
        return cal
    return fitted_calibration(cal.server, cal.files, cal.bench_runs, consts, config)


def dumps(cal: ServerCalibration) -> str:
    return json.dumps(cal.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def read_calibration(path: Path) -> ServerCalibration:
    """A calibration file, or a CalibrationError naming it and what is wrong."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CalibrationError(
            f"{path}: no such calibration file; `llmfleet calibrate --bench ... --out` "
            "writes one"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"{path}: not a calibration file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibrationError(
            f"{path}: not a calibration file (no \"format\": \"{FORMAT}\"); "
            "`llmfleet calibrate --bench ... --out` writes one"
        )
    try:
        return ServerCalibration.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CalibrationError(f"{path}: {where}: {first['msg']}") from None


def mismatch(cal: ServerCalibration, server: Server) -> str | None:
    """Why this calibration is not for this server (model, GPU, TP, precision, KV dtype,
    engine), or None. Engine flags (batch, token budget, memory) may differ: the factors
    are the server's efficiencies, which do not depend on them."""
    mine, theirs = cal.server, server
    by_repo = mine.model.endswith(".json") or theirs.model.endswith(".json")
    checks = (
        ("model", mine.hf_repo, theirs.hf_repo) if by_repo else ("model", mine.model, theirs.model),
        ("gpu", mine.gpu.upper(), theirs.gpu.upper()),
        ("tensor_parallel_size", mine.tensor_parallel_size, theirs.tensor_parallel_size),
        ("precision", mine.precision, theirs.precision),
        ("kv_cache_dtype", mine.kv_cache_dtype, theirs.kv_cache_dtype),
        ("engine", mine.engine, theirs.engine),
    )
    for name, have, want in checks:
        if str(have).lower() != str(want).lower():
            return f"it calibrates {name} {have}, not {want} ({mine.label})"
    return None


ServerKey = tuple[str, int, str, str]
"""(GPU, TP, precision, KV dtype): what a calibration covers in a plan's search."""


def server_key(server: Server) -> ServerKey:
    s = server
    return (s.gpu.upper(), s.tensor_parallel_size, s.precision, s.kv_cache_dtype)


@dataclass(frozen=True, eq=False)
class Covered:
    """A plan's calibration file and the server it covers."""

    path: str  # as the plan names it
    calibration: ServerCalibration

    def correction(self, slowdown: float = 1.0) -> Correction:
        """The fitted factors; `slowdown` multiplies the GPU terms (HBM and tensor time), as
        `confidence: pessimistic` slows a step to the p90 end of the band."""
        c = self.calibration.factors.correction
        return replace(c, memory=c.memory * slowdown, compute=c.compute * slowdown)

    def ratio(self, metric: str, quantile: str) -> float | None:
        """The band's p10 or p90 for a metric, or None where the runs give no band."""
        band = self.calibration.ranges.get(metric)
        return None if band is None else band[quantile]

    @property
    def label(self) -> str:
        cal = self.calibration
        return f"{self.path} ({cal.server.label}; {len(cal.runs)} runs)"


@dataclass(frozen=True, eq=False)
class Coverage:
    """The calibration files a plan names, by the server each covers."""

    servers: tuple[Covered, ...] = ()

    def find(self, gpu: str, tp: int, precision: str, kv_cache_dtype: str) -> Covered | None:
        key = (gpu.upper(), tp, precision, kv_cache_dtype)
        return next((c for c in self.servers if server_key(c.calibration.server) == key), None)
