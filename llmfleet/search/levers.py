"""The compression and speculation levers the search tries beside instance type and TP:
weight precision, KV cache dtype and speculative decoding, and which checkpoint serves each.

Semantics of the plan: `model.precision` / `model.kv_cache_dtype`, when given, pin one
value (plans written before the levers keep their meaning); otherwise the search tries
`allowed.precisions` (default: the native precision plus fp8 where the catalog lists a
published FP8 checkpoint) and `allowed.kv_cache_dtypes` (default: auto and fp8), and
always "no speculation" plus each `allowed.speculative` entry."""

from __future__ import annotations

from dataclasses import dataclass

from llmfleet.catalog.constants import Constants
from llmfleet.catalog.hardware import Gpu
from llmfleet.catalog.model_facts import published
from llmfleet.errors import PlanError
from llmfleet.perf.architecture import PRECISIONS, Arch
from llmfleet.perf.parallel import SINGLE, Parallel
from llmfleet.perf.speculation import Speculation, resolve
from llmfleet.perf.step import NO_CORRECTION, Correction, StepModel
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan, SpeculativeSpec

SIXTEEN_BIT = ("bf16", "fp16")
INT4 = ("int4-awq", "int4-gptq")


@dataclass(frozen=True)
class Levers:
    """One point of the lever space: hashable, so sizing is memoised per (instance, TP, it)."""

    precision: str
    kv_cache_dtype: str
    spec: Speculation | None = None
    enforce_eager: bool = False  # plan.model.enforce_eager: a setting, not searched

    @property
    def speculative(self) -> str | None:
        return self.spec.method if self.spec else None

    @property
    def label(self) -> str:
        spec = f", {self.spec.method} k={self.spec.k}" if self.spec else ""
        return f"{self.precision}, KV {self.kv_cache_dtype}{spec}"

    def step_model(
        self,
        arch: Arch,
        gpu: Gpu,
        tp: int,
        consts: Constants,
        correction: Correction = NO_CORRECTION,
        parallel: Parallel = SINGLE,
    ) -> StepModel:
        return StepModel(
            arch,
            gpu,
            tp,
            self.precision,
            self.kv_cache_dtype,
            consts,
            "vllm",
            self.spec,
            self.enforce_eager,
            correction,
            parallel,
        )


def plainness(levers: Levers, native: str) -> tuple[int, int]:
    """(lossy levers, levers) of a setting, 0 for the plain one: weights stored below the
    native precision and an FP8 KV cache change what the model computes; speculation does
    not (the target verifies every token) but is one more thing to run and tune. At equal
    cost the search keeps the plainer setting."""
    lossy = int(levers.precision != native) + int(levers.kv_cache_dtype == "fp8")
    return lossy, lossy + int(levers.spec is not None)


def pinned(plan: CapacityPlan) -> Levers:
    """The plan's own model.precision and model.kv_cache_dtype, without speculation."""
    return Levers(plan.model.precision, plan.model.kv_cache_dtype, None, plan.model.enforce_eager)


def native_precision(model: ResolvedModel) -> str:
    return model.native_precision if model.native_precision in PRECISIONS else "bf16"


def precision_options(plan: CapacityPlan, model: ResolvedModel) -> list[str]:
    """Precisions the search tries, each checked to have a checkpoint vLLM can serve."""
    if plan.model.pins_precision:
        return [_checked(plan, model, plan.model.precision, "model.precision")]
    if plan.allowed.precisions is not None:
        return [
            _checked(plan, model, p, f"allowed.precisions[{k}]")
            for k, p in enumerate(dict.fromkeys(plan.allowed.precisions))
        ]
    native = native_precision(model)
    fp8 = native != "fp8" and published(model.id, "fp8") is not None
    return [native, "fp8"] if fp8 else [native]


def _checked(plan: CapacityPlan, model: ResolvedModel, precision: str, field: str) -> str:
    native = native_precision(model)
    if precision == "mxfp4" and not model.arch.mxfp4_native:
        raise PlanError(
            field, precision, f"{model.id} has no MXFP4 checkpoint; use bf16, fp8 or an int4"
        )
    if precision in SIXTEEN_BIT and native not in SIXTEEN_BIT:
        raise PlanError(
            field,
            precision,
            f"{model.id} is published in {native}; llmfleet serves no 16-bit copy of it",
        )
    listed = published(model.id, precision) is not None
    if precision in INT4 and precision != native and plan.model.hf_repo is None and not listed:
        raise PlanError(
            field,
            precision,
            f"the catalog lists no {precision} checkpoint of {model.id} and vLLM cannot "
            "make INT4 at load time: name one in model.hf_repo with model.precision "
            f"{precision}, or use fp8",
        )
    return precision


def kv_options(plan: CapacityPlan) -> list[str]:
    if plan.model.pins_kv_cache_dtype:
        return [plan.model.kv_cache_dtype]
    if plan.allowed.kv_cache_dtypes is not None:
        return list(dict.fromkeys(plan.allowed.kv_cache_dtypes))
    return ["auto", "fp8"]


def spec_options(plan: CapacityPlan, model: ResolvedModel, precision: str) -> list[Speculation]:
    return [resolve_spec(s, f"allowed.speculative[{k}]", model, precision)
            for k, s in enumerate(plan.allowed.speculative)]


def resolve_spec(
    spec: SpeculativeSpec, field: str, model: ResolvedModel, precision: str
) -> Speculation:
    """A plan's speculative entry resolved against the model and the catalog's defaults."""
    return resolve(
        spec.method, spec.num_speculative_tokens, spec.acceptance_rate, spec.draft_model,
        field, model.id, model.arch, precision,
    )


def lever_space(plan: CapacityPlan, model: ResolvedModel) -> list[Levers]:
    """Every lever combination, the plain one (native, auto KV, no speculation) first."""
    out: list[Levers] = []
    for precision in precision_options(plan, model):
        specs: list[Speculation | None] = [None, *spec_options(plan, model, precision)]
        for kv in kv_options(plan):
            out.extend(Levers(precision, kv, s, plan.model.enforce_eager) for s in specs)
    return out


def gpu_problem(arch: Arch, gpu: Gpu, levers: Levers) -> str | None:
    """Why vLLM cannot run these levers on this GPU as planned, or None."""
    if levers.precision == "fp8" and not gpu.has_fp8 and arch.is_moe:
        return (
            f"FP8 MoE weights need FP8 tensor cores (Ada, Hopper, Blackwell); vLLM runs FP8 "
            f"only for dense models on {gpu.architecture} (weight-only Marlin)"
        )
    if levers.kv_cache_dtype == "fp8" and not gpu.has_fp8:
        return (
            f"FP8 KV cache is planned only on GPUs with FP8 support; on {gpu.architecture} "
            "vLLM's support depends on the attention backend (vllm-project/vllm#7714)"
        )
    return None


@dataclass(frozen=True)
class Served:
    """The checkpoint a replica loads for a precision, and the bytes it downloads."""

    hf_repo: str
    quantization: str | None  # vLLM --quantization; None: the checkpoint's own
    download_bytes: float
    source: str


def served(plan: CapacityPlan, model: ResolvedModel, levers: Levers) -> Served:
    arch, precision = model.arch, levers.precision
    native = native_precision(model)
    draft = levers.spec.draft_weight_bytes() if levers.spec else 0.0
    if plan.model.hf_repo is not None or precision == native:
        dynamic = precision == "fp8" and native != "fp8"
        size = arch.weight_bytes(native if dynamic else precision)
        return Served(
            model.hf_repo, "fp8" if dynamic else None, size + draft, "the plan's checkpoint"
        )
    ckpt = published(model.id, precision)
    if ckpt is not None:
        return Served(ckpt.hf_repo, None, arch.weight_bytes(precision) + draft, ckpt.source)
    # fp8 from a 16-bit checkpoint: vLLM quantizes the weights while loading them.
    return Served(
        model.hf_repo,
        "fp8",
        arch.weight_bytes(native) + draft,
        f"no published FP8 checkpoint of {model.id}: dynamic FP8 of the native weights",
    )
