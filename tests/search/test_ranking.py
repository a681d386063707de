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
    # Llama-3.1-8B at BF16 and 8 req/s on two g6e.xlarge ($2,717.06/month) either way: FP8 KV
    # holds twice the tokens and a replica carries 6.64 req/s against 6.17 (more spare
    # capacity on the nodes paid for), and before the tie rule won. (BASE's 10 req/s since
    # #28 need 3 nodes with 16-bit KV, 2 with FP8 KV: 10 / (0.8 x 6.17) = 2.02.)
    data = plan_dict(**{"traffic.peak_requests_per_s": 8})
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
    # Llama-3.1-405B pinned to bf16 on H100 only: TP 8 x PP 2 on 6 p5.48xlarge ($241,075 a
    # month: 3 replicas of 5.35 req/s carry 10 req/s with 20 % headroom); FP8 weights fit one
    # node at TP 8, and 3 nodes ($120,538) carry the peak. (8 nodes, $321,434, before #28's
    # SLO model.)
    plan = frontier_plan()
    fp = build_fleet_plan(plan)
    rp = fp.regions[0]
    alt = rp.pinned_alternative
    assert alt is not None
    assert (alt.precision, alt.kv_cache_dtype, alt.instance_type, alt.layout) == (
        "fp8", "auto", "p5.48xlarge", "TP 8"
    )
    assert (alt.nodes, alt.monthly_cost_usd) == (3, 120537.6)
    assert alt.pinned_monthly_cost_usd == rp.monthly_cost_usd == 241075.2
    line = (
        "FP8 weights would serve this on 3 nodes (p5.48xlarge, TP 8) at $120,538/month; the "
        "plan pins bf16 (model.precision), which costs 2.0x that ($241,075/month)"
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
    # BASE: two g6e.xlarge ($2,717) at bf16 and 16-bit KV (6.57 req/s a replica: 10 /
    # (0.8 x 6.57) = 1.90); FP8 weights with an FP8 KV cache carry the peak on one ($1,359,
    # 14.77 req/s), where FP8 weights alone (12.23: 10 / (0.8 x 12.23) = 1.02) or FP8 KV
    # alone (6.64) need two
    rp = build_fleet_plan(make_plan()).regions[0]
    alt = rp.pinned_alternative
    assert alt is not None
    assert (alt.instance_type, alt.nodes, alt.monthly_cost_usd, alt.cost_multiple) == (
        "g6e.xlarge", 1, 1358.53, 2.0
    )
    assert (
        "FP8 weights with an FP8 KV cache would serve this on 1 node (g6e.xlarge, TP 1) at "
        "$1,359/month; the plan pins bf16 (model.precision) and KV auto "
        "(model.kv_cache_dtype), which costs 2.0x that ($2,717/month)"
    ) in rp.reasons
    assert (alt.precision, alt.kv_cache_dtype) == ("fp8", "fp8")
