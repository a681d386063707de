"""`plan` promises only what its own replica record holds at each region's peak: a figure past
its target there is named, and `plan` exits 1."""

from __future__ import annotations

import pytest
from plans import make_plan

from llmfleet import cli
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.fleetplan.peak_check import outside_slo


@pytest.fixture(scope="module")
def base() -> FleetPlan:
    return build_fleet_plan(make_plan())


def _with_ttft(fp: FleetPlan, ttft_ms: float) -> FleetPlan:
    rp = fp.regions[0]
    predicted = rp.predicted.model_copy(update={"ttft_ms": ttft_ms})
    return fp.model_copy(update={"regions": [rp.model_copy(update={"predicted": predicted})]})


def test_a_sized_fleet_holds_every_target_at_its_peak(base: FleetPlan) -> None:
    assert outside_slo(base) == []


def test_a_peak_past_the_ttft_target_is_named_with_its_figures(base: FleetPlan) -> None:
    # BASE: TTFT 1,500 ms at p99; a region predicted at 1,650 ms at its peak is outside
    [line] = outside_slo(_with_ttft(base, 1650.0))
    rp = base.regions[0]
    assert line == (
        f"us-east-1: at its peak ({rp.predicted.requests_per_s_at_peak:.2f} req/s on each of "
        f"{rp.replicas.desired} replicas) TTFT p99 is 1650 ms, over the SLO's 1500 ms"
    )


def test_plan_exits_1_and_says_why_when_its_peak_is_outside(
    base: FleetPlan, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path,
) -> None:
    monkeypatch.setattr(cli, "build_fleet_plan", lambda plan: _with_ttft(base, 1650.0))
    stack = tmp_path / "Pulumi.t.yaml"
    stack.write_text("config:\n  llmfleet:plan:\n    name: t\n")  # read, then replaced above
    monkeypatch.setattr(cli, "_plan_of", lambda args: make_plan())
    assert cli.main(["plan", "--stack", str(stack)]) == 1
    assert "plan: the SLO does not hold: us-east-1: at its peak" in capsys.readouterr().err
