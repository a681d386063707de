"""Run the real Pulumi program offline under Pulumi's mocks and list what it would create.

`run_preview("dev")` executes `__main__.py` with the stack's config from
stacks/Pulumi.dev.yaml, the way the Pulumi language host does (fresh runtime settings, the
stack's config, a new event loop, `run_in_stack`), except that the resource monitor is
Pulumi's MockMonitor: nothing leaves the machine. Each run happens in a worker thread (its
own event loop) under a copy of the caller's contextvars context (Pulumi keeps its runtime
state in contextvars), so runs leak neither into each other nor into the caller and can
repeat in one process; the program's exceptions (e.g. a PlanError) reach the caller.

A resource's parent: MockResourceArgs does not carry it, and a URN encodes only the parent's
*type* chain (`...::llmfleet:index:Fleet$aws:eks/cluster:Cluster::name`), not its name. The
monitor below records the `parent` URN of each RegisterResource request (the URN's last
`::` segment is the parent's name), its provider reference, ignoreChanges and dependencies,
and the stack's outputs.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import runpy
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any

import pulumi
import yaml
from pulumi.output import Unknown
from pulumi.runtime import mocks, rpc, settings
from pulumi.runtime.stack import run_in_stack

from components.mocks import FleetMocks
from llmfleet.fleet import FleetPlan
from llmfleet.stack import REPO_ROOT, read_stack_config

PROGRAM = REPO_ROOT / "__main__.py"
STACK_TYPE = "pulumi:pulumi:Stack"
SECRET = "[secret]"
UNKNOWN = "[unknown]"


def project_name(root: Path = REPO_ROOT) -> str:
    return str(yaml.safe_load((root / "Pulumi.yaml").read_text())["name"])


class RecordingMonitor(mocks.MockMonitor):
    """MockMonitor that also records what a preview shows and MockResourceArgs leaves out:
    each registration's inputs, parent, provider and options, and the stack's outputs."""

    def __init__(self, mocks_: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks_)
        self.requests: dict[str, dict[str, Any]] = {}
        self.stack_outputs: dict[str, Any] = {}
        self._lock = Lock()

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != STACK_TYPE:
            record = {
                "id": response.id if request.custom else None,
                "inputs": rpc.deserialize_properties(request.object),
                "parent": request.parent,
                "provider": request.provider,
                "ignore_changes": list(request.ignoreChanges),
                "depends_on": sorted(request.dependencies),
            }
            with self._lock:
                self.requests[response.urn] = record
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        if _urn_type(request.urn) == STACK_TYPE:
            outputs = rpc.deserialize_properties(request.outputs)
            with self._lock:
                self.stack_outputs = outputs
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class PreviewResult:
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    """Stack outputs with secrets revealed; `secret_outputs` names those that are secret."""
    secret_outputs: list[str]


def _urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def _urn_type(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


def _plain(value: Any) -> Any:
    """JSON-able data: sorted keys, `__`-prefixed keys dropped, secrets and unknowns shown
    as `pulumi preview` shows them."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, Mapping):
        return {k: _plain(value[k]) for k in sorted(value) if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire carries every number as a double
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"unexpected {type(value).__name__} in resource inputs: {value!r}")


def _reveal(value: Any) -> Any:
    """Like _plain, but secrets show their value (for tests of stack outputs)."""
    if rpc.is_rpc_secret(value):
        return _reveal(rpc.unwrap_rpc_secret(value))
    if isinstance(value, Mapping):
        return {k: _reveal(value[k]) for k in sorted(value) if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [_reveal(v) for v in value]
    return _plain(value)


def _has_secret(value: Any) -> bool:
    if rpc.is_rpc_secret(value):
        return True
    if isinstance(value, Mapping):
        return any(_has_secret(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_secret(v) for v in value)
    return False


def _stack_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Config as the Pulumi CLI hands it to a program: strings; objects as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_preview(env: str, config: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The resources `pulumi preview` of stack `env` would create, run offline under mocks.

    `config` replaces the stack file's config (same shape: {"aws:region": ..., "llmfleet:plan":
    {...}}). One dict per resource, sorted by (type, name): type, name, id (the mock's; None
    for components), parent (the parent resource's name; None directly under the stack) and
    parent_type, provider (name of the provider resource a custom resource uses), inputs
    (wire names, as the preview shows them; secrets as "[secret]"), options (ignore_changes,
    depends_on as names).
    """
    return run_program(env, config).resources


def run_program(env: str, config: Mapping[str, Any] | None = None) -> PreviewResult:
    """run_preview plus the stack outputs (secrets revealed, for tests)."""
    cfg = dict(read_stack_config(env) if config is None else config)
    # A worker thread gets its own event loop; a copy of the caller's context keeps the
    # runtime state this run sets (settings, config, root resource) out of the caller's.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmfleet-preview") as pool:
        return pool.submit(contextvars.copy_context().run, _run, env, cfg).result()


def _run(env: str, config: dict[str, Any]) -> PreviewResult:
    project = project_name()
    settings.reset_options(project=project, stack=env, preview=True, organization="organization")
    pulumi.runtime.set_all_config(_stack_config(config), [])
    monitor = RecordingMonitor(FleetMocks())
    # set_mocks registers a root Stack when there is none; run_in_stack below makes the
    # program's own Stack, as the language host does, so hold a placeholder root meanwhile.
    settings.set_root_resource(_Placeholder())  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(
        monitor.mocks, project=project, stack=env, preview=True, monitor=monitor
    )
    settings.ROOT.set(None)

    # The mock monitor runs in the loop's executor threads and needs an event loop in each;
    # give each worker one that is closed at the end (else they are left to the GC).
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def init_worker() -> None:
        worker_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(worker_loop)
        worker_loops.append(worker_loop)

    loop = asyncio.new_event_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(thread_name_prefix="llmfleet-monitor", initializer=init_worker)
    )
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(run_in_stack(_program))
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
        _collect(monitor), _reveal(outputs), sorted(k for k, v in outputs.items() if _has_secret(v))
    )


def _program() -> None:
    runpy.run_path(str(PROGRAM), run_name="__main__")


class _Placeholder:
    """Stands in for the root resource while set_mocks runs (see _run)."""


def _collect(monitor: RecordingMonitor) -> list[dict[str, Any]]:
    names = {urn: _urn_name(urn) for urn in monitor.requests}
    resources = []
    for urn, req in monitor.requests.items():
        provider_urn = req["provider"].rsplit("::", 1)[0] if req["provider"] else ""
        parent_type = _urn_type(req["parent"]) if req["parent"] else STACK_TYPE
        top = parent_type == STACK_TYPE
        resources.append(
            {
                "type": _urn_type(urn),
                "name": _urn_name(urn),
                "id": req["id"] or None,
                "parent": None if top else _urn_name(req["parent"]),
                "parent_type": None if top else parent_type,
                "provider": _urn_name(provider_urn) if provider_urn else None,
                "inputs": _plain(req["inputs"]),
                "options": {
                    "ignore_changes": req["ignore_changes"],
                    "depends_on": sorted(names.get(d, d) for d in req["depends_on"]),
                },
            }
        )
    return sorted(resources, key=lambda r: (r["type"], r["name"]))


KEY_INPUTS: dict[str, tuple[str, ...]] = {
    "pulumi:providers:aws": ("region",),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("availabilityZoneId", "cidrBlock", "mapPublicIpOnLaunch"),
    "aws:ec2/natGateway:NatGateway": ("connectivityType",),
    "aws:ec2/routeTable:RouteTable": ("routes",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn",),
    "aws:kms/key:Key": ("enableKeyRotation", "deletionWindowInDays"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "retentionInDays"),
    "aws:eks/cluster:Cluster": (
        "version",
        "vpcConfig.endpointPrivateAccess",
        "vpcConfig.endpointPublicAccess",
        "encryptionConfig.resources",
        "enabledClusterLogTypes",
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "metadataOptions.httpTokens",
        "metadataOptions.httpPutResponseHopLimit",
        "blockDeviceMappings.0.ebs",
        "networkInterfaces.0.associatePublicIpAddress",
    ),
    "aws:eks/addon:Addon": ("addonName", "configurationValues", "resolveConflictsOnUpdate"),
    "kubernetes:helm.sh/v3:Release": ("chart", "version", "namespace"),
    "kubernetes:apps/v1:Deployment": ("metadata.namespace", "metadata.name"),
    "kubernetes:keda.sh/v1alpha1:ScaledObject": ("spec.minReplicaCount", "spec.maxReplicaCount"),
    "kubernetes:karpenter.sh/v1:NodePool": ("spec.limits", "spec.disruption.consolidateAfter"),
    "aws:eks/nodeGroup:NodeGroup": (
        "instanceTypes",
        "amiType",
        "capacityType",
        "scalingConfig",
        "taints",
        "subnetIds",
    ),
}
"""Per resource type, the inputs format_preview shows (dotted paths; digits index lists)."""


def _dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return None
    return value


def _compact(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"))
    )


def _fleet_summary(fleet_plan: FleetPlan) -> list[str]:
    lines = [
        f"fleet {fleet_plan.name}: {fleet_plan.model.id} ({fleet_plan.model.precision}), "
        f"{len(fleet_plan.regions)} region(s), Kubernetes {fleet_plan.kubernetes_version}, "
        f"${fleet_plan.monthly_cost_usd:,.2f}/month at desired nodes "
        f"(${fleet_plan.monthly_cost_usd_at_trough:,.2f} at the trough)"
    ]
    for r in fleet_plan.regions:
        lines.append(
            f"  {r.region}: {r.instance_type} ({r.gpus_per_node} x {r.gpu}), "
            f"TP {r.tensor_parallel_size}, "
            f"nodes {r.nodes.min}/{r.nodes.desired}/{r.nodes.max}, "
            f"replicas {r.replicas.min}/{r.replicas.desired}/{r.replicas.max} (min/desired/max), "
            f"${r.monthly_cost_usd:,.2f}/month"
        )
        sp, cap = r.system_pool, r.capacity
        lines.append(
            f"    GPU nodes in zone IDs {', '.join(r.node_zone_ids)} of the cluster's "
            f"{', '.join(r.cluster_zone_ids)}: floor {cap.floor_nodes} node(s) "
            f"({cap.purchase}), Karpenter up to {cap.ceiling_nodes} (nvidia.com/gpu <= "
            f"{cap.karpenter_gpu_limit}); system pool {sp.instance_type}, "
            f"nodes {sp.nodes.min}/{sp.nodes.desired}/{sp.nodes.max}"
            + ("" if sp.priced else " (not priced)")
        )
    return lines


def format_preview(resources: list[dict[str, Any]], fleet_plan: FleetPlan) -> str:
    """A fleet summary per region, then the resource tree grouped by parent, with the key
    inputs of each resource (KEY_INPUTS)."""

    def order(r: dict[str, Any]) -> tuple[int, str, str]:
        kind = 0 if r["type"].startswith("pulumi:providers:") else 2 if r["id"] is None else 1
        return kind, r["type"], r["name"]

    children: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    for r in resources:
        children.setdefault((r["parent_type"], r["parent"]), []).append(r)
    lines = _fleet_summary(fleet_plan) + ["", f"{len(resources)} resources:"]

    def walk(parent: tuple[str | None, str | None], indent: str) -> None:
        kids = sorted(children.get(parent, []), key=order)
        for k, r in enumerate(kids):
            last = k == len(kids) - 1
            shown = [
                f"{path}={_compact(v)}"
                for path in KEY_INPUTS.get(r["type"], ())
                if (v := _dig(r["inputs"], path)) is not None
            ]
            lines.append(
                f"{indent}{'└─ ' if last else '├─ '}{r['type']}  {r['name']}"
                + (f"  {'  '.join(shown)}" if shown else "")
            )
            walk((r["type"], r["name"]), indent + ("   " if last else "│  "))

    walk((None, None), "")
    return "\n".join(lines) + "\n"
