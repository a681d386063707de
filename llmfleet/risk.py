"""Risk in the open: does a region's SLO hold where the calibration says a measurement may
land (the p90 end of the held-out measured/predicted ratios), and what would the chosen
configuration cost sized there (`confidence: pessimistic`)?"""

from __future__ import annotations

from llmfleet import catalog, fleet
from llmfleet.calibration import Constants
from llmfleet.choice import Choice
from llmfleet.optimizer import deployed_replicas, nodes_for
from llmfleet.sizing import Rejection, size_replica
from llmfleet.units import HOURS_PER_MONTH


def risk(choice: Choice, expected: fleet.Predicted, pessimistic: Constants) -> fleet.Risk:
    """The region's risk: SLO at the p90 ends, and the chosen configuration re-sized with the
    pessimistic constants (the same instance type and TP; `confidence: pessimistic` searches
    every configuration)."""
    plan = choice.plan
    ttft_p90 = expected.ranges["ttft_ms"][1]
    itl_p90 = expected.ranges["itl_ms"][1]
    holds = ttft_p90 <= plan.slo.ttft_ms and itl_p90 <= plan.slo.itl_ms
    inst = choice.instance
    sized = size_replica(
        choice.model.arch, catalog.gpu(inst.gpu), inst, choice.tp, plan, pessimistic, choice.lever
    )
    if isinstance(sized, Rejection):
        replicas, cost = None, None
        outcome = f"at the p90 step time {inst.instance_type} TP {choice.tp} cannot hold the "
        outcome += f"SLO ({sized.reason}); confidence: pessimistic searches the others"
    else:
        rep = deployed_replicas(plan, choice.region, sized.capacity_rps)
        nodes = nodes_for(rep, choice.replicas_per_node)
        replicas = rep.desired
        cost = round(nodes.desired * choice.price_usd_per_hour * HOURS_PER_MONTH, 2)
        outcome = (
            f"sized at the p90 step time it needs {rep.desired} replicas on {nodes.desired} "
            f"nodes (${cost:,.0f}/month against ${choice.monthly_cost_usd:,.0f})"
        )
    verdict = "holds" if holds else "does NOT hold"
    return fleet.Risk(
        slo_holds_at_p90=holds,
        ttft_ms_p90=ttft_p90,
        itl_ms_p90=itl_p90,
        pessimistic_replicas=replicas,
        pessimistic_monthly_cost_usd=cost,
        summary=f"the SLO {verdict} at the p90 end of the calibration ranges (TTFT "
        f"{ttft_p90:g} ms vs {plan.slo.ttft_ms:g}, ITL {itl_p90:g} ms vs {plan.slo.itl_ms:g}); "
        + outcome,
    )
