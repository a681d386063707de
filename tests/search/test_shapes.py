"""Replica shapes beyond one TP group: which the search tries, a model larger than a node
on two nodes, MoE models with data-parallel attention and expert parallelism."""

import pytest
from plans import frontier_plan, make_plan

from llmfleet.catalog import hardware
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.perf.replica import catalog_arch
from llmfleet.search.shapes import Shape, shapes


def labels(model: str, instance: str) -> list[str]:
    return [s.label for s in shapes(catalog_arch(model), hardware.instance(instance))]


def test_a_dense_model_on_an_efa_node_also_tries_pipeline_and_tensor_parallelism_across_nodes():
    assert labels("Llama-3.1-405B-Instruct", "p5.48xlarge") == [
        "TP 1", "TP 2", "TP 4", "TP 8", "TP 8 x PP 2", "TP 8 x PP 4", "TP 16",
    ]


def test_a_moe_model_also_tries_data_parallel_attention_with_experts_over_the_node():
    assert labels("DeepSeek-V3", "p5en.48xlarge")[4:] == [
        "TP 1 x DP 8 (EP 8)", "TP 2 x DP 4 (EP 8)", "TP 4 x DP 2 (EP 8)",
        "TP 8 x PP 2", "TP 8 x PP 4", "TP 16", "TP 1 x DP 16 (EP 16)",
    ]


def test_a_node_without_efa_rdma_keeps_every_replica_inside_it():
    assert labels("Llama-3.1-70B-Instruct", "g6e.48xlarge") == ["TP 1", "TP 2", "TP 4", "TP 8"]


def test_a_shape_spanning_nodes_counts_nodes_not_replicas_per_node():
    pp2 = Shape(8, pp=2)
    assert (pp2.ranks, pp2.replicas_per_node(8), pp2.nodes_per_replica(8)) == (16, 1, 2)
    assert (Shape(4).replicas_per_node(8), Shape(4).nodes_per_replica(8)) == (2, 1)


def test_405b_in_bf16_on_h100_only_is_feasible_with_a_replica_on_two_nodes():
    region = build_fleet_plan(frontier_plan()).regions[0]
    assert (region.instance_type, region.layout, region.nodes_per_replica) == (
        "p5.48xlarge", "TP 8 x PP 2", 2,
    )
    assert region.workload.kind == "LeaderWorkerSet"
    mn, fabric = region.multi_node, region.fabric
    assert mn is not None and mn.nodes_per_replica == 2 and mn.launch == "mp"
    # every node of the region in one cluster placement group, in one zone; the pipeline hop
    # crosses nodes over TCP: the default image has no EFA NCCL plugin
    assert fabric is not None and fabric.crosses == ["each pipeline hop"]
    assert (fabric.transport, fabric.efa_interfaces_per_node) == ("tcp", 0)
    assert region.capacity.node_zone_ids == [fabric.zone_id] and mn.placement_strategy == "cluster"
    # nodes come in whole replicas: floor and ceiling are even
    assert region.nodes.min % 2 == 0 and region.nodes.max % 2 == 0
    assert region.nodes.desired == 2 * region.replicas.desired
    assert any("spans 2 p5.48xlarge nodes" in r for r in mn.reasons)


def test_without_multi_node_the_405b_plan_says_what_a_node_cannot_hold():
    with pytest.raises(Exception, match="Weights need 756 GiB"):
        build_fleet_plan(frontier_plan(**{"allowed.multi_node": False}))


def test_the_search_considers_data_parallel_attention_for_deepseek():
    plan = make_plan(
        **{
            "model.id": "DeepSeek-V3",
            "model.precision": "fp8",
            "max_model_len": 16384,
            "allowed.instance_types": ["p5en.48xlarge"],
            "slo": {"ttft_ms": 3000, "itl_ms": 100, "itl": "tpot", "percentile": 99},
            "prices": [{"instance_type": "p5en.48xlarge", "usd_per_hour": 63.3}],
        }
    )
    alts = build_fleet_plan(plan).regions[0].alternatives
    dp = [a for a in alts if a.data_parallel_size > 1]
    assert {a.shape for a in dp} >= {"TP 1 x DP 8 (EP 8)", "TP 2 x DP 4 (EP 8)"}
    assert all(a.expert_parallel for a in dp)
