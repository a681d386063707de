"""Plan inputs about how capacity is bought and started: per region the purchase option and
the GPU zones; fleet-wide the traffic growth a cold start must ride out, the image digest and
registry, and the day's traffic profile the cost is averaged over.

Strict like the rest of the plan (`extra="forbid"`, frozen); cross-field checks that need
the catalog or the chosen instance are in `llmfleet.capacity`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from llmfleet.data import Data

PurchaseType = Literal["on_demand", "reservation", "capacity_block", "spot"]
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
"""The EC2NodeClass CRD's pattern for a capacity reservation id (karpenter.k8s.aws/v1)."""



class CapacityPurchase(Data):
    """How a region's GPU nodes are bought. The always-on floor is on-demand (or the
    reservation); the burst above it is bought as `type` says."""

    type: PurchaseType = Field(
        default="on_demand",
        description="on_demand; reservation (On-Demand Capacity Reservations, ids given); "
        "capacity_block (Capacity Blocks for ML, ids given); spot (burst only, see "
        "on_demand_floor).",
    )
    reservation_ids: list[str] = Field(
        default_factory=list,
        description="cr-... ids of the reservations or Capacity Blocks Karpenter launches into.",
    )
    instance_type: str | None = Field(
        default=None,
        description="The instance type the reservations hold; must be the one llmfleet chooses "
        "(restrict allowed.instance_types to it).",
    )
    reserved_nodes: int = Field(
        default=0, ge=0, description="Instances the reservations hold (billed used or not)."
    )
    usd_per_hour: float | None = Field(
        default=None,
        gt=0,
        description="Price per instance-hour for spot or a Capacity Block. llmfleet ships no "
        "sourced spot discount or Capacity Block price, so it is required for those two.",
    )
    on_demand_floor: bool = Field(
        default=True,
        description="spot: keep the always-on floor on on-demand nodes. Without it a p99 "
        "SLO is refused: one spot reclaim can take every node.",
    )

    @field_validator("reservation_ids")
    @classmethod
    def _ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not RESERVATION_ID.match(i)]
        if bad:
            raise ValueError(f"{', '.join(bad)}: a reservation id looks like cr-0123456789abcdef0")
        return ids

    @model_validator(mode="after")
    def _consistent(self) -> CapacityPurchase:
        reserved = self.type in ("reservation", "capacity_block")
        if reserved and not (self.reservation_ids and self.instance_type and self.reserved_nodes):
            raise ValueError(
                f"type {self.type} needs reservation_ids, instance_type and reserved_nodes"
            )
        if not reserved and (self.reservation_ids or self.reserved_nodes):
            raise ValueError(
                "reservation_ids and reserved_nodes apply to type reservation or capacity_block"
            )
        if self.type in ("spot", "capacity_block") and self.usd_per_hour is None:
            raise ValueError(
                f"type {self.type} needs usd_per_hour: llmfleet has no sourced {self.type} "
                "price (see the EC2 console or aws ec2 describe-spot-price-history)"
            )
        return self


class Startup(Data):
    """What a cold start must carry and what it pulls."""

    traffic_growth_per_min: float = Field(
        default=0.01,
        gt=0,
        lt=1,
        description="Fastest growth of the request rate, as a share of the peak per minute "
        "(default 1 %: trough to peak in no less than (1 - trough/peak) x 100 minutes). "
        "The headroom must carry this growth for one cold start.",
    )
    image_digest: str | None = Field(
        default=None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="Digest of the pinned vLLM image (docker buildx imagetools inspect "
        "vllm/vllm-openai:<tag>); without it the image is pinned by tag only.",
    )
    ecr_account_id: str | None = Field(
        default=None,
        pattern=r"^[0-9]{12}$",
        description="AWS account of the ECR pull-through cache; without it nodes pull the "
        "image from Docker Hub through the NAT gateways.",
    )


class DayProfile(Data):
    """The day's traffic shape the daily cost is averaged over (an assumption: state yours)."""

    peak_hours: float = Field(default=8, ge=0, le=24, description="Hours a day at the peak.")
    trough_hours: float = Field(default=8, ge=0, le=24, description="Hours a day at the trough.")

    @model_validator(mode="after")
    def _a_day(self) -> DayProfile:
        if self.peak_hours + self.trough_hours > 24:
            raise ValueError(
                f"peak_hours + trough_hours = {self.peak_hours + self.trough_hours:g} > 24"
            )
        return self

    @property
    def ramp_hours(self) -> float:
        """The rest of the day, costed halfway between trough and peak."""
        return 24 - self.peak_hours - self.trough_hours
