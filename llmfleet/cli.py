"""Command line: parse, call the core, print. User errors exit 2 without a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmfleet import paths
from llmfleet.calibration import fit
from llmfleet.calibration.band import shipped_band as held_out_band
from llmfleet.calibration.fit import fit_all, held_out_by_architecture, leave_one_source_out
from llmfleet.calibration.measurements import load_measurements, regime_of
from llmfleet.calibration.prefix_runs import prefix_caching_report, prefix_caching_text
from llmfleet.calibration.report import summarize, validation_report
from llmfleet.calibration.rows import predict_rows
from llmfleet.calibration.server_calibration import (
    Covered,
    ServerCalibration,
    calibrate_server,
    current,
    dumps,
    mismatch,
    read_calibration,
    untested_length,
)
from llmfleet.calibration.server_fit import Server
from llmfleet.catalog import constants, hardware, model_facts
from llmfleet.catalog.constants import fitted, priors
from llmfleet.catalog.kubernetes import support_notice
from llmfleet.cli_parser import build_parser
from llmfleet.drill import drill, drill_text, parse_lost
from llmfleet.errors import ArgumentError, CalibrationError, LlmfleetError, PlanError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan, sizing_constants
from llmfleet.fleetplan.peak_check import outside_slo
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
from llmfleet.gc_pause import gc_paused
from llmfleet.outputs import render, rendered_files
from llmfleet.outputs.console import calibration_text, fleet_text, predict_text, validation_text
from llmfleet.outputs.deploy_order import deploy_order, deploy_order_text
from llmfleet.outputs.diff import before_after_charts
from llmfleet.outputs.diff.compare import diff_plans
from llmfleet.outputs.diff.markdown import charts_section, markdown
from llmfleet.outputs.render import VLLM_CONFIG
from llmfleet.outputs.simulation import simulation_text
from llmfleet.perf.architecture import check_config
from llmfleet.perf.memory import MemoryBudget
from llmfleet.perf.replica import PredictRequest, PredictResult, predict_served
from llmfleet.perf.step import NO_CORRECTION, StepModel
from llmfleet.plan import stacks
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import (
    format_validation_error,
    list_stacks,
    read_plan,
    read_plan_file,
    stack_arg,
    stack_file_config,
)
from llmfleet.simulate.run import report_simulation, simulate
from llmfleet.simulate.scenario import DEFAULT_SPIKE_MINUTES, scenario_from_args


def _dump(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def today() -> date:
    """The day a running fleet is warned against (the core never reads the clock)."""
    return date.today()


def warn_support(fp: FleetPlan) -> None:
    """On stderr, when the fleet's Kubernetes version leaves EKS standard support within the
    margin of today (catalog.kubernetes.support_notice)."""
    notice = support_notice(fp.kubernetes_version, fp.kubernetes_support, today())
    if notice:
        sys.stderr.write(f"warning: {notice}\n")


def _plan_of(args: argparse.Namespace) -> CapacityPlan:
    """The plan of `--stack` (a name, or a stack file's path: `_stack_names`)."""
    if args.stack_file is None:
        return read_plan(args.stack)
    return read_plan_file(args.stack_file)


def _stack_names(args: argparse.Namespace) -> None:
    """`--stack NAME` or `--stack PATH/Pulumi.NAME.yaml`: every command takes either. Sets
    `args.stack` to the name and `args.stack_file` to the file given (None: stacks/NAME's)."""
    args.stack_file = None
    if getattr(args, "stack", None):
        args.stack, args.stack_file = stack_arg(args.stack, paths.STACKS_DIR)


def cmd_plan(args: argparse.Namespace) -> int:
    fp = build_fleet_plan(_plan_of(args))
    sys.stdout.write(_dump(fp.model_dump(mode="json")) if args.json else fleet_text(fp))
    warn_support(fp)
    outside = outside_slo(fp)
    for line in outside:
        sys.stderr.write(f"plan: the SLO does not hold: {line}\n")
    return 1 if outside else 0


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


def cmd_drill(args: argparse.Namespace) -> int:
    plan = _plan_of(args)
    report = drill(plan, parse_lost(plan, args.lose), environment=args.stack)
    sys.stdout.write(_dump(report.model_dump(mode="json")) if args.json else drill_text(report))
    return 0 if report.passed else 1


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.spike_minutes is not None and args.spike is None:
        raise PlanError("--spike-minutes", args.spike_minutes, "give it with --spike PCT@HH:MM")
    if args.seed < 0:
        raise PlanError("--seed", args.seed, "give a seed of 0 or more")
    plan = _plan_of(args)
    scenario = scenario_from_args(
        plan,
        day=args.day,
        spike=args.spike,
        spike_minutes=args.spike_minutes or DEFAULT_SPIKE_MINUTES,
        lose=args.lose,
        seed=args.seed,
    )
    result = simulate(plan, build_fleet_plan(plan), scenario, args.stack)
    text = _dump(result.model_dump(mode="json")) if args.json else simulation_text(result)
    sys.stdout.write(text)
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    plan = _plan_of(args)
    folder = paths.STACKS_DIR if args.stack_file is None else args.stack_file.parent
    present = stacks.list_stack_files(folder) if folder.is_dir() else []
    order = deploy_order(args.stack, plan, build_fleet_plan(plan), present)
    sys.stdout.write(
        _dump(order.model_dump(mode="json")) if args.json else deploy_order_text(order)
    )
    return 0


def _config(args: argparse.Namespace) -> dict[str, object] | None:
    """--model's config.json when it names one (None: a catalog model)."""
    config = None
    if args.model.endswith(".json") or Path(args.model).is_file():
        config = model_facts.load_config_json(Path(args.model), "--model")
        check_config(config, args.model, "--model")
        return config
    return None


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


def cmd_predict(args: argparse.Namespace) -> int:
    header, replica = "", None
    if args.stack:
        req, config, header, replica, cal_path, confidence = _plan_replica(args)
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
        result = result.model_copy(update={"ranges": band_ranges(result, shipped_band(req))})
    sys.stdout.write(
        _dump(result.model_dump(mode="json")) if args.json else header + predict_text(result)
    )
    return 0


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
    config = None
    if args.model.endswith(".json") or Path(args.model).is_file():
        config = model_facts.load_config_json(Path(args.model), "--model")
        check_config(config, args.model, "--model")
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
    args: argparse.Namespace,
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
    plan = _plan_of(args)
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
    return band_ranges(result, {**shipped_band(req), **cal.ranges})


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


def shipped_band(req: PredictRequest) -> dict[str, dict[str, float]]:
    """The shipped band for a request's regime of load (a burst of every prompt at once has
    its own; a steady state, low load or an offline run the one plans are sized with)."""
    consts = fitted()
    if regime_of(req) == "burst":
        return consts.uncertainty_by_regime.get("burst", consts.uncertainty)
    return consts.band(hardware.gpu(req.gpu).architecture)


def cmd_preview(args: argparse.Namespace) -> int:
    with gc_paused():  # also while importing components/ (the Pulumi SDKs): see gc_pause
        # components/ holds the Pulumi code; the pure core imports it only for this command.
        from components.preview.run import run_program
        from components.preview.split import split_commands
        from components.preview.text import format_findings

        if args.stack_file is not None and (args.split or args.from_source):
            raise ArgumentError(
                f"preview --{'split' if args.split else 'from'} reads the stack's region stacks "
                f"and history from stacks/: give the stack by name (copy its file to "
                f"stacks/Pulumi.{args.stack}.yaml)"
            )
        if args.split:
            sys.stdout.write("\n".join(split_commands(args.stack)) + "\n")
            return 0
        if args.from_source:
            return _preview_change(args)
        config = None if args.stack_file is None else stack_file_config(args.stack_file)
        result = run_program(args.stack, config)
        findings = [] if args.no_checks else result.findings()
    sys.stdout.write(_dump(result.resources) if args.json else result.text())
    warn_support(result.fleet_plan)
    if findings:
        sys.stderr.write(format_findings(findings))
        return 1
    return 0


def _preview_change(args: argparse.Namespace) -> int:
    """`preview --from`: the change from a revision or a file to now (docs/preview.md)."""
    from components.preview.change_report import change_from
    from components.preview.text import format_findings

    change, resources, result = change_from(args.stack, args.from_source, args.allow_replace)
    findings = [] if args.no_checks or result is None else result.findings()
    if not args.no_checks:
        findings += change.findings
    if args.json:
        sys.stdout.write(_dump(change.annotate(resources)))
    else:
        sys.stdout.write((f"{result.part}\n" if result is not None and result.part else "")
                         + change.text())
    if findings:
        sys.stderr.write(format_findings(findings))
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    loaded = load_measurements(Path(args.measurements))
    report = validation_report(loaded, fitted(), priors(), loso=not args.no_loso)
    if not args.no_loso:
        report["risk_at_p90"] = risk_at_p90()
    report["prefix_caching"] = prefix_caching_report(paths.PREFIX_CACHING_CSV)
    text = "" if args.json else validation_text(report) + "\n".join(
        prefix_caching_text(report["prefix_caching"])) + "\n"
    sys.stdout.write(_dump(report) if args.json else text)
    return 0


def risk_at_p90() -> dict[str, dict[str, dict[str, float | None]]]:
    """Per stack and region: what the chosen configuration costs sized at the p90 end of
    the band (`fleetplan.risk`), against the plan: the price of the model's uncertainty."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for env in list_stacks():
        fp = build_fleet_plan(read_plan(env))
        out[env] = {}
        for r in fp.regions:
            at = r.risk.pessimistic_monthly_cost_usd
            plan_usd = r.on_demand_monthly_cost_usd  # like for like: risk sizes on demand
            out[env][r.region] = {
                "monthly_cost_usd": r.billed_monthly_cost_usd,
                "on_demand_monthly_cost_usd": plan_usd,
                "at_p90_monthly_cost_usd": at,
                "at_p90_over_plan": round(at / plan_usd, 3) if at is not None and plan_usd
                else None,
            }
    return out


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.bench:
        return calibrate_bench(args)
    if args.out:
        raise ArgumentError("--out writes a server's calibration: give its runs with --bench")
    loaded = load_measurements(Path(args.measurements))
    prior = constants.priors()
    fitted = fit_all(loaded.rows, prior)
    # Ranges come from held-out errors: a plan's model and GPU are usually not the rows'.
    held_out = leave_one_source_out(loaded.rows, prior)
    band = held_out_band(loaded.rows, held_out, held_out_by_architecture(loaded.rows, prior))
    for name, consts in (("prior", prior), ("fitted", fitted)):
        stats = summarize(p for p in predict_rows(loaded.rows, consts) if p.engine == "vllm")
        line = ", ".join(f"{m} {s['median_ape']:.1f}%" for m, s in stats.items())
        print(f"{name}: median abs error on vLLM rows: {line}")
    text = fit.render(constants.document(), fitted, band)
    if args.write:
        constants.PATH.write_text(text)
        print(f"wrote {constants.PATH}")
    else:
        sys.stdout.write(text)
    return 0


def calibrate_bench(args: argparse.Namespace) -> int:
    """`calibrate --bench FILE... --out FILE`: one server's correction from its own runs."""
    missing = [flag for flag, value in (("--model", args.model), ("--gpu", args.gpu),
                                        ("--out", args.out)) if not value]
    if missing:
        raise ArgumentError(f"calibrate --bench needs {', '.join(missing)}")
    if args.write:
        raise ArgumentError("--write refits the shipped constants; with --bench give --out")
    config = _config(args)
    server = server_from_args(args, config)
    cal = calibrate_server(server, [Path(b) for b in args.bench], fitted(), config)
    Path(args.out).write_text(dumps(cal))
    sys.stdout.write(calibration_text(cal) + f"wrote {args.out}\n")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else paths.RENDERED_DIR
    envs = [args.stack] if args.stack else list_stacks()
    drifted: list[str] = []
    for env in envs:
        root = out / env
        # `--check` draws every chart; a write keeps those whose stamp still matches.
        drawn = {} if args.check else render.drawn_charts(root)
        plan = _plan_of(args) if args.stack else read_plan(env)
        fleet = build_fleet_plan(plan)
        files = render.render_stack(fleet, drawn, report_simulation(plan, fleet, fleet.name))
        if args.check:
            drifted += rendered_files.drift(files, root).lines(root)
        else:
            sys.stdout.write(rendered_files.write(files, root).report(root))
    if args.check and not args.stack and out.is_dir():
        drifted += [f"extra: {d}" for d in sorted(out.iterdir()) if d.name not in envs]
    if drifted:
        lines = "\n  ".join(drifted)
        print(f"rendered files differ; run `llmfleet render`:\n  {lines}", file=sys.stderr)
        return 1
    if args.check:
        print(f"{out}: up to date for {', '.join(envs)}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    base, head = stacks.plan_source(args.base), stacks.plan_source(args.head)
    before, after = build_fleet_plan(base.plan), build_fleet_plan(head.plan)
    d = diff_plans(base.label, before, head.label, after)
    change = _resource_change(args) if args.resources else None
    if args.json:
        data = d.model_dump(mode="json")
        if change is not None:
            data["resources"] = change.summary()
        text = _dump(data)
    else:
        text = markdown(d) + (change.markdown() if change is not None else "")
    if args.charts:
        folder = Path(args.charts)
        files = before_after_charts.chart_files(before, after, base.label, head.label)
        _write_charts(files, folder)
        if not args.json:
            links = [(t, (folder / name).as_posix())
                     for t, name in before_after_charts.chart_titles(files)]
            text += charts_section(links) + "\n"
    sys.stdout.write(text)
    return 1 if change is not None and change.findings else 0


def _resource_change(args: argparse.Namespace) -> Any:
    """`diff --resources`: the program run for both sides under mocks (preview --from)."""
    with gc_paused():
        from components.preview.change_report import resource_change

        return resource_change(args.base, args.head, args.allow_replace)


def _write_charts(files: dict[str, str], folder: Path) -> None:
    """Write the diff's charts (only those files: the folder may hold others)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    except OSError as e:
        raise ArgumentError(
            f"--charts: cannot write {e.filename or folder} ({e.strerror}); give a directory "
            "you can write to"
        ) from None


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "calibrate": cmd_calibrate,
    "diff": cmd_diff,
    "drill": cmd_drill,
    "plan": cmd_plan,
    "predict": cmd_predict,
    "preview": cmd_preview,
    "render": cmd_render,
    "rollout": cmd_rollout,
    "simulate": cmd_simulate,
    "validate": cmd_validate,
}


def parser() -> argparse.ArgumentParser:
    return build_parser(HANDLERS, __doc__)


def main(argv: Sequence[str] | None = None, *, ends_process: bool = False) -> int:
    """Run one command. `ends_process`: the interpreter exits after it (`python -m llmfleet`,
    the `llmfleet` script), so the command runs without cycle collections and what it
    allocated is frozen, not walked, before exit (gc_pause: render of prod 3.4 -> 2.2 s)."""
    args = parser().parse_args(argv)
    try:
        _stack_names(args)
        with gc_paused(until_exit=True) if ends_process else nullcontext():
            code: int = args.func(args)
        return code
    except LlmfleetError as e:
        print(f"llmfleet: error: {e}", file=sys.stderr)
        return 2


def entry() -> int:
    """The `llmfleet` console script."""
    return main(ends_process=True)
