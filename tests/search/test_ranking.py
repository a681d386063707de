"""How the search ranks candidates of equal cost."""

from __future__ import annotations

from plans import plan_dict

from llmfleet.fleetplan.fleet import build_fleet_plan
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
