"""A preview of a change: two runs of the program under mocks (the stack as it was, the
stack now) compared resource by resource, as `pulumi preview` of the update would show it:
create, update, replace or delete, and why a replacement happens.

Resources pair up by URN (or an alias the new run gives). A changed input is looked up in
the sourced table `replacements.csv` (`replacements.rules_for`): a replace row makes the
provider plan a replacement; a refused row is an update the API refuses (unless the resource
asks for `replace_on_changes` there); a recreates row is an update after which a controller
makes its objects anew (nodes, pods, a load balancer). A replacement travels as the engine
carries it: an input that reads a replaced resource's outputs (the monitor records which
input reads which resource) changes too, and so does every resource of a replaced provider.
An input that reads an *updated* resource's outputs changes where the run saw them unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from components.preview.replacements import COMPONENT_PREFIX, Path_, Rule, parse_path, rules_for
from components.preview.replacements import show_path as show
from components.preview.wire import UNKNOWN

Op = Literal["create", "update", "replace", "delete", "same"]
Resource = Mapping[str, Any]
SKIPPED_TYPES = ("pulumi:pulumi:StackReference",)
"""Reads, not resources: nothing is created or deleted."""
READS_ON_UPDATE: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("aws:ec2/launchTemplate:LaunchTemplate", "aws:eks/nodeGroup:NodeGroup", "launchTemplate"):
        ("launchTemplate", "version"),
}
"""(updated type, reader type, reader input) -> the part of the input an update changes,
though the mocks answer it the same: EC2 makes a new launch template version on every
update (latest_version), which a node group's launch_template.version reads."""


@dataclass(frozen=True)
class Reason:
    """Why a resource is replaced, refused or has its objects made anew."""

    property: str
    effect: str
    source: str
    detail: str = ""

    def text(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.property}{detail}: {self.source}"


@dataclass
class ResourceChange:
    urn: str
    type: str
    name: str
    op: Op
    changed: list[str] = field(default_factory=list)
    """The inputs that change (dotted paths), as the preview's diff lists them."""
    reasons: list[Reason] = field(default_factory=list)
    before: Resource | None = None
    after: Resource | None = None

    def of(self, effect: str) -> list[Reason]:
        return [r for r in self.reasons if r.effect == effect]

    @property
    def resource(self) -> Resource:
        """The run's record of it: the new one, or the old one for a delete."""
        return self.after if self.after is not None else self.before or {}

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "changed": self.changed,
            "replace_because": [_reason_json(r) for r in self.of("replace")],
            "refused_because": [_reason_json(r) for r in self.of("refused")],
            "recreates_because": [_reason_json(r) for r in self.of("recreates")],
        }


def _reason_json(r: Reason) -> dict[str, str]:
    return {"property": r.property, "source": r.source, "detail": r.detail}


def compare(before: Sequence[Resource], after: Sequence[Resource]) -> list[ResourceChange]:
    """Per resource of either run (components and reads left out): what the update does,
    sorted by (type, name)."""
    old = {r["urn"]: r for r in before if _counts(r)}
    new = {r["urn"]: r for r in after if _counts(r)}
    previous: dict[str, str] = {}  # new URN -> the old URN it continues
    for urn, r in new.items():
        match = urn if urn in old else next(
            (a for a in r["options"].get("aliases", []) if a in old), None
        )
        if match is not None:
            previous[urn] = match
    changes: dict[str, ResourceChange] = {}
    for urn, r in new.items():
        if urn not in previous:
            changes[urn] = ResourceChange(urn, r["type"], r["name"], "create", after=r)
            continue
        was = old[previous[urn]]
        change = ResourceChange(urn, r["type"], r["name"], "same", before=was, after=r)
        paths = [p for p in _changed_paths(was["inputs"], r["inputs"]) if not _ignored(r, p)]
        _classify(change, paths)
        changes[urn] = change
    _carry(changes, new)
    continued = set(previous.values())
    for urn, r in old.items():
        if urn not in continued:
            changes[urn] = ResourceChange(urn, r["type"], r["name"], "delete", before=r)
    return sorted(changes.values(), key=lambda c: (c.type, c.name, c.op))


def _counts(r: Resource) -> bool:
    return not str(r["type"]).startswith(COMPONENT_PREFIX) and r["type"] not in SKIPPED_TYPES


# --- which inputs change ---------------------------------------------------------------


def _changed_paths(a: Any, b: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b)):
            out += _changed_paths(a.get(key), b.get(key), (*path, key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _changed_paths(x, y, (*path, i))
        return out
    return [] if a == b else [path]


def _ignored(r: Resource, path: tuple[str | int, ...]) -> bool:
    keys = _keys(path)
    for ignore in r["options"].get("ignore_changes", []):
        rule = parse_path(ignore)
        if keys[: len(rule)] == rule:
            return True
    return False


def _keys(path: Sequence[str | int]) -> Path_:
    return tuple(p for p in path if isinstance(p, str))


def _dig(value: Any, path: Path_) -> Any:
    for key in path:
        while isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


# --- what a change does ----------------------------------------------------------------


def _classify(
    change: ResourceChange, paths: Iterable[tuple[str | int, ...]], detail: str = ""
) -> None:
    """Add the changed `paths` to `change` and the rows of the table they touch."""
    r = change.after or {}
    replace_on = [parse_path(p) for p in r.get("options", {}).get("replace_on_changes", [])]
    for path in paths:
        shown = show(path)
        if shown not in change.changed:
            change.changed.append(shown)
        keys = _keys(path)
        for rule in rules_for(change.type):
            if rule.touches(keys) and (detail or _holds(rule, change)):
                effect = rule.effect
                if effect == "refused" and any(_under(keys, p) for p in replace_on):
                    effect = "replace"
                _add(change, Reason(show(rule.property), effect, rule.source, detail))
        for p in replace_on:
            if _under(keys, p):
                _add(change, Reason(shown, "replace", "the resource's replace_on_changes", detail))
    if change.changed and change.op == "same":
        change.op = "update"
    if change.of("replace"):
        change.op = "replace"


def _under(keys: Path_, pattern: Path_) -> bool:
    return pattern == ("*",) or keys[: len(pattern)] == pattern


def _add(change: ResourceChange, reason: Reason) -> None:
    if all((r.property, r.effect) != (reason.property, reason.effect) for r in change.reasons):
        change.reasons.append(reason)


def _holds(rule: Rule, change: ResourceChange) -> bool:
    """Whether a row's condition holds for this change of values."""
    was = _dig((change.before or {}).get("inputs", {}), rule.property)
    now = _dig((change.after or {}).get("inputs", {}), rule.property)
    if rule.when == "removed":
        return bool(was) and not now
    if rule.when == "presence":
        return (was is None) != (now is None)
    if rule.when == "minor_step":
        old, new = _minor(was), _minor(now)
        return old is None or new is None or new < old or new[1] - old[1] > 1 or new[0] != old[0]
    if rule.when == "active_cluster":
        return bool(_active_cluster(was) != _active_cluster(now))
    return True


def _minor(version: Any) -> tuple[int, int] | None:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _active_cluster(kubeconfig: Any) -> Any:
    """The cluster a kubeconfig's current context points at (what the provider compares)."""
    try:
        doc = json.loads(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    except json.JSONDecodeError:
        doc = yaml.safe_load(kubeconfig)
    if not isinstance(doc, Mapping):
        return kubeconfig
    current = doc.get("current-context")
    contexts = {c.get("name"): c.get("context", {}) for c in doc.get("contexts") or []}
    cluster = contexts.get(current, {}).get("cluster")
    clusters = {c.get("name"): c.get("cluster") for c in doc.get("clusters") or []}
    return clusters.get(cluster, doc.get("clusters"))


# --- how a replacement travels ---------------------------------------------------------


def _carry(changes: dict[str, ResourceChange], new: Mapping[str, Resource]) -> None:
    """Spread replacements (and updates read as unknown) to the inputs that read them, and
    a replaced provider's replacement to its resources, until nothing more changes."""
    while True:
        moved = False
        for urn, change in changes.items():
            if change.op not in ("same", "update"):
                continue
            r = new[urn]
            provider = changes.get(r.get("provider_urn") or "")
            if provider is not None and provider.op == "replace":
                _add(change, Reason("provider", "replace",
                                    "the engine replaces every resource of a replaced provider",
                                    f"{provider.name} is replaced"))
                change.op, moved = "replace", True
                continue
            for key, deps in sorted(r["options"].get("property_dependency_urns", {}).items()):
                for dep in deps:
                    source = changes.get(dep)
                    if source is None or source.op not in ("replace", "update", "create"):
                        continue
                    paths: list[tuple[str | int, ...]] = [(key,)]
                    if source.op == "update":
                        paths = _read_on_update(source.type, r, key)
                        if not paths:
                            continue
                    paths = [p for p in paths if not _ignored(r, p)]
                    if not paths:
                        continue
                    before = (change.op, len(change.reasons), len(change.changed))
                    what = "replaced" if source.op != "update" else "updated"
                    _classify(change, paths, f"reads {source.name}, which is {what}")
                    moved = moved or before != (change.op, len(change.reasons), len(change.changed))
        if not moved:
            return


def _read_on_update(source_type: str, r: Resource, key: str) -> list[tuple[str | int, ...]]:
    """The parts of input `key` of `r` that an update of the resource it reads changes: what
    READS_ON_UPDATE names, else what the run saw unknown."""
    named = READS_ON_UPDATE.get((source_type, r["type"], key))
    if named is not None:
        return [named]
    return _unknown_paths(r["inputs"].get(key), (key,))


def _unknown_paths(value: Any, path: tuple[str | int, ...]) -> list[tuple[str | int, ...]]:
    if value == UNKNOWN:
        return [path]
    if isinstance(value, Mapping):
        return [p for k in sorted(value) for p in _unknown_paths(value[k], (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_paths(v, (*path, i))]
    return []
