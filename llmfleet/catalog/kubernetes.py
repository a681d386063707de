"""Kubernetes on EKS: the versions EKS offers with their support dates (eks_versions.csv), what
the control plane costs in standard and extended support and the day the calendar was last
checked (eks_support.json), and the Helm charts a cluster runs with the Kubernetes versions
each one supports and how its CRDs are delivered (charts.csv).

Support is judged against `calendar_as_of`, the day the files were checked, never the clock:
the same plan always plans the same, and moving the date is a reviewed change."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent
EKS_VERSIONS = HERE / "eks_versions.csv"
EKS_SUPPORT = HERE / "eks_support.json"
CHARTS = HERE / "charts.csv"

SupportType = Literal["standard", "extended"]
CrdDelivery = Literal["templates", "crds-dir", "none"]
"""templates: the chart renders its CRDs as templates, so `helm upgrade` upgrades them;
crds-dir: Helm installs the chart's crds/ once and never upgrades them; none: no CRDs."""


@dataclass(frozen=True)
class EksVersion:
    version: str
    released: str
    end_of_standard_support: str
    end_of_extended_support: str
    source: str

    @property
    def minor(self) -> int:
        return minor(self.version)

    def support_on(self, day: date) -> SupportType | None:
        """Which support EKS gives this version on `day` (None: past extended support)."""
        if day < date.fromisoformat(self.end_of_standard_support):
            return "standard"
        if day < date.fromisoformat(self.end_of_extended_support):
            return "extended"
        return None


@dataclass(frozen=True)
class EksSupport:
    calendar_as_of: date
    standard_support_margin_days: int
    control_plane_usd_per_hour: dict[SupportType, float]
    source: str


@dataclass(frozen=True)
class ChartPin:
    """A pinned Helm chart and the Kubernetes minor versions it supports (inclusive; no
    maximum where the project publishes none)."""

    component: str
    chart: str
    repository: str
    version: str
    app_version: str
    kubernetes_min: str
    kubernetes_max: str | None
    crds: CrdDelivery
    source: str

    def supports(self, version: str) -> bool:
        low = minor(self.kubernetes_min) <= minor(version)
        return low and (self.kubernetes_max is None or minor(version) <= minor(self.kubernetes_max))

    @property
    def window(self) -> str:
        return f"{self.kubernetes_min}-{self.kubernetes_max or ''}"


def minor(version: str) -> int:
    """1.35 -> 35."""
    return int(version.split(".")[1])


@cache
def eks_versions() -> dict[str, EksVersion]:
    """The Kubernetes versions EKS offers (standard or extended support), with their dates."""
    with EKS_VERSIONS.open(newline="") as f:
        return {
            row["version"]: EksVersion(
                row["version"],
                row["released"],
                row["end_of_standard_support"],
                row["end_of_extended_support"],
                row["source"],
            )
            for row in csv.DictReader(f)
        }


@cache
def eks_support() -> EksSupport:
    doc = json.loads(EKS_SUPPORT.read_text())
    return EksSupport(
        calendar_as_of=date.fromisoformat(doc["calendar_as_of"]),
        standard_support_margin_days=int(doc["standard_support_margin_days"]),
        control_plane_usd_per_hour={
            "standard": float(doc["control_plane_usd_per_hour"]["standard"]),
            "extended": float(doc["control_plane_usd_per_hour"]["extended"]),
        },
        source=doc["control_plane_price_source"],
    )


@cache
def charts() -> dict[str, ChartPin]:
    """Every pinned chart by component name."""
    with CHARTS.open(newline="") as f:
        return {
            row["component"]: ChartPin(
                component=row["component"],
                chart=row["chart"],
                repository=row["repository"],
                version=row["version"],
                app_version=row["app_version"],
                kubernetes_min=row["kubernetes_min"],
                kubernetes_max=row["kubernetes_max"] or None,
                crds=row["crds"],  # type: ignore[arg-type]
                source=row["source"],
            )
            for row in csv.DictReader(f)
        }


def chart(component: str) -> ChartPin:
    return charts()[component]


def charts_missing(version: str) -> list[ChartPin]:
    """The pinned charts whose support window leaves `version` out."""
    return [c for c in charts().values() if not c.supports(version)]


def default_kubernetes_version() -> str:
    """The newest version in standard support on the calendar's date with at least the
    margin left, that every pinned chart supports."""
    support = eks_support()
    fits = [
        v
        for v in eks_versions().values()
        if (date.fromisoformat(v.end_of_standard_support) - support.calendar_as_of).days
        >= support.standard_support_margin_days
        and not charts_missing(v.version)
    ]
    if not fits:
        raise ValueError("no EKS version in eks_versions.csv fits every chart in charts.csv")
    return max(fits, key=lambda v: v.minor).version
