"""Day 2 as plan edits (docs/day2.md): a new weights revision, a region's retirement, a new
environment's first rollout; and what the weeks after the first `pulumi up` need of a drain,
a node-group update and the staging Job. Worked numbers on the tests' own plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plans import (
    CPG,
    FRONTIER,
    RESERVED_FRONTIER,
    THREE_REGIONS,
    _changed,
    frontier_plan,
    make_plan,
    three_regions,
    write_stacks,
)

from components.weights import read_weights_policy, stage_weights_policy
from llmfleet.errors import LlmfleetError, PlanError, StackError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import karpenter_manifests
from llmfleet.outputs.deploy_order import deploy_order, deploy_order_text
from llmfleet.plan.stacks import read_plan, stack_file_text

OLD = "0123456789abcdef0123456789abcdef01234567"
NEW = "89abcdef0123456789abcdef0123456789abcdef"


# --- a new weights revision ---------------------------------------------------------------------


def test_during_a_revision_rollout_the_readers_keep_both_prefixes() -> None:
    """revision -> NEW with previous_revision OLD: a pod restarting before the new Job is done
    still reads OLD's prefix; the Job writes NEW's only."""
    fp = build_fleet_plan(make_plan(**{"model.revision": NEW, "model.previous_revision": OLD}))
    staging = fp.regions[0].staging
    repo = staging.repo
    assert staging.reader_prefixes == [f"{repo}/{NEW}", f"{repo}/{OLD}"]
    reader = json.loads(read_weights_policy("arn:aws:s3:::b", staging.reader_prefixes))
    assert reader["Statement"][1]["Resource"] == [  # sorted: OLD's commit sorts first
        f"arn:aws:s3:::b/{repo}/{OLD}/*", f"arn:aws:s3:::b/{repo}/{NEW}/*"]
    writer = json.loads(stage_weights_policy("arn:aws:s3:::b", staging.prefix))
    assert writer["Statement"][2]["Resource"] == f"arn:aws:s3:::b/{repo}/{NEW}/*"
    # once the rollout is done, removing previous_revision narrows the readers to NEW
    done = build_fleet_plan(make_plan(**{"model.revision": NEW})).regions[0].staging
    assert done.reader_prefixes == [f"{repo}/{NEW}"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"model.revision": OLD, "model.previous_revision": OLD},
     "model.previous_revision is model.revision"),
    ({"model.previous_revision": OLD}, "model.previous_revision needs model.revision"),
])
def test_a_previous_revision_must_be_another_commit(changes, message) -> None:
    with pytest.raises(LlmfleetError, match=message):
        make_plan(**changes)


# --- the longest request, not the p95 -----------------------------------------------------------


def test_drain_idle_timeout_and_grace_are_sized_for_the_longest_request() -> None:
    """Three regions: max_model_len 16,384 at 40 ms + TTFT 0.5 s = 655.9 s: vLLM drains 661 s
    after the 30 s preStop, the pod's grace is 696 s, the ALB keeps a draining target 691 s
    and waits 656 s on a silent response; Karpenter's node drain waits for the pods' grace."""
    fp = build_fleet_plan(three_regions())
    rp = fp.regions[0]
    assert rp.serving.vllm.shutdown_timeout == 661
    assert rp.serving.termination_grace_s == 696
    assert rp.entry_point is not None and rp.entry_point.deregistration_delay_s == 691
    assert rp.entry_point.idle_timeout_s == 656
    pool = karpenter_manifests.nodepool(fp, rp)
    grace = pool["spec"]["template"]["spec"]["terminationGracePeriod"]
    assert grace == "16m"  # max(consolidateAfter 960 s, the pods' 696 s)


def test_a_drain_longer_than_the_alb_allows_is_capped_and_said() -> None:
    """max_model_len 131,072 at 50 ms: 6,554 s, over the ALB's 3600 s; vLLM drains 3570 s."""
    rp = build_fleet_plan(make_plan(max_model_len=131072)).regions[0]
    assert rp.serving.vllm.shutdown_timeout == 3570
    assert any("requests over 3570 s are cut" in r for r in rp.serving.reasons)


# --- a node-group update --------------------------------------------------------------------------


def test_a_node_group_update_waits_for_every_drain_and_cold_start() -> None:
    """us-east-1: 5 floor nodes (19 replicas, four a node) one at a time, each round a 696 s
    drain plus the 958 s cold start: 5 x 1654 s x 1.25 = 10,338 s -> 10,380 s, past the
    provider's 60 minutes (10 replicas two a node, a 919 s cold start and 10,140 s before
    #28's SLO model)."""
    update = build_fleet_plan(three_regions()).region("us-east-1").node_update
    assert (update.max_unavailable, update.rounds, update.round_s) == (1, 5, 1654)
    assert update.timeout_s == 10380


def test_a_replica_across_nodes_updates_a_whole_replica_at_a_time() -> None:
    rp = build_fleet_plan(frontier_plan()).regions[0]
    assert rp.node_update.max_unavailable == 2
    assert rp.workload.pdb_max_unavailable == 2  # the group's two pods restart together


def test_production_refuses_a_replica_across_nodes_on_demand() -> None:
    with pytest.raises(PlanError, match=r"regions\[0\].capacity.type = 'on_demand': a replica "
                       r"spans 2 nodes"):
        build_fleet_plan(frontier_plan(**{
            "environment": "production", "account_id": "111122223333",
            "cluster": {"public_access_cidrs": ["52.94.76.0/22"],
                        "break_glass_role_arn": "arn:aws:iam::111122223333:role/eks-break-glass"},
            "model.revision": OLD,
            "alerts": {"receivers": [{"name": "oncall", "severities": ["critical"],
                                      "email": {"addresses": ["oncall@example.com"]}}]},
        }))


# --- where a replica across nodes gets its nodes ---------------------------------------------


def _reserved(**capacity: Any) -> dict[str, Any]:
    region = dict(RESERVED_FRONTIER["regions"][0])
    region["capacity"] = {**region["capacity"], **capacity}
    return _changed(RESERVED_FRONTIER, {"regions": [region]})


def test_reserved_nodes_join_the_placement_group_their_reservations_were_created_in() -> None:
    """An On-Demand Capacity Reservation serves a cluster placement group only when created in
    it, and EC2 creates it there only once the group exists: the user creates both, the plan
    names the group, llmfleet creates none and Karpenter selects it by name."""
    fp = build_fleet_plan(make_plan(**_reserved()))
    multi = fp.regions[0].multi_node
    assert multi is not None
    assert (multi.placement_group, multi.placement_group_created) == (CPG, False)
    node_class = karpenter_manifests.ec2nodeclass(fp, fp.regions[0])
    assert node_class["spec"]["placementGroupSelector"] == {"name": CPG}
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}]


def test_a_reservation_for_a_replica_across_nodes_names_its_placement_group() -> None:
    with pytest.raises(PlanError, match=r"regions\[0\].capacity.placement_group = None: a "
                       r"replica spans 2 nodes of one cluster placement group"):
        build_fleet_plan(make_plan(**_reserved(placement_group=None)))


def test_capacity_block_nodes_join_no_placement_group() -> None:
    """EC2 places a Capacity Block's instances close together in an UltraCluster itself."""
    fp = build_fleet_plan(make_plan(**_reserved(type="capacity_block", placement_group=None,
                                               usd_per_hour=31.46)))
    multi = fp.regions[0].multi_node
    assert multi is not None
    assert (multi.placement_group, multi.placement_group_created) == (None, False)
    node_class = karpenter_manifests.ec2nodeclass(fp, fp.regions[0])
    assert "placementGroupSelector" not in node_class["spec"]


def test_on_demand_nodes_join_the_placement_group_llmfleet_creates() -> None:
    multi = build_fleet_plan(frontier_plan()).regions[0].multi_node
    assert multi is not None
    assert (multi.placement_group, multi.placement_group_created) == ("t-us-east-1-gpu", True)


@pytest.mark.parametrize("purchase", [{"type": "on_demand"}, {
    "type": "capacity_block", "reservation_ids": ["cr-0123456789abcdef0"],
    "instance_type": "p5.48xlarge", "reserved_nodes": 8, "usd_per_hour": 31.46}])
def test_a_placement_group_is_named_only_for_reservations(purchase: dict[str, Any]) -> None:
    with pytest.raises(LlmfleetError, match="placement_group applies to type reservation"):
        make_plan(**FRONTIER, regions=[{"name": "us-east-1", "traffic_share": 1.0,
                                        "capacity": {**purchase, "placement_group": CPG}}])


# --- the staging Job ------------------------------------------------------------------------------


def test_the_staging_deadline_counts_download_hash_and_upload_over_its_workers() -> None:
    """405B bf16: 756.4 GiB x (10 + 2 + 5) s/GiB / 2 workers = 6,429 s, twice: 12,900 s."""
    staging = build_fleet_plan(frontier_plan()).regions[0].staging
    assert staging.workers == 2 and staging.job_cpu == 2
    assert staging.timeout_s == 12900


# --- the order of a rollout -----------------------------------------------------------------------


def test_a_new_environment_runs_its_global_stack_first() -> None:
    plan = three_regions()
    order = deploy_order("prod", plan, build_fleet_plan(plan))
    assert order.bootstrap == "prod.global"
    assert order.bootstrap_check == "pulumi stack output global_validation_fqdn --stack prod.global"
    text = deploy_order_text(order)
    assert text.index("pulumi up -s prod.global first") < text.index("pulumi up -s prod.eu-north-1")


def _retiring() -> dict:
    plan = _changed(THREE_REGIONS, {})
    plan["regions"][2]["retire"] = True
    return plan


def test_a_retiring_region_leaves_the_global_name_first_then_is_destroyed() -> None:
    plan = three_regions(**{"regions": _retiring()["regions"]})
    fp = build_fleet_plan(plan)
    order = deploy_order("prod", plan, fp)
    assert [s.stack for s in order.steps] == ["prod.global", "prod.eu-north-1"]
    assert order.bootstrap is None
    assert order.retire_steps[0].commands[0] == "pulumi destroy -s prod.eu-north-1"
    rp = fp.region("eu-north-1")
    assert rp.retiring and rp.entry_point is not None and not rp.entry_point.deletion_protection
    attrs = rp.entry_point.ingress_annotations["alb.ingress.kubernetes.io/load-balancer-attributes"]
    assert "deletion_protection.enabled=false" in attrs
    assert fp.region("us-east-1").entry_point.deletion_protection  # the others keep theirs


def test_a_region_retires_only_while_the_others_carry_its_users() -> None:
    regions = _retiring()["regions"]
    with pytest.raises(PlanError, match=r"regions\[2\].retire = True: the other regions are "
                       "sized to carry 0 lost region"):
        build_fleet_plan(three_regions(regions=regions, **{"routing.survive_region_losses": 0}))


def test_a_region_removed_without_its_retirement_is_refused(tmp_path: Path) -> None:
    """The plan drops eu-north-1 while its stack file still deploys it: the global stack
    would stop routing to it while its protected ALB stays up."""
    plan = _changed(THREE_REGIONS, {})
    plan["regions"] = [{**plan["regions"][0], "traffic_share": 0.6},
                       {**plan["regions"][1], "traffic_share": 0.4}]
    stacks = write_stacks(tmp_path, {"prod": plan})
    (stacks / "Pulumi.prod.eu-north-1.yaml").write_text(stack_file_text("prod", "eu-north-1"))
    with pytest.raises(StackError, match="regions: eu-north-1 is not in prod's plan, but "
                       "stacks/Pulumi.prod.eu-north-1.yaml still deploys it"):
        read_plan("prod", stacks)
