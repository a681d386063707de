"""A user's own benchmark runs: the result files of `vllm bench serve --save-result` (and of
the older `benchmarks/benchmark_serving.py` it replaced), read into runs llmfleet predicts.

A file holds one JSON object per run, or one per line (`--append-result` writes JSON Lines).
Keys differ between releases, so every key but the few a run needs is optional:
- `request_rate` is a number or the string "inf" (every request sent at once);
- `max_concurrency` exists from 2024 on (absent: no cap); `backend` or `endpoint_type`;
- `ttfts` and `itls` are seconds, every `*_ms` key milliseconds;
- per-request arrays (`input_lens`, `output_lens`, `ttfts`, `itls`) exist only with
  `--save-detailed` (and in some 2024 files always); a request that failed or produced no
  token has output length 0 and TTFT 0.0: it is left out of every mean (some releases'
  own summary averaged its 0.0 into the TTFT), and the arrays, where present, give the
  means and whether output lengths spread as a dataset's do;
- the E2E mean is `mean_e2el_ms` (only if `--percentile-metrics` named e2el) or, in 2024
  files, `mean_latency_ms`.
A run is predicted as the client ran it: `--max-concurrency` C with rate "inf" is a closed
loop of C clients whose first wave starts together; a finite `--request-rate` is an
open-loop Poisson run of `num_prompts` requests; rate "inf" without a cap is a burst of
`num_prompts` requests queued at once."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfleet.errors import BenchError

# The keys every run needs: who was served, how the client loaded it, and what it measured.
REQUIRED = (
    "model_id",
    "completed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_rate",
    "mean_ttft_ms",
    "output_throughput",
)
# Output lengths whose coefficient of variation exceeds this are a dataset's spread
# (ShareGPT's is about 1), not the few-percent jitter of a random dataset's range ratio.
SPREAD_CV = 0.5


@dataclass(frozen=True)
class BenchRun:
    """One run of a result file: its load and the means it measured."""

    file: str
    index: int  # 0-based object in the file (a JSON Lines file: its run on that line)
    model_id: str
    completed: int
    num_prompts: int
    request_rate: float | None  # None: "inf", every request sent at once
    max_concurrency: int | None
    duration_s: float
    input_tokens: float  # mean prompt tokens of a completed request
    output_tokens: float  # mean output tokens of a completed request
    spread_outputs: bool  # per-request output lengths spread as a dataset's do
    ttft_ms: float
    tpot_ms: float | None  # mean over requests of (latency - TTFT) / (output - 1)
    itl_ms: float | None  # mean gap between streamed chunks, pooled over requests
    output_tokens_per_s: float
    e2e_latency_ms: float | None

    @property
    def label(self) -> str:
        """Where the run is, for messages: the file, and the run when the file has several."""
        return f"{self.file} run {self.index + 1}"

    @property
    def measured(self) -> dict[str, float]:
        """The run's means under the metric names `llmfleet predict` prints: `itl_ms` is a
        request's mean time per output token (vLLM's TPOT; its chunk gaps where no TPOT)."""
        out = {"ttft_ms": self.ttft_ms, "output_tokens_per_s": self.output_tokens_per_s}
        itl = self.tpot_ms if self.tpot_ms is not None else self.itl_ms
        if itl is not None and itl > 0:
            out["itl_ms"] = itl
        if self.e2e_latency_ms is not None and self.e2e_latency_ms > 0:
            out["e2e_latency_ms"] = self.e2e_latency_ms
        return out


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_bench(path: Path) -> list[BenchRun]:
    """Every run in a result file, or a BenchError naming the file and what is wrong."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise BenchError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"{path}: cannot read it as text ({e})") from None
    objects = _objects(path, text)
    if not objects:
        raise BenchError(f"{path}: holds no result; `vllm bench serve --save-result` writes one")
    return [_run(path, k, obj) for k, obj in enumerate(objects)]


def _objects(path: Path, text: str) -> list[dict[str, Any]]:
    """One JSON object, or JSON Lines of them."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if whole is not None:
        raise BenchError(
            f"{path}: a JSON {type(whole).__name__}, not a result object; "
            "`vllm bench serve --save-result` writes one object per run"
        )
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchError(
                f"{path}: not JSON (line {n}, column {e.colno}: {e.msg}); give the file "
                "`vllm bench serve --save-result` wrote (one object, or one per line)"
            ) from None
        if not isinstance(obj, dict):
            raise BenchError(f"{path}: line {n} is a JSON {type(obj).__name__}, not a result")
        out.append(obj)
    return out


def _run(path: Path, index: int, obj: dict[str, Any]) -> BenchRun:
    where = f"{path}" + (f" run {index + 1}" if index else "")
    other = _other_tool(obj)
    if other:
        raise BenchError(
            f"{where}: a {other}, not a `vllm bench serve --save-result` result; llmfleet reads "
            "vLLM's (run `vllm bench serve` against the same server with --save-result)"
        )
    missing = [k for k in REQUIRED if k not in obj]
    if "mean_tpot_ms" not in obj and "mean_itl_ms" not in obj:
        missing.append("mean_tpot_ms")
    if missing:
        raise BenchError(
            f"{where}: lacks {', '.join(missing)}: not a `vllm bench serve --save-result` "
            "result (those keys are in every release's file)"
        )
    completed = _number(obj, "completed", where)
    if completed < 1:
        raise BenchError(
            f"{where}: completed {completed:g} requests; a run with none measured nothing "
            "(check the server's log and the run's `errors`)"
        )
    rate = obj["request_rate"]
    if isinstance(rate, str):
        if rate.strip().lower() not in ("inf", "infinity"):
            raise BenchError(f"{where}: request_rate {rate!r} is neither a number nor 'inf'")
        request_rate = None
    else:
        request_rate = _number(obj, "request_rate", where)
        if math.isinf(request_rate):
            request_rate = None
        elif request_rate <= 0:
            raise BenchError(f"{where}: request_rate {request_rate:g} is not positive")
    cap = obj.get("max_concurrency")
    if cap is not None:
        cap = int(_number(obj, "max_concurrency", where))
    model_id = obj["model_id"]
    if not isinstance(model_id, str) or not model_id.strip():
        raise BenchError(f"{where}: model_id {model_id!r} names no model")
    n = int(completed)
    input_mean = _number(obj, "total_input_tokens", where) / n
    output_mean = _number(obj, "total_output_tokens", where) / n
    spread = False
    ttft_ms = _number(obj, "mean_ttft_ms", where)
    tpot_ms = _optional(obj, "mean_tpot_ms", where)
    detailed = _detailed(obj)
    if detailed is not None:
        ins, outs, ttfts, gaps = detailed
        input_mean, output_mean = statistics.fmean(ins), statistics.fmean(outs)
        spread = len(outs) > 1 and statistics.pstdev(outs) / output_mean > SPREAD_CV
        ttft_ms = statistics.fmean(ttfts) * 1000
        if gaps is not None:
            tpots = [sum(g) / (o - 1) for o, g in zip(outs, gaps, strict=True) if o > 1]
            tpot_ms = statistics.fmean(tpots) * 1000 if tpots else tpot_ms
    if output_mean <= 0 or input_mean <= 0:
        raise BenchError(f"{where}: completed requests with no prompt or output tokens")
    return BenchRun(
        file=str(path),
        index=index,
        model_id=model_id.strip(),
        completed=n,
        num_prompts=int(obj.get("num_prompts") or n),
        request_rate=request_rate,
        max_concurrency=cap,
        duration_s=_number(obj, "duration", where),
        input_tokens=input_mean,
        output_tokens=output_mean,
        spread_outputs=spread,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        itl_ms=_optional(obj, "mean_itl_ms", where),
        output_tokens_per_s=_number(obj, "output_throughput", where),
        e2e_latency_ms=_optional(obj, "mean_e2el_ms", where)
        or _optional(obj, "mean_latency_ms", where),
    )


def _other_tool(obj: dict[str, Any]) -> str | None:
    """Which other benchmark tool wrote this object, if its top level says so: GuideLLM's
    report holds a `benchmarks` list; GenAI-Perf's and AIPerf's exports hold metrics as
    objects (`time_to_first_token: {avg, p99, unit}`). Their layouts differ between releases
    and were not checked against real exports here, so they are named, not read."""
    if isinstance(obj.get("benchmarks"), list):
        return "GuideLLM report"
    for key in ("time_to_first_token", "llm_metrics", "request_throughput"):
        if isinstance(obj.get(key), dict):
            return "GenAI-Perf or AIPerf export"
    return None


def _detailed(
    obj: dict[str, Any],
) -> tuple[list[float], list[float], list[float], list[list[float]] | None] | None:
    """The completed requests' (input, output, TTFT s, chunk gaps s or None) from the
    per-request arrays, or None without them (or when they do not line up)."""
    arrays = [obj.get(k) for k in ("input_lens", "output_lens", "ttfts")]
    if not all(isinstance(a, list) for a in arrays):
        return None
    ins, outs, ttfts = (a if isinstance(a, list) else [] for a in arrays)
    itls = obj.get("itls")
    if not len(ins) == len(outs) == len(ttfts) or not outs:
        return None
    if not isinstance(itls, list) or len(itls) != len(outs):
        itls = None
    errors = obj.get("errors")
    ok = [
        k
        for k in range(len(outs))
        if outs[k] > 0 and ttfts[k] > 0 and not (isinstance(errors, list) and errors[k])
    ]
    if not ok:
        return None
    return (
        [float(ins[k]) for k in ok],
        [float(outs[k]) for k in ok],
        [float(ttfts[k]) for k in ok],
        [[float(g) for g in itls[k]] for k in ok] if itls is not None else None,
    )


def _number(obj: dict[str, Any], key: str, where: str) -> float:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchError(f"{where}: {key} is {value!r}, not a number")
    if math.isnan(value):
        raise BenchError(f"{where}: {key} is NaN")
    return float(value)


def _optional(obj: dict[str, Any], key: str, where: str) -> float | None:
    return _number(obj, key, where) if obj.get(key) is not None else None
