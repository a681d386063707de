"""The replica record: the FleetPlan carries the replica the search sized, so what reads it
(predict --stack, simulate, drill) rebuilds the search's own step model and never searches.
One plan per layout: TP (ONE_REGION, BASE), PP (FRONTIER), DP + EP (MOE_DP), disaggregated
(LONG_PROMPT)."""

from __future__ import annotations

from collections.abc import Callable

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
from llmfleet.fleetplan.replica_record import ReplicaRecord, step_model_of
from llmfleet.fleetplan.replica_request import at_peak
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search import disagg, optimizer
from llmfleet.simulate.engine import replica_models, step_models
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
    _, _, choice, fp = searched
    rec, s = fp.regions[0].replica, choice.sizing
    assert (rec.batch, rec.chunk_tokens) == (s.batch, s.chunk_tokens)
    assert rec.memory == s.memory
    assert rec.memory.kv_cache_tokens == fp.regions[0].predicted.kv_cache_tokens
    assert rec.capacity_requests_per_s == s.capacity_requests_per_s


def test_the_record_alone_gives_the_plans_predicted_figures_at_the_peak(searched) -> None:
    _, plan, _, fp = searched
    rp = fp.regions[0]
    assert at_peak(plan, rp, resolve_model(plan)) == (rp.predicted.ttft_ms, rp.predicted.itl_ms)


def test_a_multi_node_record_carries_the_link_between_its_nodes() -> None:
    # FRONTIER: TP 8 x PP 2 spans two p5.48xlarge nodes; the pipeline hop crosses EFA.
    rec = build_fleet_plan(frontier_plan()).regions[0].replica
    assert (rec.layout.nodes_per_replica, rec.layout.gpus) == (2, 16)
    assert rec.layout.inter_node is not None and rec.layout.inter_node.name == "efa"
    assert rec.step.gpu.compute_tflops == rec.step.gpu.bf16_dense_tflops  # bf16 math


def test_a_data_parallel_replica_is_simulated_at_its_whole_batch() -> None:
    # MOE_DP: vLLM's max_num_seqs is 54 a rank; the replica's two ranks run 108 (before the
    # record the simulator capped the replica at one rank's batch and found 0 % of the peak
    # inside; 49 and 98 before #29's refit).
    plan = moe_dp_plan()
    fp = build_fleet_plan(plan)
    rec = fp.regions[0].replica
    [model] = replica_models(plan, fp).values()
    assert (rec.max_num_seqs, rec.batch, model.max_num_seqs) == (54, 108, 108)
    assert model.budget_tokens == rec.batch + rec.chunk_tokens


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
    [model] = step_models(plan, fp).values()
    assert model.parallel.pp == 2
    result = simulate(plan, fp, Scenario(day=parse_day("peak", plan.day_profile)), "t")
    assert result.requests > 0


def test_drill_runs_from_the_fleetplan_without_searching(request) -> None:
    # THREE_REGIONS loses us-east-1: the survivors' TTFT and ITL come from their records
    # (at this commit 327.3 ms / 31.38 ms and 380.7 ms / 23.84 ms, as the search's own
    # operating points gave them before the record).
    plan = three_regions()
    fp = build_fleet_plan(plan)
    request.getfixturevalue("no_search")
    report = drill(plan, ["us-east-1"], fleet=fp)
    assert report.passed and [s.region for s in report.survivors] == ["us-west-2", "eu-north-1"]
