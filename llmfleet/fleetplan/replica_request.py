"""A region's replica as `llmfleet predict` runs it: its replica record's GPU, node, layout
(TP, PP, DP, EP), levers (precision, KV dtype, speculation, eager mode) and engine arguments
(max_model_len, max_num_seqs, the token budget, the memory share), at the load one replica
carries at the region's peak, so `predict --stack ENV --region R` reproduces a plan's
replica, and the flags it prints reproduce it without the stack."""

from __future__ import annotations

import shlex
from pathlib import Path

from llmfleet.catalog import model_facts
from llmfleet.errors import PlanError, UnknownNameError
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.replica_record import slo_at
from llmfleet.perf.prefix_cache import ROUTER_REPLICAS
from llmfleet.perf.replica import PredictRequest
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.prefix_hold import balancing_of


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
    lengths), from its replica record: GPU, node, layout, levers and engine arguments."""
    rec = rp.replica
    lay, step = rec.layout, rec.step
    spec = step.speculation
    per_replica = rp.predicted.requests_per_s_at_peak or None
    return PredictRequest(
        **_fleet_fields(plan, rp, per_replica),
        model=plan.model.id or str(plan.model.config_path),
        gpu=step.gpu.gpu,
        tensor_parallel_size=lay.tensor_parallel_size,
        pipeline_parallel_size=lay.pipeline_parallel_size,
        data_parallel_size=lay.data_parallel_size,
        enable_expert_parallel=lay.expert_parallel,
        instance_type=lay.instance_type,
        inter_node="tcp" if lay.inter_node is not None and lay.inter_node.name == "tcp"
        else "efa",
        precision=step.precision,
        kv_cache_dtype="fp8" if step.kv_cache_dtype == "fp8" else "auto",
        input_tokens=plan.traffic.input_tokens.mean,
        output_tokens=plan.traffic.output_tokens.mean,
        gpu_memory_utilization=rec.gpu_memory_utilization,
        max_model_len=rec.memory.max_model_len,
        max_num_seqs=rec.max_num_seqs,
        max_num_batched_tokens=rec.max_num_batched_tokens,
        enforce_eager=step.enforce_eager,
        speculative_method=spec.method if spec else None,
        num_speculative_tokens=spec.num_speculative_tokens if spec else None,
        acceptance_rate=spec.acceptance_rate if spec else None,
        draft_model=spec.draft_model if spec else None,
    )


def _fleet_fields(plan: CapacityPlan, rp: RegionPlan, per_replica: float | None
                  ) -> dict[str, object]:
    """The load: the peak per replica; a replica sized with a prefix cache is one of the
    region's replicas behind its balancing (the region's peak over them), its traffic's
    reuse as the plan gives it (`predict`'s fleet flags)."""
    if rp.replica.prefix_cache is None or per_replica is None:
        return {"request_rate": per_replica}
    t = plan.traffic
    balancing = balancing_of(plan)
    return {
        "request_rate": per_replica * rp.replicas.desired,
        "replicas": rp.replicas.desired,
        "balancing": balancing,
        "turns": t.turns,
        "shared_prefix_tokens": t.shared_prefix_tokens,
        "think_time_s": t.think_time_s,
        "router_replicas": ROUTER_REPLICAS if balancing == "prefix_aware" else 1,
    }


def at_peak(plan: CapacityPlan, rp: RegionPlan, model: ResolvedModel) -> tuple[float, float]:
    """(TTFT at the SLO percentile, ITL as slo.itl reads it), ms, of the region's replica at
    its peak, from its replica record alone: what the FleetPlan's `predicted` holds."""
    region = next(r for r in plan.regions if r.name == rp.region)
    peak = plan.traffic.peak_requests_per_s * region.traffic_share
    split = rp.disaggregation
    per_prefill = peak / split.prefill.replicas.desired if split else 0.0
    point, pair = slo_at(rp.replica, plan, model, peak / rp.replicas.desired, per_prefill)
    ttft_s = pair.ttft_at() if pair else point.ttft_at()
    return round(ttft_s * 1000, 1), round(point.itl_s(plan.slo.itl) * 1000, 2)


def model_config(plan: CapacityPlan, base_dir: Path) -> dict[str, object] | None:
    """The plan's config.json (None for a catalog model)."""
    if plan.model.config_path is None:
        return None
    return model_facts.load_config_json(base_dir / plan.model.config_path)


FLAG_ORDER = (
    "model",
    "gpu",
    "instance_type",
    "inter_node",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "precision",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "input_tokens",
    "output_tokens",
    "request_rate",
    "replicas",
    "balancing",
    "turns",
    "shared_prefix_tokens",
    "think_time_s",
    "router_replicas",
    "speculative_method",
    "num_speculative_tokens",
    "acceptance_rate",
    "draft_model",
)
SWITCHES = ("enable_expert_parallel", "enforce_eager")
UNLESS_ONE = ("pipeline_parallel_size", "data_parallel_size", "replicas", "turns",
              "router_replicas")
"""Flags left out at their default of 1."""
UNLESS_DEFAULT = {"inter_node": "efa", "balancing": "least_outstanding",
                  "shared_prefix_tokens": 0, "think_time_s": 60.0}
"""Flags left out at their default."""


def predict_command(
    req: PredictRequest, calibration: str | None = None, confidence: str = "expected"
) -> str:
    """`llmfleet predict ...` with the flags that reproduce `req` (and the calibration file
    and confidence the plan sized the replica with)."""
    words = ["llmfleet", "predict"]
    for name in FLAG_ORDER:
        value = getattr(req, name)
        if value is not None and not (name in UNLESS_ONE and value == 1) \
                and UNLESS_DEFAULT.get(name) != value:
            text = f"{value:g}" if isinstance(value, float) else str(value)
            words += ["--" + name.replace("_", "-"),
                      text.replace("_", "-") if name == "balancing" else text]
    words += ["--" + name.replace("_", "-") for name in SWITCHES if getattr(req, name)]
    if calibration is not None:
        words += ["--calibration", calibration]
    if confidence != "expected":
        words += ["--confidence", confidence]
    return " ".join(shlex.quote(w) for w in words)
