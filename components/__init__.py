"""Pulumi components: translate a FleetPlan into AWS and Kubernetes resources. No math."""

from components.cluster import InferenceCluster, InferenceClusterArgs
from components.cluster_addons import ClusterAddons, ClusterAddonsArgs
from components.fleet import Fleet, FleetArgs
from components.network import Network, NetworkArgs
from components.node_pool import NodePool, NodePoolArgs
from components.vllm_service import VllmService, VllmServiceArgs

__all__ = [
    "ClusterAddons",
    "ClusterAddonsArgs",
    "Fleet",
    "FleetArgs",
    "InferenceCluster",
    "InferenceClusterArgs",
    "Network",
    "NetworkArgs",
    "NodePool",
    "NodePoolArgs",
    "VllmService",
    "VllmServiceArgs",
]
