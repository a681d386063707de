"""Pinned CRD schemas and what a rendered object breaks in them: Karpenter's (tests/crds/,
the structural schema plus fields it does not declare) and the KEDA and prometheus-operator
objects' (cloudcoil's models of the upstream CRDs, plus keys the models do not declare)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from cloudcoil.models.keda.v1alpha1 import ScaledObject
from cloudcoil.models.prometheus_operator.v1 import PrometheusRule, ServiceMonitor
from pydantic import BaseModel, RootModel

from llmfleet.outputs import karpenter

CRD_DIR = Path(__file__).parent / "crds" / f"karpenter-{karpenter.KARPENTER_VERSION}"


CRD_FILES = {
    "NodePool": "karpenter.sh_nodepools.yaml",
    "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml",
}


@cache
def schema(kind: str, api_version: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRD_DIR / CRD_FILES[kind]).read_text())
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    served = {v["name"]: v for v in crd["spec"]["versions"] if v["served"]}
    return dict(served[version]["schema"]["openAPIV3Schema"])


def undeclared(schema_node: dict[str, Any], data: Any, path: str = "") -> list[str]:
    """Keys the structural schema does not declare (the API server prunes them)."""
    if isinstance(data, dict):
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
        return [p for i, v in enumerate(data) for p in undeclared(schema_node["items"], v, path)]
    return []


def problems(doc: dict[str, Any]) -> list[str]:
    s = schema(doc["kind"], doc["apiVersion"])
    errors = [e.message for e in jsonschema.Draft7Validator(s).iter_errors(doc)]
    return errors + [f"undeclared {p}" for p in undeclared(s, doc)]


CRD_MODELS: dict[str, type[BaseModel]] = {
    "ScaledObject": ScaledObject,
    "ServiceMonitor": ServiceMonitor,
    "PrometheusRule": PrometheusRule,
}
CRD_VERSIONS = {"keda": "2.16.1", "prometheus-operator": "0.80.1"}


def undeclared_keys(model: Any, data: Any, path: str = "") -> list[str]:
    """Dotted paths of keys in `data` that the validated `model` does not declare."""
    if isinstance(model, RootModel):
        return undeclared_keys(model.root, data, path)
    if isinstance(model, BaseModel) and isinstance(data, dict):
        fields = {(f.alias or name): name for name, f in type(model).model_fields.items()}
        bad = []
        for key, value in data.items():
            if key not in fields:
                bad.append(f"{path}.{key}")
            else:
                bad += undeclared_keys(getattr(model, fields[key]), value, f"{path}.{key}")
        return bad
    if isinstance(model, list) and isinstance(data, list):
        return [
            p
            for i, (m, d) in enumerate(zip(model, data, strict=True))
            for p in undeclared_keys(m, d, f"{path}[{i}]")
        ]
    if isinstance(model, dict) and isinstance(data, dict):
        return [
            p for k in data if k in model for p in undeclared_keys(model[k], data[k], f"{path}.{k}")
        ]
    return []


def validate_crd(obj: dict[str, Any]) -> list[str]:
    model = CRD_MODELS[obj["kind"]].model_validate(obj)
    return undeclared_keys(model, obj)
