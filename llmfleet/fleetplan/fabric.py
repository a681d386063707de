"""What a region's GPU nodes carry between them, and over what: a replica across nodes (its
pipeline hops, tensor-parallel all-reduce or experts' all-to-all) or a disaggregated region's
KV transfer from the prefill pool to the decode pool.

The transport is a fact of the serving image (catalog/images.csv, `efa_nccl_plugin`), not of
the node: NCCL uses EFA only through the aws-ofi-nccl plugin and libfabric inside the image,
NIXL only through its LIBFABRIC backend. The default image, the pinned vLLM release's
upstream `vllm/vllm-openai`, has neither, so NCCL runs over TCP sockets on the node's ENA
interface and NIXL over UCX's TCP transport; EFA interfaces, the EFA device plugin and
`vpc.amazonaws.com/efa` requests would sit unused, so the deploy asks for none. With an image
that carries the plugin (a row the user adds: the pinned image plus the EFA installer) every
node gets an EFA-only interface per network card, the pods request them all, the EFA device
plugin advertises them, and the nodes' containers may lock memory without limit (libfabric
registers its buffers; `IPC_LOCK` would grant a non-root process nothing, so the node's
containerd base runtime spec lifts RLIMIT_MEMLOCK instead: nodeadm's `baseRuntimeSpec`).
`startup.require_efa` refuses a plan whose image has no plugin.

Either way the GPU nodes of such a region sit in one zone: EFA traffic does not leave its
subnet, and TCP across zones adds a zone hop and $0.01/GB each way (EC2 data transfer within
a region). A replica across nodes also keeps its nodes in a cluster placement group. No huge
pages are requested: Karpenter's instance model carries no `hugepages-2Mi`, so a pod
requesting them never gets a node launched for it, and libfabric's EFA provider uses huge
pages only when the node offers them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmfleet.catalog import network
from llmfleet.catalog.images import ServingImage, serving_image
from llmfleet.catalog.kubernetes import chart
from llmfleet.data import Data
from llmfleet.errors import PlanError
from llmfleet.search.choice import Choice

EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"
SOCKET_ENV = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}
"""NCCL's and Gloo's bootstrap (and, without EFA, NCCL's socket transport) on the pod's own
interface, as llm-d's wide-EP manifests set them."""
EFA_ENV = {"FI_PROVIDER": "efa"}
"""libfabric uses EFA, not TCP (AWS's EKS nccl-tests manifest). Left at their defaults
(aws/aws-ofi-nccl doc/efa-env-var.md): FI_EFA_USE_DEVICE_RDMA ("do not set for libfabric >=
1.18"), FI_EFA_FORK_SAFE ("not needed anymore"), NCCL_BUFFSIZE, NCCL_MIN_CHANNELS."""
UNLIMITED = 18446744073709551615
"""RLIM_INFINITY as an OCI runtime spec's rlimit (a uint64)."""
BASE_RLIMITS = [{"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576}]
"""The EKS AL2023 AMI's containerd base runtime spec rlimits (awslabs/amazon-eks-ami
nodeadm/internal/containerd/base-runtime-spec.json @81fec2e8), kept beside the one added."""


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


class Fabric(Data):
    """Traffic between a region's GPU nodes: what crosses them and over what transport."""

    crosses: list[str] = Field(description="What crosses nodes (hops, collectives, KV).")
    image: str = Field(description="The serving image's catalog key (catalog/images.csv).")
    transport: Literal["efa", "tcp"] = Field(
        description="efa: the image carries aws-ofi-nccl and libfabric; tcp: NCCL sockets "
        "and NIXL's UCX over the ENA interface."
    )
    efa_interfaces_per_node: int = Field(
        description="vpc.amazonaws.com/efa each pod requests (0 with tcp: none is attached)."
    )
    efa_gbps_per_node: float = Field(description="The node's EFA bandwidth (catalog efa.csv).")
    network_interfaces: list[NetworkInterface] = Field(
        description="The node's interfaces with EFA (empty with tcp: the one ENA primary)."
    )
    zone_id: str = Field(description="The one zone every GPU node of the region uses.")
    env: dict[str, str] = Field(description="NCCL's and libfabric's environment in the pods.")
    kv_backend: str = Field(description="NIXL's backend for a disaggregated KV transfer.")
    memlock_rlimits: list[dict[str, object]] = Field(
        description="With efa: the containerd base runtime spec rlimits of the GPU nodes "
        "(RLIMIT_MEMLOCK unlimited); empty with tcp."
    )
    efa_device_plugin_version: str | None = Field(
        description="The EFA device plugin chart (with efa), catalog/charts.csv."
    )
    source: str = Field(description="Where the image's facts come from (its catalog row).")
    reasons: list[str]


def cross_node_traffic(choice: Choice) -> list[str]:
    """What crosses nodes in the region's replicas (empty: nothing)."""
    shape, inst = choice.layout, choice.instance
    out = []
    if choice.nodes_per_replica > 1:
        out.append(
            "every tensor-parallel all-reduce" if shape.tp > inst.gpu_count
            else "the experts' all-to-all" if shape.ep
            else "each pipeline hop"
        )
    if choice.prefill is not None:
        out.append("each prompt's KV cache from a prefill pod to a decode pod")
    return out


def transport_of(image: ServingImage) -> Literal["efa", "tcp"]:
    return "efa" if image.efa_nccl_plugin else "tcp"


def build_fabric(choice: Choice, zone_id: str) -> Fabric | None:
    """The region's fabric, or None when nothing crosses its nodes. PlanError when the plan
    requires EFA (`startup.require_efa`) and the image has no EFA NCCL plugin."""
    crosses = cross_node_traffic(choice)
    if not crosses:
        return None
    startup = choice.plan.startup
    image = serving_image(startup.image)
    transport = transport_of(image)
    what = " and ".join(crosses)
    if transport == "tcp" and startup.require_efa:
        raise PlanError(
            "startup.require_efa",
            True,
            f"{choice.region.name}'s layout ({choice.layout.label}"
            f"{', disaggregated' if choice.prefill is not None else ''}) sends {what} across "
            f"nodes, and startup.image {image.image} has no EFA NCCL plugin "
            "(catalog/images.csv): build the pinned vLLM image with the EFA installer, add it "
            "as a row and name it in startup.image (docs/multi-node.md), or drop "
            "require_efa (TCP sockets, priced so), or set allowed.multi_node and "
            "allowed.disaggregated to false",
        )
    row = network.efa(choice.instance.instance_type)
    efa = transport == "efa" and row is not None
    interfaces = row.efa_interfaces if efa and row is not None else 0
    reasons = [
        f"{what} cross(es) nodes over {'EFA' if efa else 'TCP'}: the image {image.image} "
        + (
            f"carries the EFA NCCL plugin ({image.libfabric}); {interfaces} EFA interfaces "
            f"per node ({row.efa_gbps:g} Gbps), the EFA device plugin, RLIMIT_MEMLOCK "
            "unlimited in the nodes' containers"
            if efa and row is not None
            else "has no aws-ofi-nccl or libfabric, so NCCL uses TCP sockets and NIXL UCX's "
            "TCP transport on the ENA interface; no EFA interface, device plugin or request "
            "is deployed (it would sit unused)"
        ),
        f"every GPU node in one zone ({zone_id}): EFA stays in its subnet and TCP across zones "
        "costs a hop and $0.01/GB each way, so a zone outage takes the region's GPU nodes",
    ]
    return Fabric(
        crosses=crosses,
        image=image.image,
        transport="efa" if efa else "tcp",
        efa_interfaces_per_node=interfaces,
        efa_gbps_per_node=row.efa_gbps if row is not None else 0.0,
        network_interfaces=efa_interfaces(interfaces) if efa else [],
        zone_id=zone_id,
        env={**SOCKET_ENV, **(EFA_ENV if efa else {})},
        kv_backend="LIBFABRIC" if efa else "UCX",
        memlock_rlimits=[
            *BASE_RLIMITS, {"type": "RLIMIT_MEMLOCK", "soft": UNLIMITED, "hard": UNLIMITED}
        ] if efa else [],
        efa_device_plugin_version=chart(EFA_DEVICE_PLUGIN).version if efa else None,
        source=image.source,
        reasons=reasons,
    )
