"""Moving an environment deployed as one stack into its region stacks and global stack without
recreating anything (`llmfleet preview --stack ENV --split`).

Every resource keeps its name, type and parent between the two layouts, so its URN differs
only in the stack's name: `pulumi state move` rewrites exactly that (it keeps the type chain;
a moved resource whose parent stays behind is re-parented to the root stack in the state,
and the destination program, which registers it under its own `Fleet` component with the
same URN, sets the parent back). The commands come from the mocked previews of the deploy
stacks: each gets the top-level components (children of `Fleet`, providers aside: `state
move` copies the providers a moved resource uses) that its own program registers.

One resource changes owner on purpose: the global name's ACM validation record, which every
region's certificate used to write (`<fleet>-<region>-cert-validation-0`: one Route53 record
owned once per region). All copies move to the global stack; the first region's is adopted
there by `GlobalValidation`'s alias, the others are forgotten (`pulumi state delete` keeps the
record; deleting any copy would delete it for every region).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.global_endpoint import validation_copy_urn
from components.preview.run import project_name, run_program
from llmfleet.plan.stacks import deploy_stacks, read_plan, splits

FLEET_TYPE = "llmfleet:index:Fleet"
PROVIDER_PREFIX = "pulumi:providers:"


def in_stack(urn: str, stack: str) -> str:
    """`urn` with its stack part replaced (what `pulumi state move` does to it)."""
    _, rest = urn.split("::", 1)
    return f"urn:pulumi:{stack}::{rest}"


def top_level(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The direct children of the Fleet component that `state move` may move."""
    return [
        r
        for r in resources
        if r["parent_type"] == FLEET_TYPE and not r["type"].startswith(PROVIDER_PREFIX)
    ]


def _quoted(urns: list[str]) -> str:
    return " \\\n    ".join(f"'{u}'" for u in urns)


def split_commands(
    env: str, previews: Mapping[str, list[dict[str, Any]]] | None = None
) -> list[str]:
    """The shell commands, in order, that move the single stack `env` into its deploy
    stacks. `previews`: stack -> its preview's resources (default: run them)."""
    plan = read_plan(env)
    if not splits(plan):
        return [f"# {env} has one region: it stays the one stack {env}"]
    stacks = deploy_stacks(env, plan, plan.rollout.order)
    runs = dict(previews or {s: run_program(s).resources for s in stacks})
    glob, project = stacks[-1], project_name()
    copies = [validation_copy_urn(env, project, plan.name, r.name) for r in plan.regions]
    lines = [
        f"# Move the single stack {env} into {', '.join(stacks)} (pulumi state move: nothing is",
        "# recreated). First keep a copy of its state:",
        f"pulumi stack export --stack {env} --file {env}.state.json",
        *(f"pulumi stack init {s}  # its config is stacks/Pulumi.{s}.yaml" for s in stacks),
        "# 1. The global name's validation record, written by each region's certificate: every",
        "#    copy to the global stack; the first is adopted there (an alias), the others are",
        "#    forgotten (the Route53 record stays; deleting a copy would delete it).",
        f"pulumi state move --yes --source {env} --dest {glob} \\\n    {_quoted(copies)}",
        *(f"pulumi state delete --yes --stack {glob} '{in_stack(u, glob)}'" for u in copies[1:]),
        "# 2. Each stack's resources; their children and the providers they use come along.",
    ]
    for stack in stacks:
        urns = [in_stack(r["urn"], env) for r in top_level(runs[stack])]
        move = f"pulumi state move --yes --source {env} --dest {stack}"
        lines.append(f"{move} \\\n    {_quoted(urns)}")
    lines += [
        "# (`state move` warns of a resource not found: one this llmfleet version adds; the",
        "#  next `up` creates it.)",
        "# 3. Each preview must show no replace or delete of a moved resource:",
        *(f"pulumi preview --stack {s}" for s in stacks),
        "# 4. The old stack keeps only its Fleet component and providers: remove it, keeping its",
        "#    config file (the plan):",
        f"pulumi stack rm --yes --force --preserve-config {env}",
        f"# Then deploy in order: llmfleet rollout --stack {env}",
    ]
    return lines
