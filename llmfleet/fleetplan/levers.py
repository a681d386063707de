"""Stage 3 in the FleetPlan: per region the chosen levers (which checkpoint a replica loads
at the chosen precision, what it downloads, the speculation it runs), and the report's
levers section: weights per precision against BF16 (the seed claims FP8/AWQ "cut model
memory footprint by 50 % to 75 %"), speculative speed-up against batch size on the chosen
hardware (the seed claims 2x to 3x), and the monthly cost with each lever alone on each
region's chosen instance and TP."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.model_facts import model_default, published
from llmfleet.data import Data
from llmfleet.perf.architecture import PRECISIONS
from llmfleet.perf.speculation import Speculation, resolve
from llmfleet.perf.step import step_time
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice
from llmfleet.search.cost import on_demand_monthly_usd
from llmfleet.search.levers import Levers, native_precision, resolve_spec, served
from llmfleet.search.operating_point import Rejection
from llmfleet.search.optimizer import Sizer
from llmfleet.search.replicas import nodes_for
from llmfleet.units import GIB


class ChosenLevers(Data):
    """What the search chose beside instance and TP: the checkpoint served at a precision,
    the KV dtype, and speculative decoding with its expected tokens per target step."""

    precision: str
    kv_cache_dtype: str
    checkpoint: str = Field(description="Hugging Face repo id vLLM loads.")
    checkpoint_source: str
    download_gib: float = Field(description="Weights downloaded per replica (drafter included).")
    speculative: str | None = Field(description="Method, or None without speculation.")
    num_speculative_tokens: int | None
    acceptance_rate: float | None
    tokens_per_step: float = Field(description="Expected tokens per target step (1 without).")
    draft_model: str | None
    acceptance_source: str | None

    @property
    def label(self) -> str:
        """"fp8, KV fp8, no speculation" / "bf16, KV auto, eagle3 k=3"."""
        spec = (
            f"{self.speculative} k={self.num_speculative_tokens}"
            if self.speculative
            else "no speculation"
        )
        return f"{self.precision}, KV {self.kv_cache_dtype}, {spec}"


def build_chosen_levers(choice: Choice) -> ChosenLevers:
    lv = choice.served_levers
    ckpt = served(choice.plan, choice.model, lv)
    spec = lv.spec
    return ChosenLevers(
        precision=lv.precision,
        kv_cache_dtype=lv.kv_cache_dtype,
        checkpoint=ckpt.hf_repo,
        checkpoint_source=ckpt.source,
        download_gib=round(ckpt.download_bytes / GIB, 2),
        speculative=spec.method if spec else None,
        num_speculative_tokens=spec.k if spec else None,
        acceptance_rate=spec.acceptance_rate if spec else None,
        tokens_per_step=round(spec.tokens_per_step, 4) if spec else 1.0,
        draft_model=spec.draft_model if spec else None,
        acceptance_source=spec.source if spec else None,
    )


def download_gib(choice: Choice) -> float:
    """Weights a replica downloads and caches: the checkpoint served plus any drafter."""
    return served(choice.plan, choice.model, choice.served_levers).download_bytes / GIB


class PrecisionMemory(Data):
    precision: str
    weights_gib: float
    saved_vs_bf16: float = Field(description="Share of the BF16 weights saved (0.5 = half).")
    checkpoint: str | None = Field(description="The checkpoint served at it (None: none known).")


class SpeedupRow(Data):
    batch: int
    ms_per_token: float = Field(description="Decode-only step without speculation.")
    spec_step_ms: float = Field(description="Verify step with k + 1 tokens per sequence + draft.")
    spec_ms_per_token: float = Field(description="That step over the expected tokens per step.")
    speedup: float


class LeverCost(Data):
    region: str
    lever: str
    precision: str
    kv_cache_dtype: str
    speculative: str | None
    monthly_cost_usd: float | None = Field(description="None: infeasible on this hardware.")
    saves_usd: float | None = Field(description="Against the plain levers on the same hardware.")


class LeverReport(Data):
    seed_claim: str
    memory: list[PrecisionMemory]
    speculative_method: str | None
    num_speculative_tokens: int | None
    acceptance_rate: float | None
    tokens_per_step: float | None
    speedup_hardware: str | None
    speedup: list[SpeedupRow]
    costs: list[LeverCost]
    notes: list[str]


SPEEDUP_BATCHES = (1, 4, 16, 32, 64, 128, 256)
SEED_CLAIM = "FP8/AWQ cut model memory footprint by 50 % to 75 %; speculation 2x to 3x"


def memory_rows(model: ResolvedModel) -> list[PrecisionMemory]:
    arch = model.arch
    bf16 = arch.weight_bytes("bf16")
    rows = []
    for p in PRECISIONS:
        if p == "fp16" or (p == "mxfp4" and not arch.mxfp4_native):
            continue
        size = arch.weight_bytes(p)
        ckpt = published(model.id, p)
        repo = model.hf_repo if p == native_precision(model) else ckpt.hf_repo if ckpt else None
        rows.append(
            PrecisionMemory(
                precision=p,
                weights_gib=round(size / GIB, 2),
                saved_vs_bf16=round(1 - size / bf16, 4),
                checkpoint=repo,
            )
        )
    return rows


def _spec_for_table(plan: CapacityPlan, model: ResolvedModel, precision: str) -> Speculation | None:
    """The plan's first speculative entry, else the catalog's default for the model."""
    if plan.allowed.speculative:
        return resolve_spec(plan.allowed.speculative[0], "allowed.speculative[0]", model, precision)
    for method in ("eagle3", "mtp"):
        if model_default(model.id, method):
            return resolve(method, None, None, None, "speculative", model.id, model.arch, precision)
    return None


def speedup_rows(choice: Choice, spec: Speculation, consts: Constants) -> list[SpeedupRow]:
    """Decode-only steps at the plan's mean context, with and without speculation."""
    t = choice.plan.traffic
    ctx = t.input_tokens.mean + t.output_tokens.mean / 2
    gpu, tp, lv = hardware.gpu(choice.instance.gpu), choice.tp, choice.served_levers
    plain = replace(lv, spec=None).step_model(choice.model.arch, gpu, tp, consts)
    spec_lv = replace(lv, spec=spec)
    specd = spec_lv.step_model(choice.model.arch, gpu, tp, consts)
    rows = []
    for b in SPEEDUP_BATCHES:
        base = step_time(plain, b, ctx).total_s * 1000
        step = step_time(specd, b, ctx).total_s * 1000
        per = step / spec.tokens_per_step
        rows.append(
            SpeedupRow(
                batch=b,
                ms_per_token=round(base, 2),
                spec_step_ms=round(step, 2),
                spec_ms_per_token=round(per, 2),
                speedup=round(base / per, 3),
            )
        )
    return rows


def cost_rows(choice: Choice, sizer: Sizer) -> list[LeverCost]:
    """The chosen instance and TP with the plain levers, each lever alone, and the choice."""
    plain = sizer.levers[0]
    lv = choice.served_levers
    variants = [("none", plain)]
    if lv.precision != plain.precision:
        variants.append(("precision", replace(plain, precision=lv.precision)))
    if lv.kv_cache_dtype != plain.kv_cache_dtype:
        variants.append(("kv_cache_dtype", replace(plain, kv_cache_dtype=lv.kv_cache_dtype)))
    spec = lv.spec or next((v.spec for v in sizer.levers if v.spec), None)
    if spec is not None:  # shown even when not chosen: what speculation would cost here
        variants.append(("speculative", replace(plain, spec=spec)))
    variants.append(("chosen", lv))
    base = _cost(choice, sizer, plain)
    out = []
    for name, v in variants:
        cost = _cost(choice, sizer, v)
        saves = None if cost is None or base is None else round(base - cost, 2)
        out.append(
            LeverCost(
                region=choice.region.name,
                lever=name,
                precision=v.precision,
                kv_cache_dtype=v.kv_cache_dtype,
                speculative=v.speculative,
                monthly_cost_usd=None if cost is None else round(cost, 2),
                saves_usd=saves,
            )
        )
    return out


def _cost(choice: Choice, sizer: Sizer, levers: Levers) -> float | None:
    sized = sizer(choice.instance, choice.layout, levers)
    if isinstance(sized, Rejection):
        return None
    replicas = sizer.replicas(choice.region, sized.capacity_requests_per_s)
    nodes = nodes_for(replicas, choice.replicas_per_node, choice.nodes_per_replica)
    return on_demand_monthly_usd(nodes.desired, choice.price_usd_per_hour)


def build_lever_report(
    plan: CapacityPlan,
    model: ResolvedModel,
    choices: list[Choice],
    sizer: Sizer,
    consts: Constants,
) -> LeverReport:
    first = choices[0]
    spec = _spec_for_table(plan, model, first.served_levers.precision)
    notes = [
        "memory: weights only; FP8 and INT4 keep embeddings, norms and routers in 16-bit, so "
        "the saving is below the 50 % / 75 % of the bits alone",
        "speed-up: a decode-only step at the plan's mean context on the first region's "
        "instance and TP; the verify step multiplies k + 1 tokens per sequence, so the gain "
        "fades once the batch makes the step compute-bound",
        "the token-gap SLO sees a whole verify step between bursts of accepted tokens, so "
        "speculation lengthens the gap it bounds; it pays under slo.itl: tpot or at low load",
        "cost per lever: each region's chosen instance type and TP, re-sized with one lever "
        "moved from the plain ones (native precision, first KV dtype, no speculation)",
    ]
    speedup = speedup_rows(first, spec, consts) if spec else []
    if not spec:
        notes.append(
            f"no speculative default for {model.id}: add allowed.speculative to see "
            "the speed-up table"
        )
    hardware = f"{first.instance.instance_type} TP {first.tp} ({first.served_levers.label})"
    return LeverReport(
        seed_claim=SEED_CLAIM,
        memory=memory_rows(model),
        speculative_method=spec.method if spec else None,
        num_speculative_tokens=spec.k if spec else None,
        acceptance_rate=spec.acceptance_rate if spec else None,
        tokens_per_step=round(spec.tokens_per_step, 4) if spec else None,
        speedup_hardware=hardware if spec else None,
        speedup=speedup,
        costs=[row for c in choices for row in cost_rows(c, sizer)],
        notes=notes,
    )
