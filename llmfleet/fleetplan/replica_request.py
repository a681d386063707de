"""A region's replica as `llmfleet predict` runs it: the region's GPU, its engine arguments
(`serving.vllm`: TP, max_model_len, max_num_seqs, the token budget, the memory share, the KV
dtype, eager mode), its levers (precision, speculation) and the load one replica carries at
the region's peak, so `predict --stack ENV --region R` reproduces a plan's replica, and the
flags it prints reproduce it without the stack."""

from __future__ import annotations

import shlex
from pathlib import Path

from llmfleet.catalog import model_facts
from llmfleet.errors import PlanError, UnknownNameError
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.perf.replica import PredictRequest
from llmfleet.plan.schema import CapacityPlan


def region_of(plan: CapacityPlan, regions: list[RegionPlan], name: str | None) -> RegionPlan:
    """The region `--region` names; a one-region plan needs no name."""
    names = [r.region for r in regions]
    if name is None and len(regions) == 1:
        return regions[0]
    if name is None:
        raise PlanError("--region", None, f"{plan.name} has {len(names)} regions: name one of "
                        f"{', '.join(names)}")
    if name not in names:
        raise UnknownNameError("--region", str(name), f"region of {plan.name}", names)
    return regions[names.index(name)]


def replica_request(plan: CapacityPlan, rp: RegionPlan) -> PredictRequest:
    """The region's replica at its peak load per replica (open loop, the plan's mean
    lengths)."""
    vllm, lv = rp.serving.vllm, rp.levers
    spec = lv.speculative if lv else None
    return PredictRequest(
        model=plan.model.id or str(plan.model.config_path),
        gpu=rp.gpu,
        tensor_parallel_size=vllm.tensor_parallel_size,
        precision=lv.precision if lv else plan.model.precision,
        kv_cache_dtype="fp8" if vllm.kv_cache_dtype == "fp8" else "auto",
        input_tokens=plan.traffic.input_tokens.mean,
        output_tokens=plan.traffic.output_tokens.mean,
        request_rate=rp.predicted.requests_per_s_at_peak or None,
        gpu_memory_utilization=vllm.gpu_memory_utilization,
        max_model_len=vllm.max_model_len,
        max_num_seqs=vllm.max_num_seqs,
        max_num_batched_tokens=vllm.max_num_batched_tokens,
        enforce_eager=bool(vllm.enforce_eager),
        speculative_method=spec,
        num_speculative_tokens=lv.num_speculative_tokens if lv and spec else None,
        acceptance_rate=lv.acceptance_rate if lv and spec else None,
        draft_model=lv.draft_model if lv and spec else None,
    )


def model_config(plan: CapacityPlan, base_dir: Path) -> dict[str, object] | None:
    """The plan's config.json (None for a catalog model)."""
    if plan.model.config_path is None:
        return None
    return model_facts.load_config_json(base_dir / plan.model.config_path)


FLAG_ORDER = (
    "model",
    "gpu",
    "tensor_parallel_size",
    "precision",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "input_tokens",
    "output_tokens",
    "request_rate",
    "speculative_method",
    "num_speculative_tokens",
    "acceptance_rate",
    "draft_model",
)


def predict_command(req: PredictRequest) -> str:
    """`llmfleet predict ...` with the flags that reproduce `req`."""
    words = ["llmfleet", "predict"]
    for name in FLAG_ORDER:
        value = getattr(req, name)
        if value is not None:
            words += ["--" + name.replace("_", "-"), f"{value:g}" if isinstance(value, float)
                      else str(value)]
    if req.enforce_eager:
        words.append("--enforce-eager")
    return " ".join(shlex.quote(w) for w in words)
