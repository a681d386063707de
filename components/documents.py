"""A rendered Kubernetes document as a typed Pulumi resource: the kinds llmfleet deploys
(core objects by their SDK class, CRDs as `CustomResource`) and the document's top-level
keys as the SDK's argument names. VllmService, PrefixRouter and Karpenter deploy their
rendered documents through it, unchanged."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

TYPED: Mapping[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("networking.k8s.io/v1", "Ingress"): k8s.networking.v1.Ingress,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}
"""Core objects get their typed class; the CRDs below are `apiextensions.CustomResource`."""
CUSTOM = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
TOP_LEVEL = {
    "apiVersion": "api_version",
    "kind": "kind",
    "metadata": "metadata",
    "automountServiceAccountToken": "automount_service_account_token",
    "roleRef": "role_ref",
}


def resource_kwargs(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed document as resource keyword arguments: top-level keys become the SDK's
    argument names (`apiVersion` -> `api_version`); everything below is passed verbatim."""
    return {TOP_LEVEL.get(key, key): value for key, value in doc.items()}
