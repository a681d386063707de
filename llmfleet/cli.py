"""Command line: parse, call the core, print. User errors exit 2 without a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

from pydantic import ValidationError

from llmfleet import paths
from llmfleet.calibration import fit
from llmfleet.calibration.fit import fit_all, leave_one_source_out, uncertainty
from llmfleet.calibration.measurements import load_measurements
from llmfleet.calibration.report import summarize, validation_report
from llmfleet.calibration.rows import predict_rows
from llmfleet.catalog import constants, model_facts
from llmfleet.catalog.constants import fitted, priors
from llmfleet.drill import drill, drill_text, parse_lost
from llmfleet.errors import ArgumentError, LlmfleetError, PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.gc_pause import gc_paused
from llmfleet.outputs import render, rendered_files
from llmfleet.outputs.diff import diff_plans
from llmfleet.outputs.diff_markdown import markdown
from llmfleet.outputs.report import fleet_text, predict_text, validation_text
from llmfleet.paths import MEASUREMENTS
from llmfleet.perf.architecture import PRECISIONS, check_config_heads
from llmfleet.perf.replica import ENGINES, PredictRequest, run_predict
from llmfleet.plan import stacks
from llmfleet.plan.stacks import format_validation_error, list_stacks, read_plan

GPUS = ("H100", "H200", "B200", "A100-80GB", "A100-40GB", "L40S", "L4", "A10G")


def _dump(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def cmd_plan(args: argparse.Namespace) -> int:
    fp = build_fleet_plan(read_plan(args.stack))
    sys.stdout.write(_dump(fp.model_dump(mode="json")) if args.json else fleet_text(fp))
    return 0


def as_flag(field: str) -> str:
    """A PredictRequest field as the flag that sets it: tensor_parallel_size ->
    --tensor-parallel-size."""
    return "--" + field.replace("_", "-")


def cmd_drill(args: argparse.Namespace) -> int:
    plan = read_plan(args.stack)
    report = drill(plan, parse_lost(plan, args.lose))
    sys.stdout.write(_dump(report.model_dump(mode="json")) if args.json else drill_text(report))
    return 0 if report.passed else 1


def cmd_predict(args: argparse.Namespace) -> int:
    config = None
    if args.model.endswith(".json") or Path(args.model).is_file():
        config = model_facts.load_config_json(Path(args.model), "--model")
        check_config_heads(config, args.model, "--model")
    try:
        req = PredictRequest(
            model=args.model,
            gpu=args.gpu,
            tensor_parallel_size=args.tensor_parallel_size,
            precision=args.precision,
            kv_cache_dtype=args.kv_cache_dtype,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            concurrency=args.concurrency,
            request_rate=args.request_rate,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            engine=args.engine,
            num_requests=args.num_requests,
            output_lengths=args.output_lengths,
            speculative_method=args.speculative_method,
            num_speculative_tokens=args.num_speculative_tokens,
            acceptance_rate=args.acceptance_rate,
            draft_model=args.draft_model,
            enforce_eager=args.enforce_eager,
            pipeline_parallel_size=args.pipeline_parallel_size,
            data_parallel_size=args.data_parallel_size,
            enable_expert_parallel=args.enable_expert_parallel,
            instance_type=args.instance_type,
        )
    except ValidationError as e:
        raise ArgumentError(
            "invalid predict arguments:\n" + format_validation_error(e, as_flags=True)
        ) from None
    try:
        result = run_predict(req, config)
    except PlanError as e:  # the core names request fields; the user typed flags
        raise PlanError(as_flag(e.field), e.value, e.hint) from None
    sys.stdout.write(_dump(result.model_dump(mode="json")) if args.json else predict_text(result))
    return 0


def cmd_preview(args: argparse.Namespace) -> int:
    with gc_paused():  # also while importing components/ (the Pulumi SDKs): see gc_pause
        # components/ holds the Pulumi code; the pure core imports it only for this command.
        from components.preview.run import run_program

        result = run_program(args.stack)
    sys.stdout.write(_dump(result.resources) if args.json else result.text())
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    loaded = load_measurements(Path(args.measurements))
    report = validation_report(loaded, fitted(), priors(), loso=not args.no_loso)
    sys.stdout.write(_dump(report) if args.json else validation_text(report))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    loaded = load_measurements(Path(args.measurements))
    prior = constants.priors()
    fitted = fit_all(loaded.rows, prior)
    # Ranges come from held-out errors: a plan's model and GPU are usually not the rows'.
    ratios = uncertainty(leave_one_source_out(loaded.rows, prior))
    for name, consts in (("prior", prior), ("fitted", fitted)):
        stats = summarize(p for p in predict_rows(loaded.rows, consts) if p.engine == "vllm")
        line = ", ".join(f"{m} {s['median_ape']:.1f}%" for m, s in stats.items())
        print(f"{name}: median abs error on vLLM rows: {line}")
    text = fit.render(constants.document(), fitted, ratios)
    if args.write:
        constants.PATH.write_text(text)
        print(f"wrote {constants.PATH}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else paths.RENDERED_DIR
    envs = [args.stack] if args.stack else list_stacks()
    drifted: list[str] = []
    for env in envs:
        root = out / env
        # `--check` draws every chart; a write keeps those whose stamp still matches.
        drawn = {} if args.check else render.drawn_charts(root)
        files = render.render_stack(build_fleet_plan(read_plan(env)), drawn)
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
    d = diff_plans(base.label, build_fleet_plan(base.plan), head.label, build_fleet_plan(head.plan))
    sys.stdout.write(_dump(d.model_dump(mode="json")) if args.json else markdown(d))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llmfleet", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("plan", help="size the fleet for a stack and print it")
    s.add_argument("--stack", required=True, help="environment: stacks/Pulumi.<ENV>.yaml")
    s.add_argument("--json", action="store_true", help="print the FleetPlan as JSON")
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("predict", help="predict one replica configuration")
    s.add_argument("--model", required=True, help="catalog id or path to a config.json")
    s.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help="serving engine whose memory accounting and fitted factors apply",
    )
    s.add_argument("--gpu", required=True, help=" ".join(GPUS))
    s.add_argument("--tensor-parallel-size", type=int, default=1)
    s.add_argument(
        "--pipeline-parallel-size",
        type=int,
        default=1,
        help="pipeline stages (across nodes over EFA where TP x PP exceeds a node)",
    )
    s.add_argument(
        "--data-parallel-size",
        type=int,
        default=1,
        help="data-parallel ranks (attention per rank; with --enable-expert-parallel the "
        "experts spread over TP x DP GPUs)",
    )
    s.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        help="MoE only: spread the routed experts over TP x DP GPUs (vLLM's flag)",
    )
    s.add_argument(
        "--instance-type",
        help="the node the GPUs sit in (default: the catalog's largest node of --gpu); its "
        "EFA links a replica that spans nodes",
    )
    # case-insensitive, as --gpu is: BF16 = bf16
    s.add_argument("--precision", default="bf16", type=str.lower, help=" ".join(PRECISIONS))
    s.add_argument("--kv-cache-dtype", choices=("auto", "fp8"), default="auto", type=str.lower)
    s.add_argument("--input-tokens", type=int, required=True)
    s.add_argument("--output-tokens", type=int, required=True)
    load = s.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=float, help="closed loop: requests in flight")
    load.add_argument("--request-rate", type=float, help="open loop: requests per second")
    s.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    s.add_argument("--max-model-len", type=int)
    s.add_argument("--max-num-seqs", type=int)
    s.add_argument("--max-num-batched-tokens", type=int)
    s.add_argument(
        "--num-requests",
        type=int,
        help="how many requests the run sends: offline, the queue; with --request-rate, the "
        "run's length (an overloaded run's TTFT grows with it)",
    )
    s.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM without CUDA graphs: small-batch steps wait on Python's kernel launches",
    )
    s.add_argument(
        "--output-lengths",
        choices=("fixed", "sharegpt"),
        default="fixed",
        help="every request generates --output-tokens (fixed), or lengths spread around it as "
        "ShareGPT's are (sharegpt: a finite queue then drains at a shrinking batch)",
    )
    s.add_argument(
        "--speculative-method",
        choices=("ngram", "eagle", "eagle3", "mtp", "draft_model"),
        help="speculative decoding (defaults per method and model: "
        "catalog/levers/speculative.json)",
    )
    s.add_argument("--num-speculative-tokens", type=int, help="tokens drafted per step (k)")
    s.add_argument("--acceptance-rate", type=float, help="per-token acceptance, in (0, 1)")
    s.add_argument("--draft-model", help="eagle head repo, or a catalog model for draft_model")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_predict)

    s = sub.add_parser("validate", help="predict every published measurement and show the error")
    s.add_argument("--measurements", default=str(MEASUREMENTS))
    s.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out refits")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("calibrate", help="refit the performance model's constants")
    s.add_argument("--measurements", default=str(MEASUREMENTS))
    s.add_argument("--write", action="store_true", help="write llmfleet/calibration/constants.json")
    s.set_defaults(func=cmd_calibrate)

    s = sub.add_parser(
        "render", help="write the vLLM config, Kubernetes manifests and fleet report per stack"
    )
    s.add_argument("--stack", help="one environment (default: every stacks/Pulumi.<ENV>.yaml)")
    s.add_argument("--out", help="output root, files go to OUT/<ENV>/ (default: rendered/)")
    s.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming stale, missing or extra files",
    )
    s.set_defaults(func=cmd_render)

    s = sub.add_parser(
        "diff", help="what changing a plan does: GPUs, cost, SLO margins, flags, rendered files"
    )
    for name, example in (("base", "origin/main:prod"), ("head", "prod")):
        s.add_argument(
            name,
            help=f"a stack name, a stack file, or REV:STACK at a git revision (e.g. {example})",
        )
    s.add_argument("--json", action="store_true", help="print the comparison as JSON")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser(
        "drill", help="lose regions, re-route their users, check the survivors against the SLO"
    )
    s.add_argument("--stack", required=True)
    s.add_argument("--lose", required=True, help="REGION[,REGION]: the regions lost")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_drill)

    s = sub.add_parser("preview", help="run the Pulumi program under mocks and list its resources")
    s.add_argument("--stack", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_preview)
    return p


def main(argv: Sequence[str] | None = None, *, ends_process: bool = False) -> int:
    """Run one command. `ends_process`: the interpreter exits after it (`python -m llmfleet`,
    the `llmfleet` script), so the command runs without cycle collections and what it
    allocated is frozen, not walked, before exit (gc_pause: render of prod 3.4 -> 2.2 s)."""
    args = parser().parse_args(argv)
    try:
        with gc_paused(until_exit=True) if ends_process else nullcontext():
            code: int = args.func(args)
        return code
    except LlmfleetError as e:
        print(f"llmfleet: error: {e}", file=sys.stderr)
        return 2


def entry() -> int:
    """The `llmfleet` console script."""
    return main(ends_process=True)
