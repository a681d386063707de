"""Disaggregated prefill and decode priced against aggregated serving."""

import pytest
from plans import long_prompt_plan, make_plan

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.perf.disagg import kv_transfer_s
from llmfleet.perf.parallel import efa_link


def test_a_prompts_kv_crosses_efa_split_over_the_decode_replicas_gpus():
    # 22,439 tokens x 163,840 bytes (Llama-3.3-70B, FP8 KV) over 4 GPUs' shares of p5's EFA
    link = efa_link(69.1, 443.7, 50.0)
    kv = 22_439 * 163_840
    assert kv_transfer_s(kv, link, 4) == pytest.approx(69.1e-6 + kv / (4 * 50e9))


def test_long_prompts_under_a_tight_token_gap_choose_disaggregated_pools_when_cheaper():
    fleet = build_fleet_plan(long_prompt_plan())
    region = fleet.regions[0]
    d = region.disaggregation
    assert d is not None
    chosen, *others = [a for a in region.alternatives if a.feasible]
    assert chosen.disaggregated and chosen.reason == "chosen: cheapest feasible"
    aggregated = [a for a in others if not a.disaggregated]
    assert chosen.monthly_cost_usd < min(a.monthly_cost_usd for a in aggregated)
    # the pools: the decode pool is the region's replicas, both pools' nodes are its nodes
    # (3 prefill replicas of TP 8 x PP 4 on 12 p5.48xlarge, 2 decode replicas of TP 8 on 2)
    decode_nodes = -(-region.replicas.desired // region.replicas_per_node) * (
        region.nodes_per_replica
    )
    assert region.nodes.desired == d.prefill.nodes.desired + decode_nodes == 14
    # a token gap is a decode step: no chunk rides beside it
    assert region.predicted.mixed_step_share == 0
    # within the plan's 12 ms gap and 8,000 ms TTFT (p99), the KV's crossing over TCP
    # included
    assert region.predicted.itl_ms <= fleet.slo.itl_ms == 12
    assert region.predicted.ttft_ms <= fleet.slo.ttft_ms == 8000
    assert region.serving.vllm.kv_transfer_config == d.prefill.serving.vllm.kv_transfer_config
    assert any(r.startswith("disaggregated:") for r in region.reasons)
    # the cost without resilience counts both pools' nodes
    own = fleet.resilience.regions[0].nodes_without_resilience
    assert own["min"] >= d.prefill.nodes.min + 1


def test_a_shorter_gap_budget_keeps_aggregated_serving_and_lists_the_pools_with_their_cost():
    region = build_fleet_plan(long_prompt_plan(**{"slo.itl_ms": 30})).regions[0]
    assert region.disaggregation is None
    listed = [a for a in region.alternatives if a.disaggregated]
    assert listed and all(a.feasible and a.monthly_cost_usd for a in listed)
    assert listed[0].shape.startswith("disaggregated: prefill TP")
    assert region.monthly_cost_usd < listed[0].monthly_cost_usd


def test_disaggregation_can_be_left_out():
    region = build_fleet_plan(long_prompt_plan(**{"allowed.disaggregated": False})).regions[0]
    assert region.disaggregation is None
    assert not any(a.disaggregated for a in region.alternatives)


def test_nodes_without_efa_rdma_get_no_disaggregated_pools():
    plan = make_plan(**{"allowed.gpus": ["L40S"]})
    assert not any(a.disaggregated for a in build_fleet_plan(plan).regions[0].alternatives)
