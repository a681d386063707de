"""`llmfleet diff` says why: one line per material change naming the constraint that binds,
what each region serves, and before/after charts beside the markdown."""

import pytest
from plans import three_regions

from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs.diff import before_after_charts
from llmfleet.outputs.diff.compare import PlanDiff, diff_plans
from llmfleet.outputs.diff.markdown import markdown


@pytest.fixture(scope="module")
def tighter_ttft(own_plans):
    """The three-region plan with TTFT 500 -> 400 ms (at 300 ms since #28 eu-north-1 needs
    replicas across two nodes, which a production plan must reserve)."""
    after = build_fleet_plan(three_regions(**{"slo.ttft_ms": 400}))
    return own_plans["three-regions"], after, diff_plans("500", own_plans["three-regions"],
                                                         "400", after)


@pytest.fixture(scope="module")
def looser_before(own_plans):
    """The three-region plan's diff with TTFT 650 -> 500 ms."""
    before = build_fleet_plan(three_regions(**{"slo.ttft_ms": 650}))
    return diff_plans("650", before, "500", own_plans["three-regions"])


def _configuration_cause(d: PlanDiff, region: str) -> str:
    [config] = [c for r in d.regions if r.region == region for c in r.causes
                if c.startswith("configuration ")]
    return config


def test_an_slo_change_names_the_binding_constraint_in_every_region(tighter_ttft) -> None:
    _, after, d = tighter_ttft
    for r in d.regions:
        rp = after.region(r.region)
        [batch] = [c for c in r.causes if c.startswith("batch ")]
        assert rp.binding.text in batch and batch.count("TTFT binds") == 1
    east = next(r for r in d.regions if r.region == "us-east-1")
    # B200 TP 2: the slots fall 133 -> 100 and a replica's SLO-limit rate 13.28 -> 11.59
    # req/s, where 1 % more load would take TTFT p99 to 404 ms; the 4,057-token p99 prompt
    # alone takes 203 ms, 51 % of the new 400 ms. 21 replicas carry the 240 req/s of
    # us-west-2's loss (243 req/s). (B200 TP 4, 198 -> 109 at 300 ms before #28.)
    assert east.causes[0] == (
        "batch 133 → 100: TTFT binds: 1 % more load (11.7 req/s per replica) would take TTFT "
        "p99 to 404 ms, over the 400 ms SLO; a lone p99 prompt (4,057 tokens) already takes "
        "203 ms of it on B200 TP 2 (51%)"
    )
    assert east.causes[1].startswith(
        "GPUs at the peak 40 → 48 (19 → 21 replicas): a replica carries 13.28 → 11.59 req/s"
    )
    text = markdown(d)
    assert "#### Why" in text and "- **us-east-1**\n  - batch 133 → 100: TTFT binds" in text


def test_a_new_configuration_says_what_became_of_the_old_one(tighter_ttft) -> None:
    # TTFT 500 -> 400 ms: eu-north-1 moves from 5 p5.48xlarge at TP 4 (9 replicas of 8.35
    # req/s) to 6 at TP 8 (6 of 13.61); TP 4 would now need 7 nodes, and at 500 ms TP 8 cost
    # the same 5 nodes and lost the tie-break to fewer GPUs (p5en.48xlarge TP 4 with FP8 KV
    # -> p5.48xlarge TP 8 before #28's SLO model)
    config = _configuration_cause(tighter_ttft[2], "eu-north-1")
    assert config.startswith(
        "configuration p5.48xlarge TP 4 (fp8, KV auto, no speculation) → p5.48xlarge TP 8 "
        "(fp8, KV auto, no speculation): the old one now costs $300,942/month, 1.17x the cost "
        "(7 x p5.48xlarge)"
    )
    assert config.endswith(
        "before, the new one costs the same ($214,959/month) and loses the tie-break (the "
        "plainer levers, then fewer GPUs, then more spare capacity)"
    )


def test_an_old_configuration_that_ties_says_the_plainer_levers_won(looser_before) -> None:
    # TTFT 650 -> 500 ms: us-east-1's B200 TP 2 needs 5 nodes with FP8 KV or 16-bit KV (FP8
    # KV was a node cheaper at 650 ms: 16 replicas for the 240 req/s of a loss on 4 nodes);
    # the tie goes to 16-bit KV, the plainer lever, not to fewer GPUs or spare capacity (FP8
    # KV holds more sequences). (TTFT 500 -> 400 ms at TP 4 before #28's SLO model.)
    assert _configuration_cause(looser_before, "us-east-1").startswith(
        "configuration p6-b200.48xlarge TP 2 (fp8, KV fp8, no speculation) → p6-b200.48xlarge "
        "TP 2 (fp8, KV auto, no speculation): the old one now costs the same ($415,855/month) "
        "and loses the tie-break (the plainer levers, then fewer GPUs, then more spare "
        "capacity)"
    )


def test_doubling_the_peak_names_the_load_and_the_warm_floor(own_plans) -> None:
    before = own_plans["three-regions"]
    after = build_fleet_plan(three_regions(**{"traffic.peak_requests_per_s": 600}))
    east = next(r for r in diff_plans("b", before, "a", after).regions if r.region == "us-east-1")
    # 135 -> 270 req/s. At twice the peak FP8 KV serves 13.46 req/s a replica where 16-bit KV
    # serves 13.28: 36 replicas on 9 nodes, not 37 on 10 (a tie at the old peak, which the
    # plainer levers won). 270 req/s over 10.77 (13.46 less 20 % headroom): 26 replicas, and
    # 36 to carry us-west-2's users too (480 req/s at 13.46)
    assert east.causes[0].startswith("configuration p6-b200.48xlarge TP 2 (fp8, KV auto, no "
                                     "speculation) → p6-b200.48xlarge TP 2 (fp8, KV fp8")
    [gpus] = [c for c in east.causes if c.startswith("GPUs at the peak")]
    assert gpus == (
        "GPUs at the peak 40 → 72 (19 → 36 replicas): the region's peak 135 → 270 req/s; a "
        "replica carries 13.28 → 13.46 req/s inside the SLOs (the batch above); the warm floor "
        "for a lost region adds 6 → 10 replicas"
    )
    [trough] = [c for c in east.causes if c.startswith("trough floor")]
    assert trough.startswith("trough floor 5 → 9 node(s), $415,855 → $748,538/month: stage 4 "
                             "keeps 36 replica(s) warm")


def test_an_unchanged_plan_has_no_cause(own_plans) -> None:
    fp = own_plans["three-regions"]
    d = diff_plans("a", fp, "b", fp)
    assert all(r.causes == [] for r in d.regions)
    assert "No material change in any region." in markdown(d)


def test_the_headline_and_table_show_precision_kv_and_speculation(looser_before) -> None:
    text = markdown(looser_before)
    # TTFT 650 -> 500 ms: the B200 regions leave FP8 KV, a node cheaper at 650 ms, for
    # 16-bit KV, which ties it at 500 ms; eu-north-1 keeps 16-bit KV (TTFT 500 -> 300 ms,
    # eu-north-1 leaving FP8 KV, before #28's SLO model)
    assert (
        "chat-three: Llama-3.3-70B-Instruct served as us-east-1, us-west-2: fp8, KV fp8, no "
        "speculation; eu-north-1: fp8, KV auto, no speculation → fp8, KV auto, no speculation."
    ) in text
    assert "| region | instance | TP | precision | KV | speculation | batch |" in text
    assert "| us-east-1 | p6-b200.48xlarge | 2 | fp8 | fp8 → auto | none | 144 → 133 |" in text


@pytest.mark.slow  # whole plans, drills or renders: program-check
def test_diff_charts_are_drawn_beside_the_markdown_and_byte_identical(
    tighter_ttft, tmp_path, capsys, own_stacks
) -> None:
    before, after, _ = tighter_ttft
    head = tmp_path / "Pulumi.tighter.yaml"
    head.write_text((own_stacks / "Pulumi.three-regions.yaml").read_text().replace(
        "ttft_ms: 500", "ttft_ms: 400"))
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
    assert before_after_charts.chart_files(before, after, "three-regions", str(head)) == drawn
    title = "us-east-1: ITL, TTFT and throughput against the batch"
    assert f"![{title}]({out_dir}/us-east-1-batch.svg)" in out
