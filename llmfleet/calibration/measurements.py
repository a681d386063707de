"""Published measurements: read benchmarks/measurements.csv and map each row to a prediction.

Rows name models, GPUs and engines as their sources print them; `normalize_*` maps that
text to catalog names, and a row that cannot be mapped is skipped with the reason."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from llmfleet.catalog import hardware, model_facts, network, vllm_release
from llmfleet.errors import LlmfleetError, MeasurementsError
from llmfleet.paths import MEASUREMENTS
from llmfleet.perf.layout import layout_problem
from llmfleet.perf.replica import PredictRequest, catalog_arch
from llmfleet.perf.step import prefill_floor_s

# Harnesses that drive the engine through its Python API, with no API server in between.
OFFLINE = re.compile(r"offline|benchmark_latency|benchmark_throughput|trtllm-bench")
# TensorRT-LLM's kv_cache_free_gpu_memory_fraction when a source does not state it.
TRTLLM_KV_FRACTION = 0.9


def normalize_engine(text: str) -> str | None:
    t = text.lower()
    if "sglang" in t:
        return "sglang"
    if "tensorrt" in t or "trtllm" in t or "nim" in t:
        # NIM's optimized profiles (this fp8 TP2 H100 one among them) run TensorRT-LLM.
        return "trtllm"
    if "vllm" in t or "not named" in t:
        return "vllm"
    return None


def normalize_gpu(text: str) -> str | None:
    t = text.lower()
    if "rtx" in t or t.strip() in ("", "not stated"):
        return None
    for name in ("h200", "h100", "b200", "l40s", "a10g"):
        if name in t:
            return name.upper()
    if re.search(r"\bl4\b", t):
        return "L4"
    if "a100" in t:
        if "40gb" in t.replace(" ", "") or "39.38" in t:
            return "A100-40GB"
        if "80" in t and "not stated" not in t:
            return "A100-80GB"
    return None


def normalize_precision(text: str, model: str) -> str:
    t = f"{text} {model}".lower()
    for key, name in (
        ("mxfp4", "mxfp4"),
        ("awq", "int4-awq"),
        ("gptq", "int4-gptq"),
        ("fp8", "fp8"),
    ):
        if key in t:
            return name
    return "bf16"


def normalize_model(text: str) -> str | None:
    name = text.split(" (")[0].strip()
    try:
        return model_facts.model_entry(name).id
    except LlmfleetError:
        return None


def _num(text: str) -> float | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isinf(value) else value


def _flag(text: str | None) -> bool:
    """A yes/no column: true, yes or 1."""
    return (text or "").strip().lower() in ("true", "yes", "1")


def _int(text: str) -> int | None:
    value = _num(text)
    return int(value) if value else None


# At most this many requests in flight is "low load": a request rarely waits for another's
# prefill, so its TTFT is request handling plus its own prefill.
LOW_LOAD_REQUESTS = 4
# A prompt this short prefills in a few ms on the catalog's GPUs (8B, 1,024 tokens on one
# H100: 17 ms at the tensor peak): the rows that identify request handling.
SHORT_PROMPT_TOKENS = 1024

Regime = str  # "low_load" | "steady" | "burst" | "offline" | "startup" (KV logs only)
REGIMES: tuple[Regime, ...] = ("low_load", "steady", "burst", "offline", "startup")
# Regimes whose held-out spread is the band a plan is sized with (Poisson arrivals at a
# steady state), and whose rows the model is fitted on: a burst of every prompt at once
# through an API server measures the server's front end (the first tokens of 1,000
# prompts arrive near the end of the run, at 30-210 requests/s whatever the GPU), not the
# engine's steps.
SIZING_REGIMES: tuple[Regime, ...] = ("low_load", "steady", "offline", "startup")


@dataclass(frozen=True)
class Measurement:
    row_id: str
    source_id: str
    engine: str
    request: PredictRequest
    measured: dict[str, float]
    legacy: bool = False  # a vLLM release of the V0 engine era (before 0.8): not fitted on
    beyond_one_group: bool = False  # pipeline stages, DP ranks or EP
    shape_source: bool = False  # its source measures layouts beyond one TP group
    regime: Regime = "steady"
    ttft_floor_ms: float = 0.0  # the least TTFT the GPUs' tensor peak allows (prefill_floor_s)

    @property
    def below_floor(self) -> bool:
        """Its TTFT is below the prefill's compute floor: the prompt was not computed (a
        prefix-cache hit, e.g. the same random prompts sent again with prefix caching on).
        Flagged, reported, and its TTFT kept out of the fit and the error figures."""
        ttft = self.measured.get("ttft_ms")
        return ttft is not None and ttft < self.ttft_floor_ms

    @property
    def identifies_request_handling(self) -> bool:
        """A short prompt at low load through an API server: its TTFT is mostly request
        handling (what `request_handling_ms` is fitted on, and only on)."""
        return (
            self.regime == "low_load"
            and self.request.harness == "server"
            and self.request.input_tokens <= SHORT_PROMPT_TOKENS
            and "ttft_ms" in self.measured
            and not self.below_floor
        )

    @property
    def fitted_on(self) -> bool:
        """Rows the constants are fitted on. Left out, predicted and counted: V0-era vLLM
        (another scheduler and kernels), and every row of a source that measures layouts
        beyond one TP group, its plain rows being those layouts' baselines: the constants
        describe one group's kernels, and these sources' setups are ones the catalog stands
        in for (PCIe A100s as SXM ones, stages on two VMs predicted on one node, eager L4s),
        so fitting on them would move every prediction for hardware they do not describe; and
        bursts of every prompt at once through an API server, which measure its front end."""
        return not self.legacy and not self.shape_source and self.regime in SIZING_REGIMES

    def fitted_metrics(self) -> dict[str, float]:
        """What the fit and the error figures read of this row: a TTFT below the compute
        floor is not a prefill's and is left out."""
        if self.below_floor:
            return {k: v for k, v in self.measured.items() if k != "ttft_ms"}
        return self.measured



@dataclass
class Loaded:
    rows: list[Measurement] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (row_id, reason)


# Optional, read where present: engine_version, e2e_latency_mean_ms, max_num_seqs,
# max_num_batched_tokens, num_prompts, and the layout beyond TP (pipeline_parallel,
# data_parallel, expert_parallel, enforce_eager, disaggregated) (files written before they
# existed still validate).
REQUIRED_COLUMNS = (
    "row_id",
    "source_id",
    "model",
    "engine",
    "gpu",
    "gpu_count",
    "tensor_parallel",
    "precision",
    "kv_cache_dtype",
    "input_len",
    "output_len",
    "workload",
    "concurrency",
    "request_rate_qps",
    "output_tok_s",
    "total_tok_s",
    "req_s",
    "ttft_mean_ms",
    "tpot_mean_ms",
    "itl_mean_ms",
    "kv_cache_gib_per_gpu",
    "kv_cache_tokens",
    "gpu_memory_utilization",
    "max_model_len",
)


def load_measurements(path: Path = MEASUREMENTS) -> Loaded:
    out = Loaded()
    try:
        text = path.read_text()
    except OSError as e:
        raise MeasurementsError(f"{path}: cannot read the measurements ({e.strerror})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise MeasurementsError(
            f"{path}: missing columns {', '.join(missing)}; the header of "
            f"benchmarks/measurements.csv lists every column"
        )
    for raw in reader:
        result = parse_row(raw)
        if isinstance(result, str):
            out.skipped.append((raw["row_id"], result))
        else:
            out.rows.append(result)
    shapes = {m.source_id for m in out.rows if m.beyond_one_group}
    out.rows = [replace(m, shape_source=m.source_id in shapes) for m in out.rows]
    return out


def parse_row(r: dict[str, str]) -> Measurement | str:
    """A measurement, or the reason the row cannot be predicted."""
    model = normalize_model(r["model"])
    if model is None:
        return f"model {r['model']!r} is not in the catalog"
    gpu = normalize_gpu(r["gpu"])
    if gpu is None:
        return f"GPU {r['gpu']!r} is not a catalog GPU (or its variant is not stated)"
    engine = normalize_engine(r["engine"])
    if engine is None:
        return f"engine {r['engine']!r} is not vllm, trtllm or sglang"
    if _flag(r.get("disaggregated")):
        return (
            "disaggregated serving: a prefill and a decode pool are priced by the search, "
            "not predicted row by row"
        )
    tp = int(_num(r["tensor_parallel"]) or _num(r["gpu_count"]) or 1)
    measured = {}
    for metric, col in (
        ("kv_cache_gib", "kv_cache_gib_per_gpu"),
        ("kv_cache_tokens", "kv_cache_tokens"),
        ("output_tokens_per_s", "output_tok_s"),
        ("ttft_ms", "ttft_mean_ms"),
        ("e2e_latency_ms", "e2e_latency_mean_ms"),
    ):
        v = _num(r.get(col, ""))  # columns added later (e2e) may be absent
        if v is not None:
            measured[metric] = v
    itl = _num(r["tpot_mean_ms"]) or _num(r["itl_mean_ms"])
    if itl is not None:
        measured["itl_ms"] = itl
    if not measured:
        return "no metric llmfleet predicts"
    i, o = _num(r["input_len"]), _num(r["output_len"])
    req_s, out_s, tot_s = _num(r["req_s"]), _num(r["output_tok_s"]), _num(r["total_tok_s"])
    if (i is None or o is None) and req_s and out_s and tot_s:
        # Dataset workloads (ShareGPT): mean lengths from the source's own token rates.
        o = out_s / req_s
        i = tot_s / req_s - o
    e2e, ttft, tpot = (
        _num(r.get(c, "")) for c in ("e2e_latency_mean_ms", "ttft_mean_ms", "tpot_mean_ms")
    )
    if i and o and e2e and ttft and tpot and e2e > ttft:
        # Lengths drawn around the nominal (a random-range ratio): a request's mean output
        # is 1 + (E2E - TTFT) / TPOT by the benchmark's own definition of TPOT, and the
        # input scales with it (or follows from the total / output token rates).
        mean_o = 1 + (e2e - ttft) / tpot
        i = mean_o * (tot_s / out_s - 1) if out_s and tot_s else i * mean_o / o
        o = mean_o
    elif i and o and out_s and tot_s and tot_s > out_s and i * out_s / (tot_s - out_s) < 0.97 * o:
        # Without ignore_eos outputs stop early (S20's random runs): the random dataset's
        # input is as asked, so the mean output is the input times the run's own ratio of
        # output to input tokens (the totals the benchmark prints; 3 %: beyond rounding).
        o = i * out_s / (tot_s - out_s)
    timing = {"output_tokens_per_s", "ttft_ms", "itl_ms", "e2e_latency_ms"} & set(measured)
    if timing and (i is None or o is None or i < 1 or o < 1):
        return "no input/output lengths for its throughput or latency"
    conc_text = r["concurrency"].strip().lower()
    concurrency = _num(conc_text)
    rate = _num(r["request_rate_qps"])
    prompts = re.search(r"(\d+) prompts|num-prompts (\d+)", r["workload"])
    # "at once", "no rate limit": a burst of prompts; "fixed batch size": benchmark_latency's
    # one batch of N prompts generated together.
    burst = re.search(r"at once|no rate limit|fixed batch size", r["workload"].lower()) is not None
    num_requests = _int(r.get("num_prompts", ""))
    if num_requests is None and prompts:
        num_requests = int(prompts.group(1) or prompts.group(2))
    if burst and concurrency and not num_requests:
        # "--num-prompts N" sent at once: the concurrency column is the burst size
        num_requests = int(concurrency)
    if burst:
        concurrency = None
    if not timing:
        i, o = 1, 1
    harness = "offline" if OFFLINE.search(r["workload"].lower()) else "server"
    precision = normalize_precision(r["precision"], r["model"])
    kv_text = r["kv_cache_dtype"].lower()
    kv = "fp8" if "fp8" in kv_text else "auto"
    if engine == "trtllm" and precision == "fp8" and not kv_text.strip():
        # TensorRT-LLM's KV cache takes the checkpoint's dtype (kv_cache_config.dtype
        # "auto"), and a ModelOpt FP8 checkpoint declares an FP8 KV cache
        # (kv_cache_quant_algo FP8): NIM's and trtllm-bench's FP8 profiles run so.
        kv = "fp8"
    try:
        req = PredictRequest(
            model=model,
            engine=engine,
            gpu=gpu,
            tensor_parallel_size=tp,
            precision=precision,
            kv_cache_dtype=kv,
            input_tokens=max(1, round(i or 1)),
            output_tokens=max(1, round(o or 1)),
            concurrency=concurrency if concurrency and concurrency > 0 else None,
            request_rate=rate if rate and not concurrency and not math.isinf(rate) else None,
            gpu_memory_utilization=_num(r["gpu_memory_utilization"])
            or (TRTLLM_KV_FRACTION if engine == "trtllm" else 0.9),
            max_model_len=_int(r["max_model_len"]),
            max_num_seqs=_int(r.get("max_num_seqs", "")),
            max_num_batched_tokens=_int(r.get("max_num_batched_tokens", "")),
            num_requests=num_requests,
            output_lengths="sharegpt" if "sharegpt" in r["workload"].lower() else "fixed",
            engine_version=r.get("engine_version", ""),  # "" (not stated): an old release
            pipeline_parallel_size=_int(r.get("pipeline_parallel", "") or "") or 1,
            data_parallel_size=_int(r.get("data_parallel", "") or "") or 1,
            enable_expert_parallel=_flag(r.get("expert_parallel")),
            enforce_eager=_flag(r.get("enforce_eager")),
            harness=harness,
        )
    except ValueError as e:
        return f"row does not parse: {e}"
    node = network.node_for_gpu(gpu)
    layout = layout_problem(
        catalog_arch(model), node, tp, req.pipeline_parallel_size, req.data_parallel_size,
        req.enable_expert_parallel,
    )
    if layout:
        return f"layout: {layout[1]}"
    release = vllm_release.release(r.get("engine_version", ""))
    legacy = engine == "vllm" and release is not None and release < vllm_release.V1_ENGINE
    beyond = (
        req.pipeline_parallel_size > 1
        or req.data_parallel_size > 1
        or req.enable_expert_parallel
    )
    return Measurement(
        r["row_id"], r["source_id"], engine, req, measured, legacy, beyond,
        regime=regime_of(req) if timing else "startup",
        ttft_floor_ms=ttft_floor_ms(req) if timing else 0.0,
    )


def regime_of(req: PredictRequest) -> Regime:
    """What a row's load measures: an offline harness (no API server); low load (at most
    LOW_LOAD_REQUESTS in flight: a closed loop of that many clients, or a burst of that many
    prompts); a burst of more prompts at once through an API server; else a steady state
    (a closed loop or Poisson arrivals)."""
    if req.harness == "offline":
        return "offline"
    if req.concurrency is not None:
        return "low_load" if req.concurrency <= LOW_LOAD_REQUESTS else "steady"
    if req.request_rate is not None:
        return "steady"
    if req.num_requests is not None and req.num_requests <= LOW_LOAD_REQUESTS:
        return "low_load"
    return "burst"


def ttft_floor_ms(req: PredictRequest) -> float:
    """The least mean TTFT the GPUs' tensor peak allows for the row's load: one prompt's
    linear FLOPs (`perf.step.prefill_floor_s`), and for a burst of n equal prompts (n + 1) / 2
    of them (the k-th first token needs k prompts computed)."""
    arch = catalog_arch(req.model)
    one = prefill_floor_s(
        arch, hardware.gpu(req.gpu), req.tensor_parallel_size, req.precision, req.input_tokens
    )
    waves = 1.0
    if req.concurrency is None and req.request_rate is None and req.num_requests:
        waves = (req.num_requests + 1) / 2
    return one * waves * 1000
