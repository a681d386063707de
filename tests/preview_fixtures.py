"""Resources as `llmfleet preview --json` lists them, written out by hand for the tests of the
preview's checks (tests/components/test_preview_checks.py, test_aws_rules.py): the providers
and the cluster every fixture runs on, one resource, and a check's messages."""

from __future__ import annotations

from typing import Any

from components.preview.checks import run_checks

ACCOUNT = "111122223333"
AWS_PROVIDER = "urn:p::aws::pulumi:providers:aws::fleet-us-east-1-aws"
K8S_PROVIDER = "urn:p::k8s::pulumi:providers:kubernetes::fleet-us-east-1-k8s"
CLUSTER_URN = "urn:p::x::aws:eks/cluster:Cluster::fleet-us-east-1"


def res(typ: str, name: str, inputs: dict[str, Any], *, provider: str | None = None,
        deps: tuple[str, ...] = (), resource_id: str | None = None) -> dict[str, Any]:
    """One resource as the preview records it (`deps`: URNs it waits for)."""
    return {
        "urn": f"urn:p::x::{typ}::{name}",
        "type": typ,
        "name": name,
        "id": resource_id or f"{name}-id",
        "parent": None,
        "parent_urn": None,
        "parent_type": None,
        "provider": provider.rsplit("::", 1)[-1] if provider else None,
        "provider_urn": provider,
        "inputs": inputs,
        "options": {"ignore_changes": [], "depends_on": [], "depends_on_urns": sorted(deps)},
    }


def urn(r: dict[str, Any]) -> str:
    return str(r["urn"])


def base() -> list[dict[str, Any]]:
    """The providers and the cluster every fixture runs on."""
    return [
        {**res("pulumi:providers:aws", "fleet-us-east-1-aws", {"region": "us-east-1"}),
         "urn": AWS_PROVIDER},
        {**res("pulumi:providers:kubernetes", "fleet-us-east-1-k8s", {"kubeconfig": "[secret]"},
               deps=(CLUSTER_URN,)), "urn": K8S_PROVIDER},
        {**res("aws:eks/cluster:Cluster", "fleet-us-east-1", {"name": "fleet-us-east-1"},
               provider=AWS_PROVIDER), "urn": CLUSTER_URN},
    ]


def checks(resources: list[dict[str, Any]], only: str) -> list[str]:
    return [f.message for f in run_checks(resources, ACCOUNT, only=[only])]
