"""Run the real Pulumi program offline under Pulumi's mocks and list what it would create.

`run_preview("dev")` executes `__main__.py` with the stack's config from
stacks/Pulumi.dev.yaml, the way the Pulumi language host does (fresh runtime settings, the
stack's config, a new event loop, `run_in_stack`), except that the resource monitor is
Pulumi's MockMonitor: nothing leaves the machine. Each run happens in a worker thread (its
own event loop) under a copy of the caller's contextvars context (Pulumi keeps its runtime
state in contextvars), so runs leak neither into each other nor into the caller and can
repeat in one process; the program's exceptions (e.g. a PlanError) reach the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import runpy
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import settings
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_in_stack

from components.preview.checks import run_checks
from components.preview.graph import Finding
from components.preview.mocks import MOCK_ACCOUNT, FleetMocks
from components.preview.monitor import RecordingMonitor
from components.preview.text import format_preview
from components.preview.wire import collect, has_secret, reveal
from llmfleet.errors import ProgramError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.gc_pause import gc_paused
from llmfleet.paths import PROJECT_ROOT
from llmfleet.plan.stacks import region_stack, resolve_stack, stack_config

PROGRAM = PROJECT_ROOT / "__main__.py"


def project_name(root: Path = PROJECT_ROOT) -> str:
    return str(yaml.safe_load((root / "Pulumi.yaml").read_text())["name"])


@dataclass(frozen=True)
class PreviewResult:
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    """Stack outputs with secrets revealed; `secret_outputs` names those that are secret."""
    secret_outputs: list[str]
    fleet_plan: FleetPlan
    """The FleetPlan the program built (so a caller need not size the fleet a second time)."""
    part: str = ""
    """What part of its environment the stack holds ("" for the whole environment)."""
    account: str = MOCK_ACCOUNT
    """The account the mocked credentials belong to (the plan's, or the mocks' own for a
    plan without account_id): the program puts it in every global name."""

    def text(self) -> str:
        """What `llmfleet preview` prints: the fleet summary, then the resource tree."""
        text = format_preview(self.resources, self.fleet_plan)
        return f"{self.part}\n{text}" if self.part else text

    def findings(self) -> list[Finding]:
        """What AWS or Kubernetes would refuse or break that the mocks accepted (checks)."""
        return run_checks(self.resources, self.account)


def run_preview(
    env: str,
    config: Mapping[str, Any] | None = None,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The resources `pulumi preview` of stack `env` would create, run offline under mocks.

    `config` replaces the stack file's config (same shape: {"aws:region": ..., "llmfleet:plan":
    {...}}). One dict per resource, sorted by (type, name): type, name, id (the mock's; None
    for components), parent (the parent resource's name; None directly under the stack) and
    parent_type, provider (name of the provider resource a custom resource uses), inputs
    (wire names, as the preview shows them; secrets as "[secret]"), options (ignore_changes,
    depends_on as names, aliases as URNs), urn (as the engine names it in this stack).

    A global stack (`<env>.global`) reads its region stacks' outputs through StackReferences:
    `stack_outputs` (stack name -> outputs) answers them; by default, what each region
    stack's own run exports (run first, the same way).
    """
    return run_program(env, config, stack_outputs).resources


def run_program(
    env: str,
    config: Mapping[str, Any] | None = None,
    stack_outputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> PreviewResult:
    """run_preview plus the stack outputs (secrets revealed, for tests) and the FleetPlan."""
    if not PROGRAM.is_file():
        raise ProgramError(
            f"{PROGRAM.parent} has Pulumi.yaml and stacks/ but no __main__.py: `plan` and "
            "`render` read the stacks alone, `preview` runs the Pulumi program; copy "
            "__main__.py and components/ from llmfleet's checkout into it, or run preview "
            "from the checkout"
        )
    cfg = dict(stack_config(env) if config is None else config)
    secret: dict[str, list[str]] = {}
    target = resolve_stack(env, cfg)
    part = {
        "environment": "",
        "region": f"stack {env} deploys {target.region} of {target.environment}, whose plan is "
        "sized as a whole:",
        "global": f"stack {env} deploys what spans {target.environment}'s regions (DNS), whose "
        "plan is sized as a whole:",
    }[target.scope]
    if stack_outputs is None:
        stack_outputs = {}
        if target.scope == "global":
            for region in target.plan.regions:
                stack = region_stack(target.environment, region.name)
                region_run = run_program(stack)
                stack_outputs[stack] = region_run.outputs
                secret[stack] = region_run.secret_outputs
    # the deploying credentials are the plan's account (the program checks them)
    mocks = FleetMocks(stack_outputs, secret, target.plan.account_id or MOCK_ACCOUNT)
    # A worker thread gets its own event loop; a copy of the caller's context keeps the
    # runtime state this run sets (settings, config, root resource) out of the caller's.
    with (
        _ONE_RUN,
        gc_paused(),
        _without_source_positions(),
        ThreadPoolExecutor(1, thread_name_prefix="llmfleet-preview") as pool,
    ):
        result = pool.submit(contextvars.copy_context().run, _run, env, cfg, mocks).result()
    return dataclasses.replace(result, part=part, account=mocks.account)


_ONE_RUN = threading.Lock()
"""Runs take turns: _without_source_positions swaps an SDK function for the whole process."""


@contextmanager
def _without_source_positions() -> Iterator[None]:
    """Skip the call stack the SDK walks for each resource (`_get_stack_trace`, about 1 ms a
    resource: it reads the source line of every frame). It only tells the engine where in the
    program a resource was declared, and the mock monitor never reads it. If a future SDK
    renames the function, nothing is swapped and the preview is only slower."""
    original = getattr(sdk_resource, "_get_stack_trace", None)
    if original is None:
        yield
        return
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = original


def _stack_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: strings; objects as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


class _Placeholder:
    """Stands in for the root resource while set_mocks runs (see _run)."""


def _run(env: str, config: dict[str, Any], mocks: FleetMocks) -> PreviewResult:
    project = project_name()
    settings.reset_options(project=project, stack=env, preview=True, organization="organization")
    pulumi.runtime.set_all_config(_stack_config(config), [])
    monitor = RecordingMonitor(mocks)
    # set_mocks registers a root Stack when there is none; run_in_stack below makes the
    # program's own Stack, as the language host does, so hold a placeholder root meanwhile.
    settings.set_root_resource(_Placeholder())  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(
        monitor.mocks,
        project=project,
        stack=env,
        preview=True,
        monitor=monitor,
        organization="organization",  # a DIY backend's organization
    )
    settings.ROOT.set(None)

    # The mock monitor runs in the loop's executor threads and needs an event loop in each;
    # give each worker one that is closed at the end (else they are left to the GC).
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def init_worker() -> None:
        worker_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(worker_loop)
        worker_loops.append(worker_loop)

    program_globals: dict[str, Any] = {}

    async def program() -> None:
        program_globals.update(runpy.run_path(str(PROGRAM), run_name="__main__"))
        await _settle()

    loop = asyncio.new_event_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(thread_name_prefix="llmfleet-monitor", initializer=init_worker)
    )
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(run_in_stack(program))
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()
        for worker_loop in worker_loops:
            worker_loop.close()
    outputs = monitor.stack_outputs
    return PreviewResult(
        collect(monitor),
        reveal(outputs),
        sorted(k for k, v in outputs.items() if has_secret(v)),
        _fleet_plan_of(program_globals),
    )


async def _settle() -> None:
    """Wait until the registrations and outputs the program started have all finished.

    The SDK waits for them after the program too (pulumi.runtime.stack.wait_for_rpcs), but
    wakes on each finished output and re-arms a wait on all the others: quadratic in the
    ~9,000 outputs of the prod fleet, about a second of its preview. Waiting on them together
    costs one pass per wave; the SDK's own wait then finds them done and reports any error as
    it always does (an error stops this wait at once and is left to it).
    """
    rpc_manager = settings._get_rpc_manager()
    while True:
        await asyncio.sleep(0)
        with settings.SETTINGS.lock:
            waves = [*rpc_manager.rpcs, *settings.SETTINGS.outputs]
        pending = [fut for fut in map(asyncio.ensure_future, waves) if not fut.done()]
        if not pending:
            return
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
        if any(not f.cancelled() and f.exception() is not None for f in done):
            return


def _fleet_plan_of(program_globals: Mapping[str, Any]) -> FleetPlan:
    """The FleetPlan the program sized (its one module-level FleetPlan)."""
    plans = [v for v in program_globals.values() if isinstance(v, FleetPlan)]
    if len(plans) != 1:
        raise RuntimeError(f"{PROGRAM} should leave one FleetPlan in its globals, not {len(plans)}")
    return plans[0]
