"""The report says what each region serves and what it could not choose: precision, KV dtype
and speculation per region, alternatives that name the lever they change, and whether the
region sells a faster GPU at all."""

import pytest
from plans import make_plan, one_region

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render
from llmfleet.outputs.console import fleet_text

TWO = [{"name": "us-east-1", "traffic_share": 0.5}, {"name": "eu-west-1", "traffic_share": 0.5}]


@pytest.fixture(scope="module")
def mixed():
    """Llama-3.1-8B with precision and KV dtype left to the search in us-east-1 and
    eu-west-1: eu-west-1 sells only A10G and A100 (no FP8 KV there)."""
    return build_fleet_plan(make_plan(model={"id": "Llama-3.1-8B-Instruct"}, regions=TWO))


def test_the_headline_says_what_each_region_serves_when_they_differ(mixed) -> None:
    # eu-west-1's A10G serves FP8 weights (Marlin, weight-only) on as many nodes as BF16 (3
    # g5.12xlarge): the tie goes to the plainer BF16; us-east-1's L40S carries its 5 req/s
    # on one node with FP8 weights (12.23 req/s a replica), where FP8 KV ties it and BF16
    # needs two (with FP8 KV too before the KV pool's slots were found by bisection)
    served = "us-east-1: fp8, KV auto, no speculation; eu-west-1: bf16, KV auto, no speculation"
    assert mixed.served_as() == served
    report = render.render_stack(mixed)[render.REPORT]
    assert f"served as **{served}**" in report
    assert "| us-east-1 | g6e.xlarge | 1 x L40S | 1 | fp8, KV auto, no speculation |" in report
    assert f"served as {served}" in fleet_text(mixed)


def test_one_label_when_every_region_serves_alike(own_plans) -> None:
    assert own_plans["one-region"].served_as() == "bf16, KV auto, no speculation"


def test_the_alternatives_table_leaves_out_the_chosen_row_and_names_what_differs(
    own_plans,
) -> None:
    fp = own_plans["three-regions"]
    rp = fp.region("us-east-1")
    [chosen] = [a for a in rp.alternatives if a.chosen]
    assert (chosen.instance_type, chosen.tensor_parallel_size) == (
        rp.instance_type,
        rp.tensor_parallel_size,
    )
    assert chosen.differs == "" and chosen == rp.alternatives[0]
    report = render.render_stack(fp)[render.REPORT]
    section = report.split("## us-east-1:")[1].split("## us-west-2:")[0]
    table = section.split("Top alternatives not chosen")[1].split("\n\n")[1]
    rows = table.splitlines()[2:]
    assert len(rows) == 5
    # p6-b200.48xlarge TP 2 with FP8 KV: the same instance and TP, another KV, at the same
    # cost (5 nodes), a tie the plainer 16-bit KV wins (TP 4 with FP8 KV chosen, 16-bit KV a
    # node more, before #28's SLO model)
    assert (
        "| p6-b200.48xlarge | 2 | fp8 | fp8 | - | yes | $415,854.72 | 1.00x the cost "
        "(5 x p6-b200.48xlarge) | KV fp8 (chosen auto) |"
    ) in rows
    assert not any("| p6-b200.48xlarge | 2 | fp8 | auto | - |" in row for row in rows)  # chosen


def test_a_region_without_a_faster_gpu_says_so() -> None:
    # A100-40GB in eu-west-1, which sells A100-40GB and A10G (the mixed plan's eu-west-1
    # takes A10Gs since #28, and A100 is faster)
    plan = make_plan(regions=[{"name": "eu-west-1", "traffic_share": 1.0}],
                     **{"allowed.gpus": ["A100-40GB"]})
    rp = build_fleet_plan(plan).regions[0]
    assert (rp.instance_type, rp.faster_gpus) == ("p4d.24xlarge", [])
    assert (
        "the catalog sells no GPU faster than A100-40GB in eu-west-1 (1,555 GB/s of memory "
        "bandwidth; eu-west-1 offers A100-40GB, A10G)"
    ) in rp.reasons


def test_faster_gpus_the_plan_does_not_allow_are_named() -> None:
    rp = build_fleet_plan(one_region()).regions[0]  # L4, A10G or L40S only
    assert rp.gpu == "L40S" and rp.faster_gpus[:2] == ["B200", "H200"]
    [note] = [r for r in rp.reasons if r.startswith("faster GPUs sold in us-east-1")]
    assert "that the plan does not allow: B200 (p6-b200.48xlarge), H200 (p5en.48xlarge)" in note
