"""`llmfleet predict`: its request from the flags or from a plan's replica record
(`--stack`), the prediction with its band, and the server the flags describe (which
`calibrate --bench` reads too)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError

from llmfleet import paths
from llmfleet.calibration.measurements import regime_of
from llmfleet.calibration.server_calibration import (
    Covered,
    ServerCalibration,
    current,
    mismatch,
    read_calibration,
    untested_length,
)
from llmfleet.calibration.server_fit import Server
from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import fitted
from llmfleet.errors import ArgumentError, CalibrationError, PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan, sizing_constants
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.replica_record import step_model_of
from llmfleet.fleetplan.replica_request import (
    at_peak,
    model_config,
    predict_command,
    region_of,
    replica_request,
)
from llmfleet.fleetplan.risk import calibrated_slowdown, for_architecture
from llmfleet.outputs.render import VLLM_CONFIG
from llmfleet.perf.architecture import check_config
from llmfleet.perf.memory import MemoryBudget
from llmfleet.perf.replica import PredictRequest, PredictResult, predict_served
from llmfleet.perf.step import NO_CORRECTION, StepModel
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import format_validation_error


def as_flag(field: str) -> str:
    """A field the core names, as the `predict` flag that sets it: tensor_parallel_size ->
    --tensor-parallel-size; model.precision (the plan's word) -> --precision;
    --speculative.draft_model (a speculative entry checked for predict) -> --draft-model.
    A config.json key (`config.json:head_dim`) is named as it is in the file."""
    if ":" in field:
        return field
    name = field.removeprefix("--")
    for prefix in ("speculative.", "model."):
        name = name.removeprefix(prefix)
    return "--" + name.replace("_", "-")


def config_json(args: argparse.Namespace) -> dict[str, object] | None:
    """--model's config.json when it names one (None: a catalog model)."""
    if not (args.model.endswith(".json") or Path(args.model).is_file()):
        return None
    config = model_facts.load_config_json(Path(args.model), "--model")
    check_config(config, args.model, "--model")
    return config


def server_from_args(args: argparse.Namespace, config: dict[str, object] | None) -> Server:
    """The server the flags describe (calibrate --bench)."""
    return server_of(vars(args), config)


def server_of(values: dict[str, object], config: dict[str, object] | None) -> Server:
    """A server from flag values, with catalog names spelled as the catalog does."""
    name = str(values["model"])
    model = name if config is not None else model_facts.model_entry(name, "--model").id
    fields = {k: values.get(k) for k in Server.model_fields if k not in ("model", "gpu")}
    try:
        return Server.model_validate(
            {**{k: v for k, v in fields.items() if v is not None}, "model": model,
             "gpu": hardware.gpu(str(values["gpu"]), "--gpu").gpu}
        )
    except ValidationError as e:
        raise ArgumentError(
            "invalid server arguments:\n" + format_validation_error(e, as_flags=True)
        ) from None


ENGINE_DEFAULTS = {
    "engine": "vllm",
    "tensor_parallel_size": 1,
    "precision": "bf16",
    "kv_cache_dtype": "auto",
    "gpu_memory_utilization": 0.9,
    "pipeline_parallel_size": 1,
    "data_parallel_size": 1,
}
"""predict's defaults for the engine flags (None in the parser, so `--stack` can tell a flag
given from one left out)."""
PLAN_SETS = (
    "model",
    "gpu",
    *ENGINE_DEFAULTS,
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "speculative_method",
    "num_speculative_tokens",
    "acceptance_rate",
    "draft_model",
    "enforce_eager",
    "engine_version",
    "hf_repo",
    "enable_expert_parallel",
    "instance_type",
    "inter_node",
    "calibration",
    "confidence",
)
"""Flags `predict --stack` takes from the plan's replica; the load flags may still be given."""
LOAD_FLAGS = ("input_tokens", "output_tokens", "concurrency", "request_rate", "num_requests")
FLEET_FLAGS = ("replicas", "turns", "shared_prefix_tokens", "think_time_s", "router_replicas")
"""predict's fleet behind one entry point (with --balancing): perf.load.ReplicaGroup."""


def _calibration(
    path: Path, req: PredictRequest, config: dict[str, object] | None, hf_repo: str | None
) -> ServerCalibration:
    """--calibration's file, refused unless it calibrates the server predicted."""
    cal = read_calibration(path)
    if config is not None and hf_repo is None:
        raise ArgumentError(
            f"--calibration {path} with a config.json --model: give --hf-repo ORG/NAME, the "
            f"checkpoint served (the calibration is for {cal.server.hf_repo or cal.server.model})"
        )
    why = mismatch(cal, server_of({**req.model_dump(), "hf_repo": hf_repo}, config))
    if why:
        raise CalibrationError(f"--calibration {path}: {why}")
    return current(cal, fitted(), config)


def _flag_request(args: argparse.Namespace) -> tuple[PredictRequest, dict[str, object] | None]:
    missing = [f"--{n.replace('_', '-')}" for n in ("model", "gpu", "input_tokens",
               "output_tokens") if getattr(args, n) is None]
    if missing:
        raise ArgumentError(
            f"predict needs {', '.join(missing)}; or give --stack ENV [--region R] to predict "
            "a plan's own replica"
        )
    config = config_json(args)
    values = {k: getattr(args, k) if getattr(args, k) is not None else v
              for k, v in ENGINE_DEFAULTS.items()}
    return _request(args, dict(model=args.model, gpu=args.gpu, **values)), config


def _request(args: argparse.Namespace, fields: dict[str, object]) -> PredictRequest:
    load = {n: getattr(args, n) for n in LOAD_FLAGS}
    try:
        return PredictRequest.model_validate(
            {
                "max_model_len": args.max_model_len,
                "max_num_seqs": args.max_num_seqs,
                "max_num_batched_tokens": args.max_num_batched_tokens,
                "speculative_method": args.speculative_method,
                "num_speculative_tokens": args.num_speculative_tokens,
                "acceptance_rate": args.acceptance_rate,
                "draft_model": args.draft_model,
                "enforce_eager": args.enforce_eager,
                "engine_version": args.engine_version,
                "enable_expert_parallel": args.enable_expert_parallel,
                "instance_type": args.instance_type,
                **({"inter_node": args.inter_node} if args.inter_node else {}),
                **{k: getattr(args, k) for k in FLEET_FLAGS if getattr(args, k, None) is not None},
                **({"balancing": args.balancing.replace("-", "_")}
                   if getattr(args, "balancing", None) else {}),
                **fields,
                **{k: v for k, v in load.items() if v is not None or k not in fields},
                "num_requests": args.num_requests,
                "output_lengths": args.output_lengths,
            }
        )
    except ValidationError as e:
        raise ArgumentError(
            "invalid predict arguments:\n" + format_validation_error(e, as_flags=True)
        ) from None


def _plan_replica(
    args: argparse.Namespace, plan: CapacityPlan
) -> tuple[
    PredictRequest, dict[str, object] | None, str, tuple[StepModel, MemoryBudget], str | None,
    str,
]:
    """`predict --stack ENV --region R`: the plan's replica record (its step model, memory and
    engine flags), the load at the region's peak per replica unless the load flags say
    otherwise; and the calibration file and confidence it was sized with."""
    given = [n for n in PLAN_SETS if getattr(args, n) not in (None, False)]
    if given:
        flag = as_flag(given[0])
        raise ArgumentError(
            f"{flag}: predict --stack takes it from the plan's replica; drop {flag}, or drop "
            "--stack and give every flag (the command printed with --stack lists them)"
        )
    fp = build_fleet_plan(plan)
    rp = region_of(plan, fp.regions, args.region)
    model = resolve_model(plan, paths.PROJECT_ROOT)
    base = replica_request(plan, rp)
    fields = base.model_dump(exclude_unset=True)
    if args.concurrency is not None:
        fields.pop("request_rate", None)
    req = _request(args, fields)
    cal_path = rp.replica.step.correction.calibration
    p = rp.predicted
    ttft_ms, itl_ms = at_peak(plan, rp, model)
    header = (
        f"{fp.name} {rp.region}: {rp.instance_type} ({rp.gpus_per_node} x {rp.gpu}), the "
        f"replica of rendered/{args.stack}/{rp.region}/{VLLM_CONFIG} at "
        + (
            f"the region's peak, {p.requests_per_s_at_peak:g} req/s per replica"
            if args.concurrency is None and args.request_rate is None
            else "the load given"
        )
        + f"\n  its replica record at the plan's peak: TTFT p{fp.slo.percentile:g} {ttft_ms:g} ms "
        f"for a {p.ttft_prompt_tokens:,}-token prompt, ITL ({fp.slo.itl}) {itl_ms:g} ms; "
        "predict below runs mean-length requests, so its TTFT and ITL are means\n"
        + _pools_line(rp)
        + f"  reproduce without the stack: {predict_command(req, cal_path, fp.confidence)}\n"
    )
    replica = (step_model_of(rp.replica, model), rp.replica.memory)
    return req, model_config(plan, paths.PROJECT_ROOT), header, replica, cal_path, fp.confidence


def _pools_line(rp: RegionPlan) -> str:
    """A disaggregated region: which pool predict runs, and the prefill pool's record."""
    pre = rp.replica.prefill
    if pre is None:
        return ""
    return (
        f"  disaggregated: the TTFT above is the prefill pool's (TP "
        f"{pre.layout.tensor_parallel_size}, {pre.capacity_requests_per_s:.2f} prompts/s a "
        f"replica, the KV over {pre.kv_link.name.upper()}); predict below runs "
        "the decode pool's engine, and prefills its prompts beside the decodes as an "
        "aggregated engine would, which the decode pool never does\n"
    )


def calibrated_ranges(
    result: PredictResult, cal: ServerCalibration, req: PredictRequest
) -> dict[str, tuple[float, float]]:
    """Where the measured value is expected: the prediction times the calibration's band,
    the shipped one for the metrics its runs cannot test."""
    return band_ranges(result, {**request_band(req), **cal.ranges})


def band_ranges(
    result: PredictResult, band: dict[str, dict[str, float]]
) -> dict[str, tuple[float, float]]:
    """The prediction times a band of measured/predicted (p10, p90) per metric."""
    values = {"ttft_ms": result.ttft_ms, "itl_ms": result.itl_ms}
    values["output_tokens_per_s"] = result.output_tokens_per_s
    return {
        m: (round(v * band[m]["p10"], 2), round(v * band[m]["p90"], 2))
        for m, v in sorted(values.items())
        if v is not None and m in band
    }


def request_band(req: PredictRequest) -> dict[str, dict[str, float]]:
    """The shipped band for a request's regime of load (a burst of every prompt at once has
    its own; a steady state, low load or an offline run the one plans are sized with)."""
    consts = fitted()
    if regime_of(req) == "burst":
        return consts.uncertainty_by_regime.get("burst", consts.uncertainty)
    return consts.band(hardware.gpu(req.gpu).architecture)


def predicted(args: argparse.Namespace, plan: CapacityPlan | None
              ) -> tuple[str, PredictResult]:
    """`predict`'s result and the header that says where its request came from: the flags,
    or with `plan` (`--stack`) the plan's replica record."""
    header, replica = "", None
    if plan is not None:
        req, config, header, replica, cal_path, confidence = _plan_replica(args, plan)
    else:
        req, config = _flag_request(args)
        cal_path, confidence = args.calibration, args.confidence or "expected"
    cal = None
    if cal_path:  # a plan names its files from the project's root
        where = paths.PROJECT_ROOT / cal_path if args.stack else Path(cal_path)
        cal = _calibration(where, req, config, args.hf_repo)
    consts = sizing_constants(confidence, fitted())
    correction = NO_CORRECTION
    if cal is not None:
        covered = Covered(str(cal_path), cal)
        slow = calibrated_slowdown(consts)(covered) if confidence == "pessimistic" else 1.0
        correction = covered.correction(slow)
    elif confidence == "pessimistic":  # the p90 of the band of the GPU's architecture
        consts = for_architecture(consts, hardware.gpu(req.gpu).architecture)
    try:
        result = predict_served(req, config, correction, replica, consts)
    except PlanError as e:  # the core names request fields; the user typed flags
        raise PlanError(as_flag(e.field), e.value, e.hint) from None
    if cal is not None:
        result = result.model_copy(
            update={
                "calibration": cal_path,
                "ranges": calibrated_ranges(result, cal, req),
                "calibration_warning": untested_length(
                    cal, req.input_tokens, req.output_tokens
                ),
            }
        )
    else:  # the shipped band, held out by source: every prediction carries where it may land
        result = result.model_copy(update={"ranges": band_ranges(result, request_band(req))})
    return header, result
