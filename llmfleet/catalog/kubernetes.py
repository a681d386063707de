"""Kubernetes on EKS: the versions EKS offers with their support dates (eks_versions.csv), the
EKS AMI releases and the Kubernetes versions each carries an AL2023 NVIDIA image for
(eks_amis.csv), what the control plane costs in standard and extended support and the day plans
are judged against (eks_support.json), and the Helm charts a cluster runs with the Kubernetes
versions each one supports and how its CRDs are delivered (charts.csv). Every row says when
its source was read (`read_on`: the date of the copy read, which can be older than the day the
row was written).

A plan is judged against `calendar_as_of`, never the clock: the same plan always plans the
same, and moving the date is a reviewed change. What a running fleet must hear in time (its
version leaving standard support) is `support_notice`, which callers at the edge (the CLI, the
Pulumi program) give today's date."""

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
EKS_AMIS = HERE / "eks_amis.csv"
CHARTS = HERE / "charts.csv"

SupportType = Literal["standard", "extended"]
CrdDelivery = Literal["templates", "crds-dir", "none"]
"""templates: the chart renders its CRDs as templates, so `helm upgrade` upgrades them;
crds-dir: Helm installs the chart's crds/ once and never upgrades them; none: no CRDs."""


@dataclass(frozen=True)
class EksVersion:
    """A Kubernetes minor version and its EKS dates; empty dates: released upstream but not
    on EKS in any source read (`on_eks` False)."""

    version: str
    released: str
    end_of_standard_support: str
    end_of_extended_support: str
    read_on: str
    source: str

    @property
    def minor(self) -> int:
        return minor(self.version)

    @property
    def on_eks(self) -> bool:
        return bool(self.released and self.end_of_standard_support)

    def support_on(self, day: date) -> SupportType | None:
        """Which support EKS gives this version on `day` (None: past extended support, or
        not on EKS)."""
        if not self.on_eks:
            return None
        if day < date.fromisoformat(self.end_of_standard_support):
            return "standard"
        if day < date.fromisoformat(self.end_of_extended_support):
            return "extended"
        return None

    def standard_days_left(self, day: date) -> int:
        """Days of standard support left on `day` (negative: past its end)."""
        return (date.fromisoformat(self.end_of_standard_support) - day).days


@dataclass(frozen=True)
class AmiRelease:
    """An EKS AMI release and the Kubernetes versions it has an AL2023 NVIDIA image for."""

    release: str
    alias: str
    kubernetes_min: str
    kubernetes_max: str
    read_on: str
    source: str

    def covers(self, version: str) -> bool:
        return minor(self.kubernetes_min) <= minor(version) <= minor(self.kubernetes_max)


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
    read_on: str
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
                row["read_on"],
                row["source"],
            )
            for row in csv.DictReader(f)
        }


@cache
def ami_releases() -> list[AmiRelease]:
    """The EKS AMI releases the catalog knows, newest first."""
    with EKS_AMIS.open(newline="") as f:
        rows = [AmiRelease(**row) for row in csv.DictReader(f)]
    return sorted(rows, key=lambda r: r.release, reverse=True)


def ami_release(version: str) -> AmiRelease | None:
    """The newest AMI release with an AL2023 NVIDIA image for `version` (Karpenter's pinned
    alias follows the cluster's version), or None."""
    return next((r for r in ami_releases() if r.covers(version)), None)


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
                read_on=row["read_on"],
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
    """The newest version on EKS in standard support on the calendar's date with at least
    the margin left, that every pinned chart and an AMI release support."""
    support = eks_support()
    fits = [
        v
        for v in eks_versions().values()
        if v.on_eks
        and v.standard_days_left(support.calendar_as_of) >= support.standard_support_margin_days
        and not charts_missing(v.version)
        and ami_release(v.version) is not None
    ]
    if not fits:
        raise ValueError("no EKS version in eks_versions.csv fits every chart in charts.csv")
    return max(fits, key=lambda v: v.minor).version


def support_notice(version: str, support_type: SupportType, today: date) -> str | None:
    """What a fleet on `version` must hear on `today`: standard support ends within the
    margin (or has ended), with what EKS then does; None when there is time. The caller
    passes today's date (the clock is read at the edge: the CLI, the Pulumi program)."""
    row = eks_versions().get(version)
    if row is None or not row.on_eks:
        return None
    margin = eks_support().standard_support_margin_days
    left = row.standard_days_left(today)
    if left >= margin:
        return None
    then = (
        "EKS bills extended support ($0.60 instead of $0.10 per cluster-hour)"
        if support_type == "extended"
        else "EKS upgrades the control plane to the next version by itself while the plan, "
        "its add-ons, AMI and charts still say " + version
    )
    newest = max(
        (v for v in eks_versions().values() if v.support_on(today) == "standard"
         and not charts_missing(v.version) and ami_release(v.version) is not None),
        key=lambda v: v.minor,
        default=None,
    )
    upgrade = (
        f"raise kubernetes_version to {newest.version} (one minor at a time; docs/day2.md)"
        if newest is not None and newest.minor > row.minor
        else "no newer version is in the catalog with its charts and AMI: update "
        "llmfleet/catalog/ (eks_versions.csv, charts.csv, eks_amis.csv)"
    )
    when = (
        f"ended on {row.end_of_standard_support} ({-left} days ago)"
        if left < 0
        else f"ends on {row.end_of_standard_support}, in {left} days"
    )
    return (
        f"kubernetes_version {version}: EKS standard support {when} (today is {today}; "
        f"warned {margin} days ahead); then {then}: {upgrade}"
    )
