"""`llmfleet diff`: what a change to a plan does to GPUs, cost, cost per token and SLO margins."""

import json
import subprocess
from pathlib import Path

import pytest
from plans import plan_dict, three_regions, write_stacks

from llmfleet.cli import main
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import economics, render
from llmfleet.outputs.diff.compare import diff_plans, margin
from llmfleet.outputs.diff.markdown import markdown
from llmfleet.plan import stacks
from llmfleet.plan.stacks import parse_plan
from llmfleet.units import HOURS_PER_MONTH

SINGLE_NODE = "    allowed:\n      multi_node: false\n"
"""Replicas inside one node on both sides: at twice the peak a replica across two nodes is
a few per cent cheaper in eu-north-1, which would change more than the replica counts."""


def same_configuration(before, after, region) -> bool:
    """The region serves the same instance type, TP and levers (its operating point)."""
    b, a = before.region(region), after.region(region)
    return (b.instance_type, b.tensor_parallel_size, b.levers) == (
        a.instance_type,
        a.tensor_parallel_size,
        a.levers,
    )


@pytest.fixture(scope="module")
def peak_doubled(own_plans):
    """The tests' three-region plan with the peak doubled (300 -> 600 req/s)."""
    before = own_plans["three-regions"]
    after = build_fleet_plan(three_regions(**{"traffic.peak_requests_per_s": 600}))
    return before, after, diff_plans("three", before, "three-doubled", after)


def test_doubling_the_peak_roughly_doubles_peak_gpus_and_the_resilience_floor(peak_doubled) -> None:
    before, after, d = peak_doubled
    fb, fa = d.fleet["before"], d.fleet["after"]
    assert d.inputs[0].key == "traffic.peak_requests_per_s"
    assert (d.inputs[0].before, d.inputs[0].after) == (300, 600)
    assert (fb.gpus.desired, fa.gpus.desired) == (before.gpus.desired, after.gpus.desired)
    # Twice the peak on the configuration chosen before needs at most twice its replicas, so
    # the cheapest choice costs at most twice as much; where the configuration stays,
    # replicas are ceil(peak share / usable capacity): more, and at most twice the GPUs.
    assert fb.monthly_cost_usd < fa.monthly_cost_usd <= 2 * fb.monthly_cost_usd + 0.01
    # The trough's floor is stage 4's warm floor, which carries the absorbed peak of a lost
    # region: it follows the peak.
    assert fb.gpus.min < fa.gpus.min
    for r in d.regions:
        assert r.status == "changed" and r.before and r.after
        rp = after.region(r.region)
        assert r.after.gpus.desired == rp.nodes.desired * rp.gpus_per_node
        assert r.after.monthly_cost_usd <= 2 * r.before.monthly_cost_usd + 0.01
        if same_configuration(before, after, r.region):
            assert r.before.gpus.desired < r.after.gpus.desired <= 2 * r.before.gpus.desired
    # eu-north-1 keeps p5.48xlarge TP 4 (5 -> 9 nodes); the US regions' tie at the old peak
    # (16-bit or FP8 KV, 5 nodes each) breaks at twice it: FP8 KV takes 9 nodes, 16-bit 10.
    assert sum(same_configuration(before, after, r.region) for r in d.regions) >= 1
    text = markdown(d)
    added = fa.gpus.desired - fb.gpus.desired
    assert f"**GPUs at the peak: {fb.gpus.desired} → {fa.gpus.desired} (+{added}," in text


def test_doubling_the_peak_adds_the_cost_of_the_added_nodes(peak_doubled) -> None:
    before, after, d = peak_doubled
    for r in d.regions:
        b, a = before.region(r.region), after.region(r.region)
        # e.g. us-east-1: 5 -> 10 p6-b200.48xlarge at $113.9328/h x 730 h = +$415,854.72/month
        added = (
            a.nodes.desired * a.price_usd_per_hour - b.nodes.desired * b.price_usd_per_hour
        ) * HOURS_PER_MONTH
        assert r.after.monthly_cost_usd - r.before.monthly_cost_usd == pytest.approx(added, 1e-6)
        # the trough runs the floor (stage 4's warm floor follows the peak)
        floor = a.nodes.min * a.price_usd_per_hour * HOURS_PER_MONTH
        assert r.after.monthly_cost_usd_at_trough == pytest.approx(floor, 1e-6)
    fb, fa = d.fleet["before"], d.fleet["after"]
    assert f"**Monthly cost at the peak: ${fb.monthly_cost_usd:,.0f} → " in markdown(d)
    # Twice the tokens on at most twice the nodes: the peak's cost per token never rises.
    per_mtok = "gpu_at_peak_usd_per_million_output_tokens"
    assert getattr(fa, per_mtok) <= getattr(fb, per_mtok)


def test_the_margins_are_the_share_of_each_slo_left_unused(peak_doubled) -> None:
    _, after, d = peak_doubled
    for r in d.regions:
        rp = after.region(r.region)
        assert r.after.ttft_margin == pytest.approx((500 - rp.predicted.ttft_ms) / 500, abs=1e-4)
        assert r.after.itl_margin == pytest.approx((40 - rp.predicted.itl_ms) / 40, abs=1e-4)
        assert 0 <= r.after.ttft_margin < 1 and 0 <= r.after.itl_margin < 1
    assert margin(30.0, 40.0) == 0.25
    assert margin(50.0, 40.0) == -0.25


def test_doubling_the_peak_changes_only_the_replica_ceilings_in_the_manifests(peak_doubled) -> None:
    before, after, d = peak_doubled
    for r in d.regions:
        assert r.after.replicas.max > r.before.replicas.max  # the ScaledObject's ceiling
        if same_configuration(before, after, r.region):
            assert r.autoscaling == []  # per-replica thresholds: the same operating point
            assert r.engine_flags == []
    # the ceiling is in the ScaledObject, the "replicas at the ceiling" alert and dashboard;
    # the Deployment's rollout surge is 1 only while a node slot is spare (us-east-1's 22
    # replicas fill its 11 nodes' 22 slots: maxSurge 0)
    ceiling_files = (
        "scaledobject.yaml",
        "prometheusrule.yaml",
        "dashboard.yaml",
        "karpenter-nodepool.yaml",
        "deployment.yaml",
    )
    kept = [r.region for r in d.regions if same_configuration(before, after, r.region)]
    changed = [p for p in d.files.changed if p.split("/")[0] in kept or "/" not in p]
    assert changed and all(p.endswith((*ceiling_files, ".svg", "REPORT.md")) for p in changed)
    assert "+  maxReplicaCount: " in d.rendered_diff


def test_cost_per_million_output_tokens_is_the_billed_gpu_hours_over_tokens(own_plans) -> None:
    fp = own_plans["three-regions"]
    rp = fp.regions[0].model_copy(
        update={
            "billed_monthly_cost_usd": 3 * 100.0 * 730,  # 3 nodes billed $100/h at the peak
            "billed_monthly_cost_usd_at_trough": 1 * 100.0 * 730,
            "peak_requests_per_s": 100.0,
            "trough_requests_per_s": 20.0,
        }
    )
    # peak: $300/h over 100 req/s x 300 output tokens x 3600 s = 108 M tokens/h
    per_mtok = economics.gpu_usd_per_million_output_tokens
    assert per_mtok(fp, rp, "peak") == pytest.approx(300 / 108)
    # trough: $100/h over 20 x 300 x 3600 = 21.6 M tokens/h
    assert per_mtok(fp, rp, "trough") == pytest.approx(100 / 21.6)


def test_a_plan_price_override_is_named_with_the_list_price_beside_it(own_plans) -> None:
    rp = own_plans["three-regions"].region("eu-north-1")
    listed = economics.price_note(rp)
    assert not listed.override and listed.list_as_of == "2026-01-21"
    assert "on-demand list price as of 2026-01-21" in listed.text()
    overridden = economics.price_note(
        rp.model_copy(update={"price_usd_per_hour": 20.0, "price_source": "plan.prices override"})
    )
    assert overridden.override
    assert overridden.text().startswith("$20.000/h, plan.prices override; on-demand list price $")


def test_two_models_still_diff_and_say_so(own_plans) -> None:
    d = diff_plans("one", own_plans["one-region"], "three", own_plans["three-regions"])
    assert not d.same_model
    assert "Llama-3.1-8B-Instruct bf16 -> Llama-3.3-70B-Instruct fp8" in (d.model_note or "")
    status = {r.region: r.status for r in d.regions}
    assert status == {"us-east-1": "changed", "us-west-2": "added", "eu-north-1": "added"}
    text = markdown(d)
    assert "> **Different models**" in text
    assert "| us-west-2 (added) | — → p6-b200.48xlarge |" in text


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def own_repo(tmp_path, own_stacks, monkeypatch) -> Path:
    """A git repository whose HEAD holds the tests' own stacks; `REV:STACK` reads it."""
    write_stacks(tmp_path / "stacks")
    for argv in (["init", "-q"], ["add", "stacks"], ["commit", "-qm", "own stacks"]):
        subprocess.run(
            ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *argv],
            cwd=tmp_path, check=True, capture_output=True,
        )
    show = stacks.git_show
    monkeypatch.setattr(stacks, "git_show", lambda rev, rel, repo=None: show(rev, rel, tmp_path))
    return tmp_path


def test_diff_of_two_stacks_prints_a_pr_comment(capsys, own_stacks) -> None:
    code, out, err = run(capsys, "diff", "one-region", "three-regions")
    assert code == 0 and err == ""
    assert out.startswith("### llmfleet diff: `one-region` → `three-regions`")
    for heading in ("#### Cost", "#### SLO margins", "#### Engine flags", "#### Prices"):
        assert heading in out


def test_diff_against_the_committed_stack_reads_it_with_git(capsys, own_repo) -> None:
    code, out, _ = run(capsys, "diff", "HEAD:three-regions", "three-regions", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d) >= {"base", "head", "same_model", "fleet", "inputs", "regions", "files"}
    assert set(d["fleet"]) == {"before", "after"}
    assert set(d["regions"][0]) >= {"region", "status", "before", "after", "engine_flags"}
    assert set(d["regions"][0]["after"]) >= {
        "gpus",
        "nodes",
        "billed_monthly_cost_usd",
        "gpu_at_peak_usd_per_million_output_tokens",
        "monthly_cost_usd",  # the aliases (docs/cli.md#aliases)
        "usd_per_million_output_tokens",
        "ttft_margin",
        "itl_margin",
        "price_source",
        "price_override",
    }
    assert d["base"] == "HEAD:three-regions" and d["same_model"] is True


def test_an_unknown_revision_is_one_line_and_exit_2(capsys, own_repo) -> None:
    code, out, err = run(capsys, "diff", "no-such-rev:three-regions", "three-regions")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "no-such-rev:stacks/Pulumi.three-regions.yaml: git cannot read it" in err


def test_a_stack_missing_at_a_revision_is_exit_2(capsys, own_repo) -> None:
    code, _, err = run(capsys, "diff", "HEAD:qa", "three-regions")
    assert code == 2 and "does not exist in 'HEAD'" in err


def test_a_missing_stack_file_is_exit_2(capsys, own_stacks) -> None:
    code, _, err = run(capsys, "diff", "three-regions", "stacks/Pulumi.nope.yaml")
    assert code == 2 and "no such stack file" in err


def test_the_report_and_the_diff_mark_a_plan_price_override(own_plans) -> None:
    base = own_plans["one-region"]
    rp = base.regions[0]
    priced = plan_dict(
        **{"traffic.peak_requests_per_s": 6, "traffic.trough_requests_per_s": 1},
        allowed={"gpus": ["L4", "A10G", "L40S"]},
        prices=[{"instance_type": rp.instance_type, "usd_per_hour": 1.0}],
    )
    fp = build_fleet_plan(parse_plan(priced))
    assert fp.regions[0].instance_type == rp.instance_type
    report = render.render_stack(fp)[render.REPORT]
    assert "| **override** $1.000/h, plan.prices override; on-demand list price $" in report
    d = diff_plans("dev", base, "priced", fp)
    assert d.regions[0].after is not None and d.regions[0].after.price_override
    assert "$1.000/h, plan.prices override" in markdown(d)


def test_the_cost_per_token_line_shows_its_before_value_even_when_unchanged(own_plans) -> None:
    """A summary line always says what the value was: `$x → $y`, or `$x (unchanged)`."""
    fp = own_plans["one-region"]
    line = next(
        x for x in markdown(diff_plans("a", fp, "b", fp)).splitlines()
        if x.startswith("- $ per million output tokens")
    )
    assert line.count("(unchanged)") == 2
