"""How the search ranks candidates of equal cost, and what the lever pins of a plan cost."""

from __future__ import annotations

from plans import frontier_plan, long_prompt_plan, make_plan, plan_dict

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.fleetplan.pinned_levers import pinned_values, unpinned
from llmfleet.outputs import render
from llmfleet.outputs.console import fleet_text
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
    # Llama-3.1-8B at BF16 on two g6e.xlarge ($2,717.06/month) either way: FP8 KV holds twice
    # the tokens and a replica carries 6.91 req/s against 6.32 (more spare capacity on the
    # nodes paid for), and before the tie rule won. (One p5.4xlarge, $5,022.40, either way
    # before #29's refit.)
    data = plan_dict()
    data["model"] = {"id": "Llama-3.1-8B-Instruct", "precision": "bf16"}  # KV left free
    rp = build_fleet_plan(parse_plan(data)).regions[0]
    assert rp.levers is not None and rp.levers.kv_cache_dtype == "auto"
    [fp8] = [
        a for a in rp.alternatives
        if a.feasible and a.instance_type == rp.instance_type and a.kv_cache_dtype == "fp8"
        and a.tensor_parallel_size == 1
    ]
    assert (rp.instance_type, rp.nodes.desired) == ("g6e.xlarge", 2)
    assert fp8.monthly_cost_usd == rp.monthly_cost_usd == 2717.06
    assert fp8.differs == "KV fp8 (chosen auto)"


def test_lifting_a_plans_pins_keeps_everything_else() -> None:
    plan = frontier_plan()
    assert pinned_values(plan) == {"precision": "bf16", "kv_cache_dtype": "auto"}
    free = unpinned(plan)
    assert pinned_values(free) == {}
    assert free.model_copy(update={"model": plan.model}) == plan


def test_the_405b_plan_pinned_to_bf16_names_what_fp8_would_cost() -> None:
    # Llama-3.1-405B pinned to bf16 on H100 only: TP 8 x PP 2 on 8 p5.48xlarge ($321,434 a
    # month); FP8 weights fit one node at TP 8, and 3 nodes ($120,538) carry the peak. (18
    # nodes, $723,226, against 4, $160,717, at TTFT 5,000 ms before #29's refit.)
    plan = frontier_plan()
    fp = build_fleet_plan(plan)
    rp = fp.regions[0]
    alt = rp.pinned_alternative
    assert alt is not None
    assert (alt.precision, alt.kv_cache_dtype, alt.instance_type, alt.layout) == (
        "fp8", "auto", "p5.48xlarge", "TP 8"
    )
    assert (alt.nodes, alt.monthly_cost_usd) == (3, 120537.6)
    assert alt.pinned_monthly_cost_usd == rp.monthly_cost_usd == 321433.6
    line = (
        "FP8 weights would serve this on 3 nodes (p5.48xlarge, TP 8) at $120,538/month; the "
        "plan pins bf16 (model.precision), which costs 2.7x that ($321,434/month)"
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
    # BASE: two g6e.xlarge ($2,717) at bf16 and 16-bit KV; FP8 weights with an FP8 KV cache
    # carry the peak on one ($1,359), where FP8 weights alone or FP8 KV alone need two (one
    # H100 node, $5,022, against two g6e.xlarge, 1.85x, before #29's refit)
    alt = build_fleet_plan(make_plan()).regions[0].pinned_alternative
    assert alt is not None
    assert (alt.instance_type, alt.nodes, alt.monthly_cost_usd, alt.cost_multiple) == (
        "g6e.xlarge", 1, 1358.53, 2.0
    )
    assert (alt.precision, alt.kv_cache_dtype) == ("fp8", "fp8")
