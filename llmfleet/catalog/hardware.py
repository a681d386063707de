"""GPUs, AWS GPU instance types, where each is offered and at what price, and their zones.

Data files beside this module, each row with its source:
- gpus.csv: GPU specs (memory as AWS reports it, HBM bandwidth, dense tensor rates).
- instances.csv: AWS GPU instance types.
- offerings.csv: which region offers which instance, and its on-demand price where known
  (else why not: an offered instance without a price is not an infeasible one).
- zone_id_offerings.csv: which availability zone IDs of a region offer which instance. IDs
  name the same physical zone in every account; zone names do not.
- capacity_blocks.csv, service_quotas.csv: where Capacity Blocks are sold; the EC2 vCPU
  quota codes."""

from __future__ import annotations

import csv
import string
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from llmfleet.errors import UnknownNameError

DATA_DIR = Path(__file__).parent


class CatalogRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gpu(CatalogRow):
    gpu: str
    name: str
    architecture: str
    memory_gib: float
    memory_mib: int
    cuda_total_gib: float | None = None
    hbm_bandwidth_gb_s: float
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None
    fp4_dense_tflops: float | None
    int8_dense_tops: float | None
    int4_tensor_cores: bool
    nvlink_gb_s: float
    pcie_gb_s: float
    source: str

    @property
    def has_fp8(self) -> bool:
        return self.fp8_dense_tflops is not None

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_gb_s > 0


class Instance(CatalogRow):
    instance_type: str
    gpu: str
    gpu_count: int
    gpu_memory_mib: int
    vcpus: int
    host_memory_gib: float
    network_gbps: float
    network_baseline_gbps: float | None = None  # 'Up to N Gigabit' sizes sustain this
    efa: bool
    local_nvme_gb: int
    gpu_interconnect: str
    source: str

    @property
    def sustained_network_gbps(self) -> float:
        """What a long transfer gets: the baseline of burstable ("up to N Gigabit") sizes."""
        return self.network_baseline_gbps or self.network_gbps


class Offering(CatalogRow):
    """The region offers the instance type; its on-demand price may be unknown (then why)."""

    instance_type: str
    region: str
    on_demand_usd_per_hour: float | None
    price_as_of: str | None
    source: str
    no_price_reason: str | None = None

    @model_validator(mode="after")
    def _a_price_has_a_date_and_no_price_a_reason(self) -> Offering:
        priced = self.on_demand_usd_per_hour is not None
        if priced != (self.price_as_of is not None) or priced == bool(self.no_price_reason):
            raise ValueError(
                f"{self.instance_type} in {self.region}: a price needs price_as_of and no "
                "no_price_reason; a missing price needs a no_price_reason"
            )
        return self


def _blank_to_none(row: dict[str, str]) -> dict[str, str | None]:
    return {k: (v if v != "" else None) for k, v in row.items()}


def _read_csv(name: str) -> list[dict[str, str | None]]:
    with open(DATA_DIR / name, newline="") as f:
        return [_blank_to_none(r) for r in csv.DictReader(f)]


@cache
def gpus() -> dict[str, Gpu]:
    rows = (Gpu.model_validate(r) for r in _read_csv("gpus.csv"))
    return {g.gpu: g for g in rows}


@cache
def instances() -> dict[str, Instance]:
    rows = (Instance.model_validate(r) for r in _read_csv("instances.csv"))
    return {i.instance_type: i for i in rows}


@cache
def offerings() -> tuple[Offering, ...]:
    return tuple(Offering.model_validate(r) for r in _read_csv("offerings.csv"))


@cache
def _offerings_by_key() -> dict[tuple[str, str], Offering]:
    return {(o.instance_type, o.region): o for o in offerings()}


class ZoneIdOffering(CatalogRow):
    instance_type: str
    region: str
    zone_id: str
    source: str


@cache
def zone_id_offerings() -> tuple[ZoneIdOffering, ...]:
    return tuple(ZoneIdOffering.model_validate(r) for r in _read_csv("zone_id_offerings.csv"))


def zone_id_order(zone_id: str) -> tuple[str, int]:
    """use1-az2 sorts before use1-az10: the zone number compares as a number."""
    prefix, _, number = zone_id.rpartition("-az")
    return (prefix, int(number)) if number.isdigit() else (zone_id, -1)


def zone_ids(region: str, instance_type: str | None = None) -> list[str]:
    """Availability zone IDs (e.g. use1-az4) of a region that offer the instance type, if
    given, or any catalog instance. The same ID is the same physical zone in every account;
    resolve it to the account's zone name at deploy time."""
    return sorted(
        {
            z.zone_id
            for z in zone_id_offerings()
            if z.region == region and (instance_type is None or z.instance_type == instance_type)
        },
        key=zone_id_order,
    )


def zone_names(region: str, ids: Sequence[str]) -> list[str]:
    """The names the catalog's account (moto's, and the preview's mocks) gives these zone IDs:
    the k-th zone ID of the region, in zone-ID order, is the region plus the k-th letter.
    Names are per account (another account's us-east-1a is another zone), so deploys place
    by ID and read their own account's names; these are for display."""
    order = zone_ids(region)
    return [f"{region}{string.ascii_lowercase[order.index(z)]}" for z in ids]


def check_zone_id(region: str, zone_id: str, field: str = "zone_id") -> str:
    known = zone_ids(region)
    if zone_id not in known:
        kind = f"zone ID of {region} offering a GPU instance"
        raise UnknownNameError(field, zone_id, kind, known)
    return zone_id


def regions() -> list[str]:
    return sorted({o.region for o in offerings()})


def gpu(name: str, field: str = "gpu") -> Gpu:
    table = gpus()
    if name in table:
        return table[name]
    by_lower = {k.lower(): v for k, v in table.items()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    raise UnknownNameError(field, name, "GPU", table)


def instance(name: str, field: str = "instance_type") -> Instance:
    table = instances()
    if name not in table:
        raise UnknownNameError(field, name, "instance type", table)
    return table[name]


def check_region(name: str, field: str = "region") -> str:
    known = regions()
    if name not in known:
        raise UnknownNameError(field, name, "region (no GPU instance offered there)", known)
    return name


def offering(instance_type: str, region: str) -> Offering | None:
    """The region's offering of the instance type (its price may be None), or None if the
    region does not offer it at all."""
    return _offerings_by_key().get((instance_type, region))


def is_offered(instance_type: str, region: str) -> bool:
    """Whether the region offers the instance type at all, priced or not."""
    return (instance_type, region) in _offerings_by_key()


def on_demand_price(instance_type: str, region: str) -> float | None:
    """The on-demand list price in USD per hour; None if not offered or not priced."""
    o = offering(instance_type, region)
    return o.on_demand_usd_per_hour if o else None


@cache
def capacity_block_offerings() -> frozenset[tuple[str, str]]:
    """(instance type, region) pairs that sell Capacity Blocks (capacity_blocks.csv)."""
    with open(DATA_DIR / "capacity_blocks.csv", newline="") as f:
        return frozenset((r["instance_type"], r["region"]) for r in csv.DictReader(f))


@cache
def _quota_rows() -> tuple[dict[str, str], ...]:
    with open(DATA_DIR / "service_quotas.csv", newline="") as f:
        return tuple(csv.DictReader(f))
