"""What a region costs per month: GPU nodes at the peak, at the trough and over the day's
traffic profile (reachable now that Karpenter removes nodes), plus the EBS root volumes,
the EKS control plane, the NAT gateways and the NAT data of cold starts; and the cost per
million output tokens served over the profile.

Prices besides the GPU nodes are us-east-1 list prices (other regions differ by a few per
cent): EKS $0.10 per cluster-hour in standard support and $0.60 in extended support
(catalog/eks_support.json, `plan.checks.control_plane_support` says which is billed), NAT
gateway $0.045 per hour and per GB processed (aws.amazon.com/vpc/pricing), gp3 $0.08 per
GB-month (aws.amazon.com/ebs/pricing)."""

from __future__ import annotations

from pydantic import Field, computed_field

from llmfleet.catalog.kubernetes import eks_support
from llmfleet.data import Data
from llmfleet.fleetplan.capacity import AlwaysOn, NodeCapacity, SystemPool
from llmfleet.fleetplan.cold_start import IMAGE_GB
from llmfleet.fleetplan.serving import image_through_nat
from llmfleet.plan.checks import control_plane_support
from llmfleet.search.choice import Choice
from llmfleet.search.cost import (
    billed_usd_per_hour,
    day_profile_usd_per_million_output_tokens,
    monthly_usd,
)
from llmfleet.units import GIB, HOURS_PER_MONTH, round_or_none


class Costs(Data):
    """Monthly USD (730 h) of one region: GPU nodes at the peak, the trough and over the day
    profile, and what runs beside them."""

    gpu_peak: float
    gpu_trough: float
    gpu_day_profile: float
    ebs_day_profile: float
    eks_control_plane: float
    nat_gateways: float
    nat_data: float
    total_day_profile: float
    output_tokens_per_month: float
    day_profile_usd_per_million_output_tokens: float | None = Field(
        description="total_day_profile over output_tokens_per_month, per million (None: a "
        "standby without traffic)."
    )
    assumptions: list[str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """Alias of day_profile_usd_per_million_output_tokens (the key before #31;
        docs/cli.md#aliases)."""
        return self.day_profile_usd_per_million_output_tokens


NAT_USD_PER_HOUR = 0.045
NAT_USD_PER_GB = 0.045
GP3_USD_PER_GB_MONTH = 0.08
DAYS_PER_MONTH = HOURS_PER_MONTH / 24


def gpu_usd_per_hour(choice: Choice, capacity: NodeCapacity, nodes: float) -> float:
    """GPU nodes running `nodes` at once, billed as the purchase bills them
    (`search.cost.billed_usd_per_hour`)."""
    return billed_usd_per_hour(
        choice.region.capacity, nodes, choice.price_usd_per_hour, capacity.price_usd_per_hour,
        capacity.floor_nodes,
    )


def nat_gateways(choice: Choice, zones: int) -> int:
    """NAT gateways of a new VPC (none of ours in an existing one)."""
    if choice.region.network is not None:
        return 0
    return zones if choice.plan.cluster.nat_gateways == "per_az" else 1


def build_costs(
    choice: Choice,
    capacity: NodeCapacity,
    floor: AlwaysOn,
    system: SystemPool,
    node_volume_gib: int,
    weights_gib: float,
    cluster_zones: int,
) -> Costs:
    profile = choice.plan.day_profile
    peak_n, trough_n = choice.nodes.desired, floor.nodes
    hours = {"peak": profile.peak_hours, "trough": profile.trough_hours}
    hours["ramp"] = profile.ramp_hours
    nodes = {"peak": peak_n, "trough": trough_n, "ramp": (peak_n + trough_n) / 2}
    per_hour = {k: gpu_usd_per_hour(choice, capacity, n) for k, n in nodes.items()}
    day_avg = sum(per_hour[k] * hours[k] for k in hours) / 24
    avg_nodes = sum(nodes[k] * hours[k] for k in hours) / 24
    gib_months = avg_nodes * node_volume_gib + system.nodes.desired * system.volume_gib
    ebs = gib_months * GIB / 1e9 * GP3_USD_PER_GB_MONTH
    nat_count = nat_gateways(choice, cluster_zones)
    launches = (peak_n - trough_n) * DAYS_PER_MONTH  # one rise to the peak a day
    through_nat_gb = IMAGE_GB if image_through_nat(choice.plan.startup) else 0.0
    if choice.region.network is not None:  # no S3 gateway endpoint of ours: weights too
        through_nat_gb += weights_gib * GIB / 1e9 * choice.replicas_per_node
    nat_data = launches * through_nat_gb * NAT_USD_PER_GB
    peak_rps, trough_rps = choice.peak_requests_per_s, choice.trough_requests_per_s
    rates = {"peak": peak_rps, "trough": trough_rps, "ramp": (peak_rps + trough_rps) / 2}
    mean_rps = sum(rates[k] * hours[k] for k in hours) / 24
    tokens = mean_rps * choice.plan.traffic.output_tokens.mean * HOURS_PER_MONTH * 3600
    support = control_plane_support(choice.plan)
    eks_usd_per_hour = eks_support().control_plane_usd_per_hour[support]
    parts = {
        "gpu_day_profile": monthly_usd(day_avg),
        "ebs_day_profile": ebs,
        "eks_control_plane": monthly_usd(eks_usd_per_hour),
        "nat_gateways": monthly_usd(nat_count * NAT_USD_PER_HOUR),
        "nat_data": nat_data,
    }
    total = sum(parts.values())
    return Costs(
        gpu_peak=round(monthly_usd(per_hour["peak"]), 2),
        gpu_trough=round(monthly_usd(per_hour["trough"]), 2),
        **{k: round(v, 2) for k, v in parts.items()},
        total_day_profile=round(total, 2),
        output_tokens_per_month=round(tokens),
        day_profile_usd_per_million_output_tokens=round_or_none(
            day_profile_usd_per_million_output_tokens(total, tokens), 4
        ),
        assumptions=[
            f"day: {profile.peak_hours:g} h at the peak, {profile.trough_hours:g} h at the "
            f"trough, {profile.ramp_hours:g} h halfway (plan.day_profile)",
            f"one rise to the peak a day: {peak_n - trough_n} node launch(es) a day, each "
            f"pulling {through_nat_gb:.0f} GB through NAT",
            f"EKS control plane ${eks_usd_per_hour:.2f}/h ({support} support of Kubernetes "
            f"{choice.plan.kubernetes_version}); NAT and gp3 at us-east-1 list prices; system "
            "nodes are not priced",
        ],
    )
