"""components.preview.wiring: an Ingress's backend exists before it, a pod that watches pods
may, a PodDisruptionBudget lets a drain evict a pod; each finding and its fix."""

from __future__ import annotations

from typing import Any

from preview_fixtures import K8S_PROVIDER, base, checks, res, urn

META = {"namespace": "chat"}


def _service(name: str) -> dict[str, Any]:
    return res("kubernetes:core/v1:Service", f"svc-{name}",
               {"metadata": {"name": name, **META}}, provider=K8S_PROVIDER)


def _ingress(backend: str, deps: tuple[str, ...] = ()) -> dict[str, Any]:
    path = {"path": "/v1", "backend": {"service": {"name": backend, "port": {"name": "http"}}}}
    return res("kubernetes:networking.k8s.io/v1:Ingress", "ing", {
        "metadata": {"name": "chat", **META},
        "spec": {"rules": [{"host": "chat.example.com", "http": {"paths": [path]}}]},
    }, provider=K8S_PROVIDER, deps=deps)


def test_an_ingress_whose_backend_service_is_missing_or_later_is_found() -> None:
    router = _service("chat-router")
    [missing] = checks([*base(), router, _ingress("chat-routr")], "ingress-backends-exist")
    assert "backend Service chat-routr is not created in namespace chat" in missing
    [early] = checks([*base(), router, _ingress("chat-router")], "ingress-backends-exist")
    assert "created before its backend Service chat-router" in early
    assert checks([*base(), router, _ingress("chat-router", (urn(router),))],
                  "ingress-backends-exist") == []


def _router(args: list[str], automount: bool = True) -> dict[str, Any]:
    return res("kubernetes:apps/v1:Deployment", "router", {
        "metadata": {"name": "chat-router", **META},
        "spec": {"replicas": 2, "template": {
            "metadata": {"labels": {"app": "router"}},
            "spec": {"serviceAccountName": "chat-router",
                     "automountServiceAccountToken": automount,
                     "containers": [{"name": "router", "command": ["vllm-router"],
                                     "args": args}]}}},
    }, provider=K8S_PROVIDER)


def _rbac(verbs: list[str]) -> list[dict[str, Any]]:
    role = res("kubernetes:rbac.authorization.k8s.io/v1:Role", "role", {
        "metadata": {"name": "chat-router", **META},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}],
    }, provider=K8S_PROVIDER)
    binding = res("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "binding", {
        "metadata": {"name": "chat-router", **META},
        "subjects": [{"kind": "ServiceAccount", "name": "chat-router", "namespace": "chat"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "chat-router"},
    }, provider=K8S_PROVIDER)
    return [role, binding]


DISCOVERY = ["--service-discovery", "--service-discovery-namespace", "chat"]


def test_a_router_that_watches_pods_needs_a_role_that_lets_it() -> None:
    [denied] = checks([*base(), _router(DISCOVERY), *_rbac(["get", "list"])],
                      "discovery-permitted")
    assert "chat/chat-router may not get, list and watch pods in chat" in denied
    assert checks([*base(), _router(DISCOVERY), *_rbac(["get", "list", "watch"])],
                  "discovery-permitted") == []


def test_a_router_without_a_token_or_a_namespace_is_found() -> None:
    found = checks([*base(), _router(DISCOVERY, automount=False), *_rbac(["*"])],
                   "discovery-permitted")
    assert found == ["it watches pods through the Kubernetes API but mounts no ServiceAccount "
                     "token (automountServiceAccountToken: false)"]
    [cluster_wide] = checks([*base(), _router(["--service-discovery"]), *_rbac(["*"])],
                            "discovery-permitted")
    assert "pods of every namespace" in cluster_wide
    assert checks([*base(), _router(["--worker-urls", "http://a:8000"])],
                  "discovery-permitted") == []


def _pdb(min_available: int) -> dict[str, Any]:
    return res("kubernetes:policy/v1:PodDisruptionBudget", "pdb", {
        "metadata": {"name": "chat-router", **META},
        "spec": {"minAvailable": min_available,
                 "selector": {"matchLabels": {"app": "router"}}},
    }, provider=K8S_PROVIDER)


def test_a_budget_that_keeps_every_replica_blocks_every_drain() -> None:
    [blocked] = checks([*base(), _router(DISCOVERY), _pdb(2)], "pdb-allows-a-drain")
    assert "minAvailable 2 with 2 replica(s) of router: no pod may be evicted" in blocked
    assert checks([*base(), _router(DISCOVERY), _pdb(1)], "pdb-allows-a-drain") == []
