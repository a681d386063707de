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

from llmfleet import paths
from llmfleet.calibration import fit
from llmfleet.calibration.band import shipped_band as held_out_band
from llmfleet.calibration.fit import fit_all, held_out_by_architecture, leave_one_source_out
from llmfleet.calibration.measurements import load_measurements
from llmfleet.calibration.prefix_runs import prefix_caching_report, prefix_caching_text
from llmfleet.calibration.report import summarize, validation_report
from llmfleet.calibration.rows import predict_rows
from llmfleet.calibration.server_calibration import (
    calibrate_server,
    dumps,
)
from llmfleet.catalog import constants
from llmfleet.catalog.constants import fitted, priors
from llmfleet.catalog.kubernetes import support_notice
from llmfleet.cli_parser import build_parser
from llmfleet.cli_predict import config_json, predicted, server_from_args
from llmfleet.drill import drill, drill_text, parse_lost
from llmfleet.errors import ArgumentError, LlmfleetError, PlanError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.peak_check import outside_slo
from llmfleet.gc_pause import gc_paused
from llmfleet.outputs import render, rendered_files
from llmfleet.outputs.console import calibration_text, fleet_text, predict_text, validation_text
from llmfleet.outputs.deploy_order import deploy_order, deploy_order_text
from llmfleet.outputs.diff import before_after_charts
from llmfleet.outputs.diff.compare import diff_plans
from llmfleet.outputs.diff.markdown import charts_section, markdown
from llmfleet.outputs.simulation import simulation_text
from llmfleet.plan import stacks
from llmfleet.plan.schema import CapacityPlan
from llmfleet.plan.stacks import (
    list_stacks,
    read_plan,
    read_plan_file,
    stack_arg,
    stack_file_config,
)
from llmfleet.simulate.run import report_simulation, simulated_day
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
    result = simulated_day(plan, scenario, args.stack)
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


def cmd_predict(args: argparse.Namespace) -> int:
    header, result = predicted(args, _plan_of(args) if args.stack else None)
    sys.stdout.write(
        _dump(result.model_dump(mode="json")) if args.json else header + predict_text(result)
    )
    return 0


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
    config = config_json(args)
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
