"""A replica that spans nodes: how it is deployed and launched.

vLLM serves a model larger than a node with pipeline parallelism across nodes (TP = a node's
GPUs, PP = nodes; docs/serving/parallelism_scaling.md), TP across nodes, or data-parallel
ranks with expert parallelism across nodes. On Kubernetes a replica is then a
LeaderWorkerSet group (kubernetes-sigs/lws, its CRD `leaderworkerset.x-k8s.io/v1` from the
pinned chart, catalog/charts.csv): one pod per node, the group restarted whole when a pod
restarts (`RecreateGroupOnPodRestart`). Two launches, as vLLM documents them:

- `mp` (PP or TP across nodes, vLLM's multiprocessing multi-node launch, vLLM >= 0.11.1):
  every pod `vllm serve` with `--nnodes N --node-rank <LWS_WORKER_INDEX> --master-addr
  <LWS_LEADER_ADDRESS>`, the workers `--headless`;
- `data-parallel` (DP ranks, each its own engine, across nodes:
  docs/serving/data_parallel_deployment.md): `--data-parallel-size` ranks in all,
  `--data-parallel-size-local` on each node, `--data-parallel-address` the leader's and
  `--data-parallel-rpc-port` its port; each worker `--headless` with
  `--data-parallel-start-rank <LWS_WORKER_INDEX x ranks per node>`.

What crosses the nodes and over which transport (EFA or TCP, a fact of the image), the one
zone and the NCCL environment are `fleetplan.fabric`. Where the nodes come from decides how
they sit close together (`placement`):

- on demand: in a cluster placement group llmfleet creates (Karpenter's EC2NodeClass selects
  it by name, the floor's launch template names it); production refuses it (`capacity_note`);
- On-Demand Capacity Reservations: in the cluster placement group they were created in
  (`regions[].capacity.placement_group`). A reservation serves a cluster placement group
  only when created in it, and EC2 creates it there only once the group exists (EC2 user
  guide, "Capacity Reservations for cluster placement groups"; CreateCapacityReservation's
  PlacementGroupArn), so the user creates the group and the reservations before the plan can
  name them, and llmfleet creates no group (its name would collide with the user's);
- Capacity Blocks: in no placement group: EC2 places a Capacity Block's instances close
  together in an EC2 UltraCluster itself (EC2 API reference, CapacityBlock), and a launch
  there must match only the block's zone and platform (EC2 user guide,
  capacity-blocks-launch), so a placement group would add a constraint and nothing else."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llmfleet.catalog import network
from llmfleet.catalog.kubernetes import chart
from llmfleet.data import Data
from llmfleet.errors import PlanError
from llmfleet.search.choice import Choice

LWS_NAMESPACE = "lws-system"
"""As kubernetes-sigs/lws's installation docs install it (`--namespace lws-system`)."""
MASTER_PORT = 29501
"""vLLM's default --master-port (ParallelConfig.master_port)."""
DATA_PARALLEL_RPC_PORT = 13345
"""--data-parallel-rpc-port, set explicitly (vLLM's data-parallel deployment docs use 13345);
the peers' NetworkPolicy admits it between the group's pods."""
ROLE_LABEL = "llmfleet.io/role"


class MultiNode(Data):
    """A replica of `nodes_per_replica` nodes: a LeaderWorkerSet group in one cluster
    placement group."""

    nodes_per_replica: int = Field(description="Pods (and nodes) of one LeaderWorkerSet group.")
    launch: Literal["mp", "data-parallel"] = Field(
        description="mp: --nnodes/--node-rank/--master-addr (PP or TP across nodes); "
        "data-parallel: --data-parallel-size-local/-start-rank/-address/-rpc-port (DP ranks)."
    )
    master_port: int
    data_parallel_rpc_port: int | None = Field(
        description="The leader's data-parallel RPC port (data-parallel launch only)."
    )
    data_parallel_size_local: int | None = Field(
        description="DP ranks on each node (data-parallel launch only)."
    )
    leader_labels: dict[str, str] = Field(
        description="The leader pod's labels on top of the workload's: the Service selects it."
    )
    worker_labels: dict[str, str]
    collective_latency_us: float = Field(
        description="Two-node all-reduce latency the step model charges (catalog efa.csv)."
    )
    collective_busbw_gb_s: float
    collective_measured_on: str
    placement_group: str | None = Field(
        description="The cluster placement group every GPU node joins (None: a Capacity "
        "Block, placed by EC2)."
    )
    placement_group_created: bool = Field(
        description="Whether llmfleet creates the group (on demand) or the reservations' own "
        "is named (regions[].capacity.placement_group)."
    )
    placement_strategy: str
    lws_version: str
    reasons: list[str]


def placement_group_name(fleet_name: str, region: str) -> str:
    return f"{fleet_name}-{region}-gpu"


def data_parallel_ranks_per_node(choice: Choice) -> int | None:
    """DP ranks on each node when the replica's data-parallel ranks span nodes (vLLM's
    data-parallel launch), else None (one node, or PP/TP across nodes: the mp launch)."""
    shape, gpus = choice.layout, choice.instance.gpu_count
    if choice.nodes_per_replica <= 1 or shape.dp <= 1 or shape.tp * shape.pp > gpus:
        return None
    return gpus // (shape.tp * shape.pp)


RESERVED = ("reservation", "capacity_block")


def placement(choice: Choice, field: str) -> tuple[str | None, bool, str]:
    """(the placement group the replica's nodes join, whether llmfleet creates it, why);
    PlanError for reservations that name no group."""
    purchase, n = choice.region.capacity, choice.nodes_per_replica
    if purchase.type == "capacity_block":
        return None, False, (
            "no placement group: EC2 places a Capacity Block's instances close together in an "
            "UltraCluster itself")
    if purchase.type == "reservation":
        if purchase.placement_group is None:
            raise PlanError(
                f"{field}.capacity.placement_group", None,
                f"a replica spans {n} nodes of one cluster placement group, and a reservation "
                "serves it only when created in that group, which must exist first: create "
                "it (aws ec2 create-placement-group --group-name NAME --strategy cluster), "
                "create the reservations in it (aws ec2 create-capacity-reservation "
                "--placement-group-arn ...), and name it here; or use type capacity_block",
            )
        return purchase.placement_group, False, (
            f"its nodes in the cluster placement group {purchase.placement_group}, which the "
            "reservations were created in (the plan names it; llmfleet creates none)")
    name = placement_group_name(choice.plan.name, choice.region.name)
    return name, True, f"its nodes in the cluster placement group {name}, created here"


def capacity_note(choice: Choice, field: str) -> str:
    """Where a replica's nodes come from: on demand, `nodes_per_replica` large GPU nodes in
    one cluster placement group at once are rarely had (InsufficientInstanceCapacity), so
    production buys them (an On-Demand Capacity Reservation targeted at the placement group,
    or a Capacity Block); PlanError otherwise."""
    purchase = choice.region.capacity
    n, inst = choice.nodes_per_replica, choice.instance.instance_type
    if purchase.type in RESERVED:
        return (f"the nodes come from {purchase.type} {', '.join(purchase.reservation_ids)} "
                f"({purchase.reserved_nodes} {inst})")
    ask = (f"{n} {inst} at once in one cluster placement group per replica, on demand: EC2 "
           "rarely has that many free in one spot (InsufficientInstanceCapacity)")
    if choice.plan.environment == "production":
        raise PlanError(
            f"{field}.capacity.type", purchase.type,
            f"a replica spans {n} nodes: {ask}; buy them: type reservation (an On-Demand "
            "Capacity Reservation in the placement group) or capacity_block, with "
            "reservation_ids, instance_type and reserved_nodes",
        )
    return f"{ask}; production requires a reservation or a Capacity Block"


def build_multi_node(choice: Choice, field: str = "regions[0]") -> MultiNode | None:
    """The region's multi-node settings, or None when a replica fits one node."""
    n = choice.nodes_per_replica
    if n <= 1:
        return None
    inst = choice.instance
    row = network.multi_node_row(inst)
    assert row is not None and row.collective_latency_us is not None
    assert row.collective_busbw_gb_s is not None and row.measured_on is not None
    shape = choice.layout
    group, created, placed = placement(choice, field)
    local = data_parallel_ranks_per_node(choice)
    data_parallel = local is not None
    per_node = local or 0
    launch = (
        f"{shape.dp} data-parallel ranks, {per_node} per node: the leader's pod starts "
        f"ranks 0-{per_node - 1} and the API, each worker {per_node} more "
        "(--data-parallel-start-rank)"
        if data_parallel
        else f"one engine over {n} nodes (--nnodes {n}, the leader node rank 0)"
    )
    return MultiNode(
        nodes_per_replica=n,
        launch="data-parallel" if data_parallel else "mp",
        master_port=MASTER_PORT,
        data_parallel_rpc_port=DATA_PARALLEL_RPC_PORT if data_parallel else None,
        data_parallel_size_local=local,
        leader_labels={ROLE_LABEL: "leader"},
        worker_labels={ROLE_LABEL: "worker"},
        collective_latency_us=row.collective_latency_us,
        collective_busbw_gb_s=row.collective_busbw_gb_s,
        collective_measured_on=row.measured_on,
        placement_group=group,
        placement_group_created=created,
        placement_strategy="cluster",
        lws_version=chart("lws").version,
        reasons=[
            f"a replica ({shape.label}, {shape.ranks} GPUs) spans {n} {inst.instance_type} "
            f"nodes: a LeaderWorkerSet group of {n} pods, one per node; {launch}",
            f"the step model charges {row.collective_latency_us:g} us per cross-node "
            f"collective and {row.collective_busbw_gb_s:g} GB/s bus bandwidth (two-node "
            f"nccl-tests on {row.measured_on})",
            placed,
            capacity_note(choice, field),
        ],
    )
