"""Risk in the open: does a region's SLO hold where the calibration says a measurement may
land (the p90 end of the held-out measured/predicted ratios), and what would the chosen
configuration cost sized there (`confidence: pessimistic`)?"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from llmfleet.calibration.server_calibration import Covered
from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data
from llmfleet.fleetplan.predicted import Predicted
from llmfleet.perf.step import NO_CORRECTION
from llmfleet.search.choice import Choice
from llmfleet.search.cost import on_demand_monthly_usd
from llmfleet.search.disagg import resize_pair
from llmfleet.search.operating_point import Rejection, size_replica
from llmfleet.search.replicas import deployed_replicas, nodes_for


class Risk(Data):
    """Whether the SLO holds where the calibration says measurements may land (the p90 end
    of the held-out ranges), and what the fleet would cost sized there."""

    slo_holds_at_p90: bool = Field(
        description="TTFT and ITL stay inside the SLO at the p90 end of their ranges."
    )
    ttft_ms_p90: float
    itl_ms_p90: float
    pessimistic_replicas: int | None = Field(
        description="Replicas of the chosen configuration sized at confidence: pessimistic "
        "(None: it cannot hold the SLO there)."
    )
    pessimistic_monthly_cost_usd: float | None
    summary: str


def calibrated_slowdown(pessimistic: Constants) -> Callable[[Covered], float]:
    """How much slower than its own factors a calibrated server is sized pessimistically,
    given constants already slowed to the shipped band's p90 ITL ratio: the server's own p90
    ITL ratio in place of the shipped one (the shipped one of its GPU's architecture where
    its runs give no band)."""
    shipped = max(1.0, pessimistic.ratio("itl_ms", "p90"))

    def slowdown(covered: Covered) -> float:
        own = covered.ratio("itl_ms", "p90")
        if own is None:
            arch = hardware.gpu(covered.calibration.server.gpu).architecture
            own = pessimistic.ratio("itl_ms", "p90", arch)
        return max(1.0, own) / shipped

    return slowdown


def for_architecture(pessimistic: Constants, architecture: str) -> Constants:
    """The pessimistic constants (slowed to the measured band's p90 ITL ratio) for a GPU of
    `architecture`: slowed to its own band's p90 instead, which for an architecture no
    measurement covers is the unmeasured band (`calibration.band`)."""
    if pessimistic.measures(architecture):
        return pessimistic
    shipped = max(1.0, pessimistic.ratio("itl_ms", "p90"))
    own = max(1.0, pessimistic.ratio("itl_ms", "p90", architecture))
    factors = dict(pessimistic.engine_step_factor)
    factors["vllm"] = factors.get("vllm", 1.0) * own / shipped
    return pessimistic.model_copy(update={"engine_step_factor": factors})


def build_risk(choice: Choice, expected: Predicted, pessimistic: Constants) -> Risk:
    """The region's risk: SLO at the p90 ends, and the chosen configuration re-sized with the
    pessimistic constants (the same instance type and TP; `confidence: pessimistic` searches
    every configuration). A server a calibration file covers is re-sized at the p90 end of
    its own band."""
    plan = choice.plan
    covered = choice.calibration
    if not covered:  # a calibrated server's own band replaces the shipped one
        pessimistic = for_architecture(pessimistic, hardware.gpu(choice.instance.gpu).architecture)
    correction = covered.correction(calibrated_slowdown(pessimistic)(covered)) if covered else None
    ttft_p90 = expected.ranges["ttft_ms"][1]
    itl_p90 = expected.ranges["itl_ms"][1]
    holds = ttft_p90 <= plan.slo.ttft_ms and itl_p90 <= plan.slo.itl_ms
    inst = choice.instance
    if choice.prefill is not None:  # both pools re-sized at the p90 step time
        return _disaggregated(choice, pessimistic, holds, ttft_p90, itl_p90)
    sized = size_replica(
        choice.model.arch,
        hardware.gpu(inst.gpu),
        inst,
        choice.layout,
        plan,
        pessimistic,
        choice.served_levers,
        correction or NO_CORRECTION,
    )
    if isinstance(sized, Rejection):
        replicas, cost = None, None
        outcome = f"at the p90 step time {inst.instance_type} {choice.layout.label} cannot "
        outcome += f"hold the SLO ({sized.reason}); confidence: pessimistic searches the others"
    else:
        rep = deployed_replicas(
            plan, choice.region, sized.capacity_requests_per_s,
            loss_requests_per_s=sized.loss_requests_per_s,
        )
        nodes = nodes_for(rep, choice.replicas_per_node, choice.nodes_per_replica)
        replicas = rep.desired
        cost = round(on_demand_monthly_usd(nodes.desired, choice.price_usd_per_hour), 2)
        outcome = (
            f"sized at the p90 step time it needs {rep.desired} replicas on {nodes.desired} "
            f"nodes (${cost:,.0f}/month against ${choice.on_demand_monthly_cost_usd:,.0f})"
        )
    verdict = "holds" if holds else "does NOT hold"
    band = f"of {covered.path}'s band" if covered else "of the calibration ranges"
    return Risk(
        slo_holds_at_p90=holds,
        ttft_ms_p90=ttft_p90,
        itl_ms_p90=itl_p90,
        pessimistic_replicas=replicas,
        pessimistic_monthly_cost_usd=cost,
        summary=f"the SLO {verdict} at the p90 end {band} (TTFT "
        f"{ttft_p90:g} ms vs {plan.slo.ttft_ms:g}, ITL {itl_p90:g} ms vs {plan.slo.itl_ms:g}); "
        + outcome,
    )


def _disaggregated(
    choice: Choice, pessimistic: Constants, holds: bool, ttft_p90: float, itl_p90: float
) -> Risk:
    plan = choice.plan
    resized = resize_pair(choice, pessimistic)
    if isinstance(resized, Rejection):
        replicas, cost = None, None
        outcome = f"at the p90 step time these pools cannot hold the SLO ({resized.reason})"
    else:
        replicas = resized.replicas.desired
        cost = round(resized.on_demand_monthly_cost_usd, 2)
        pre = resized.prefill
        assert pre is not None
        outcome = (
            f"sized at the p90 step time it needs {pre.replicas.desired} prefill and "
            f"{resized.replicas.desired} decode replicas on {resized.nodes.desired} nodes "
            f"(${cost:,.0f}/month against ${choice.on_demand_monthly_cost_usd:,.0f})"
        )
    verdict = "holds" if holds else "does NOT hold"
    return Risk(
        slo_holds_at_p90=holds,
        ttft_ms_p90=ttft_p90,
        itl_ms_p90=itl_p90,
        pessimistic_replicas=replicas,
        pessimistic_monthly_cost_usd=cost,
        summary=f"the SLO {verdict} at the p90 end of the calibration ranges (TTFT "
        f"{ttft_p90:g} ms vs {plan.slo.ttft_ms:g}, ITL {itl_p90:g} ms vs {plan.slo.itl_ms:g}); "
        + outcome,
    )
