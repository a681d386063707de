"""`llmfleet diff` says why: one line per material change naming the constraint that binds,
what each region serves, and before/after charts beside the markdown."""

import pytest
from plans import three_regions

from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import diff_charts
from llmfleet.outputs.diff import diff_plans
from llmfleet.outputs.diff_markdown import markdown


@pytest.fixture(scope="module")
def tighter_ttft(own_plans):
    """The three-region plan with TTFT 500 -> 300 ms."""
    after = build_fleet_plan(three_regions(**{"slo.ttft_ms": 300}))
    return own_plans["three-regions"], after, diff_plans("500", own_plans["three-regions"],
                                                         "300", after)


def test_an_slo_change_names_the_binding_constraint_in_every_region(tighter_ttft) -> None:
    _, after, d = tighter_ttft
    for r in d.regions:
        rp = after.region(r.region)
        [batch] = [c for c in r.causes if c.startswith("batch ")]
        assert rp.binding.text in batch and batch.count("TTFT binds") == 1
    east = next(r for r in d.regions if r.region == "us-east-1")
    # B200 TP 4: the batch falls 189 -> 97, as 98 sequences would take TTFT p99 to 301 ms;
    # the 4,057-token p99 prompt alone takes 145 ms, 48 % of the new 300 ms
    assert east.causes[0] == (
        "batch 189 → 97: TTFT binds: 98 running sequences would take TTFT p99 to 301 ms, "
        "over the 300 ms SLO; a lone p99 prompt (4,057 tokens) already takes 145 ms of it on "
        "B200 TP 4 (48%)"
    )
    assert east.causes[1].startswith(
        "GPUs at the peak 48 → 56 (11 → 14 replicas): a replica carries 23.61 → 20.04 req/s"
    )
    text = markdown(d)
    assert "#### Why" in text and "- **us-east-1**\n  - batch 189 → 97: TTFT binds" in text


def test_a_new_configuration_says_what_became_of_the_old_one(own_plans) -> None:
    # TTFT 500 -> 400 ms: eu-north-1 moves from 6 p5en.48xlarge to 8 p5.48xlarge; the old
    # configuration would now need 8 nodes, and the new one cost 7 nodes before
    after = build_fleet_plan(three_regions(**{"slo.ttft_ms": 400}))
    d = diff_plans("500", own_plans["three-regions"], "400", after)
    north = next(r for r in d.regions if r.region == "eu-north-1")
    [config] = [c for c in north.causes if c.startswith("configuration ")]
    assert config.startswith(
        "configuration p5en.48xlarge TP 8 (fp8, KV auto, no speculation) → p5.48xlarge TP 8 "
        "(fp8, KV auto, no speculation): the old one now costs $395,524/month, 1.15x the cost"
    )
    assert "before, the new one costs $300,942/month, 1.01x the cost" in config


def test_doubling_the_peak_names_the_load_and_the_warm_floor(own_plans) -> None:
    before = own_plans["three-regions"]
    after = build_fleet_plan(three_regions(**{"traffic.peak_requests_per_s": 600}))
    east = next(r for r in diff_plans("b", before, "a", after).regions if r.region == "us-east-1")
    assert east.causes[0] == (
        "GPUs at the peak 48 → 88 (11 → 22 replicas): the region's peak 135 → 270 req/s; the "
        "warm floor for a lost region adds 3 → 7 replicas"
    )
    [trough] = [c for c in east.causes if c.startswith("trough floor")]
    assert trough.startswith("trough floor 6 → 11 node(s), $499,026 → $914,880/month: stage 4 "
                             "keeps 22 replica(s) warm")


def test_an_unchanged_plan_has_no_cause(own_plans) -> None:
    fp = own_plans["three-regions"]
    d = diff_plans("a", fp, "b", fp)
    assert all(r.causes == [] for r in d.regions)
    assert "No material change in any region." in markdown(d)


def test_the_headline_and_table_show_precision_kv_and_speculation(tighter_ttft) -> None:
    _, _, d = tighter_ttft
    text = markdown(d)
    assert "chat-three: Llama-3.3-70B-Instruct served as fp8, KV auto, no speculation." in text
    assert "| region | instance | TP | precision | KV | speculation | batch |" in text
    assert "| us-east-1 | p6-b200.48xlarge | 4 | fp8 | auto | none | 189 → 97 |" in text


@pytest.mark.slow  # whole plans, drills or renders: program-check
def test_diff_charts_are_drawn_beside_the_markdown_and_byte_identical(
    tighter_ttft, tmp_path, capsys, own_stacks
) -> None:
    before, after, _ = tighter_ttft
    head = tmp_path / "Pulumi.tighter.yaml"
    head.write_text((own_stacks / "Pulumi.three-regions.yaml").read_text().replace(
        "ttft_ms: 500", "ttft_ms: 300"))
    out_dir = tmp_path / "charts"
    assert main(["diff", "three-regions", str(head), "--charts", str(out_dir)]) == 0
    out = capsys.readouterr().out
    drawn = {p.name: p.read_text() for p in sorted(out_dir.iterdir())}
    assert sorted(drawn) == [
        "eu-north-1-batch.svg", "fleet.svg", "us-east-1-batch.svg", "us-west-2-batch.svg"
    ]
    for text in drawn.values():
        assert text.startswith("<?xml") and "<dc:date>" not in text and "<text" in text
    # drawn again from the same two plans: byte-identical
    assert diff_charts.chart_files(before, after, "three-regions", str(head)) == drawn
    title = "us-east-1: ITL, TTFT and throughput against the batch"
    assert f"![{title}]({out_dir}/us-east-1-batch.svg)" in out
