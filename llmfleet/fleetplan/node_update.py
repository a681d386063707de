"""How the GPU floor's managed node group replaces its nodes (an AMI or Kubernetes update):
how many at a time and how long `pulumi up` waits.

EKS updates a managed node group by launching new nodes, then cordoning and draining the old
ones, `update_config.max_unavailable` at a time; a node whose pods do not leave within 15
minutes fails the update (PodEvictionFailure: EKS user guide, managed-node-update-behavior),
so the PodDisruptionBudget lets one node's pods go at once (`workload.pods_per_node`). Each
round then lasts the drain (the pods' grace, sized for the longest request) and the
replacement's cold start, and the whole update can run far past the provider's default of 60
minutes: the node group's update timeout is sized for every round, with a quarter to spare."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.data import Data

PROVIDER_DEFAULT_TIMEOUT_S = 3600
"""pulumi-aws's default create/update/delete timeout of aws.eks.NodeGroup (60 minutes)."""
EVICTION_LIMIT_S = 15 * 60
"""EKS gives a node's pods 15 minutes to leave before the update fails."""
MARGIN = 1.25


class NodeUpdate(Data):
    """The GPU floor node group's update: nodes at a time and how long `pulumi up` waits."""

    max_unavailable: int = Field(description="Nodes replaced at a time: one replica's.")
    rounds: int
    round_s: int = Field(description="A round: the pods' drain plus the replacement's cold start.")
    timeout_s: int = Field(description="The node group's update timeout (custom_timeouts).")
    reason: str


def build_node_update(
    floor_nodes: int, nodes_per_replica: int, cold_start_s: float, termination_grace_s: int
) -> NodeUpdate:
    at_a_time = nodes_per_replica
    rounds = max(1, math.ceil(floor_nodes / at_a_time))
    round_s = math.ceil(termination_grace_s + cold_start_s)
    timeout = max(PROVIDER_DEFAULT_TIMEOUT_S, math.ceil(rounds * round_s * MARGIN / 60) * 60)
    reason = (
        f"a node-group update replaces {at_a_time} node(s) at a time: {rounds} round(s) of up "
        f"to {round_s} s (a {termination_grace_s} s drain and a {cold_start_s:.0f} s cold start "
        f"of the replacement), so `pulumi up` waits up to {timeout} s, not the provider's "
        f"{PROVIDER_DEFAULT_TIMEOUT_S} s"
    )
    if termination_grace_s > EVICTION_LIMIT_S:
        reason += (
            f"; the pods' drain ({termination_grace_s} s) outlasts EKS's 15-minute eviction "
            "limit: an update fails with PodEvictionFailure unless run with force (which cuts "
            "the longest requests)"
        )
    return NodeUpdate(
        max_unavailable=at_a_time, rounds=rounds, round_s=round_s, timeout_s=timeout,
        reason=reason,
    )
