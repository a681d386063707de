"""Karpenter's pinned CRD schemas (tests/crds/), and what a rendered NodePool or
EC2NodeClass breaks in them: the structural schema plus fields it does not declare."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

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
