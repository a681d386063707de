"""`llmfleet preview --stack S --from REV|FILE`: the change from the stack as it was to the
stack now, with its findings, deletion blockers and the steps a removal or a first rollout
takes, as text and as the `change` keys of `preview --json`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.preview.change import Resource, ResourceChange, compare
from components.preview.change_checks import (
    Blocker,
    blockers,
    change_findings,
    retiring_patterns,
)
from components.preview.graph import Finding
from components.preview.revision import before_run, deploys
from components.preview.run import PreviewResult, run_program
from llmfleet.errors import StackError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.outputs.deploy_order import deploy_order
from llmfleet.plan.stacks import GLOBAL, global_stack, resolve_stack

OPS = ("create", "update", "replace", "delete")
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
MARK = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
SHOWN_PATHS = 6


@dataclass
class ChangePreview:
    stack: str
    label: str
    """Where the change starts (a revision or a file)."""
    changes: list[ResourceChange]
    findings: list[Finding] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)

    def ops(self, typ: str | None = None) -> dict[str, str]:
        """Resource name -> what the update does, for `typ` (or every type): tests read it."""
        return {c.name: c.op for c in self.changes if typ is None or c.type == typ}

    def of(self, op: str) -> list[ResourceChange]:
        return [c for c in self.changes if c.op == op]

    def counts(self) -> dict[str, int]:
        counted: Counter[str] = Counter(c.op for c in self.changes)
        return {op: counted.get(op, 0) for op in OPS}

    def text(self) -> str:
        counts = ", ".join(f"{n} to {op}" for op, n in self.counts().items())
        lines = [f"change of stack {self.stack} from {self.label} to now: {counts}"]
        for c in self.changes:
            if c.op == "same":
                continue
            changed = ", ".join(c.changed[:SHOWN_PATHS])
            extra = len(c.changed) - SHOWN_PATHS
            more = f" (+{extra} more)" if extra > 0 else ""
            what = f": {changed}{more}" if changed and c.op != "create" else ""
            lines.append(f"  {MARK[c.op]:<2} {c.op:<7} {c.type} {c.name}{what}")
            for reason in c.reasons:
                lines.append(f"       {reason.effect}: {reason.text()}")
        if self.blockers:
            lines.append("deletion blockers (and the step that clears each):")
            for b in self.blockers:
                lines += [f"  {b.resource}: {b.what}", f"    step: {b.step} [{b.source}]"]
        if self.steps:
            lines.append("steps:")
            lines += [f"  {i}. {s}" for i, s in enumerate(self.steps, 1)]
        return "\n".join(lines) + "\n"

    def summary(self) -> dict[str, Any]:
        """The change on its own (`diff --resources --json`)."""
        return {
            "stack": self.stack,
            "from": self.label,
            "counts": self.counts(),
            "resources": [{"type": c.type, "name": c.name, **self._json(c)}
                          for c in self.changes if c.op != "same"],
            "findings": [{"check": f.check, "resource": f.resource, "message": f.message}
                         for f in self.findings],
            "blockers": [{"resource": b.resource, "what": b.what, "step": b.step,
                          "source": b.source} for b in self.blockers],
            "steps": self.steps,
        }

    def markdown(self) -> str:
        """The change as the PR comment shows it (after `llmfleet diff`'s plan sections)."""
        counts = ", ".join(f"{n} to {op}" for op, n in self.counts().items())
        head = f"#### Resources: {counts}"
        if self.findings:
            items = [f"- **{f.check}** `{f.resource}`: {f.message}" for f in self.findings]
            head += "\n\n" + "\n".join(items)
        return f"{head}\n\n```text\n{self.text()}```\n"

    def annotate(self, resources: Sequence[Resource]) -> list[dict[str, Any]]:
        """`preview --json` with the change: each resource of the run now gains a `change`
        key; a deleted resource follows, as the old run had it, with its `change`."""
        by_urn = {c.urn: c for c in self.changes}
        out = [{**r, "change": self._json(by_urn.get(r["urn"]))} for r in resources]
        out += [{**c.before, "change": self._json(c)} for c in self.of("delete") if c.before]
        return out

    def _json(self, change: ResourceChange | None) -> dict[str, Any]:
        if change is None:  # a component or a read
            return {"op": "same", "changed": [], "replace_because": [], "refused_because": [],
                    "recreates_because": [], "findings": [], "blockers": []}
        return {
            **change.to_json(),
            "findings": [{"check": f.check, "message": f.message}
                         for f in self.findings if f.resource == change.name],
            "blockers": [{"what": b.what, "step": b.step, "source": b.source}
                         for b in self.blockers if b.resource == change.name],
        }


def preview_change(
    stack: str,
    before: Sequence[Resource],
    after: Sequence[Resource],
    label: str,
    allow: Sequence[str] = (),
    order: Sequence[str] = (),
    retiring: Sequence[str] = (),
) -> ChangePreview:
    """The change between two runs of `stack`'s program (`allow`: --allow-replace; `order`:
    the environment's stacks as `llmfleet rollout` runs them; `retiring`: the regions the plan
    now retires, whose resources' deletion it means)."""
    changes = compare(before, after)
    allow = [*allow, *retiring_patterns(retiring)]
    preview = ChangePreview(stack, label, changes, change_findings(changes, before, allow),
                            blockers(changes))
    preview.steps = _steps(stack, preview, bool(before), order)
    return preview


def change_from(
    stack: str, source: str, allow: Sequence[str] = ()
) -> tuple[ChangePreview, list[dict[str, Any]], PreviewResult | None]:
    """The change from `--from SOURCE` (a revision or a file: read first, so a bad one fails
    before the program runs) to the run now; with the run's resources and result."""
    start = before_run(stack, source)
    resources, result = after_run(stack)
    order = rollout_order(stack, result.fleet_plan) if result is not None else []
    change = preview_change(stack, start.resources, resources, start.label, allow, order,
                            retiring_regions(result.fleet_plan) if result is not None else [])
    return change, resources, result


def retiring_regions(fleet: FleetPlan) -> list[str]:
    """The regions the plan retires (regions[].retire)."""
    return [rp.region for rp in fleet.regions if rp.retiring]


def rollout_order(stack: str, fleet: FleetPlan) -> list[str]:
    """The stacks `llmfleet rollout` runs for `stack`'s environment, in order."""
    target = resolve_stack(stack)
    order = deploy_order(target.environment, target.plan, fleet)
    return [step.stack for step in order.steps]


def after_run(stack: str) -> tuple[list[dict[str, Any]], PreviewResult | None]:
    """The run now: (resources, PreviewResult), or ([], None) where the stack no longer
    deploys (its region left the plan: a destroy)."""
    if not deploys(stack):
        return [], None
    result = run_program(stack)
    return result.resources, result


def _steps(stack: str, preview: ChangePreview, existed: bool, order: Sequence[str]) -> list[str]:
    """The order a region removal or a first rollout takes across the environment's stacks."""
    env, _, part = stack.partition(".")
    clusters = [c for c in preview.of("delete") if c.type == "aws:eks/cluster:Cluster"]
    if not existed:
        return _first_rollout(env, order)
    if not clusters:
        return []
    gone = ", ".join(c.name for c in clusters)
    raised = [c.name for c in preview.of("update") if c.type == NODE_GROUP and _floor(c.after)
              > _floor(c.before)]
    first_steps = [f"the surviving regions' floors rise in this change ({', '.join(raised)}): "
                   "`pulumi up` their stacks first, so they carry the users DNS moves to them"
                   ] if raised else []
    if part and part != GLOBAL:
        first = (f"global stack first: `pulumi up --stack {global_stack(env)}` so the latency "
                 f"records and health checks of {part} go, then wait one record TTL")
        last = f"`pulumi destroy --stack {stack}`, then `pulumi stack rm {stack}`"
    else:
        first = ("the global part first: the records and health checks of the region go in "
                 "the same update; if the environment deploys as region stacks, "
                 f"`pulumi up --stack {global_stack(env)}` before the region's own stack")
        last = "`pulumi up` (or `pulumi destroy` for the region's own stack)"
    middle = [b.step for b in sorted(preview.blockers, key=lambda b: b.rank)]
    return [*first_steps, first, *dict.fromkeys(middle), f"{last} (removes {gone})"]


def _first_rollout(env: str, order: Sequence[str]) -> list[str]:
    """A new environment's stacks in `llmfleet rollout`'s order, its global stack first once
    (deploy_order's bootstrap): it writes the global name's validation record, which every
    region's certificate waits for."""
    if not order:
        return [f"a first rollout: the stacks of `llmfleet rollout --stack {env}`, in its order"]
    bootstrap = [s for s in order if s == global_stack(env)][:1]
    runs = [f"`pulumi up --stack {s}`" for s in order]
    if bootstrap and order[0] != bootstrap[0]:
        runs.insert(0, f"`pulumi up --stack {bootstrap[0]}` (once, first: the global name's "
                    "certificate validation record, which every region's certificate waits for)")
    return [f"a first rollout: {run}" for run in runs]


def _floor(r: Resource | None) -> int:
    return int(((r or {}).get("inputs", {}).get("scalingConfig") or {}).get("minSize") or 0)



def resource_change(base: str, head: str, allow: Sequence[str] = ()) -> ChangePreview:
    """`llmfleet diff --resources BASE HEAD`: each side (a stack name: this tree; REV:STACK:
    that revision; a stack or plan file) run for the same stack, and the change between."""
    sides = [_side(base), _side(head)]
    stack = next((s for _, s in sides if s), None)
    if stack is None:
        raise StackError(f"diff --resources: name the stack on one side ({base!r}, {head!r}), "
                         "e.g. origin/main:prod prod")
    runs = []
    retiring: list[str] = []
    for k, (source, _) in enumerate(sides):
        if source is None:
            resources, result = after_run(stack)
            runs.append(resources)
            if k == 1 and result is not None:
                retiring = retiring_regions(result.fleet_plan)
        else:
            runs.append(before_run(stack, source).resources)
    return preview_change(stack, runs[0], runs[1], base, allow, retiring=retiring)


def _side(spec: str) -> tuple[str | None, str | None]:
    """(what `before_run` takes, or None for this tree; the stack it names, if any)."""
    path = Path(spec)
    if path.is_file():
        name = path.name
        named = name.startswith("Pulumi.") and name.endswith((".yaml", ".yml"))
        return spec, name[len("Pulumi."):].rsplit(".", 1)[0] if named else None
    if ":" in spec:
        rev, _, stack = spec.rpartition(":")
        return rev, stack.removesuffix(".yaml").removeprefix("stacks/Pulumi.")
    return None, spec
