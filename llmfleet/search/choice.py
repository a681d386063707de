"""What the search chose for one region: the one object every FleetPlan section builder
reads, so none of them takes nine arguments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmfleet.calibration.server_calibration import Covered
from llmfleet.catalog.hardware import Instance
from llmfleet.data import MinDesiredMax
from llmfleet.perf.disagg import Pair
from llmfleet.perf.parallel import Link
from llmfleet.perf.step import StepModel
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.regions import Region
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search import cost
from llmfleet.search.levers import Levers, native_precision, pinned, plainness
from llmfleet.search.operating_point import ReplicaSizing
from llmfleet.search.shapes import Shape


@dataclass(frozen=True)
class PrefillPool:
    """The prefill pool of a disaggregated region (search.disagg): its shape, engine at its
    SLO-limit rate, replicas and nodes, the link the KV crosses, and the pair of pools at
    their limits; the Choice that holds it is the decode pool."""

    shape: Shape
    step_model: StepModel
    sizing: ReplicaSizing  # the prefill engine at its SLO-limit rate
    replicas: MinDesiredMax
    nodes: MinDesiredMax
    link: Link  # what the KV crosses to the decode pool
    transfer_s: np.ndarray  # each prompt bin's KV to the decode pool
    pair: Pair  # both pools at their SLO-limit rates

    @property
    def tp(self) -> int:
        return self.shape.tp

    @property
    def capacity_requests_per_s(self) -> float:
        """Prompts/s one replica takes inside the TTFT target."""
        return self.sizing.capacity_requests_per_s

    @property
    def max_num_seqs(self) -> int:
        return self.sizing.max_num_seqs

    @property
    def chunk_tokens(self) -> int:
        return self.sizing.budget_tokens


@dataclass(frozen=True)
class Choice:
    """One sized candidate: (instance type, TP) with its operating point, price, replicas and
    nodes. The optimizer builds one per feasible candidate and keeps the cheapest."""

    plan: CapacityPlan
    model: ResolvedModel
    region: Region
    instance: Instance
    step_model: StepModel
    sizing: ReplicaSizing
    price_usd_per_hour: float
    price_source: str
    replicas: MinDesiredMax
    nodes: MinDesiredMax
    searched_levers: Levers | None = None  # None: the plan's pinned precision and KV dtype
    calibration: Covered | None = None  # the plan's calibration file covering this server
    shape: Shape | None = None  # None: one TP group of step_model.tp GPUs
    prefill: PrefillPool | None = None  # disaggregated: this Choice is the decode pool

    @property
    def serving_nodes(self) -> MinDesiredMax:
        """Nodes of the replicas this Choice sizes (without a prefill pool's): `nodes` counts
        every GPU node of the region."""
        if self.prefill is None:
            return self.nodes
        p = self.prefill.nodes
        n = self.nodes
        return MinDesiredMax(min=n.min - p.min, desired=n.desired - p.desired, max=n.max - p.max)

    @property
    def layout(self) -> Shape:
        """TP, PP, DP and EP of one replica."""
        return self.shape or Shape(self.step_model.tp)

    @property
    def served_levers(self) -> Levers:
        """Precision, KV dtype and speculation this candidate serves with: the searched
        setting, or the plan's pins where none was searched."""
        return self.searched_levers or pinned(self.plan)

    @property
    def on_demand_gpu_at_peak_usd_per_million_output_tokens(self) -> float | None:
        """The desired nodes at the on-demand price over the output tokens of the region's
        peak (a floor: traffic averages lower than its peak); None without traffic."""
        return cost.gpu_usd_per_million_output_tokens(
            self.nodes.desired * self.price_usd_per_hour,
            cost.output_tokens_per_hour(
                self.peak_requests_per_s, self.plan.traffic.output_tokens.mean
            ),
        )

    @property
    def tp(self) -> int:
        return self.step_model.tp

    @property
    def replicas_per_node(self) -> int:
        """Replicas one node hosts (1 when a replica spans nodes)."""
        return self.layout.replicas_per_node(self.instance.gpu_count)

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans (1 when it fits a node)."""
        return self.layout.nodes_per_replica(self.instance.gpu_count)

    @property
    def peak_requests_per_s(self) -> float:
        return self.plan.traffic.peak_requests_per_s * self.region.traffic_share

    @property
    def trough_requests_per_s(self) -> float:
        return self.plan.traffic.trough_requests_per_s * self.region.traffic_share

    @property
    def peak_requests_per_s_per_replica(self) -> float:
        return self.peak_requests_per_s / self.replicas.desired

    @property
    def on_demand_monthly_cost_usd(self) -> float:
        """The desired nodes at the node's price for a month: what the search compares (the
        FleetPlan's billed cost applies the purchase's rules, `cost.billed_usd_per_hour`)."""
        return cost.on_demand_monthly_usd(self.nodes.desired, self.price_usd_per_hour)

    @property
    def rank(
        self,
    ) -> tuple[float, tuple[int, int], int, int, bool, bool, float, str, int, int, int, bool]:
        """Cheapest; then the plainest levers (fewest lossy ones, then fewest: FP8 KV does not
        win a tie against the model's own dtype for the capacity it leaves spare,
        `levers.plainness`); then fewest GPUs; then replicas inside one node, and one TP
        group (a replica across nodes needs EFA, a placement group in one zone and a whole
        group to restart; at the same cost it buys nothing); then most spare capacity on the
        nodes paid for. Disaggregated serving likewise only wins by cost."""
        gpus = self.nodes.desired * self.instance.gpu_count
        slots = self.nodes.desired * self.replicas_per_node // self.nodes_per_replica
        spare = slots * self.sizing.capacity_requests_per_s
        return (
            round(self.on_demand_monthly_cost_usd, 6),
            plainness(self.served_levers, native_precision(self.model)),
            gpus,
            self.nodes_per_replica,
            not self.layout.plain,
            self.prefill is not None,
            -round(spare, 6),
            self.instance.instance_type,
            self.tp,
            self.layout.pp,
            self.layout.dp,
            self.layout.ep,
        )
