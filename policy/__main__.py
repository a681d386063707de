"""llmfleet's CrossGuard policy pack: `pulumi preview --policy-pack policy`.

Every rule lives in rules.py as a pure function over resource dicts; this file only adapts
`pulumi_policy` resources to that shape and registers one policy per rule, resource-scoped
rules as ResourceValidationPolicy, the ones that need other resources as
StackValidationPolicy. The tests run the same functions offline (tests/test_policy.py).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Secret,
    StackValidationArgs,
    StackValidationPolicy,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rules import RULES, SECRET, Rule  # noqa: E402

LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}


def plain(value: Any) -> Any:
    """Properties as plain data; a Pulumi secret shows as "[secret]", as in the preview."""
    if isinstance(value, Secret):
        return SECRET
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def as_resource(resource_type: str, name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    data = plain(props)
    return {"type": resource_type, "name": name, "id": data.get("id"), "inputs": data}


def resource_policy(rule: Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        resource = as_resource(args.resource_type, args.name, args.props)
        for v in rule.check([resource], args.stack_tags):
            report(v.message, args.urn)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=LEVELS[rule.enforcement],
    )


def stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [as_resource(r.resource_type, r.name, r.props) for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for v in rule.check(resources, args.stack_tags):
            report(v.message, urns.get(v.resource))

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=LEVELS[rule.enforcement],
    )


POLICIES = [resource_policy(r) if r.scope == "resource" else stack_policy(r) for r in RULES]

if __name__ == "__main__":  # the analyzer host runs this file; PolicyPack serves until killed
    PolicyPack(
        name="llmfleet",
        description="Secure defaults of an llmfleet GPU fleet (policy/rules.py).",
        policies=POLICIES,
    )
