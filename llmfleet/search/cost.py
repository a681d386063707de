"""What GPU nodes cost: each formula once, named for what it is.

Two monthly costs, never one name for both:

- on demand (`on_demand_monthly_usd`): nodes x the node's price (the catalog's on-demand
  list price or a `plan.prices` override) x 730 h. The search compares candidates by it and
  every "sized again, it would cost" figure (alternatives, levers, risk, resilience, traffic
  moves) is one.
- billed (`billed_usd_per_hour`): what the purchase bills for nodes running at once
  (`regions[].capacity`: a reservation is paid used or not, a Capacity Block whole at its own
  price with on-demand above it, spot above the on-demand floor at the spot price). The
  FleetPlan's `billed_monthly_cost_usd`, its day profile and the simulator's day read it.

Two costs per million output tokens:

- GPU nodes at a load (`gpu_usd_per_million_output_tokens`): the nodes running at that load
  for an hour over the output tokens that load serves in the hour (at the peak: the nodes
  provisioned for it, serving it; a floor, as traffic averages lower).
- over the day profile (`day_profile_usd_per_million_output_tokens`): the region's whole
  month (GPU nodes over the day profile, EBS, EKS, NAT) over the output tokens of the month's
  traffic (`fleetplan.costs`).
"""

from __future__ import annotations

from llmfleet.plan.regions import CapacityPurchase
from llmfleet.units import HOURS_PER_MONTH


def monthly_usd(usd_per_hour: float) -> float:
    """An hourly cost held the month (730 h)."""
    return usd_per_hour * HOURS_PER_MONTH


def on_demand_monthly_usd(nodes: float, usd_per_hour: float) -> float:
    """`nodes` at the node's price (on-demand or a plan.prices override) for a month."""
    return nodes * usd_per_hour * HOURS_PER_MONTH


def nodes_for_monthly_usd(monthly: float, usd_per_hour: float) -> float:
    """The nodes `monthly` dollars pay for at the node's price (on_demand_monthly_usd's
    inverse)."""
    return monthly / (usd_per_hour * HOURS_PER_MONTH)


def billed_usd_per_hour(
    purchase: CapacityPurchase,
    nodes: float,
    on_demand_usd_per_hour: float,
    purchase_usd_per_hour: float,
    floor_nodes: int,
) -> float:
    """GPU nodes running `nodes` at once, as the purchase bills them: a reservation is billed
    for its reserved nodes used or not (more above them at the on-demand rate); a Capacity
    Block is paid whole at its price, on-demand above it; spot keeps the floor's
    `floor_nodes` on demand and bills the nodes above at the spot price; on-demand bills
    every node at the on-demand rate."""
    od = on_demand_usd_per_hour
    if purchase.type == "reservation":
        return max(nodes, purchase.reserved_nodes) * od
    if purchase.type == "capacity_block":
        return (
            purchase.reserved_nodes * purchase_usd_per_hour
            + max(0.0, nodes - purchase.reserved_nodes) * od
        )
    if purchase.type == "spot":
        return min(nodes, floor_nodes) * od + max(0.0, nodes - floor_nodes) * purchase_usd_per_hour
    return nodes * od


def output_tokens_per_hour(requests_per_s: float, mean_output_tokens: float) -> float:
    return requests_per_s * mean_output_tokens * 3600


def gpu_usd_per_million_output_tokens(
    gpu_usd_per_hour: float, output_tokens_per_hour: float
) -> float | None:
    """GPU nodes running at a load for an hour over the output tokens that load serves in it,
    per million; None without traffic (a failover standby)."""
    if output_tokens_per_hour <= 0:
        return None
    return gpu_usd_per_hour / output_tokens_per_hour * 1e6


def day_profile_usd_per_million_output_tokens(
    monthly: float, output_tokens_per_month: float
) -> float | None:
    """A month's cost over the day profile over the output tokens its traffic makes in the
    month, per million; None without traffic."""
    return monthly / (output_tokens_per_month / 1e6) if output_tokens_per_month > 0 else None
