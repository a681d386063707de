"""Where AWS regions are, and which surviving region is nearest a lost one.

Route53 latency routing answers each resolver with the region of lowest measured latency.
When a region drops out, its users get the region with the next-lowest latency from where
they are; their latency to every region is unknown offline, so llmfleet takes the region
nearest the lost one (great-circle distance between the regions' locations,
`region_locations.csv`) as that next-nearest region. It is a proxy: users near a
boundary may split between two survivors."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from llmfleet.catalog.hardware import DATA_DIR
from llmfleet.errors import UnknownNameError

LOCATIONS = DATA_DIR / "region_locations.csv"
EARTH_RADIUS_KM = 6371.0
"""Mean Earth radius (IUGG)."""


@dataclass(frozen=True)
class Location:
    region: str
    location: str
    latitude: float
    longitude: float
    source: str


@cache
def locations() -> dict[str, Location]:
    with LOCATIONS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        r["region"]: Location(
            r["region"], r["location"], float(r["latitude"]), float(r["longitude"]), r["source"]
        )
        for r in rows
    }


def location(region: str, field: str = "region") -> Location:
    table = locations()
    if region not in table:
        raise UnknownNameError(field, region, "region (no location in the catalog)", table)
    return table[region]


def distance_km(a: str, b: str) -> float:
    """Great-circle (haversine) distance between two regions' locations."""
    p, q = location(a), location(b)
    lat1, lat2 = math.radians(p.latitude), math.radians(q.latitude)
    dlat = lat2 - lat1
    dlon = math.radians(q.longitude - p.longitude)
    h = math.sin(dlat / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(dlon / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(h))


def nearest(region: str, candidates: Sequence[str]) -> str:
    """The candidate nearest `region` (ties: name order)."""
    return min(sorted(candidates), key=lambda c: round(distance_km(region, c), 6))
