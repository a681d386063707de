"""A replica that spans nodes: how it is deployed and what its nodes need.

vLLM serves a model larger than a node with pipeline parallelism across nodes (TP = a node's
GPUs, PP = nodes; docs/serving/parallelism_scaling.md), TP across nodes, or data-parallel
ranks with expert parallelism across nodes. On Kubernetes a replica is then a
LeaderWorkerSet group (kubernetes-sigs/lws, its CRD `leaderworkerset.x-k8s.io/v1` from the
pinned chart): one pod per node, the leader runs the API server and node rank 0, each worker
`vllm serve --headless` with its node rank (vLLM's multiprocessing multi-node launch,
`--nnodes/--node-rank/--master-addr`, vLLM >= 0.11.1), and the group restarts whole when a
pod does (`RecreateGroupOnPodRestart`).

The nodes: EFA interfaces on every network card (the pods request `vpc.amazonaws.com/efa`,
advertised by the EFA device plugin), a cluster placement group (one zone: EFA's RDMA traffic
stays in one subnet), huge pages for libfabric, and NCCL told where EFA and the bootstrap
interface are. The pinned chart versions live here so the report and the components read one
home."""

from __future__ import annotations

from pydantic import Field

from llmfleet.catalog import network
from llmfleet.data import Data
from llmfleet.search.choice import Choice

LWS_CHART = "oci://registry.k8s.io/lws/charts/lws"
LWS_VERSION = "0.10.0"
"""kubernetes-sigs/lws v0.10.0 (2026-08-11); its docs install the OCI chart with
`--version=0.10.0 --namespace lws-system` (site/content/en/docs/installation @v0.10.0)."""
LWS_NAMESPACE = "lws-system"
EFA_DEVICE_PLUGIN_VERSION = "v0.5.30"
"""aws/eks-charts stable/aws-efa-k8s-device-plugin Chart.yaml at HEAD 5239609 (2026-08-03):
chart v0.5.30, image v0.5.20."""
HUGEPAGES_2MI_MIB = 5120
"""Huge pages per pod, as AWS's EKS nccl-tests manifest requests (aws-samples/awsome-
distributed-training micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml @0162aacd):
libfabric's EFA provider registers its buffers in huge pages by default."""
MASTER_PORT = 29501
"""vLLM's default --master-port (ParallelConfig.master_port)."""
ROLE_LABEL = "llmfleet.io/role"
NCCL_ENV = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "eth0",
    "GLOO_SOCKET_IFNAME": "eth0",
}
"""FI_PROVIDER=efa as AWS's EKS nccl-tests manifest sets it (libfabric uses EFA, not TCP);
NCCL's and Gloo's bootstrap on the pod's own interface, as llm-d's wide-EP manifests set
them. Left at their defaults (aws/aws-ofi-nccl doc/efa-env-var.md): FI_EFA_USE_DEVICE_RDMA
("do not set for libfabric >= 1.18"), FI_EFA_FORK_SAFE ("not needed anymore"),
NCCL_BUFFSIZE and NCCL_MIN_CHANNELS."""


class NetworkInterface(Data):
    """One network interface of a GPU node (EC2's launch shape, Karpenter's networkInterfaces)."""

    network_card_index: int
    device_index: int
    interface_type: str = Field(description="interface (ENA) or efa-only.")


def efa_interfaces(cards: int) -> list[NetworkInterface]:
    """EC2's recommended layout for EFA on a node with several network cards (EC2 User
    Guide, efa-acc-inst-types): the primary interface (card 0, device 0) is ENA, card 0
    adds an EFA-only interface at device 1, every other card an EFA-only one at device 0."""
    return [
        NetworkInterface(network_card_index=0, device_index=0, interface_type="interface"),
        NetworkInterface(network_card_index=0, device_index=1, interface_type="efa-only"),
        *(
            NetworkInterface(network_card_index=k, device_index=0, interface_type="efa-only")
            for k in range(1, cards)
        ),
    ]


class MultiNode(Data):
    """A replica of `nodes_per_replica` nodes: a LeaderWorkerSet group on EFA nodes in one
    cluster placement group."""

    nodes_per_replica: int = Field(description="Pods (and nodes) of one LeaderWorkerSet group.")
    launch: str = Field(
        description="vLLM's multi-node launch: `mp` (--nnodes/--node-rank/--master-addr)."
    )
    master_port: int
    leader_labels: dict[str, str] = Field(
        description="The leader pod's labels on top of the workload's: the Service selects it."
    )
    worker_labels: dict[str, str]
    efa_interfaces_per_node: int = Field(
        description="vpc.amazonaws.com/efa each pod requests: every EFA interface of its node."
    )
    efa_gbps_per_node: float
    network_interfaces: list[NetworkInterface] = Field(
        description="The node's interfaces: one ENA primary and an EFA-only one per card."
    )
    collective_latency_us: float = Field(
        description="Two-node all-reduce latency the step model charges (catalog efa.csv)."
    )
    collective_busbw_gb_s: float
    collective_measured_on: str
    hugepages_2mi_mib: int
    placement_group: str = Field(description="The cluster placement group every GPU node joins.")
    placement_strategy: str
    zone_id: str = Field(description="The one zone the placement group and the GPU nodes use.")
    nccl_env: dict[str, str]
    lws_version: str
    efa_device_plugin_version: str
    reasons: list[str]


def placement_group_name(fleet_name: str, region: str) -> str:
    return f"{fleet_name}-{region}-gpu"


def build_multi_node(choice: Choice, zone_id: str) -> MultiNode | None:
    """The region's multi-node settings, or None when a replica fits one node."""
    n = choice.nodes_per_replica
    if n <= 1:
        return None
    inst = choice.instance
    row = network.multi_node_row(inst)
    assert row is not None and row.collective_latency_us is not None
    assert row.collective_busbw_gb_s is not None and row.measured_on is not None
    shape = choice.layout
    across = (
        "every TP all-reduce"
        if shape.tp > inst.gpu_count
        else "the experts' all-to-all"
        if shape.ep
        else "each pipeline hop"
    )
    return MultiNode(
        nodes_per_replica=n,
        launch="mp",
        master_port=MASTER_PORT,
        leader_labels={ROLE_LABEL: "leader"},
        worker_labels={ROLE_LABEL: "worker"},
        efa_interfaces_per_node=row.efa_interfaces,
        efa_gbps_per_node=row.efa_gbps,
        network_interfaces=efa_interfaces(row.efa_interfaces),
        collective_latency_us=row.collective_latency_us,
        collective_busbw_gb_s=row.collective_busbw_gb_s,
        collective_measured_on=row.measured_on,
        hugepages_2mi_mib=HUGEPAGES_2MI_MIB,
        placement_group=placement_group_name(choice.plan.name, choice.region.name),
        placement_strategy="cluster",
        zone_id=zone_id,
        nccl_env=dict(NCCL_ENV),
        lws_version=LWS_VERSION,
        efa_device_plugin_version=EFA_DEVICE_PLUGIN_VERSION,
        reasons=[
            f"a replica ({shape.label}, {shape.ranks} GPUs) spans {n} {inst.instance_type} "
            f"nodes: a LeaderWorkerSet group of {n} pods, one per node; {across} crosses "
            f"EFA ({row.efa_interfaces} interfaces, {row.efa_gbps:g} Gbps per node)",
            f"the step model charges {row.collective_latency_us:g} us per cross-node "
            f"collective and {row.collective_busbw_gb_s:g} GB/s bus bandwidth (two-node "
            f"nccl-tests on {row.measured_on})",
            f"GPU nodes in one cluster placement group in {zone_id}: EFA's RDMA traffic "
            "stays in one subnet, so a zone outage takes every GPU node of the region",
            "the image must carry the aws-ofi-nccl plugin for NCCL to use EFA (without it "
            "NCCL falls back to TCP sockets on the ENA interface: not verified for "
            "vllm/vllm-openai)",
        ],
    )
