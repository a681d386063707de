"""Does a pod's NetworkPolicy admit every endpoint the pod needs?

Kubernetes semantics (networking.k8s.io/v1): a pod selected by no policy with `Egress` in its
policyTypes may reach anything; once one selects it, a connection is allowed only if some
egress rule of some selecting policy admits it: every `to` peer list entry and port list
is an OR, a missing `to` or `ports` admits all. The VPC CNI's policy agent enforces the same
on link-local destinations too (aws-network-policy-agent: eBPF LPM lookup on every
destination, only the node's own IP is allowed by default), so the Pod Identity agent's
169.254.170.23 needs a rule like any other address.

What a pod needs:
- DNS: CoreDNS pods (`k8s-app: kube-dns` in kube-system) on UDP and TCP 53;
- EKS Pod Identity: 169.254.170.23 TCP 80, when its ServiceAccount has an association (EKS
  user guide, pod-id-considerations);
- STS (HTTPS to a public address), when its ServiceAccount uses IRSA
  (`eks.amazonaws.com/role-arn`): IRSA calls AssumeRoleWithWebIdentity from the pod;
- S3 and Hugging Face (HTTPS to a public address), when it reads or writes the model store
  (an S3 model path, or the staging scripts' bucket): through the VPC's S3 gateway endpoint
  S3 still answers on its public ranges. The probe address is TEST-NET-2 (198.51.100.10,
  RFC 5737), standing for any public address: the rendered policy admits public HTTPS as a
  range, not S3's own prefixes."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

POD_IDENTITY_ADDRESS = "169.254.170.23"
PUBLIC_PROBE = "198.51.100.10"
KUBE_DNS = {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}}
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class Endpoint:
    """A destination a pod connects to: an address, or pods by namespace and labels."""

    what: str
    protocol: str
    port: int
    address: str | None = None
    namespace: str | None = None
    labels: Mapping[str, str] | None = None


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions In/NotIn/Exists/DoesNotExist)."""
    if selector is None:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def _peer_admits(peer: Mapping[str, Any], end: Endpoint, own_namespace: str) -> bool:
    if "ipBlock" in peer:
        if end.address is None:
            return False
        addr = ipaddress.ip_address(end.address)
        block = peer["ipBlock"]
        if addr not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(addr in ipaddress.ip_network(x) for x in block.get("except") or [])
    if end.namespace is None or end.labels is None:
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": end.namespace}
        if not _matches(peer["namespaceSelector"], ns_labels):
            return False
    elif end.namespace != own_namespace:
        return False
    return _matches(peer.get("podSelector"), end.labels)


def _port_admits(ports: list[Mapping[str, Any]] | None, end: Endpoint) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != end.protocol:
            continue
        port, last = p.get("port"), p.get("endPort")
        if port is None or port == end.port or (last is not None and port <= end.port <= last):
            return True
    return False


def admitted(
    policies: list[Mapping[str, Any]], namespace: str, labels: Mapping[str, str], end: Endpoint
) -> bool:
    """Whether the pod (namespace, labels) may connect to `end` under `policies`."""
    selecting = [
        p for p in policies
        if (p.get("metadata") or {}).get("namespace") == namespace
        and _matches((p.get("spec") or {}).get("podSelector") or {}, labels)
        and "Egress" in ((p.get("spec") or {}).get("policyTypes") or [])
    ]
    if not selecting:
        return True
    for p in selecting:
        for rule in (p.get("spec") or {}).get("egress") or []:
            peers = rule.get("to")
            if not _port_admits(rule.get("ports"), end):
                continue
            if not peers or any(_peer_admits(peer, end, namespace) for peer in peers):
                return True
    return False


def admitted_from(
    policies: list[Mapping[str, Any]], namespace: str, labels: Mapping[str, str], peer: Endpoint
) -> bool:
    """Whether pods (namespace, labels) accept a connection from `peer` (its namespace and
    labels, to `peer.port`) under `policies`: the ingress side of `admitted`."""
    selecting = [
        p for p in policies
        if (p.get("metadata") or {}).get("namespace") == namespace
        and _matches((p.get("spec") or {}).get("podSelector") or {}, labels)
        and "Ingress" in ((p.get("spec") or {}).get("policyTypes") or ["Ingress"])
    ]
    if not selecting:
        return True
    for p in selecting:
        for rule in (p.get("spec") or {}).get("ingress") or []:
            if not _port_admits(rule.get("ports"), peer):
                continue
            peers = rule.get("from")
            if not peers or any(_peer_admits(source, peer, namespace) for source in peers):
                return True
    return False


def needs(
    pod: Mapping[str, Any],
    *,
    has_pod_identity: bool,
    irsa: bool,
    configmaps: Mapping[str, Mapping[str, str]],
) -> list[Endpoint]:
    """The endpoints a pod template needs (see the module docstring)."""
    out = [
        Endpoint("DNS (CoreDNS, UDP)", "UDP", 53, **KUBE_DNS),  # type: ignore[arg-type]
        Endpoint("DNS (CoreDNS, TCP)", "TCP", 53, **KUBE_DNS),  # type: ignore[arg-type]
    ]
    if has_pod_identity:
        out.append(Endpoint("the EKS Pod Identity agent", "TCP", 80, POD_IDENTITY_ADDRESS))
    if irsa:
        out.append(Endpoint("STS (IRSA's AssumeRoleWithWebIdentity)", "TCP", 443, PUBLIC_PROBE))
    if _reads_model_store(pod, configmaps):
        out.append(Endpoint("S3 (the model store, public ranges)", "TCP", 443, PUBLIC_PROBE))
    return out


def _reads_model_store(pod: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]]) -> bool:
    containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
    for c in containers:
        if any(e.get("name") == "LLMFLEET_BUCKET" for e in c.get("env") or []):
            return True
    for volume in pod.get("volumes") or []:
        data = configmaps.get(((volume.get("configMap") or {}).get("name")) or "") or {}
        for text in data.values():
            if text.lstrip().startswith(("model:", "{")) or "\nmodel:" in text:
                config = yaml.safe_load(text)
                if isinstance(config, dict) and str(config.get("model", "")).startswith("s3://"):
                    return True
    return False
