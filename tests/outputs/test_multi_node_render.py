"""What a replica across nodes and a disaggregated region render to: a LeaderWorkerSet in a
placement group, over TCP on the default image and over EFA on an image with the EFA NCCL
plugin; a prefill pool, a decode pool and the router in front, in one zone."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest
from crd_schema import problems
from plans import frontier_plan, long_prompt_plan

from llmfleet.catalog import images as catalog_images
from llmfleet.catalog.vllm_release import vllm_release
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.outputs import karpenter_manifests, render

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


EFA_IMAGE = "vllm-openai-efa-v0.33.0"


@pytest.fixture
def efa_image(monkeypatch: pytest.MonkeyPatch) -> str:
    """A catalog row for the pinned image built with the EFA installer (a user adds it)."""
    base = catalog_images.default_image()
    row = dataclasses.replace(base, image=EFA_IMAGE, repository="111122223333.dkr.ecr.{region}"
                              ".amazonaws.com/vllm-efa", registry="ecr", efa_nccl_plugin=True,
                              libfabric="EFA installer 1.47.0", source="built by the user")
    known = {**catalog_images.images(), EFA_IMAGE: row}
    monkeypatch.setattr(catalog_images, "images", lambda: known)
    monkeypatch.setattr("llmfleet.plan.checks.images", lambda: known)
    monkeypatch.setenv("LLMFLEET_CACHE", "off")  # the catalog changed in memory, not on disk
    return EFA_IMAGE


def _containers(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    group = lws["spec"]["leaderWorkerTemplate"]
    leader, worker = (
        group[k]["spec"]["containers"][0] for k in ("leaderTemplate", "workerTemplate")
    )
    return leader, worker


def test_a_replica_across_nodes_is_a_leaderworkerset_group_over_tcp(frontier) -> None:
    """The default image has no EFA NCCL plugin: no EFA request, no huge pages (Karpenter's
    instance model has none, so it would launch no node) and no IPC_LOCK (a non-root process
    gains nothing from it); NCCL's sockets on the pod's interface."""
    d = docs(frontier)
    assert "deployment" not in d and "networkpolicy-peers" in d
    lws = d["leaderworkerset"]
    assert set(lws["spec"]) <= LWS_SPEC_KEYS and "replicas" not in lws["spec"]
    group = lws["spec"]["leaderWorkerTemplate"]
    assert set(group) <= LWS_TEMPLATE_KEYS
    assert (group["size"], group["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    leader, worker = _containers(lws)
    rank = ["--node-rank", "$(LWS_WORKER_INDEX)", "--master-addr", "$(LWS_LEADER_ADDRESS)"]
    assert leader["command"][4:] == rank and worker["command"][4:] == [*rank, "--headless"]
    assert "ports" in leader and "ports" not in worker and "readinessProbe" not in worker
    for c in (leader, worker):
        limits = c["resources"]["limits"]
        assert "vpc.amazonaws.com/efa" not in limits and "hugepages-2Mi" not in limits
        assert "add" not in c["securityContext"]["capabilities"]
        assert {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in c["env"]
        assert not any(e["name"] == "FI_PROVIDER" for e in c["env"])
    # clients reach the leaders; KEDA scales groups
    assert d["service"]["spec"]["selector"]["llmfleet.io/role"] == "leader"
    target = d["scaledobject"]["spec"]["scaleTargetRef"]
    assert target["kind"] == "LeaderWorkerSet"
    assert target["apiVersion"] == "leaderworkerset.x-k8s.io/v1"


def test_on_an_image_with_the_efa_plugin_the_pods_request_every_efa_interface(efa_image) -> None:
    fp = build_fleet_plan(frontier_plan(**{"startup.image": efa_image}))
    fabric = fp.regions[0].fabric
    assert fabric is not None and (fabric.transport, fabric.efa_interfaces_per_node) == ("efa", 32)
    for c in _containers(docs(fp)["leaderworkerset"]):
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert "hugepages-2Mi" not in c["resources"]["limits"]
        assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
    # memory locking comes from the node's containerd spec, not from a capability
    user_data = karpenter_manifests.ec2nodeclass(fp, fp.regions[0])["spec"]["userData"]
    assert "RLIMIT_MEMLOCK" in user_data and "18446744073709551615" in user_data


def test_require_efa_refuses_an_image_without_the_plugin() -> None:
    with pytest.raises(PlanError, match=r"startup.require_efa = True: us-east-1's layout "
                       r"\(TP 8 x PP 2\) sends each pipeline hop across nodes, and "
                       r"startup.image vllm-openai-v0.33.0 has no EFA NCCL plugin"):
        build_fleet_plan(frontier_plan(**{"startup.require_efa": True}))


def test_an_image_of_another_vllm_release_is_refused() -> None:
    """The newest AWS Deep Learning Container with EFA carries vLLM 0.27.1, not 0.33.0."""
    with pytest.raises(PlanError, match=r"startup.image = 'aws-dlc-vllm-0.27.1': it carries "
                       r"vLLM 0.27.1, llmfleet renders for the pinned 0.33.0"):
        build_fleet_plan(frontier_plan(**{"startup.image": "aws-dlc-vllm-0.27.1"}))


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


def test_the_nodes_join_the_placement_group_through_karpenter(frontier) -> None:
    region = frontier.regions[0]
    mn, fabric = region.multi_node, region.fabric
    assert mn is not None and fabric is not None
    node_class = karpenter_manifests.ec2nodeclass(frontier, region)
    assert problems(node_class) == []
    assert node_class["spec"]["placementGroupSelector"] == {"name": mn.placement_group}
    assert "networkInterfaces" not in node_class["spec"]  # TCP: the one ENA interface
    pool = karpenter_manifests.nodepool(frontier, region)
    assert pool["spec"]["template"]["spec"]["requirements"][2]["values"] == [fabric.zone_id]


def test_efa_nodes_get_an_efa_only_interface_per_network_card(efa_image) -> None:
    fp = build_fleet_plan(frontier_plan(**{"startup.image": efa_image}))
    node_class = karpenter_manifests.ec2nodeclass(fp, fp.regions[0])
    assert problems(node_class) == []
    interfaces = node_class["spec"]["networkInterfaces"]
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    assert len([i for i in interfaces if i["interfaceType"] == "efa-only"]) == 32


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
    # the KV crosses nodes inside one zone, over UCX's TCP transport on the default image
    assert region.fabric is not None and region.capacity.node_zone_ids == [region.fabric.zone_id]
    assert "backends:\n    - UCX" in files["us-east-1/vllm-config.yaml"]


def test_the_disaggregated_objects_validate(disaggregated) -> None:
    for kind, doc in docs(disaggregated).items():
        if doc["kind"] in ("ScaledObject", "ServiceMonitor", "PrometheusRule"):
            assert problems(doc) == [], kind
        else:
            kubernetes_validate.validate(doc, disaggregated.kubernetes_version, strict=True)


def test_dp_ranks_across_nodes_launch_with_vllms_data_parallel_flags(frontier) -> None:
    """DP 16 x TP 1 with EP over two 8-GPU nodes (the region's shape forced here: the search
    picks TP 8 x PP 2 for this plan): vLLM's data-parallel deployment flags, not --nnodes;
    each worker starts its ranks at LWS_WORKER_INDEX x 8 (docs/serving/
    data_parallel_deployment.md)."""
    region = frontier.regions[0]
    assert region.multi_node is not None
    mn = region.multi_node.model_copy(update={
        "launch": "data-parallel", "data_parallel_size_local": 8, "data_parallel_rpc_port": 13345})
    vllm = region.serving.vllm.model_copy(update={
        "tensor_parallel_size": 1, "pipeline_parallel_size": None, "data_parallel_size": 16,
        "enable_expert_parallel": True, "nnodes": None, "master_port": None,
        "data_parallel_size_local": 8, "data_parallel_rpc_port": 13345})
    dp = region.model_copy(update={
        "multi_node": mn, "serving": region.serving.model_copy(update={"vllm": vllm})})
    fp = frontier.model_copy(update={"regions": [dp]})
    leader, worker = _containers(docs(fp)["leaderworkerset"])
    assert leader["command"][:2] == ["/bin/sh", "-c"]
    assert leader["command"][2].endswith('--data-parallel-address "$LWS_LEADER_ADDRESS"')
    assert worker["command"][2].endswith(
        '--data-parallel-start-rank $((LWS_WORKER_INDEX * 8)) --headless')
    config = render.vllm_config(dp)
    for key in ("data-parallel-size: 16", "data-parallel-size-local: 8",
                "data-parallel-rpc-port: 13345"):
        assert key in config
    assert "nnodes" not in config and "node-rank" not in str(worker["command"])
    flags = vllm_release()["flags"]
    for flag in ("--data-parallel-size-local", "--data-parallel-start-rank",
                 "--data-parallel-address", "--data-parallel-rpc-port", "--headless"):
        assert flag in flags
