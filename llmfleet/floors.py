"""The always-on floor of a region: the replicas and GPU nodes that run whatever the
traffic. One function decides both, so a later stage (resilience: carry a lost region's
share) raises the floor here and every consumer (the KEDA minimum, the floor node group,
the trough cost) follows."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmfleet.choice import Choice
from llmfleet.routing_plan import RegionFloor


@dataclass(frozen=True)
class Floors:
    replicas: int
    nodes: int
    reason: str


def floors(choice: Choice, stage4: RegionFloor | None = None) -> Floors:
    """The replicas that carry the region's trough rate with the plan's headroom (the
    optimizer's `replicas.min`), on as few nodes as hold them; or, when stage 4 raised that
    minimum to keep a lost region's share warm (`stage4`, already in `choice.replicas`), the
    warm floor, and the reason says so."""
    replicas = choice.replicas.min
    nodes = math.ceil(replicas / choice.replicas_per_node)
    trough = stage4.replicas_without_resilience["min"] if stage4 is not None else replicas
    if stage4 is not None and replicas > trough:
        reason = (
            f"stage 4 keeps {replicas} replica(s) warm, above the {trough} the trough "
            f"({choice.trough_requests_per_s:.2f} req/s) needs: with "
            f"{', '.join(stage4.worst_case_lost)} lost this region carries "
            f"{stage4.worst_load_requests_per_s:g} req/s, and routing.warm_share "
            f"{choice.plan.routing.warm_share:.0%} of the extra is held warm; on {nodes} node(s)"
        )
    else:
        reason = (
            f"the trough ({choice.trough_requests_per_s:.2f} req/s) needs {replicas} "
            f"replica(s) with {choice.plan.headroom:.0%} headroom, on {nodes} node(s)"
        )
    return Floors(replicas=replicas, nodes=nodes, reason=reason)
