"""Every rendered object validates against the upstream schema of what will receive it.

- Core Kubernetes objects: kubernetes-validate's OpenAPI schemas for the plan's Kubernetes
  version, strict (an unknown field is an error, as `kubectl apply --validate=strict`).
- KEDA ScaledObject, ServiceMonitor and PrometheusRule: the CRDs of the versions the cluster
  installs (catalog/charts.csv: KEDA 2.20.2; prometheus-operator v0.93.1 as
  kube-prometheus-stack 88.5.3 ships it), kept in tests/crds/ with their source, through
  `crd_schema.problems`: the structural schema with jsonschema, plus any key the schema
  does not declare at its level (the API server's structural pruning would drop it).
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from crd_schema import CRD_FILES, FIXTURE_LAGS, FIXTURES, problems

from llmfleet.catalog.kubernetes import chart
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.outputs import render

CRD_KINDS = ("ScaledObject", "ServiceMonitor", "PrometheusRule")
OTHER_CRD_KINDS = ("LeaderWorkerSet",)
"""Custom resources checked elsewhere (tests/outputs/test_multi_node_render.py)."""


def validate_crd(obj: dict[str, Any]) -> list[str]:
    return problems(obj)


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
    """Every kind a region renders is here or a custom resource (a replica across nodes is a
    LeaderWorkerSet: tests/outputs/test_multi_node_render.py checks its pods strictly)."""
    core = [(v, o) for v, o in objects if o["kind"] not in (*CRD_KINDS, *OTHER_CRD_KINDS)]
    assert {o["kind"] for _, o in core} <= {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Ingress",
        "Job",
    }
    for version, obj in core:
        kubernetes_validate.validate(obj, version, strict=True)


def test_every_scaled_object_and_service_monitor_validates_against_its_crd(objects) -> None:
    crds = [o for _, o in objects if o["kind"] in CRD_KINDS]
    assert {o["kind"] for o in crds} == set(CRD_KINDS)
    for obj in crds:
        assert validate_crd(obj) == [], obj["kind"]


def test_the_crd_fixtures_are_the_versions_the_cluster_installs_or_say_why_not() -> None:
    """Each fixture is the pinned chart's CRD, or FIXTURE_LAGS says why that one is missing
    (and a lag is dropped once the fixture catches up)."""
    for component, fixture in FIXTURES.items():
        pinned = chart(component).version
        assert (fixture == pinned) != (component in FIXTURE_LAGS), (component, fixture, pinned)
    assert CRD_FILES["ScaledObject"].startswith(f"keda-{FIXTURES['keda']}/")


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
    assert validate_crd(obj) == [f"undeclared {path}"]


def test_the_crd_check_rejects_a_wrong_type(objects) -> None:
    obj = copy.deepcopy(next(o for _, o in objects if o["kind"] == "ScaledObject"))
    obj["spec"]["minReplicaCount"] = "two"
    assert any("'two' is not of type 'integer'" in p for p in validate_crd(obj))
