"""The fake engine a preview runs against: Pulumi's MockMonitor plus what it leaves out.

A resource's parent: MockResourceArgs does not carry it, and a URN encodes only the parent's
*type* chain (`...::llmfleet:index:Fleet$aws:eks/cluster:Cluster::name`), not its name; URNs
are made as the engine makes them (the whole chain), so `pulumi state move` and aliases can
be checked against them. The
monitor below records the `parent` URN of each RegisterResource request (the URN's last
`::` segment is the parent's name), its provider reference, ignoreChanges and dependencies,
and the stack's outputs. What the mocks answer is `mocks.FleetMocks`.
"""

from __future__ import annotations

from threading import Lock
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc

STACK_TYPE = "pulumi:pulumi:Stack"


def urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def urn_type(urn: str) -> str:
    return urn.split("::")[2].split("$")[-1]


class RecordingMonitor(mocks.MockMonitor):
    """MockMonitor that also records what a preview shows and MockResourceArgs leaves out:
    each registration's inputs, parent, provider and options (with which input reads which
    resource), and the stack's outputs."""

    def __init__(self, mocks_: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks_)
        self.requests: dict[str, dict[str, Any]] = {}
        self.stack_outputs: dict[str, Any] = {}
        self._lock = Lock()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives: the parent's whole type chain (MockMonitor keeps only its
        last type), without the root stack's type."""
        chain = parent.split("::")[2] if parent else STACK_TYPE
        qualified = type_ if chain == STACK_TYPE else f"{chain}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{qualified}::{name}"

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
                "aliases": sorted(a.urn for a in request.aliases if a.urn),
                # what a preview of a change needs: which input reads which resource, and
                # how a replacement runs (components/preview/change.py)
                "property_dependencies": {
                    key: sorted(deps.urns)
                    for key, deps in sorted(request.propertyDependencies.items())
                    if deps.urns
                },
                "delete_before_replace": bool(request.deleteBeforeReplace),
                "replace_on_changes": list(request.replaceOnChanges),
                "protect": bool(request.protect),
                "retain_on_delete": bool(request.retainOnDelete),
            }
            with self._lock:
                self.requests[response.urn] = record
        return response

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """A read (a StackReference): recorded like a registration, without options."""
        response = super().ReadResource(request)  # type: ignore[no-untyped-call]
        record = {
            "id": request.id,
            "inputs": rpc.deserialize_properties(request.properties),
            "parent": request.parent,
            "provider": request.provider,
            "ignore_changes": [],
            "depends_on": sorted(request.dependencies),
            "aliases": [],
            "property_dependencies": {},
            "delete_before_replace": False,
            "replace_on_changes": [],
            "protect": False,
            "retain_on_delete": False,
        }
        with self._lock:
            self.requests[response.urn] = record
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        if urn_type(request.urn) == STACK_TYPE:
            outputs = rpc.deserialize_properties(request.outputs)
            with self._lock:
                self.stack_outputs = outputs
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]
