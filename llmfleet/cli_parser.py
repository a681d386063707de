"""The command line's flags: every command's arguments, apart from what runs them (`cli`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from llmfleet.paths import MEASUREMENTS
from llmfleet.perf.architecture import PRECISIONS
from llmfleet.perf.replica import ENGINES
from llmfleet.simulate.scenario import DEFAULT_SPIKE_MINUTES

GPUS = ("H100", "H200", "B200", "A100-80GB", "A100-40GB", "L40S", "L4", "A10G")


def add_server_flags(s: argparse.ArgumentParser, required: bool, defaults: bool = True) -> None:
    """The flags that say what a server is (predict, calibrate --bench): model, engine, GPU,
    parallelism, precision and vLLM's flags. `required`: --model and --gpu must be given
    (calibrate checks them itself, as plain `calibrate` needs neither). `defaults`: the engine
    flags default here (calibrate); without, they are None until used, so `predict --stack`
    can tell a flag given from one left out (ENGINE_DEFAULTS fills them)."""

    def default(value: object) -> object:
        return value if defaults else None

    s.add_argument("--model", required=required, help="catalog id or path to a config.json")
    s.add_argument(
        "--hf-repo",
        help="the checkpoint served, with a config.json --model (the model_id its benchmark "
        "runs carry; a calibration file is matched on it)",
    )
    s.add_argument(
        "--engine",
        choices=ENGINES,
        default=default("vllm"),
        help="serving engine whose memory accounting and fitted factors apply (default vllm)",
    )
    s.add_argument(
        "--engine-version",
        help="the vLLM release served (its memory accounting; default: the pinned one)",
    )
    s.add_argument("--gpu", required=required, help=" ".join(GPUS))
    s.add_argument("--tensor-parallel-size", type=int, default=default(1), help="default 1")
    # case-insensitive, as --gpu is: BF16 = bf16
    s.add_argument(
        "--precision",
        default=default("bf16"),
        type=str.lower,
        help=" ".join(PRECISIONS) + " (default bf16)",
    )
    s.add_argument(
        "--kv-cache-dtype", choices=("auto", "fp8"), default=default("auto"), type=str.lower
    )
    s.add_argument(
        "--gpu-memory-utilization", type=float, default=default(0.9), help="default 0.9"
    )
    s.add_argument("--max-model-len", type=int)
    s.add_argument("--max-num-seqs", type=int)
    s.add_argument("--max-num-batched-tokens", type=int)
    s.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM without CUDA graphs: small-batch steps wait on Python's kernel launches",
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


def build_parser(
    handlers: Mapping[str, Callable[[argparse.Namespace], int]], description: str | None
) -> argparse.ArgumentParser:
    """Every command's flags; `handlers` maps a command to the function that runs it."""
    p = argparse.ArgumentParser(prog="llmfleet", description=description)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("plan", help="size the fleet for a stack and print it")
    s.add_argument("--stack", required=True, help="environment: stacks/Pulumi.<ENV>.yaml")
    s.add_argument("--json", action="store_true", help="print the FleetPlan as JSON")
    s.set_defaults(func=handlers["plan"])

    s = sub.add_parser("predict", help="predict one replica configuration")
    s.add_argument(
        "--stack",
        help="a plan's own replica: its GPU, engine arguments and levers, at the region's peak "
        "per replica (the load flags may override it)",
    )
    s.add_argument("--region", help="with --stack: the region (a one-region plan needs none)")
    add_server_flags(s, required=False, defaults=False)
    s.add_argument("--input-tokens", type=int)
    s.add_argument("--output-tokens", type=int)
    s.add_argument(
        "--pipeline-parallel-size",
        type=int,
        help="pipeline stages (across nodes over EFA where TP x PP exceeds a node; default 1)",
    )
    s.add_argument(
        "--data-parallel-size",
        type=int,
        help="data-parallel ranks (attention per rank; with --enable-expert-parallel the "
        "experts spread over TP x DP GPUs; default 1)",
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
    s.add_argument(
        "--inter-node",
        choices=["efa", "tcp"],
        help="what crosses between a replica's nodes: efa (an image with the EFA NCCL plugin, "
        "the default) or tcp (NCCL's sockets, as the pinned vLLM image runs)",
    )
    load = s.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=float, help="closed loop: requests in flight")
    load.add_argument("--request-rate", type=float, help="open loop: requests per second")
    s.add_argument(
        "--num-requests",
        type=int,
        help="how many requests the run sends: offline, the queue; with --request-rate, the "
        "run's length (an overloaded run's TTFT grows with it)",
    )
    fleet = s.add_argument_group(
        "a fleet behind one entry point (with --request-rate: the whole fleet's rate)")
    fleet.add_argument("--replicas", type=int, help="replicas sharing the rate (default 1)")
    fleet.add_argument(
        "--balancing",
        choices=("round-robin", "least-outstanding", "prefix-aware"),
        help="how the entry point spreads requests: round-robin and least-outstanding spread "
        "a conversation's turns over every replica, prefix-aware routes a prompt to the "
        "replica caching its prefix (vllm-router's cache_aware policy; default "
        "least-outstanding)",
    )
    fleet.add_argument("--turns", type=float,
                       help="requests come in conversations of this many turns on average, "
                       "each prompt resending the conversation so far (default 1)")
    fleet.add_argument("--shared-prefix-tokens", type=int,
                       help="leading tokens every prompt carries (a system prompt; default 0)")
    fleet.add_argument("--think-time-s", type=float,
                       help="mean time from an answer to the conversation's next prompt "
                       "(default 60)")
    fleet.add_argument("--router-replicas", type=int,
                       help="prefix-aware routers, each learning only the prefixes it routed "
                       "(default 1)")
    s.add_argument(
        "--output-lengths",
        choices=("fixed", "sharegpt"),
        default="fixed",
        help="every request generates --output-tokens (fixed), or lengths spread around it as "
        "ShareGPT's are (sharegpt: a finite queue then drains at a shrinking batch)",
    )
    s.add_argument(
        "--calibration",
        help="a calibration file of this server (llmfleet calibrate --bench ... --out FILE): "
        "its fitted factors apply",
    )
    s.add_argument(
        "--confidence",
        choices=("expected", "pessimistic"),
        help="pessimistic: every step's GPU time at the p90 of the held-out ITL band, as a "
        "plan's `confidence: pessimistic` sizes it (default expected)",
    )
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=handlers["predict"])

    s = sub.add_parser("validate", help="predict every published measurement and show the error")
    s.add_argument("--measurements", default=str(MEASUREMENTS))
    s.add_argument("--no-loso", action="store_true", help="skip the leave-one-source-out refits")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=handlers["validate"])

    s = sub.add_parser(
        "calibrate",
        help="refit the performance model's constants; with --bench, fit one server's "
        "correction on its own `vllm bench serve` results",
    )
    s.add_argument("--measurements", default=str(MEASUREMENTS))
    s.add_argument("--write", action="store_true", help="write llmfleet/calibration/constants.json")
    s.add_argument(
        "--bench",
        nargs="+",
        metavar="FILE",
        help="`vllm bench serve --save-result` files (one object, or one per line) of one "
        "server, described by the flags below",
    )
    s.add_argument("--out", help="where --bench writes the server's calibration file")
    add_server_flags(s, required=False)
    s.set_defaults(func=handlers["calibrate"])

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
    s.set_defaults(func=handlers["render"])

    s = sub.add_parser(
        "diff", help="what changing a plan does: GPUs, cost, SLO margins, flags, rendered files"
    )
    for name, example in (("base", "origin/main:prod"), ("head", "prod")):
        s.add_argument(
            name,
            help=f"a stack name, a stack file, or REV:STACK at a git revision (e.g. {example})",
        )
    s.add_argument("--json", action="store_true", help="print the comparison as JSON")
    s.add_argument(
        "--resources",
        action="store_true",
        help="also run the Pulumi program for both sides under mocks and show what the update "
        "does per resource (create, update, replace, delete; why; findings, deletion blockers)",
    )
    add_allow_replace(s)
    s.add_argument(
        "--charts",
        metavar="DIR",
        help="also draw before/after SVG charts into DIR (fleet.svg, <region>-batch.svg) and "
        "link them from the markdown",
    )
    s.set_defaults(func=handlers["diff"])

    s = sub.add_parser(
        "drill", help="lose regions, re-route their users, check the survivors against the SLO"
    )
    s.add_argument("--stack", required=True)
    s.add_argument("--lose", required=True, help="REGION[,REGION]: the regions lost")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=handlers["drill"])

    s = sub.add_parser(
        "rollout",
        help="the stacks `pulumi up` runs for an environment, canary first, and their gates",
    )
    s.add_argument("--stack", required=True, help="environment: stacks/Pulumi.<ENV>.yaml")
    s.add_argument("--json", action="store_true", help="the steps as JSON (the workflow's input)")
    s.set_defaults(func=handlers["rollout"])

    s = sub.add_parser(
        "simulate",
        help="replay a day of the fleet: arrivals, replicas, autoscaling, a spike, a lost region",
    )
    s.add_argument("--stack", required=True)
    s.add_argument(
        "--day",
        default="plan",
        help="plan (the plan's day_profile), peak (the peak all day), trough, or P,T: hours at "
        "the peak and at the trough",
    )
    s.add_argument(
        "--spike",
        help="PCT@HH:MM: PCT %% more traffic in every region from HH:MM (less: --spike=-PCT@HH:MM)",
    )
    s.add_argument(
        "--spike-minutes",
        type=int,
        help=f"how long the spike lasts (default {DEFAULT_SPIKE_MINUTES})",
    )
    s.add_argument("--lose", help="REGION@HH:MM: the region lost at that time")
    s.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals (default 0)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=handlers["simulate"])

    s = sub.add_parser("preview", help="run the Pulumi program under mocks and list its resources")
    s.add_argument(
        "--stack",
        required=True,
        help="an environment (the whole fleet), or one of its region stacks ENV.REGION or "
        "ENV.global",
    )
    s.add_argument(
        "--split",
        action="store_true",
        help="print the commands (pulumi state move) that carry an environment deployed as one "
        "stack into its region stacks and global stack without recreating anything",
    )
    s.add_argument("--json", action="store_true")
    s.add_argument(
        "--no-checks",
        action="store_true",
        help="skip the checks of what AWS or Kubernetes would refuse (exit 1 when one fails)",
    )
    s.add_argument(
        "--from",
        dest="from_source",
        metavar="REV|FILE",
        help="preview the change from the stack at git revision REV (its own code), or as an "
        "edited stack or plan file FILE, to now: per resource create, update, replace or delete "
        "and why (docs/preview.md)",
    )
    add_allow_replace(s)
    s.set_defaults(func=handlers["preview"])
    return p


def add_allow_replace(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--allow-replace",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a stateful resource (cluster, bucket, DNS record, warm node group, ...) this change "
        "means to replace or delete: its name, URN or type, shell wildcards allowed; repeatable",
    )
