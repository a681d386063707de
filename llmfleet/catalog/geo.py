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
FIBRE_KM_PER_S = 200_000.0
"""Light in optical fibre: c / n with silica's group index n ~ 1.47 (ITU-T G.652 fibre;
c = 299,792 km/s) is ~204,000 km/s, i.e. ~5 us per km, rounded to the 200,000 km/s network
engineers use. Great-circle distance at this speed is a lower bound: cables run longer."""
HANDSHAKE_ROUND_TRIPS = 2
"""Round trips before a new HTTPS connection carries a request: TCP's three-way handshake
(one round trip, RFC 9293 section 3.5) and a full TLS 1.3 handshake (one round trip, RFC
8446 section 2). After a failover every client opens a new connection to the new region."""


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


def round_trip_ms(a: str, b: str) -> float:
    """One round trip between two regions: twice the great-circle distance at fibre speed."""
    return 2 * distance_km(a, b) / FIBRE_KM_PER_S * 1000


def first_token_detour_ms(a: str, b: str) -> float:
    """What serving region `a`'s users from `b` adds to their first token, on a new
    connection: the TCP and TLS handshakes plus the request itself, one round trip each."""
    return (HANDSHAKE_ROUND_TRIPS + 1) * round_trip_ms(a, b)
