"""The report's SVG charts: drawn from FleetPlan numbers, byte-identical across processes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from plans import ONE_REGION

from llmfleet.fleetplan.predicted import CURVE_SHARES
from llmfleet.outputs import charts, render

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a fresh interpreter: imports and renders every stack
def test_charts_are_byte_identical_in_another_process(own_plans) -> None:
    here = charts.chart_files(own_plans["one-region"])
    code = (
        "import json, sys\n"
        "from llmfleet.outputs import charts\n"
        "from llmfleet.fleetplan.fleet import build_fleet_plan\n"
        "from llmfleet.plan.stacks import parse_plan\n"
        f"plan = parse_plan(json.loads({json.dumps(json.dumps(ONE_REGION))}))\n"
        "json.dump(charts.chart_files(build_fleet_plan(plan)), sys.stdout)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    there = json.loads(done.stdout)
    assert list(there) == list(here)
    for path, text in here.items():
        assert there[path] == text, path


def test_an_svg_carries_no_date_version_or_glyph_outlines(own_plans) -> None:
    for path, text in charts.chart_files(own_plans["three-regions"]).items():
        assert text.startswith("<?xml") and text.endswith("</svg>\n"), path
        assert "<dc:date>" not in text and "Matplotlib v" not in text, path
        assert "<text" in text, path  # svg.fonttype none: text stays text, so it diffs
        assert '<use xlink:href="#DejaVu' not in text, path


def test_the_report_embeds_every_chart_by_a_relative_link(stack_plans) -> None:
    for fp in stack_plans.values():
        files = render.render_stack(fp)
        links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", files[render.REPORT])
        assert links == [c.path for c in charts.chart_index(fp)]
        assert all(link in files and link.startswith("charts/") for link in links)
        assert f"charts/{fp.regions[0].region}-batch.svg" in links


def test_the_curve_passes_through_the_slo_limit_and_breaks_an_slo_beyond_it(
    stack_plans,
) -> None:
    for fp in stack_plans.values():
        slo_itl, slo_ttft = fp.slo.itl_ms, fp.slo.ttft_ms
        for rp in fp.regions:
            [op] = [p for p in rp.batch_curve if p.operating]
            assert op.requests_per_s == pytest.approx(rp.replica.capacity_requests_per_s,
                                                      rel=1e-3)
            assert op.itl_ms <= slo_itl and op.ttft_ms is not None and op.ttft_ms <= slo_ttft
            if rp.binding.constraint in ("ttft", "itl") and rp.disaggregation is None:
                # 5 % more load breaks the binding SLO at the percentile
                p = next(p for p in rp.batch_curve if p.requests_per_s > op.requests_per_s)
                assert p.itl_ms is None or p.itl_ms > slo_itl or p.ttft_ms is None \
                    or p.ttft_ms > slo_ttft
            tokens = [p.output_tokens_per_s for p in rp.batch_curve]
            assert tokens == sorted(tokens)  # more load never serves fewer tokens/s
            batches = [p.batch for p in rp.batch_curve]
            assert batches == sorted(batches)  # nor runs fewer sequences


def test_the_curve_spans_a_tenth_of_the_slo_limit_to_a_fifth_beyond_it(own_plans) -> None:
    rp = own_plans["one-region"].regions[0]
    cap = rp.replica.capacity_requests_per_s
    loads = [p.requests_per_s for p in rp.batch_curve]
    assert loads == [round(share * cap, 4) for share in CURVE_SHARES]
    assert (CURVE_SHARES[0], CURVE_SHARES[-1]) == (0.1, 1.2)
