"""The control loops a region deploys, with the FleetPlan's parameters: KEDA's triggers read
by the HPA, Karpenter's GPU nodes above the managed floor, and a new replica's cold start.

Autoscaler (KEDA 2.16 feeding the HPA, every `autoscaling.polling_interval_s`, which is also
the ServiceMonitor's scrape interval): each trigger is AverageValue, so it proposes ceil(value
/ threshold) replicas, or keeps the current count when value / (threshold x current) is within
the HPA's 10 % tolerance; the HPA takes the largest proposal within [replicas.min,
replicas.max]. Scale-up is immediate but at most max(2 x current, current + 4) per period;
scale-down takes the largest proposal of the last `scale_down_stabilization_s` (Kubernetes
defaults besides the plan's window:
kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale, "Default behavior"). The
signals are what vLLM exports, summed over Ready replicas: requests completed a second over the
window (the arrivals of the window: completions equal them at a steady load), waiting requests
(`num_requests_waiting`: each replica's count drawn from a geometric law with the step's mean,
a queue's length, so the sum is negative binomial), KV use (running sequences drawn as Poisson,
the count of an infinite-server system, averaged over the window's scrapes as the query's
avg_over_time does), and over the queries' 2-minute window the mean queue time and the TTFT at
the SLO percentile times the Ready count. The TTFT quantile is read as the arrival-weighted
mean of each step's TTFT at the percentile (the plan's formula at that step), not from
histogram buckets. KEDA's fallback (hold `replicas.desired` after `fallback_failure_threshold`
failed polls) never fires: Prometheus does not fail here; its `cooldownPeriod` applies only to
scaling to zero, which `replicas.min` >= 1 rules out.

Nodes: the managed node group's floor (`capacity.floor_nodes`) is always there; a pod that
finds no free slot makes Karpenter launch nodes up to `capacity.ceiling_nodes`. A pod on a
new node serves after the cold start (`cold_start.total_s`: node launch and join, image
pull, container), on a node with a free slot after the container's part
(`cold_start.container_s`); then the startup probe's next success (every
`serving.startup_period_s`) and the ALB's two healthy checks 15 s apart (AWS Load Balancer
Controller defaults: healthy-threshold-count 2, healthcheck-interval-seconds 15;
kubernetes-sigs/aws-load-balancer-controller docs/guide/ingress/annotations.md). A
scale-down removes pods not yet serving first, then the newest; Karpenter removes a node
that has stayed empty `cold_start.consolidate_after_s`, one at a time (the floor never)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from llmfleet.fleetplan.autoscaling import TTFT_METRIC
from llmfleet.fleetplan.region import RegionPlan

HPA_TOLERANCE = 0.1
HPA_UP_PODS = 4
HPA_UP_FACTOR = 2
ALB_HEALTHY_CHECKS = 2
ALB_CHECK_INTERVAL_S = 15
SIGNAL_WINDOW_S = 120
"""The queries' rate window (`autoscaling.RATE_WINDOW`, 2m)."""

SIGNALS = {
    "vllm:request_success_total": "rate",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:request_queue_time_seconds": "queue_wait",
    TTFT_METRIC: "ttft",
}
"""The metric family each trigger reads, and the simulated signal standing for it."""


@dataclass
class Node:
    karpenter: bool
    ready_at: float
    pods: int = 0
    empty_since: float | None = None


@dataclass
class Pod:
    node: Node
    serves_at: float


@dataclass
class RegionControl:
    """One region's pods, nodes and autoscaler state."""

    region: RegionPlan
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    proposals: deque[tuple[float, int]] = field(default_factory=deque)
    launches: int = 0
    lost: bool = False

    @classmethod
    def start(cls, region: RegionPlan, t: float, replicas: int) -> RegionControl:
        """The floor's nodes and `replicas` pods serving (within the plan's bounds), on
        Karpenter nodes already up where the floor holds fewer: a steady state at `t`."""
        rc = cls(region)
        rc.nodes = [Node(False, t) for _ in range(region.capacity.floor_nodes)]
        bounds = region.replicas
        count = min(max(replicas, bounds.min), bounds.max)
        for _ in range(count):
            rc._place(t, t)
        rc.launches = 0
        rc.proposals.append((t, count))  # the HPA's recent past: it has held this count
        return rc

    @property
    def per_node(self) -> int:
        return self.region.replicas_per_node

    def serving(self, t: float) -> int:
        return sum(1 for p in self.pods if p.serves_at <= t)

    def starting(self, t: float) -> int:
        return sum(1 for p in self.pods if p.serves_at > t)

    def ready_delay_s(self, container_s: float) -> float:
        """From a container's start to its first request: probe, then the ALB's checks."""
        period = self.region.serving.startup_period_s
        probed = math.ceil(container_s / period - 1e-9) * period
        return probed + ALB_HEALTHY_CHECKS * ALB_CHECK_INTERVAL_S

    def _place(self, t: float, serves_at: float | None = None) -> bool:
        """Add one pod: a free slot on a node (Ready first, then launching), else a new
        Karpenter node below the ceiling. False when no slot can be had."""
        cold = self.region.cold_start
        node = next((n for n in self.nodes if n.pods < self.per_node and n.ready_at <= t), None)
        if node is None:
            node = next((n for n in self.nodes if n.pods < self.per_node), None)
        if node is None:
            if len(self.nodes) >= self.region.capacity.ceiling_nodes:
                return False
            launch = cold.total_s - cold.container_s if serves_at is None else 0.0
            node = Node(True, t + launch)
            self.nodes.append(node)
            self.launches += 1
        node.pods += 1
        node.empty_since = None
        start = max(t, node.ready_at)
        at = serves_at if serves_at is not None else start + self.ready_delay_s(cold.container_s)
        self.pods.append(Pod(node, at))
        return True

    def _remove(self, t: float) -> None:
        """Remove one pod: one not yet serving (the latest), else the newest serving, on a
        Karpenter node before the floor's."""
        k = max(
            range(len(self.pods)),
            key=lambda j: (self.pods[j].serves_at > t, self.pods[j].serves_at,
                           self.pods[j].node.karpenter, self.pods[j].node.ready_at, j),
        )
        pod = self.pods.pop(k)
        pod.node.pods -= 1
        if pod.node.pods == 0:
            pod.node.empty_since = max(t, pod.node.ready_at)

    def desired(self, t: float, signals: dict[str, float]) -> int:
        """The HPA's replicas from the triggers' values (fleet-wide sums, AverageValue)."""
        scaling, bounds = self.region.autoscaling, self.region.replicas
        current = len(self.pods)
        proposals = []
        for trigger in scaling.triggers:
            value = signals[SIGNALS[trigger.metric]]
            ratio = value / (trigger.threshold * current) if current else math.inf
            if abs(ratio - 1) <= HPA_TOLERANCE:
                proposals.append(current)
            else:
                proposals.append(math.ceil(value / trigger.threshold - 1e-9))
        raw = min(max(max(proposals), bounds.min), bounds.max)
        window = scaling.scale_down_stabilization_s
        self.proposals.append((t, raw))
        while self.proposals and self.proposals[0][0] <= t - window:
            self.proposals.popleft()
        if raw > current:
            return min(raw, max(HPA_UP_FACTOR * current, current + HPA_UP_PODS))
        if raw < current:
            return min(current, max(r for _, r in self.proposals))
        return current

    def poll(self, t: float, signals: dict[str, float]) -> None:
        """One autoscaler period: scale the pods, then let Karpenter consolidate."""
        if self.lost:
            return
        want = self.desired(t, signals)
        while len(self.pods) < want and self._place(t):
            pass
        while len(self.pods) > want:
            self._remove(t)
        after = self.region.cold_start.consolidate_after_s
        for node in self.nodes:
            if node.karpenter and node.empty_since is not None and t - node.empty_since >= after:
                self.nodes.remove(node)
                break

    def lose(self) -> None:
        """The region is gone: its pods stop serving; its nodes stay billed as they were."""
        self.lost = True
        self.pods.clear()
