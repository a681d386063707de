"""The Kubernetes version a fleet runs, against today's date and the catalog: a fleet hears
90 days ahead that standard support ends, the AMI alias follows the version, and a version
with no AMI or chart window is refused."""

from __future__ import annotations

from datetime import date

import pytest
from plans import make_plan

from llmfleet import cli
from llmfleet.catalog.kubernetes import ami_release, default_kubernetes_version, support_notice
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import karpenter_manifests


def test_a_fleet_hears_90_days_before_standard_support_ends() -> None:
    """1.36 leaves standard support on 2027-08-02: silent on 2027-05-03 (91 days left),
    warned on 2027-05-05 (89 days)."""
    assert support_notice("1.36", "standard", date(2027, 5, 3)) is None
    notice = support_notice("1.36", "standard", date(2027, 5, 5))
    assert notice is not None
    assert "ends on 2027-08-02, in 89 days (today is 2027-05-05" in notice
    assert "EKS upgrades the control plane to the next version by itself" in notice


def test_past_its_end_the_notice_says_what_eks_bills_and_what_to_raise() -> None:
    """1.34 left standard support on 2026-12-02; on 2026-12-10 1.36 is the newest version in
    standard support with its charts and AMI."""
    notice = support_notice("1.34", "extended", date(2026, 12, 10))
    assert notice is not None
    assert "ended on 2026-12-02 (8 days ago)" in notice
    assert "EKS bills extended support ($0.60 instead of $0.10 per cluster-hour)" in notice
    assert "raise kubernetes_version to 1.36" in notice


def test_the_cli_warns_against_the_clock_not_the_calendar(monkeypatch, capsys) -> None:
    fp = build_fleet_plan(make_plan())  # 1.36, judged against the calendar's 2026-12-01
    monkeypatch.setattr(cli, "today", lambda: date(2027, 7, 1))
    cli.warn_support(fp)
    assert ("warning: kubernetes_version 1.36: EKS standard support ends on 2027-08-02, in 32 "
            "days") in capsys.readouterr().err


def test_the_karpenter_ami_alias_follows_the_kubernetes_version() -> None:
    """AMI release v20260714 has AL2023 NVIDIA images for 1.30-1.36, none for 1.37."""
    assert default_kubernetes_version() == "1.36"
    for version in ("1.34", "1.35", "1.36"):
        assert karpenter_manifests.ami_alias(version) == "al2023@v20260714"
    assert ami_release("1.37") is None
    fp = build_fleet_plan(make_plan(kubernetes_version="1.35"))
    spec = karpenter_manifests.ec2nodeclass(fp, fp.regions[0])["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]


def test_a_version_no_ami_release_covers_is_refused(monkeypatch) -> None:
    monkeypatch.setattr("llmfleet.plan.checks.ami_release", lambda version: None)
    monkeypatch.setenv("LLMFLEET_CACHE", "off")  # the catalog changed in memory, not on disk
    with pytest.raises(PlanError, match="no EKS AMI release in llmfleet/catalog/eks_amis.csv"):
        build_fleet_plan(make_plan(kubernetes_version="1.35"))
