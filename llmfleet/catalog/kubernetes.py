"""The Kubernetes versions EKS offers, with their support dates (eks_versions.csv)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

EKS_VERSIONS = Path(__file__).resolve().parent / "eks_versions.csv"


@dataclass(frozen=True)
class EksVersion:
    version: str
    released: str
    end_of_extended_support: str
    source: str


@cache
def eks_versions() -> dict[str, EksVersion]:
    """The Kubernetes versions EKS offers (standard or extended support), with their dates."""
    with EKS_VERSIONS.open(newline="") as f:
        return {
            row["version"]: EksVersion(
                row["version"], row["released"], row["end_of_extended_support"], row["source"]
            )
            for row in csv.DictReader(f)
        }
