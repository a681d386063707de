"""The preview's resources as a dependency graph: what each resource waits for before the
engine creates it.

A resource waits for its explicit `depends_on` and the resources whose outputs it reads
(the engine records both as dependencies), and for its provider (a Kubernetes provider
waits for the cluster its kubeconfig names). Waiting for a component is waiting for every
resource under it. Transitively: if A waits for B and B for C, A is created after C."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

Resource = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    """What a check of the graph found: the check, the resource and what AWS or Kubernetes
    would do with it."""

    check: str
    resource: str
    message: str


class Graph:
    """Resources by URN, with `waits_for(a, b)`: is `b` created before `a`?"""

    def __init__(self, resources: Iterable[Resource]) -> None:
        self.by_urn: dict[str, Resource] = {r["urn"]: r for r in resources}
        self.children: dict[str, list[str]] = {}
        for r in self.by_urn.values():
            if r.get("parent_urn"):
                self.children.setdefault(r["parent_urn"], []).append(r["urn"])
        self._closure = cache(self._closure_uncached)

    def descendants(self, urn: str) -> set[str]:
        out: set[str] = set()
        stack = list(self.children.get(urn, []))
        while stack:
            u = stack.pop()
            if u not in out:
                out.add(u)
                stack.extend(self.children.get(u, []))
        return out

    def direct(self, urn: str) -> set[str]:
        """What the resource waits for directly: its dependencies (a component: everything
        under it) and its provider."""
        r = self.by_urn[urn]
        deps = set((r.get("options") or {}).get("depends_on_urns") or [])
        if r.get("provider_urn"):
            deps.add(r["provider_urn"])
        expanded = set(deps)
        for d in deps:
            expanded |= self.descendants(d)
        return {d for d in expanded if d in self.by_urn and d != urn}

    def _closure_uncached(self, urn: str) -> frozenset[str]:
        seen: set[str] = set()
        stack = [urn]
        while stack:
            u = stack.pop()
            for d in self.direct(u):
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return frozenset(seen)

    def waits_for(self, resource: Resource, other: Resource) -> bool:
        return other["urn"] in self._closure(resource["urn"])

    def of_type(self, *types: str) -> list[Resource]:
        return [r for r in self.by_urn.values() if r["type"] in types]

    def provider_of(self, r: Resource) -> Resource | None:
        return self.by_urn.get(r.get("provider_urn") or "")

    def region_of(self, r: Resource) -> str | None:
        """An AWS resource's region: its provider's (None for what has none)."""
        provider = self.provider_of(r)
        if provider is None:
            return None
        region = (provider.get("inputs") or {}).get("region")
        return str(region) if region else None

    def cluster_of(self, r: Resource) -> str | None:
        """A Kubernetes object's cluster: the provider it is created with."""
        return r.get("provider_urn")

    def eks_cluster_of(self, r: Resource) -> tuple[str | None, str] | None:
        """(region, EKS cluster name) of a Kubernetes object: the cluster whose kubeconfig
        its provider reads (the provider waits for it)."""
        provider = self.provider_of(r)
        if provider is None:
            return None
        for dep in (provider.get("options") or {}).get("depends_on_urns") or []:
            cluster = self.by_urn.get(dep)
            if cluster is not None and cluster["type"] == "aws:eks/cluster:Cluster":
                name = (cluster.get("inputs") or {}).get("name") or cluster["name"]
                return self.region_of(cluster), str(name)
        return None
