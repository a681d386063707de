"""Every rendered object validates against the upstream schema of what will receive it.

- Core Kubernetes objects: kubernetes-validate's OpenAPI schemas for the plan's Kubernetes
  version, strict (an unknown field is an error, as `kubectl apply --validate=strict`).
- KEDA ScaledObject and ServiceMonitor: the pydantic models that cloudcoil generates from
  the upstream CRDs, at the versions ClusterAddons installs: cloudcoil-models-keda 2.16.1.0
  (KEDA v2.16.1 CRDs) and cloudcoil-models-prometheus-operator 0.80.1.0 (prometheus-operator
  v0.80.1 CRDs, shipped by kube-prometheus-stack 69.5.1). Those models ignore unknown fields,
  so `undeclared_keys` walks each object beside its model and reports any key that the model
  does not declare (by alias) at that level, like the API server's structural pruning would.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from crd_schema import CRD_MODELS, CRD_VERSIONS, validate_crd

from components.cluster_addons import KEDA, KUBE_PROMETHEUS_STACK
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.outputs import render


def _objects(plans: dict[str, FleetPlan]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (fp.kubernetes_version, doc)
        for fp in plans.values()
        for rp in fp.regions
        for doc in render.region_manifests(fp, rp)
    ]


@pytest.fixture(scope="module")
def objects(stack_plans: dict[str, FleetPlan]) -> list[tuple[str, dict[str, Any]]]:
    return _objects(stack_plans)


def test_every_core_object_validates_strictly_for_the_plans_kubernetes(objects) -> None:
    core = [(v, o) for v, o in objects if o["kind"] not in CRD_MODELS]
    assert {o["kind"] for _, o in core} == {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Ingress",
    }
    for version, obj in core:
        kubernetes_validate.validate(obj, version, strict=True)


def test_every_scaled_object_and_service_monitor_validates_against_its_crd(objects) -> None:
    crds = [o for _, o in objects if o["kind"] in CRD_MODELS]
    assert {o["kind"] for o in crds} == set(CRD_MODELS)
    for obj in crds:
        assert validate_crd(obj) == [], obj["kind"]


def test_the_crd_models_are_the_versions_the_cluster_installs() -> None:
    from importlib.metadata import version

    assert version("cloudcoil.models.keda").startswith(CRD_VERSIONS["keda"])
    assert version("cloudcoil.models.prometheus_operator").startswith(
        CRD_VERSIONS["prometheus-operator"]
    )
    assert KEDA.version == CRD_VERSIONS["keda"]
    assert KUBE_PROMETHEUS_STACK.version == "69.5.1"  # ships prometheus-operator v0.80.1


# --- the validators themselves catch mistakes ---------------------------------------------------


def test_strict_kubernetes_validation_rejects_an_unknown_field(objects) -> None:
    version, deployment = next((v, o) for v, o in objects if o["kind"] == "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, version, strict=True)


@pytest.mark.parametrize(
    ("kind", "mutate", "path"),
    [
        (
            "ScaledObject",
            lambda o: o["spec"]["fallback"].update(replica=1),
            ".spec.fallback.replica",
        ),
        (
            "ScaledObject",
            lambda o: o["spec"]["triggers"][0].update(metric="x"),
            ".spec.triggers[0].metric",
        ),
        (
            "ScaledObject",
            lambda o: o["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"][
                "scaleDown"
            ].update(stabilizationWindow=1),
            ".spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindow",
        ),
        (
            "ServiceMonitor",
            lambda o: o["spec"]["endpoints"][0].update(paths="/m"),
            ".spec.endpoints[0].paths",
        ),
        ("ServiceMonitor", lambda o: o.update(extra=1), ".extra"),
        (
            "PrometheusRule",
            lambda o: o["spec"]["groups"][0]["rules"][0].update(severity="x"),
            ".spec.groups[0].rules[0].severity",
        ),
    ],
)
def test_the_strict_crd_check_names_an_undeclared_key(objects, kind, mutate, path) -> None:
    obj = copy.deepcopy(next(o for _, o in objects if o["kind"] == kind))
    mutate(obj)
    assert validate_crd(obj) == [path]


def test_the_crd_models_reject_a_wrong_type(objects) -> None:
    obj = copy.deepcopy(next(o for _, o in objects if o["kind"] == "ScaledObject"))
    obj["spec"]["minReplicaCount"] = "two"
    with pytest.raises(ValueError, match="minReplicaCount|min_replica_count"):
        validate_crd(obj)
