"""The replica record: the FleetPlan carries the replica the search sized, so what reads it
(predict --stack, simulate, drill) rebuilds the search's own engine and never searches.
One plan per layout: TP (ONE_REGION, BASE), PP (FRONTIER), DP + EP (MOE_DP), disaggregated
(LONG_PROMPT). The invariants hold for each: the record is the layout vLLM runs, it rebuilds
the search's step model and engine exactly, its capacity is that engine's SLO limit (every SLO
holds there and a 2 % higher rate breaks one), and the FleetPlan's predictions at the peak
are the record's own."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest
from plans import (
    frontier_plan,
    long_prompt_plan,
    make_plan,
    moe_dp_plan,
    one_region,
    three_regions,
)

from llmfleet.drill import drill
from llmfleet.fleetplan.fleet import build_fleet_plan, fleet_plan_of, search_setup
from llmfleet.fleetplan.replica_record import ReplicaRecord, engine_of, slo_at, step_model_of
from llmfleet.fleetplan.replica_request import at_peak
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search import disagg, optimizer
from llmfleet.search.replica_slo import slo_of
from llmfleet.simulate.engine import replica_models
from llmfleet.simulate.run import simulate
from llmfleet.simulate.scenario import Scenario, parse_day

LAYOUTS: dict[str, Callable[[], CapacityPlan]] = {
    "TP 1 (ONE_REGION)": one_region,
    "TP 1 (BASE)": make_plan,
    "TP 8 x PP 2 (FRONTIER)": frontier_plan,
    "TP 4 x DP 2 (EP 8) (MOE_DP)": moe_dp_plan,
    "disaggregated (LONG_PROMPT)": long_prompt_plan,
}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def searched(request):
    """A plan, its search's choice and the FleetPlan built from it."""
    plan = LAYOUTS[request.param]()
    found = search_setup(plan)
    [(choice, alts)] = found.choose(plan)
    return request.param, plan, choice, fleet_plan_of(plan, found, [(choice, alts)])


def test_each_plan_is_the_layout_it_stands_for(searched) -> None:
    name, _, choice, fp = searched
    rec = fp.regions[0].replica
    if name.startswith("disaggregated"):
        assert choice.prefill is not None and rec.prefill is not None
        assert rec.prefill.layout.tensor_parallel_size == choice.prefill.tp
    else:
        assert name.startswith(rec.layout.label + " (") and rec.prefill is None
    # the layout is what vLLM runs
    vllm = fp.regions[0].serving.vllm
    assert rec.layout.tensor_parallel_size == vllm.tensor_parallel_size
    assert rec.layout.pipeline_parallel_size == (vllm.pipeline_parallel_size or 1)
    assert rec.layout.data_parallel_size == (vllm.data_parallel_size or 1)
    assert rec.layout.expert_parallel == bool(vllm.enable_expert_parallel)
    assert (rec.max_num_seqs, rec.max_num_batched_tokens) == (
        vllm.max_num_seqs, vllm.max_num_batched_tokens
    )


def test_the_record_rebuilds_the_exact_step_model_the_search_used(searched) -> None:
    # After a trip through plan --json's text: every number a step reads is the record's.
    _, plan, choice, fp = searched
    rec = ReplicaRecord.model_validate_json(fp.regions[0].replica.model_dump_json())
    model = resolve_model(plan)
    assert step_model_of(rec, model) == choice.step_model
    if choice.prefill is not None:
        assert rec.prefill is not None
        assert step_model_of(rec.prefill, model) == choice.prefill.step_model


def test_the_record_holds_the_engine_and_memory_the_search_sized(searched) -> None:
    _, plan, choice, fp = searched
    rec, s = fp.regions[0].replica, choice.sizing
    assert (rec.slots, rec.max_num_batched_tokens, rec.chunk_tokens) == (
        s.slots, s.budget_tokens, s.chunk_tokens)
    assert rec.batch == rec.slots  # the documented alias
    assert rec.memory == s.memory
    assert rec.memory.kv_cache_tokens == fp.regions[0].predicted.kv_cache_tokens
    assert rec.capacity_requests_per_s == s.capacity_requests_per_s
    assert engine_of(rec, resolve_model(plan)) == s.engine


def test_the_records_capacity_is_its_engines_slo_limit(searched) -> None:
    # Every SLO holds at the recorded capacity; 2 % more breaks one (the search's rate is
    # found to 0.3 %).
    _, plan, _, fp = searched
    rec, rp, model = fp.regions[0].replica, fp.regions[0], resolve_model(plan)
    slo = slo_of(plan)
    cap = rec.capacity_requests_per_s
    if rec.prefill is None:
        assert slo_at(rec, plan, model, cap)[0].meets(slo)
        assert not slo_at(rec, plan, model, cap * 1.02)[0].meets(slo)
    else:  # the decode pool at its limit beside prefill replicas at theirs
        decode_slo = replace(slo, ttft_s=math.inf)  # TTFT is the pair's
        pre = rec.prefill.capacity_requests_per_s
        point, pair = slo_at(rec, plan, model, cap, pre)
        assert point.meets(decode_slo) and pair is not None and pair.meets(slo)
        assert not slo_at(rec, plan, model, cap * 1.02, pre)[0].meets(decode_slo)
        assert not slo_at(rec, plan, model, cap, pre * 1.02)[1].meets(slo)
    assert rp.predicted.ttft_ms <= plan.slo.ttft_ms and rp.predicted.itl_ms <= plan.slo.itl_ms


def test_the_record_alone_gives_the_plans_predicted_figures_at_the_peak(searched) -> None:
    _, plan, _, fp = searched
    rp = fp.regions[0]
    assert at_peak(plan, rp, resolve_model(plan)) == (rp.predicted.ttft_ms, rp.predicted.itl_ms)


def test_a_multi_node_record_carries_the_link_between_its_nodes() -> None:
    # FRONTIER: TP 8 x PP 2 spans two p5.48xlarge nodes; the pipeline hop crosses TCP (the
    # pinned image has no EFA NCCL plugin: catalog/images.csv).
    rec = build_fleet_plan(frontier_plan()).regions[0].replica
    assert (rec.layout.nodes_per_replica, rec.layout.gpus) == (2, 16)
    assert rec.layout.inter_node is not None and rec.layout.inter_node.name == "tcp"
    assert rec.step.gpu.compute_tflops == rec.step.gpu.bf16_dense_tflops  # bf16 math


def test_a_data_parallel_replica_is_simulated_at_its_whole_batch() -> None:
    # MOE_DP: vLLM's max_num_seqs is 77 a rank; the replica's two ranks admit 153 (the slots
    # cut to the fewest that keep the SLOs, an odd number split 77 + 76), and the simulator's
    # engine is the record's with every slot.
    plan = moe_dp_plan()
    fp = build_fleet_plan(plan)
    rec = fp.regions[0].replica
    [model] = replica_models(plan, fp).values()
    assert (rec.max_num_seqs, rec.slots, model.table.engine.slots) == (77, 153, 153)
    assert model.table.engine.step_model.parallel.dp == 2


@pytest.fixture
def no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizing anything from here on raises: what runs after reads the FleetPlan only."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the search ran")

    monkeypatch.setattr(optimizer.Sizer, "__init__", refuse)
    monkeypatch.setattr(optimizer.Sizer, "__call__", refuse)
    monkeypatch.setattr(disagg.PairSizer, "__init__", refuse)
    monkeypatch.setattr(optimizer, "size_replica", refuse)
    monkeypatch.setattr(optimizer, "choose_region", refuse)


def test_simulate_runs_from_the_fleetplan_without_searching(request) -> None:
    plan = frontier_plan()
    fp = build_fleet_plan(plan)
    request.getfixturevalue("no_search")
    [model] = replica_models(plan, fp).values()
    assert model.table.engine.step_model.parallel.pp == 2
    result = simulate(plan, fp, Scenario(day=parse_day("peak", plan.day_profile)), "t")
    assert result.requests > 0


def test_drill_runs_from_the_fleetplan_without_searching(request) -> None:
    # THREE_REGIONS loses us-east-1: the survivors' TTFT and ITL come from their records
    # (at this commit 472.4 ms / 34.61 ms and 469.2 ms / 37.07 ms).
    plan = three_regions()
    fp = build_fleet_plan(plan)
    request.getfixturevalue("no_search")
    report = drill(plan, ["us-east-1"], fleet=fp)
    assert report.passed and [s.region for s in report.survivors] == ["us-west-2", "eu-north-1"]
