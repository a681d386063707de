"""What the monitor recorded, as the JSON-able list `preview --json` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.output import Unknown
from pulumi.runtime import rpc

from components.preview.monitor import STACK_TYPE, RecordingMonitor, urn_name, urn_type

SECRET = "[secret]"
UNKNOWN = "[unknown]"


def plain(value: Any) -> Any:
    """JSON-able data: sorted keys, `__`-prefixed keys dropped, secrets and unknowns shown
    as `pulumi preview` shows them."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, Mapping):
        return {k: plain(value[k]) for k in sorted(value) if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire carries every number as a double
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"unexpected {type(value).__name__} in resource inputs: {value!r}")


def reveal(value: Any) -> Any:
    """Like plain, but secrets show their value (for tests of stack outputs)."""
    if rpc.is_rpc_secret(value):
        return reveal(rpc.unwrap_rpc_secret(value))
    if isinstance(value, Mapping):
        return {k: reveal(value[k]) for k in sorted(value) if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [reveal(v) for v in value]
    return plain(value)


def has_secret(value: Any) -> bool:
    if rpc.is_rpc_secret(value):
        return True
    if isinstance(value, Mapping):
        return any(has_secret(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_secret(v) for v in value)
    return False


def collect(monitor: RecordingMonitor) -> list[dict[str, Any]]:
    """One dict per registered resource, sorted by (type, name) (see run_preview)."""
    names = {urn: urn_name(urn) for urn in monitor.requests}
    resources = []
    for urn, req in monitor.requests.items():
        provider_urn = req["provider"].rsplit("::", 1)[0] if req["provider"] else ""
        parent_type = urn_type(req["parent"]) if req["parent"] else STACK_TYPE
        top = parent_type == STACK_TYPE
        resources.append(
            {
                "type": urn_type(urn),
                "name": urn_name(urn),
                "urn": urn,
                "id": req["id"] or None,
                "parent": None if top else urn_name(req["parent"]),
                "parent_urn": None if top else req["parent"],
                "parent_type": None if top else parent_type,
                "provider": urn_name(provider_urn) if provider_urn else None,
                "provider_urn": provider_urn or None,
                "inputs": plain(req["inputs"]),
                "options": {
                    "ignore_changes": req["ignore_changes"],
                    "depends_on": sorted(names.get(d, d) for d in req["depends_on"]),
                    "depends_on_urns": sorted(req["depends_on"]),
                    "aliases": req["aliases"],
                    "property_dependencies": {
                        key: sorted(names.get(d, d) for d in deps)
                        for key, deps in req["property_dependencies"].items()
                    },
                    "property_dependency_urns": req["property_dependencies"],
                    "delete_before_replace": req["delete_before_replace"],
                    "replace_on_changes": req["replace_on_changes"],
                    "protect": req["protect"],
                    "retain_on_delete": req["retain_on_delete"],
                },
            }
        )
    return sorted(resources, key=lambda r: (r["type"], r["name"]))
