"""What a fleet's tokens cost and where its prices come from, for the report and the diff.

A reviewer weighs a capacity change by dollars per million output tokens (the unit price
of the service, comparable across models and fleets) and needs to know whether a price is
the catalog's on-demand list price (as of when, from which snapshot) or a plan-level
override such as a negotiated rate, a savings plan or a reservation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llmfleet.catalog import hardware
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.search import cost
from llmfleet.units import HOURS_PER_MONTH

TrafficLevel = Literal["peak", "trough"]
OVERRIDE_PREFIX = "plan.prices"
"""`RegionPlan.price_source` of a price taken from the plan's `prices` overrides."""


def region_usd_per_hour(rp: RegionPlan, load: TrafficLevel) -> float:
    """The region's GPU nodes at that load (desired at the peak, min at the trough) as their
    purchase bills them: the RegionPlan's billed monthly figure
    (`search.cost.billed_usd_per_hour`: spot above the floor, a reservation paid used or not,
    ...) per hour."""
    monthly = (
        rp.billed_monthly_cost_usd if load == "peak" else rp.billed_monthly_cost_usd_at_trough
    )
    return monthly / HOURS_PER_MONTH


def output_tokens_per_hour(fp: FleetPlan, rp: RegionPlan, load: TrafficLevel) -> float:
    rate = rp.peak_requests_per_s if load == "peak" else rp.trough_requests_per_s
    return cost.output_tokens_per_hour(rate, fp.traffic.output_tokens.mean)


def gpu_usd_per_million_output_tokens(
    fp: FleetPlan, rp: RegionPlan | None, load: TrafficLevel
) -> float | None:
    """The fleet's (rp None) or one region's GPU nodes billed for an hour at that load over the
    output tokens it serves in that hour, per million tokens (`search.cost`'s GPU nodes at a
    load); None for a region that serves no traffic (a failover standby)."""
    regions = fp.regions if rp is None else [rp]
    return cost.gpu_usd_per_million_output_tokens(
        sum(region_usd_per_hour(r, load) for r in regions),
        sum(output_tokens_per_hour(fp, r, load) for r in regions),
    )


@dataclass(frozen=True)
class PriceNote:
    """One region's price, said so a reviewer can check it."""

    region: str
    instance_type: str
    usd_per_hour: float
    source: str  # the FleetPlan's price_source
    override: bool  # from plan.prices rather than the catalog
    list_usd_per_hour: float | None  # the catalog's on-demand price, for comparison
    list_as_of: str | None
    list_source: str | None  # the price snapshot the catalog row names

    def text(self) -> str:
        if not self.override:
            return (
                f"${self.usd_per_hour:,.3f}/h, on-demand list price as of {self.list_as_of} "
                f"({self.list_source})"
            )
        listed = (
            f"${self.list_usd_per_hour:,.3f}/h as of {self.list_as_of} ({self.list_source})"
            if self.list_usd_per_hour is not None
            else "none in the catalog"
        )
        return f"${self.usd_per_hour:,.3f}/h, plan.prices override; on-demand list price {listed}"


def price_note(rp: RegionPlan) -> PriceNote:
    offering = hardware.offering(rp.instance_type, rp.region)
    listed = offering.on_demand_usd_per_hour if offering else None
    source = None
    if offering is not None and listed is not None:
        # Catalog sources read "offering: ... ; price: <snapshot>"; keep the price part.
        parts = [p.strip() for p in offering.source.split(";")]
        source = next((p.removeprefix("price: ") for p in parts if p.startswith("price:")), None)
        source = source or offering.source
    return PriceNote(
        region=rp.region,
        instance_type=rp.instance_type,
        usd_per_hour=rp.price_usd_per_hour,
        source=rp.price_source,
        override=rp.price_source.startswith(OVERRIDE_PREFIX),
        list_usd_per_hour=listed,
        list_as_of=offering.price_as_of if offering and listed is not None else None,
        list_source=source,
    )


def price_notes(fp: FleetPlan) -> list[PriceNote]:
    return [price_note(rp) for rp in fp.regions]
