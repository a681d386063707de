"""What a replica across nodes and a disaggregated region render to: a LeaderWorkerSet on
EFA nodes in a placement group; a prefill pool, a decode pool and the router in front."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from crd_schema import problems
from plans import frontier_plan, long_prompt_plan

from llmfleet.catalog.vllm_release import vllm_release
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.outputs import karpenter, render

LWS_SPEC_KEYS = {"leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "replicas"}
LWS_TEMPLATE_KEYS = {"leaderTemplate", "workerTemplate", "size", "restartPolicy"}
"""kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go @v0.10.0: the
fields of LeaderWorkerSetSpec and LeaderWorkerTemplate the rendered object may use."""


@pytest.fixture(scope="module")
def frontier() -> FleetPlan:
    return build_fleet_plan(frontier_plan())


@pytest.fixture(scope="module")
def disaggregated() -> FleetPlan:
    return build_fleet_plan(
        long_prompt_plan(dns={"zone_name": "example.com", "record_name": "x.example.com"})
    )


def docs(fp: FleetPlan) -> dict[str, dict[str, Any]]:
    region = fp.regions[0]
    kinds = render.manifest_kinds(region)
    return dict(zip(kinds, render.region_manifests(fp, region), strict=True))


def test_a_replica_across_nodes_is_a_leaderworkerset_group_on_efa(frontier) -> None:
    d = docs(frontier)
    assert "deployment" not in d and "networkpolicy-peers" in d
    lws = d["leaderworkerset"]
    assert set(lws["spec"]) <= LWS_SPEC_KEYS and "replicas" not in lws["spec"]
    group = lws["spec"]["leaderWorkerTemplate"]
    assert set(group) <= LWS_TEMPLATE_KEYS
    assert (group["size"], group["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    leader, worker = (
        group[k]["spec"]["containers"][0] for k in ("leaderTemplate", "workerTemplate")
    )
    rank = ["--node-rank", "$(LWS_WORKER_INDEX)", "--master-addr", "$(LWS_LEADER_ADDRESS)"]
    assert leader["command"][4:] == rank and worker["command"][4:] == [*rank, "--headless"]
    assert "ports" in leader and "ports" not in worker and "readinessProbe" not in worker
    for c in (leader, worker):
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert c["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
    # clients reach the leaders; KEDA scales groups
    assert d["service"]["spec"]["selector"]["llmfleet.io/role"] == "leader"
    target = d["scaledobject"]["spec"]["scaleTargetRef"]
    assert target["kind"] == "LeaderWorkerSet"
    assert target["apiVersion"] == "leaderworkerset.x-k8s.io/v1"


def test_the_leaderworkerset_pods_and_the_vllm_flags_are_valid(frontier) -> None:
    lws = docs(frontier)["leaderworkerset"]
    for key in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][key]
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
               "template": template}
        kubernetes_validate.validate(pod, frontier.kubernetes_version, strict=True)
    flags = vllm_release()["flags"]
    for flag in ("--node-rank", "--master-addr", "--headless"):
        assert flag in flags
    config = render.vllm_config(frontier.regions[0])
    assert "pipeline-parallel-size: 2" in config and "nnodes: 2" in config


def test_efa_nodes_join_the_placement_group_through_karpenter(frontier) -> None:
    region = frontier.regions[0]
    mn = region.multi_node
    assert mn is not None
    node_class = karpenter.ec2nodeclass(frontier, region)
    assert problems(node_class) == []
    assert node_class["spec"]["placementGroupSelector"] == {"name": mn.placement_group}
    interfaces = node_class["spec"]["networkInterfaces"]
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa_only = [i for i in interfaces if i["interfaceType"] == "efa-only"]
    assert len(efa_only) == mn.efa_interfaces_per_node == 32
    assert karpenter.nodepool(frontier, region)["spec"]["template"]["spec"]["requirements"][2][
        "values"
    ] == [mn.zone_id]


def test_a_disaggregated_region_renders_both_pools_and_the_router(disaggregated) -> None:
    d = docs(disaggregated)
    region = disaggregated.regions[0]
    dis = region.disaggregation
    assert dis is not None
    for kind in ("deployment-prefill", "configmap-prefill", "router-deployment", "router-role",
                 "router-rolebinding", "router-serviceaccount", "service-engines",
                 "networkpolicy-peers", "networkpolicy-router", "scaledobject-prefill"):
        assert kind in d, kind
    assert d["deployment"]["spec"]["selector"]["matchLabels"]["llmfleet.io/role"] == "decode"
    assert d["deployment-prefill"]["spec"]["selector"]["matchLabels"]["llmfleet.io/role"] == (
        "prefill"
    )
    assert d["service"]["spec"]["selector"] == dis.router.labels
    args = d["router-deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in args and "--service-discovery" in args
    assert args[args.index("--prefill-selector") + 5] == "llmfleet.io/role=prefill"
    # each pool scales on its own signal
    decode_q = d["scaledobject"]["spec"]["triggers"][0]["metadata"]["query"]
    prefill_q = d["scaledobject-prefill"]["spec"]["triggers"][0]["metadata"]["query"]
    assert "kv_cache_usage_perc" in decode_q and 'llmfleet_io_role="decode"' in decode_q
    assert "num_requests_waiting" in prefill_q and 'llmfleet_io_role="prefill"' in prefill_q
    assert d["servicemonitor"]["spec"]["podTargetLabels"] == ["llmfleet.io/role"]
    files = render.region_files(disaggregated, region)
    assert "NixlConnector" in files["us-east-1/vllm-config-prefill.yaml"]
    assert "NixlConnector" in files["us-east-1/vllm-config.yaml"]


def test_the_disaggregated_objects_validate(disaggregated) -> None:
    for kind, doc in docs(disaggregated).items():
        if doc["kind"] in ("ScaledObject", "ServiceMonitor", "PrometheusRule"):
            assert problems(doc) == [], kind
        else:
            kubernetes_validate.validate(doc, disaggregated.kubernetes_version, strict=True)
