"""The table of what a change to a resource's inputs does (components/preview/
replacements.csv): every row sourced and well-formed, and every transition rule of the pinned
CRDs in it. That it covers every type the program registers, for every layout, is checked
where the program runs (test_change_program.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.preview.replacements import covers, parse_path, rules, rules_for, show_path

CRDS = Path(__file__).resolve().parent.parent / "crds"
TYPE = re.compile(r"^(aws|kubernetes|pulumi|llmfleet):[\w./-]*(:(\w+|\*))?$|^(aws|kubernetes):\*$")


def test_every_row_has_a_type_an_effect_a_condition_and_a_source() -> None:
    assert len(rules()) > 150
    for rule in rules():
        assert TYPE.match(rule.type), rule
        assert rule.effect in ("replace", "refused", "recreates", "none"), rule
        assert rule.when in ("always", "removed", "minor_step", "presence", "active_cluster")
        assert len(rule.source) > 20, rule
        assert bool(rule.property) == (rule.effect != "none"), rule


def test_a_key_holding_dots_is_one_segment_of_a_path() -> None:
    path = parse_path('metadata.annotations["alb.ingress.kubernetes.io/scheme"]')
    assert path == ("metadata", "annotations", "alb.ingress.kubernetes.io/scheme")
    assert show_path(path) == 'metadata.annotations["alb.ingress.kubernetes.io/scheme"]'


def test_a_type_gets_its_own_rows_and_its_providers() -> None:
    props = {show_path(r.property) for r in rules_for("aws:eks/nodeGroup:NodeGroup")}
    assert {"instanceTypes", "subnetIds", "nodeRoleArn", "region"} <= props
    assert "scalingConfig" not in props  # a floor change is an update
    k8s = {show_path(r.property) for r in rules_for("kubernetes:apps/v1:Deployment")}
    assert {"metadata.name", "metadata.namespace", "spec.selector"} <= k8s
    assert covers("aws:eks/nodeGroup:NodeGroup") and covers("llmfleet:index:Anything")
    assert not covers("aws:rds/instance:Instance")  # a pattern row covers no type of its own


def _transition_rules(node: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Paths that a CEL rule comparing with oldSelf guards, in an openAPIV3Schema."""
    out = []
    for rule in node.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            fields = re.findall(r"oldSelf\.(\w+)", rule["rule"])
            out += [(*path, f) for f in fields] or [path]
    for name, child in (node.get("properties") or {}).items():
        out += _transition_rules(child, (*path, name))
    if isinstance(node.get("items"), dict):
        out += _transition_rules(node["items"], path)
    return out


CRD_FILES = sorted(CRDS.rglob("*.yaml"))


@pytest.mark.parametrize("path", CRD_FILES, ids=[p.name for p in CRD_FILES])
def test_every_transition_rule_of_a_pinned_crd_is_a_refused_row(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            typ = f"kubernetes:{group}/{version['name']}:{kind}"
            schema = version.get("schema", {}).get("openAPIV3Schema", {})
            refused = {r.property for r in rules_for(typ) if r.effect == "refused"}
            for guarded in _transition_rules(schema, ()):
                assert guarded in refused, (typ, guarded)
