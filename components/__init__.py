"""Pulumi components: translate a FleetPlan into AWS resources. They do no math."""

from components.cluster import InferenceCluster, InferenceClusterArgs
from components.fleet import Fleet, FleetArgs
from components.network import Network, NetworkArgs
from components.node_pool import GpuNodePool, GpuNodePoolArgs

__all__ = [
    "Fleet",
    "FleetArgs",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "InferenceCluster",
    "InferenceClusterArgs",
    "Network",
    "NetworkArgs",
]
