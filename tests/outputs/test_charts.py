"""The report's SVG charts: drawn from FleetPlan numbers, byte-identical across processes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from plans import ONE_REGION

from llmfleet.fleetplan.predicted import curve_batches
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


def test_the_curve_passes_through_the_operating_point_at_the_slo_edge(stack_plans) -> None:
    for fp in stack_plans.values():
        slo_itl, slo_ttft = fp.slo.itl_ms, fp.slo.ttft_ms
        for rp in fp.regions:
            by_batch = {p.batch: p for p in rp.batch_curve}
            op = by_batch[rp.serving.vllm.max_num_seqs]
            assert op.itl_ms <= slo_itl and op.ttft_ms is not None and op.ttft_ms <= slo_ttft
            beyond = [p for p in rp.batch_curve if p.batch > op.batch]
            if beyond and rp.binding.constraint in ("ttft", "itl", "prefill"):
                # the next batch drawn breaks an SLO: max_num_seqs is the largest (where the
                # KV pool binds, the next batch breaks no SLO: it does not fit)
                p = beyond[0]
                assert p.itl_ms > slo_itl or p.ttft_ms is None or p.ttft_ms > slo_ttft
            tokens = [p.output_tokens_per_s for p in rp.batch_curve]
            assert tokens == sorted(tokens)  # a bigger batch never serves fewer tokens/s


def test_curve_batches_span_one_to_twice_the_operating_point_within_the_kv_pool() -> None:
    # 5 points over 1..300 step by 74.75: 1, 76, 151, 225, 300; the operating point joins them
    assert curve_batches(150, 10_000, points=5) == [1, 76, 150, 151, 225, 300]
    # the KV pool holds 200 mean sequences: 1..200 in 3 points (step 99.5), plus 150
    assert curve_batches(150, 200, points=3) == [1, 101, 150, 200]
    assert curve_batches(1, 1) == [1]


def test_a_chart_whose_numbers_have_not_changed_is_reused_not_drawn(
    own_plans, monkeypatch
) -> None:
    drawn = charts.chart_files(own_plans["one-region"])
    assert all(charts.stamp_of(text) for text in drawn.values())

    def no_drawing(*_: object) -> None:
        raise AssertionError("drew a chart whose stamp matched")

    monkeypatch.setattr(charts, "_figure", no_drawing)
    charts._svg.cache_clear()
    assert charts.chart_files(own_plans["one-region"], drawn) == drawn


def test_a_chart_whose_numbers_changed_is_drawn_again(own_plans) -> None:
    fp = own_plans["one-region"]
    drawn = charts.chart_files(fp)
    region = fp.regions[0].model_copy(update={"monthly_cost_usd": 1.0})
    cheaper = fp.model_copy(update={"regions": [region]})
    again = charts.chart_files(cheaper, drawn)
    assert again["charts/cost.svg"] != drawn["charts/cost.svg"]  # the cost bars moved
    assert charts.stamp_of(again["charts/cost.svg"]) != charts.stamp_of(drawn["charts/cost.svg"])
    assert again["charts/memory.svg"] == drawn["charts/memory.svg"]


def test_render_check_draws_every_chart_so_an_edited_one_is_drift(
    tmp_path, capsys, own_stacks
) -> None:
    from llmfleet.cli import main

    out = tmp_path / "rendered"
    assert main(["render", "--stack", "one-region", "--out", str(out)]) == 0
    chart = out / "one-region" / "charts" / "cost.svg"
    chart.write_text(chart.read_text().replace("<svg", "<svg data-edited='1'", 1))
    assert main(["render", "--stack", "one-region", "--out", str(out), "--check"]) == 1
    assert "charts/cost.svg" in capsys.readouterr().err
