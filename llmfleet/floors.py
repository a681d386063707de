"""The always-on floor of a region: the replicas and GPU nodes that run whatever the
traffic. One function decides both, so a later stage (resilience: carry a lost region's
share) raises the floor here and every consumer (the KEDA minimum, the floor node group,
the trough cost) follows."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmfleet.choice import Choice


@dataclass(frozen=True)
class Floors:
    replicas: int
    nodes: int
    reason: str


def floors(choice: Choice) -> Floors:
    """Today the floor is the trough: the replicas that carry the region's trough rate with
    the plan's headroom (the optimizer's `replicas.min`), on as few nodes as hold them."""
    replicas = choice.replicas.min
    nodes = math.ceil(replicas / choice.replicas_per_node)
    return Floors(
        replicas=replicas,
        nodes=nodes,
        reason=f"the trough ({choice.trough_requests_per_s:.2f} req/s) needs {replicas} "
        f"replica(s) with {choice.plan.headroom:.0%} headroom, on {nodes} node(s)",
    )
