"""The band measured, not asserted (#29): its coverage of held-out measurements is counted
with each source's band made without it, every prediction carries a band, and bursts
through an API server have their own."""

import json

import pytest

from llmfleet.calibration.band import coverage, ttft_bias
from llmfleet.calibration.fit import uncertainty
from llmfleet.calibration.rows import Point
from llmfleet.cli import main


def _pt(source: str, ratio: float, regime: str = "steady", metric: str = "itl_ms") -> Point:
    # measured / predicted = ratio
    return Point(f"{source}-{ratio}", source, "vllm", metric, ratio * 10.0, 10.0, regime)


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
