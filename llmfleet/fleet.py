"""The FleetPlan: every decided number, with its predictions and reasons. Plain data.

Components, templates and the CLI read it; none of them recompute anything.
"""

from __future__ import annotations

from pydantic import Field, computed_field

from llmfleet import __version__
from llmfleet.data import Data
from llmfleet.fleet_capacity import ColdStart, Costs, NodeCapacity
from llmfleet.fleet_serving import Autoscaling as Autoscaling
from llmfleet.fleet_serving import Paging as Paging
from llmfleet.fleet_serving import Serving as Serving
from llmfleet.fleet_serving import Trigger as Trigger
from llmfleet.fleet_serving import VllmArgs as VllmArgs
from llmfleet.fleet_serving import Workload as Workload
from llmfleet.lever_data import LeverReport
from llmfleet.plan import ClusterAccess, Slo, Traffic
from llmfleet.plan_capacity import Startup
from llmfleet.routing_plan import EntryPoint, Resilience
from llmfleet.routing_policy import ApiKey, Dns, Routing


class MinDesiredMax(Data):
    min: int
    desired: int
    max: int


class Predicted(Data):
    """Per replica, at the region's peak load unless a name says otherwise."""

    ttft_ms: float = Field(
        description="TTFT at the SLO percentile at the peak load per replica: the prompt of "
        "ttft_prompt_tokens plus the queue wait at that percentile."
    )
    ttft_prompt_tokens: int = Field(
        description="The prompt TTFT is predicted for: that percentile of the input lengths."
    )
    itl_ms: float = Field(description="ITL as the SLO defines it (slo.itl) at the percentile.")
    token_gap_ms: float = Field(description="The longest gap between two tokens of a stream.")
    tpot_ms: float = Field(description="A request's mean time per output token at the percentile.")
    decode_only_itl_ms: float = Field(description="Gap between tokens in a step without prefill.")
    mixed_step_ms: float = Field(
        description="Gap in a step that carries a prefill chunk: the longest token gap."
    )
    mixed_step_share: float = Field(description="Share of steps that carry a prefill chunk.")
    output_tokens_per_s: float = Field(
        description="Output tokens/s one replica sustains inside the SLOs."
    )
    requests_per_s: float = Field(description="Requests/s one replica sustains inside the SLOs.")
    requests_per_s_at_peak: float = Field(description="Requests/s each replica serves at the peak.")
    kv_cache_tokens: int = Field(description="KV capacity of a replica, as vLLM logs it.")
    max_concurrency: float = Field(description="Sequences of max_model_len the KV pool holds.")
    ranges: dict[str, tuple[float, float]] = Field(
        description="Per metric, where the measured value is expected (p10-p90 of the "
        "calibration's held-out measured/predicted ratios)."
    )


class Risk(Data):
    """Whether the SLO holds where the calibration says measurements may land (the p90 end
    of the held-out ranges), and what the fleet would cost sized there."""

    slo_holds_at_p90: bool = Field(
        description="TTFT and ITL stay inside the SLO at the p90 end of their ranges."
    )
    ttft_ms_p90: float
    itl_ms_p90: float
    pessimistic_replicas: int | None = Field(
        description="Replicas of the chosen configuration sized at confidence: pessimistic "
        "(None: it cannot hold the SLO there)."
    )
    pessimistic_monthly_cost_usd: float | None
    summary: str


class Memory(Data):
    gpu_total_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token: float


class ChosenLevers(Data):
    """What the search chose beside instance and TP: the checkpoint served at a precision,
    the KV dtype, and speculative decoding with its expected tokens per target step."""

    precision: str
    kv_cache_dtype: str
    checkpoint: str = Field(description="Hugging Face repo id vLLM loads.")
    checkpoint_source: str
    download_gib: float = Field(description="Weights downloaded per replica (drafter included).")
    speculative: str | None = Field(description="Method, or None without speculation.")
    num_speculative_tokens: int | None
    acceptance_rate: float | None
    tokens_per_step: float = Field(description="Expected tokens per target step (1 without).")
    draft_model: str | None
    acceptance_source: str | None


class SystemPool(Data):
    """Untainted CPU nodes for cluster services (CoreDNS, KEDA, Prometheus, the operators)."""

    instance_type: str
    nodes: MinDesiredMax
    volume_gib: int
    priced: bool = Field(description="False: not in the price catalog, not in monthly_cost_usd.")
    reason: str


class BatchPoint(Data):
    """One replica at a running batch: what the performance model predicts (curves.py)."""

    batch: int = Field(description="Running sequences (max_num_seqs at the operating point).")
    itl_ms: float = Field(description="TPOT at the SLO percentile, with the chosen chunk.")
    ttft_ms: float | None = Field(description="TTFT at the percentile; None: prefill saturated.")
    output_tokens_per_s: float = Field(description="batch / mean step time.")


class Alternative(Data):
    instance_type: str
    tensor_parallel_size: int
    feasible: bool
    monthly_cost_usd: float | None
    reason: str
    precision: str | None = Field(default=None, description="Weight precision tried.")
    kv_cache_dtype: str | None = Field(default=None, description="KV cache dtype tried.")
    speculative: str | None = Field(
        default=None, description="Speculative method tried (None: no speculation)."
    )
    usd_per_million_output_tokens: float | None = Field(
        default=None,
        description="monthly_cost_usd over the output tokens of the region's peak held all "
        "month (a floor on the cost per token).",
    )
    pruned: bool = Field(
        default=False,
        description="Not sized: even at its capacity upper bound it costs more than the "
        "chosen candidate (feasible is then unknown and reported false).",
    )

    no_price: bool = Field(
        default=False,
        description="Not sized only because no price is known in the region (add a "
        "plan.prices override): unpriced, not infeasible.",
    )


class AlertRule(Data):
    """One Prometheus alerting rule (PrometheusRule); its threshold comes from the plan."""

    name: str = Field(description="The alert's name (CamelCase, as Prometheus shows it).")
    severity: str = Field(description="critical pages someone; warning opens a ticket.")
    expr: str = Field(description="PromQL; the alert fires while it returns a series.")
    for_duration: str = Field(description="How long expr must hold before the alert fires.")
    summary: str
    reason: str = Field(description="Why this threshold: the plan's number it comes from.")


class Alerts(Data):
    """Day-2 alerts of a region's vLLM fleet: SLO burn rates, KV pressure, preemptions,
    the replica ceiling and a fleet with nothing ready."""

    error_budget: float = Field(description="1 - slo.percentile / 100: the share of slow "
                                "requests (TTFT) or token gaps (ITL) the SLO allows.")
    rules: list[AlertRule]
    notes: list[str] = Field(description="What is deliberately not alerted on here, and why.")


class RegionPlan(Data):
    region: str
    traffic_share: float
    peak_requests_per_s: float
    trough_requests_per_s: float
    instance_type: str
    gpu: str
    gpus_per_node: int
    replicas_per_node: int
    replicas: MinDesiredMax = Field(
        description="min carries the trough, desired and max the peak; KEDA scales between."
    )
    nodes: MinDesiredMax
    price_usd_per_hour: float
    price_source: str
    monthly_cost_usd: float = Field(description="At desired nodes (provisioned for the peak).")
    monthly_cost_usd_at_trough: float
    predicted: Predicted
    risk: Risk
    memory: Memory
    serving: Serving
    autoscaling: Autoscaling
    workload: Workload
    system_pool: SystemPool
    node_zones: list[str] = Field(
        description="node_zone_ids as zone names of the catalog's (moto's) account; another "
        "account's names differ, so deploys use node_zone_ids."
    )
    availability_zones: list[str] = Field(
        description="cluster_zone_ids as the catalog account's zone names (informational)."
    )
    node_volume_gib: int = Field(description="Root volume per node: images and weights.")
    vpc_id: str | None
    private_subnet_ids: list[str] | None
    vpc_cidr: str
    reasons: list[str]
    alternatives: list[Alternative]
    batch_curve: list[BatchPoint] = Field(
        description="ITL, TTFT and throughput against the running batch, from one sequence to "
        "what the KV pool holds; includes the operating point (the report's chart)."
    )
    levers: ChosenLevers | None = Field(
        default=None, description="Precision, KV dtype, checkpoint and speculation chosen."
    )
    alerts: Alerts
    entry_point: EntryPoint | None = Field(
        default=None, description="The region's TLS entry point (None without plan.dns)."
    )
    node_zone_ids: list[str] = Field(description="Zone IDs of the GPU nodes (2+ where offered).")
    cluster_zone_ids: list[str] = Field(
        description="Zone IDs of the cluster's private subnets: the GPU zones topped up to 2-3."
    )
    capacity: NodeCapacity
    cold_start: ColdStart
    costs: Costs

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tensor_parallel_size(self) -> int:
        """GPUs per replica = vLLM's --tensor-parallel-size (its home: serving.vllm)."""
        return self.serving.vllm.tensor_parallel_size


class ModelSummary(Data):
    id: str
    hf_repo: str | None
    source: str
    params_b: float
    active_params_b: float
    precision: str
    kv_cache_dtype: str
    weights_gib: float
    kv_bytes_per_token: float


class RuleOfThumb(Data):
    rule: str
    rule_value: str
    computed: str
    verdict: str


class FleetPlan(Data):
    name: str
    llmfleet_version: str = __version__
    model: ModelSummary
    slo: Slo
    traffic: Traffic
    headroom: float
    confidence: str
    kubernetes_version: str
    cluster: ClusterAccess
    regions: list[RegionPlan]
    monthly_cost_usd: float
    monthly_cost_usd_at_trough: float
    gpus: MinDesiredMax
    rules_of_thumb: list[RuleOfThumb]
    levers_report: LeverReport | None = Field(
        default=None,
        description="Memory per precision, speculative speed-up against batch, cost per lever.",
    )
    environment: str = Field(description="development or production (plan.environment).")
    routing: Routing
    dns: Dns | None
    api_key: ApiKey | None
    resilience: Resilience = Field(
        description="Loss scenarios, warm floors, recovery time; monthly_cost_usd includes "
        "the floors, resilience.monthly_cost_usd_without_resilience does not."
    )
    startup: Startup = Field(
        default_factory=Startup, description="The plan's image digest, registry and growth."
    )
    monthly_cost_usd_day_profile: float = Field(
        default=0.0,
        description="Every region's costs.total_day_profile: GPUs over the day's profile, "
        "EBS, EKS control planes, NAT gateways and their data.",
    )

    def region(self, name: str) -> RegionPlan:
        return next(r for r in self.regions if r.region == name)
