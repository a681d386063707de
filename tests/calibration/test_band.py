"""The band measured, not asserted (#29): its coverage of held-out measurements is counted
with each source's band made without it, every prediction carries a band, and bursts
through an API server have their own."""

import json

import pytest

from llmfleet.calibration.band import coverage, extrapolation_band, ttft_bias
from llmfleet.calibration.fit import uncertainty
from llmfleet.calibration.rows import RowPrediction
from llmfleet.catalog.constants import fitted
from llmfleet.cli import main
from llmfleet.fleetplan.fleet import sizing_constants
from llmfleet.fleetplan.risk import for_architecture


def _pt(source: str, ratio: float, regime: str = "steady", metric: str = "itl_ms") -> RowPrediction:
    # measured / predicted = ratio
    return RowPrediction(f"{source}-{ratio}", source, "vllm", metric, ratio * 10.0, 10.0, regime)


def test_coverage_checks_each_source_against_the_band_the_others_make() -> None:
    # A held out: B's and C's 7 ratios make a band of 1.0-3.1 (nearest rank), all of A's
    # inside, and so for B; C held out: A's and B's make 1.0-1.4, C's 3.0 and 3.1 outside:
    # 10 of 12 inside
    points = [_pt(s, r) for s in "AB" for r in (1.0, 1.1, 1.2, 1.3, 1.4)]
    points += [_pt("C", 3.0), _pt("C", 3.1)]
    cov = coverage(points)["itl_ms"]
    assert cov["n"] == 12
    assert cov["inside_p10_p90"] == pytest.approx(10 / 12)


def test_a_burst_is_left_out_of_the_sizing_band() -> None:
    steady = [_pt("A", r) for r in (0.9, 1.0, 1.1)]
    bursts = [_pt("B", r, "burst") for r in (2.0, 3.0, 4.0)]
    assert uncertainty(steady + bursts)["itl_ms"] == {"p10": 0.9, "p90": 1.1}


def test_ttft_bias_is_per_source_with_bursts_apart() -> None:
    pts = [_pt("A", 2.0, metric="ttft_ms"), _pt("A", 1.0, "burst", "ttft_ms")]
    assert ttft_bias(pts) == {
        "A": {
            "burst": {"n": 1, "median_predicted_over_measured": 1.0},
            "step": {"n": 1, "median_predicted_over_measured": 0.5},
        }
    }


PREDICT = ["predict", "--model", "Llama-3.1-8B-Instruct", "--gpu", "H100",
           "--input-tokens", "1000", "--output-tokens", "200"]


def test_predict_json_always_carries_the_shipped_band(capsys) -> None:
    assert main([*PREDICT, "--concurrency", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lo, hi = out["ranges"]["itl_ms"]
    assert lo < out["itl_ms"] < hi and out["calibration"] is None


def test_a_burst_through_the_api_server_gets_the_burst_band(capsys) -> None:
    assert main([*PREDICT, "--concurrency", "4", "--json"]) == 0
    steady = json.loads(capsys.readouterr().out)
    assert main([*PREDICT, "--num-requests", "1000", "--json"]) == 0
    burst = json.loads(capsys.readouterr().out)
    width = lambda r: r["ranges"]["ttft_ms"][1] / r["ranges"]["ttft_ms"][0]  # noqa: E731
    assert width(burst) > width(steady)


def _arch_pt(source: str, ratio: float, arch: str, metric: str = "itl_ms") -> RowPrediction:
    return RowPrediction(f"{source}-{ratio}-{metric}", source, "vllm", metric, ratio * 10.0, 10.0,
                 "steady", arch)


def test_a_row_no_other_source_measures_is_checked_against_the_unmeasured_band() -> None:
    # A and B on Hopper make each other's band; C's rows on Blackwell, which no other source
    # measures, are checked against the unmeasured band made without C (given), not the
    # Hopper band, and stay out of A's and B's
    points = [_arch_pt(s, r, "Hopper") for s in "AB" for r in (1.0, 1.1, 1.2)]
    points += [_arch_pt("C", r, "Blackwell") for r in (0.7, 0.8)]
    measured = lambda p: p.architecture == "Hopper"  # noqa: E731
    unmeasured = {"C": {"itl_ms": {"p10": 0.75, "p90": 1.33}}}
    cov = coverage(points, measured=measured, unmeasured_band=unmeasured)["itl_ms"]
    assert cov["n"] == 8
    assert cov["inside_p10_p90"] == pytest.approx(7 / 8)  # C's 0.7 is outside


def test_the_unmeasured_band_is_symmetric_in_log_with_one_spread_for_the_decode_step() -> None:
    # how far predictions land without any row of their architecture, not which way
    points = [_arch_pt("A", r, "Ada") for r in (0.5, 0.8, 1.0, 1.25, 1.6)]
    points += [_arch_pt("A", 2.0, "Ada", "output_tokens_per_s")]
    band = extrapolation_band(points)
    assert band["itl_ms"] == band["output_tokens_per_s"] == band["e2e_latency_ms"]
    assert band["itl_ms"]["p10"] == pytest.approx(1 / band["itl_ms"]["p90"])
    assert band["itl_ms"]["p90"] == pytest.approx(2.0)  # |log| 80th percentile of 6
    assert "ttft_ms" not in band


def test_a_gpu_of_an_unmeasured_architecture_carries_the_unmeasured_band() -> None:
    consts = fitted()
    assert "Ada" not in consts.measured_architectures
    assert consts.ratio("itl_ms", "p90", "Ada") == consts.uncertainty_unmeasured["itl_ms"]["p90"]
    assert consts.ratio("itl_ms", "p90", "Hopper") == consts.uncertainty["itl_ms"]["p90"]
    # KV capacity does not depend on an architecture's efficiencies: the measured band stays
    assert consts.ratio("kv_cache_tokens", "p90", "Ada") == consts.ratio("kv_cache_tokens", "p90")


def test_the_risk_of_an_l40s_region_is_sized_at_its_own_band() -> None:
    pessimistic = sizing_constants("pessimistic", fitted())
    assert for_architecture(pessimistic, "Hopper") is pessimistic
    ada = for_architecture(pessimistic, "Ada")
    slower = ada.engine_step_factor["vllm"] / pessimistic.engine_step_factor["vllm"]
    assert slower == pytest.approx(
        fitted().ratio("itl_ms", "p90", "Ada") / fitted().ratio("itl_ms", "p90")
    )
