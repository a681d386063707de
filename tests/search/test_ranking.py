"""How the search ranks candidates of equal cost, and what the lever pins of a plan cost."""

from __future__ import annotations

from plans import frontier_plan, long_prompt_plan, make_plan, plan_dict

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.fleetplan.pinned_levers import pinned_values, unpinned
from llmfleet.outputs import render
from llmfleet.outputs.report import fleet_text
from llmfleet.plan.stacks import parse_plan
from llmfleet.search.levers import Levers, plainness


def test_lossy_levers_count_against_a_setting_and_speculation_only_as_a_lever() -> None:
    # bf16 native: FP8 weights and an FP8 KV cache change what the model computes
    assert plainness(Levers("bf16", "auto"), "bf16") == (0, 0)
    assert plainness(Levers("bf16", "fp8"), "bf16") == (1, 1)
    assert plainness(Levers("fp8", "fp8"), "bf16") == (2, 2)
    # a model published in MXFP4 (gpt-oss) loses nothing served in it
    assert plainness(Levers("mxfp4", "auto"), "mxfp4") == (0, 0)


def test_at_equal_cost_16_bit_kv_beats_fp8_kv_however_much_capacity_fp8_leaves_spare() -> None:
    # Llama-3.1-8B at BF16 on one p5.4xlarge ($5,022.40/month) either way: FP8 KV holds more
    # sequences (more spare capacity on the node paid for), and before the tie rule won.
    data = plan_dict()
    data["model"] = {"id": "Llama-3.1-8B-Instruct", "precision": "bf16"}  # KV left free
    rp = build_fleet_plan(parse_plan(data)).regions[0]
    assert rp.levers is not None and rp.levers.kv_cache_dtype == "auto"
    [fp8] = [
        a for a in rp.alternatives
        if a.feasible and a.instance_type == rp.instance_type and a.kv_cache_dtype == "fp8"
        and a.tensor_parallel_size == 1
    ]
    assert fp8.monthly_cost_usd == rp.monthly_cost_usd == 5022.4
    assert fp8.differs == "KV fp8 (chosen auto)"


def test_lifting_a_plans_pins_keeps_everything_else() -> None:
    plan = frontier_plan()
    assert pinned_values(plan) == {"precision": "bf16", "kv_cache_dtype": "auto"}
    free = unpinned(plan)
    assert pinned_values(free) == {}
    assert free.model_copy(update={"model": plan.model}) == plan


def test_the_405b_plan_pinned_to_bf16_names_what_fp8_would_cost() -> None:
    # Llama-3.1-405B pinned to bf16 on H100 only: TP 8 x PP 2 on 18 p5.48xlarge ($723,226 a
    # month); FP8 weights fit one node at TP 8, and 4 nodes ($160,717) carry the peak.
    plan = frontier_plan()
    fp = build_fleet_plan(plan)
    rp = fp.regions[0]
    alt = rp.pinned_alternative
    assert alt is not None
    assert (alt.precision, alt.kv_cache_dtype, alt.instance_type, alt.layout) == (
        "fp8", "auto", "p5.48xlarge", "TP 8"
    )
    assert (alt.nodes, alt.monthly_cost_usd) == (4, 160716.8)
    assert alt.pinned_monthly_cost_usd == rp.monthly_cost_usd == 723225.6
    line = (
        "FP8 weights would serve this on 4 nodes (p5.48xlarge, TP 8) at $160,717/month; the "
        "plan pins bf16 (model.precision), which costs 4.5x that ($723,226/month)"
    )
    assert line in rp.reasons
    assert line in fleet_text(fp)
    assert line in render.render_stack(fp)[render.REPORT]


def test_a_pin_that_costs_nothing_is_not_reported() -> None:
    # LONG_PROMPT pins FP8 weights and KV: already the cheapest levers
    assert build_fleet_plan(long_prompt_plan()).regions[0].pinned_alternative is None


def test_a_plan_without_pins_has_no_pinned_alternative() -> None:
    data = plan_dict()
    data["model"] = {"id": "Llama-3.1-8B-Instruct"}
    assert build_fleet_plan(parse_plan(data)).regions[0].pinned_alternative is None


def test_a_pinned_bf16_8b_plan_says_fp8_halves_it_on_l40s() -> None:
    # BASE: one H100 node ($5,022) at bf16; FP8 weights fit 2 g6e.xlarge ($2,717)
    alt = build_fleet_plan(make_plan()).regions[0].pinned_alternative
    assert alt is not None
    assert (alt.instance_type, alt.nodes, alt.monthly_cost_usd, alt.cost_multiple) == (
        "g6e.xlarge", 2, 2717.06, 1.85
    )
