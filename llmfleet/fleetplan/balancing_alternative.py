"""What prefix-aware balancing would save: a plan whose traffic shares prefixes
(`traffic.shared_prefix_tokens`, `traffic.turns`) but balances by least outstanding requests
spreads each conversation over every replica, so few turns find their history cached. Each
region is searched once more with `edge.balancing: prefix_aware` (a cache-aware router
keeps a conversation on its replica); where that costs less, the region carries it
(`RegionPlan.balancing_alternative`) and its reasons say it, with the price. The plan's own
choice stands: the router is a component the user opts into."""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice
from llmfleet.search.prefix_hold import reuses


class BalancingAlternative(Data):
    """The region searched with prefix-aware balancing, where it costs less."""

    balancing: str = Field(description="The edge.balancing it was searched with.")
    hit_rate: float = Field(description="Cached share of prompt tokens it sized with.")
    plan_hit_rate: float = Field(description="The plan's own choice's (least outstanding).")
    instance_type: str
    layout: str
    nodes: int = Field(description="GPU nodes at the peak (desired).")
    monthly_cost_usd: float = Field(description="On demand, as the search compares.")
    plan_monthly_cost_usd: float = Field(description="The plan's choice, on demand.")

    @property
    def text(self) -> str:
        """The line the reasons (plan and the report) show, from the fields above."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        return (
            f"edge.balancing: prefix_aware (a cache-aware router keeping each conversation on "
            f"the replica that holds it) would cache {self.hit_rate:.0%} of prompt tokens "
            f"(least outstanding: {self.plan_hit_rate:.0%}) and serve this on {nodes} "
            f"({self.instance_type}, {self.layout}) at ${self.monthly_cost_usd:,.0f}/month on "
            f"demand against ${self.plan_monthly_cost_usd:,.0f}"
        )


def searched_with_router(plan: CapacityPlan) -> CapacityPlan | None:
    """The plan with prefix-aware balancing, or None where it would change nothing (no
    reuse, or the plan balances prefix-aware already)."""
    if not reuses(plan) or plan.edge.balancing == "prefix_aware":
        return None
    data = plan.model_dump(exclude_unset=True)
    data.setdefault("edge", {})["balancing"] = "prefix_aware"
    return CapacityPlan.model_validate(data)


def build_balancing_alternative(choice: Choice, routed: Choice) -> BalancingAlternative | None:
    """`routed` (the region's choice with prefix-aware balancing) as what it saves, or None
    where it does not cost less."""
    plan_usd, routed_usd = choice.on_demand_monthly_cost_usd, routed.on_demand_monthly_cost_usd
    hold, routed_hold = choice.sizing.hold, routed.sizing.hold
    if (routed_usd >= plan_usd * (1 - 1e-9) or hold is None or hold.cache is None
            or routed_hold is None or routed_hold.cache is None):
        return None
    return BalancingAlternative(
        balancing="prefix_aware",
        hit_rate=round(routed_hold.cache.hit_rate, 4),
        plan_hit_rate=round(hold.cache.hit_rate, 4),
        instance_type=routed.instance.instance_type,
        layout=routed.layout.label,
        nodes=routed.nodes.desired,
        monthly_cost_usd=round(routed_usd, 2),
        plan_monthly_cost_usd=round(plan_usd, 2),
    )
