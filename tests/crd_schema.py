"""The pinned CRD schemas of what llmfleet renders objects of (tests/crds/, each directory
with the source of its files), and what a rendered object breaks in them: the structural
schema plus fields it does not declare (the API server would prune them)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from llmfleet.catalog.kubernetes import chart

CRDS = Path(__file__).parent / "crds"
CRD_FILES = {
    "NodePool": f"karpenter-{chart('karpenter').version}/karpenter.sh_nodepools.yaml",
    "EC2NodeClass": f"karpenter-{chart('karpenter').version}/karpenter.k8s.aws_ec2nodeclasses.yaml",
    "ScaledObject": f"keda-{chart('keda').version}/keda.sh_scaledobjects.yaml",
    "ServiceMonitor": f"kube-prometheus-stack-{chart('kube-prometheus-stack').version}/"
    "crd-servicemonitors.yaml",
    "PrometheusRule": f"kube-prometheus-stack-{chart('kube-prometheus-stack').version}/"
    "crd-prometheusrules.yaml",
}
"""Per kind, its CRD at the version the pinned chart installs (catalog/charts.csv): a chart
bump without its CRD here fails loudly (the file is missing)."""


@cache
def schema(kind: str, api_version: str) -> dict[str, Any]:
    [crd] = [d for d in yaml.safe_load_all((CRDS / CRD_FILES[kind]).read_text()) if d]
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    served = {v["name"]: v for v in crd["spec"]["versions"] if v["served"]}
    return dict(served[version]["schema"]["openAPIV3Schema"])


def undeclared(schema_node: dict[str, Any], data: Any, path: str = "") -> list[str]:
    """Keys the structural schema does not declare (the API server prunes them)."""
    if isinstance(data, dict):
        if schema_node.get("x-kubernetes-preserve-unknown-fields"):
            return []
        props = schema_node.get("properties")
        extra = schema_node.get("additionalProperties")
        if props is None:
            return (
                []
                if extra is None or extra is True
                else [p for k, v in data.items() for p in undeclared(extra, v, f"{path}.{k}")]
            )
        bad = [f"{path}.{k}" for k in data if k not in props]
        return bad + [
            p for k, v in data.items() if k in props for p in undeclared(props[k], v, f"{path}.{k}")
        ]
    if isinstance(data, list) and "items" in schema_node:
        items = schema_node["items"]
        return [p for i, v in enumerate(data) for p in undeclared(items, v, f"{path}[{i}]")]
    return []


def problems(doc: dict[str, Any]) -> list[str]:
    s = schema(doc["kind"], doc["apiVersion"])
    errors = [e.message for e in jsonschema.Draft7Validator(s).iter_errors(doc)]
    return errors + [f"undeclared {p}" for p in undeclared(s, doc)]
