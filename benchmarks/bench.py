"""Speed figures for the planner: `make bench` prints them (no timed assertions in tests).

Measures, with time.perf_counter over repeated runs: one `predict`, a full FleetPlan for
each stack, predicting every measurement row, one calibration fit, and peak memory; then
the wall time of CLI commands as a user runs them, each in a fresh interpreter (a
subprocess, so interpreter start and imports count): importing just the Pulumi SDK modules
the prod program loads (the floor under any preview of it); prod's plan, render, preview
and simulate, each against its target (`TARGETS_S`) scaled by that floor (exit 1 when one
misses: the check runs here, never as a timed assertion in the tests); and
`plan`, `render` and `preview` of prod both as three commands and as three calls in one
process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

from llmfleet.calibration.fit import fit_all
from llmfleet.calibration.measurements import load_measurements
from llmfleet.calibration.rows import predict_rows
from llmfleet.catalog.constants import fitted, priors
from llmfleet.fleetplan.fleet import build_fleet_plan, searched_fleet_plan
from llmfleet.perf.replica import PredictRequest, run_predict
from llmfleet.plan.stacks import list_stacks, read_plan


def timed(label: str, fn: Callable[[], object], repeat: int) -> None:
    fn()  # warm caches (catalog reads)
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    med = statistics.median(runs)
    print(f"{label:<44} median {med * 1000:9.2f} ms  min {min(runs) * 1000:9.2f} ms  n={repeat}")


ROOT = Path(__file__).resolve().parent.parent


def _cli_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command runs in: the checkout importable and bytecode written, as on
    a user's machine, where pip compiled the packages' bytecode at install (a shell that says
    not to write bytecode would have every run compile llmfleet's ~140 modules from source
    again: about 0.4 s of each command on these 2 cores)."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **(extra_env or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _wall(argvs: Sequence[Sequence[str]], extra_env: dict[str, str] | None = None) -> float:
    """Seconds to run these commands one after the other, each in a new interpreter."""
    env = _cli_env(extra_env)
    start = time.perf_counter()
    for argv in argvs:
        # plan exits 1 where a region is past its SLO at the peak: still a timing
        subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, check=False,
                       capture_output=True)
    return time.perf_counter() - start


def timed_cli(label: str, argvs: Sequence[Sequence[str]], repeat: int,
              extra_env: dict[str, str] | None = None) -> float:
    runs = [_wall(argvs, extra_env) for _ in range(repeat)]
    med = statistics.median(runs)
    print(f"{label:<44} median {med:9.2f} s   min {min(runs):9.2f} s   n={repeat}")
    return med


TARGETS_S = {"plan": 0.4, "render": 1.0, "preview": 2.0, "simulate": 1.5}
"""prod's commands on an idle 2-core machine (issue #31), each a fresh interpreter, with the
plan's FleetPlan and days already in `disk_memo` (a user's second command on a plan); the
first command, which searches, is printed beside them but not checked."""
FLOOR_REFERENCE_S = 0.45
"""Importing the three Pulumi SDKs took this on that machine (a fresh interpreter): the targets are
checked as multiples of the floor measured in the same run, so a busy machine (slower
floor) scales them and a timed check never depends on the machine's load alone."""


def check_targets(floor_s: float, sdk_modules_s: float, repeat: int = 5) -> bool:
    """Each command against its target scaled by the floor measured now; True if all hold.
    `sdk_modules_s`: importing the SDK modules prod's program loads, which preview cannot do
    without (printed beside preview's figure)."""
    scale = floor_s / FLOOR_REFERENCE_S
    held = True
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as cache:
        commands = {
            "plan": ["plan", "--stack", "prod"],
            "render": ["render", "--stack", "prod", "--out", out],
            "preview": ["preview", "--stack", "prod"],
            "simulate": ["simulate", "--stack", "prod"],
        }
        for name, argv in commands.items():
            command = [["-m", "llmfleet", *argv]]
            timed_cli(f"{name} --stack prod, searched (subprocess)", command, 1,
                      {"LLMFLEET_CACHE": "off"})
            _wall(command, {"LLMFLEET_CACHE_DIR": cache})  # the plan's first command
            med = timed_cli(f"{name} --stack prod, read back (subprocess)", command, repeat,
                            {"LLMFLEET_CACHE_DIR": cache})
            budget = TARGETS_S[name] * scale
            ok = med <= budget
            held &= ok
            print(f"  {'holds' if ok else 'MISSES'}: {med:.2f} s against {TARGETS_S[name]} s x "
                  f"{scale:.2f} (floor {floor_s:.2f} s / {FLOOR_REFERENCE_S} s) = {budget:.2f} s")
            if name == "preview":
                print(f"  of which importing the SDK modules the program loads: "
                      f"{sdk_modules_s:.2f} s")
    return held


SPLIT_PACKAGES = ("llmfleet", "components", "pulumi_aws", "pulumi_kubernetes")
"""Packages whose imports `import_breakdown` counts per subpackage (llmfleet.perf,
pulumi_aws.wafv2); any other library counts as one (numpy, pydantic)."""


def import_breakdown(argv: Sequence[str], top: int = 6) -> list[tuple[str, float]]:
    """Where one run's imports go: `python -X importtime` self-times summed per library, or
    per subpackage of `SPLIT_PACKAGES`, the largest `top` first. One run: a breakdown, not
    a figure checked against a target."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=ROOT, env=_cli_env(),
                          check=False, capture_output=True, text=True)
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].strip().split(".")
        group = ".".join(name[:2] if name[0] in SPLIT_PACKAGES else name[:1])
        totals[group] = totals.get(group, 0.0) + int(parts[0]) / 1e6
    return sorted(totals.items(), key=lambda kv: -kv[1])[:top]


def print_breakdown(label: str, groups: list[tuple[str, float]]) -> None:
    print(f"  {label}: " + ", ".join(f"{name} {s:.2f} s" for name, s in groups))


def sdk_modules() -> list[str]:
    """The Pulumi SDK packages the prod program loads (pulumi_aws and pulumi_kubernetes load
    their service packages lazily, on first use), found by running it once here."""
    from components.preview.run import run_program

    run_program("prod")
    lazy = "_LazyModule"
    return sorted(
        name
        for name, module in sys.modules.items()
        if name.startswith(("pulumi_aws.", "pulumi_kubernetes."))
        and not name.split(".")[-1].startswith("_")
        and type(module).__name__ != lazy
    )


def cli_figures(repeat: int = 3) -> bool:
    floor = "import gc; gc.disable()\nimport pulumi.runtime.mocks\n" + "".join(
        f"import {name}\n" for name in sdk_modules()
    )
    sdk_modules_s = timed_cli("import the SDK modules prod uses (no work)", [["-c", floor]],
                              repeat)
    floor_s = timed_cli("floor: import pulumi, pulumi_aws, pulumi_kubernetes",
                        [["-c", "import pulumi, pulumi_aws, pulumi_kubernetes"]], 7)
    held = check_targets(floor_s, sdk_modules_s)
    print_breakdown("imports of the SDK modules prod uses, largest (one run)",
                    import_breakdown(["-c", floor]))
    print_breakdown("imports of the command line (all a read-back plan loads), largest",
                    import_breakdown(["-c", "import llmfleet.cli"]))
    with tempfile.TemporaryDirectory() as out:
        plan = ["plan", "--stack", "prod"]
        render = ["render", "--stack", "prod", "--out", out]
        preview = ["preview", "--stack", "prod"]
        timed_cli("preview --stack prod (subprocess)", [["-m", "llmfleet", *preview]], repeat)
        timed_cli(
            "plan, render, preview prod (3 subprocesses)",
            [["-m", "llmfleet", *argv] for argv in (plan, render, preview)],
            repeat,
        )
        in_one = f"from llmfleet.cli import main\nfor a in {[plan, render, preview]!r}: main(a)"
        timed_cli("plan, render, preview prod (one subprocess)", [["-c", in_one]], repeat)
    return held


def main() -> None:
    req = PredictRequest(
        model="Llama-3.1-70B-Instruct",
        gpu="H100",
        tensor_parallel_size=4,
        input_tokens=1000,
        output_tokens=200,
        concurrency=32,
    )
    timed("predict (one configuration)", lambda: run_predict(req), 200)
    for env in list_stacks():
        plan = read_plan(env)
        timed(
            f"plan --stack {env} ({len(plan.regions)} regions), searched",
            lambda plan=plan: searched_fleet_plan(plan),
            3,
        )
        timed(
            f"plan --stack {env}, read back (disk_memo)",
            lambda plan=plan: build_fleet_plan(plan),
            5,
        )
    prod = read_plan("prod")
    start = time.process_time()
    searched_fleet_plan(prod)  # the full search: instance x TP x precision x KV x speculation
    cpu = time.process_time() - start
    print(f"{'plan --stack prod, CPU time of one search':<44} {cpu * 1000:9.2f} ms")
    loaded = load_measurements()
    timed(
        f"predict {len(loaded.rows)} measurement rows",
        lambda: predict_rows(loaded.rows, fitted()),
        10,
    )
    timed("calibration fit (all groups)", lambda: fit_all(loaded.rows, priors()), 2)
    tracemalloc.start()
    searched_fleet_plan(read_plan("prod"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{'peak Python memory, plan --stack prod':<44} {peak / 2**20:9.2f} MiB")
    if not cli_figures():
        print("make bench: a command misses its target (above)")
        raise SystemExit(1)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as bench_cache:  # never the user's own cache
        os.environ["LLMFLEET_CACHE_DIR"] = bench_cache
        main()
