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
FIXTURES = {"karpenter": chart("karpenter").version, "keda": "2.20.2",
            "kube-prometheus-stack": "88.5.3"}
"""The chart version whose CRDs tests/crds/ holds, per chart: the pinned one, or an older one
named in FIXTURE_LAGS with why the pinned version's files are not here."""
FIXTURE_LAGS = {
    "keda": "KEDA 2.21.1's CRDs are in no stored copy here (kedacore/charts and kedacore/keda "
    "stop at v2.20.2, 2026-08); ScaledObject keda.sh/v1alpha1 is served by both",
    "kube-prometheus-stack": "92.9.0's CRDs are in no stored copy here (prometheus-community/"
    "helm-charts stops at 88.5.3, prometheus-operator at v0.93.0, 2026-08); ServiceMonitor and "
    "PrometheusRule monitoring.coreos.com/v1 are served by both",
}
CRD_FILES = {
    "NodePool": f"karpenter-{FIXTURES['karpenter']}/karpenter.sh_nodepools.yaml",
    "EC2NodeClass": f"karpenter-{FIXTURES['karpenter']}/karpenter.k8s.aws_ec2nodeclasses.yaml",
    "ScaledObject": f"keda-{FIXTURES['keda']}/keda.sh_scaledobjects.yaml",
    "ServiceMonitor": f"kube-prometheus-stack-{FIXTURES['kube-prometheus-stack']}/"
    "crd-servicemonitors.yaml",
    "PrometheusRule": f"kube-prometheus-stack-{FIXTURES['kube-prometheus-stack']}/"
    "crd-prometheusrules.yaml",
}
"""Per kind, its CRD fixture (FIXTURES): a chart bump without its CRD here, or a lag named in
FIXTURE_LAGS, fails loudly."""


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
