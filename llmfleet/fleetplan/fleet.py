"""Plan -> FleetPlan: the search chooses per region, the section builders assemble.

`build_fleet_plan` is the one entry point the CLI, the renderer's callers and the Pulumi
program use; the same plan always gives the same FleetPlan. The FleetPlan is plain data:
components, templates and the CLI read it and recompute nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, computed_field

from llmfleet import __version__, disk_memo
from llmfleet.calibration.server_calibration import Coverage
from llmfleet.catalog.constants import Constants, fitted
from llmfleet.catalog.kubernetes import SupportType
from llmfleet.data import Data, MinDesiredMax
from llmfleet.errors import InfeasibleError
from llmfleet.fleetplan.balancing_alternative import (
    build_balancing_alternative,
    searched_with_router,
)
from llmfleet.fleetplan.calibrations import CalibrationUse, build_calibrations
from llmfleet.fleetplan.capacity import check_region_size
from llmfleet.fleetplan.entry_point import build_capacity_check, build_entry_point
from llmfleet.fleetplan.levers import ChosenLevers, LeverReport, build_lever_report
from llmfleet.fleetplan.pinned_levers import build_pinned_alternative, pinned_values, unpinned
from llmfleet.fleetplan.prefix_router import RegionServing, build_prefix_router
from llmfleet.fleetplan.region import RegionPlan, build_region_plan
from llmfleet.fleetplan.resilience import Resilience, build_resilience
from llmfleet.fleetplan.risk import calibrated_slowdown
from llmfleet.fleetplan.rollout import RolloutPlan, build_rollout
from llmfleet.fleetplan.traffic import TrafficAdvice, build_traffic_advice
from llmfleet.paths import PROJECT_ROOT
from llmfleet.perf.architecture import kv_dtype_bytes
from llmfleet.plan.alerting import Alerting
from llmfleet.plan.checks import check_plan, control_plane_support, load_calibrations
from llmfleet.plan.cluster import ClusterAccess, Startup
from llmfleet.plan.edge import Edge
from llmfleet.plan.model import ResolvedModel, resolve_model
from llmfleet.plan.routing import ApiKey, Dns, Routing
from llmfleet.plan.schema import CapacityPlan, Slo
from llmfleet.plan.traffic import Traffic
from llmfleet.search.choice import Choice
from llmfleet.search.optimizer import Alternative, Sizer, choose_region
from llmfleet.search.replicas import LossSizing, loss_sizing
from llmfleet.units import GB, GIB


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
    kubernetes_support: SupportType = Field(
        description="standard or extended (plan.kubernetes_support): the cluster's EKS "
        "upgrade policy; control_plane_support is what the cost model bills."
    )
    control_plane_support: str = Field(
        description="The support EKS bills the control plane at (plan.checks)."
    )
    account_id: str | None = Field(description="The AWS account the fleet deploys into.")
    cluster: ClusterAccess
    regions: list[RegionPlan]
    billed_monthly_cost_usd: float = Field(
        description="Every region's billed_monthly_cost_usd (GPU nodes at desired as their "
        "purchase bills them)."
    )
    billed_monthly_cost_usd_at_trough: float
    on_demand_monthly_cost_usd: float = Field(
        description="Every region's on_demand_monthly_cost_usd (at price_usd_per_hour)."
    )
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
    edge: Edge = Field(description="plan.edge: authentication and the WAF rate limit.")
    alerting: Alerting = Field(description="plan.alerts: receivers and the runbook's address.")
    resilience: Resilience = Field(
        description="Loss scenarios, warm floors, recovery time; billed_monthly_cost_usd includes "
        "the floors, resilience.monthly_cost_usd_without_resilience does not."
    )
    startup: Startup = Field(
        default_factory=Startup, description="The plan's image digest, registry and growth."
    )
    traffic_advice: TrafficAdvice | None = Field(
        default=None,
        description="Multi-region (latency routing): cost per request/s per region and the "
        "moves of a region's users to a cheaper region worth saying, with their detour.",
    )
    monthly_cost_usd_day_profile: float = Field(
        default=0.0,
        description="Every region's costs.total_day_profile: GPUs over the day's profile, "
        "EBS, EKS control planes, NAT gateways and their data.",
    )
    calibrations: list[CalibrationUse] = Field(
        default_factory=list,
        description="plan.calibration's files: the server each fits on the user's runs, its "
        "factors and band, and the regions it covers.",
    )
    rollout: RolloutPlan = Field(
        description="The order regions deploy in, the canary and its gate (`llmfleet rollout`)."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd(self) -> float:
        """Alias of billed_monthly_cost_usd (the key before #31; docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd_at_trough(self) -> float:
        """Alias of billed_monthly_cost_usd_at_trough (the key before #31;
        docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd_at_trough

    def region(self, name: str) -> RegionPlan:
        return next(r for r in self.regions if r.region == name)

    def served_as(self) -> str:
        """Precision, KV dtype and speculation as served: one label when every region
        serves alike, else each label with its regions ("us-east-1, us-west-2: fp8, KV
        fp8, no speculation; eu-north-1: bf16, KV auto, no speculation")."""
        labels: dict[str, list[str]] = {}
        for r in self.regions:
            label = r.levers.label if r.levers else (
                f"{self.model.precision}, KV {self.model.kv_cache_dtype}, no speculation"
            )
            labels.setdefault(label, []).append(r.region)
        if len(labels) == 1:
            return next(iter(labels))
        return "; ".join(f"{', '.join(regions)}: {label}" for label, regions in labels.items())


def sizing_constants(confidence: str, consts: Constants) -> Constants:
    """`confidence: pessimistic` slows the GPU part of every vLLM step to the p90 of the
    calibration's held-out measured/predicted ITL ratio (`predict --confidence` too)."""
    if confidence != "pessimistic":
        return consts
    factors = dict(consts.engine_step_factor)
    factors["vllm"] = factors.get("vllm", 1.0) * max(1.0, consts.ratio("itl_ms", "p90"))
    return consts.model_copy(update={"engine_step_factor": factors})


def build_model_summary(
    plan: CapacityPlan, model: ResolvedModel, levers: ChosenLevers | None = None
) -> ModelSummary:
    """The model as served: the levers the first region chose (the plan's own values when
    none are given)."""
    arch = model.arch
    precision = levers.precision if levers else plan.model.precision
    kv = levers.kv_cache_dtype if levers else plan.model.kv_cache_dtype
    return ModelSummary(
        id=model.id,
        hf_repo=model.hf_repo,
        source=model.source,
        params_b=round(arch.total_params / 1e9, 3),
        active_params_b=round(arch.active_params / 1e9, 3),
        precision=precision,
        kv_cache_dtype=kv,
        weights_gib=round(arch.weight_bytes(precision) / GIB, 2),
        kv_bytes_per_token=arch.kv_bytes_per_token(kv_dtype_bytes(kv)),
    )


@dataclass(frozen=True)
class Search:
    """What the search chooses per region, and the setup it chose with: the one place the
    sizing constants, the calibrations and the Sizer are made (the FleetPlan is built from
    it; the simulator takes its Sizer's corrections)."""

    base: Constants
    consts: Constants
    pessimistic: Constants
    model: ResolvedModel
    coverage: Coverage
    sizer: Sizer

    def choose(self, plan: CapacityPlan) -> list[tuple[Choice, list[Alternative]]]:
        """Every region's choice and alternatives (stages 1, 3 and 4's pricing)."""
        return [
            choose_region(plan, self.model, region, self.consts, self.sizer)
            for region in plan.regions
        ]

    def with_router(self, plan: CapacityPlan, choices: list[Choice]) -> list[Choice | None]:
        """Each region's choice with prefix-aware balancing (`balancing_alternative`); None
        for every region where it would change nothing, and where nothing is feasible. Its
        own Sizer: a sizing's cache depends on the balancing."""
        routed = searched_with_router(plan)
        if routed is None:
            return [None for _ in choices]
        sizer = Sizer(routed, self.model, self.consts, self.coverage, self.sizer.slowdown)
        out: list[Choice | None] = []
        for choice in choices:
            try:
                out.append(choose_region(routed, self.model, choice.region, self.consts,
                                         sizer)[0])
            except InfeasibleError:
                out.append(None)
        return out

    def without_pins(self, plan: CapacityPlan, choices: list[Choice]) -> list[Choice | None]:
        """Each region's choice with the plan's lever pins lifted (`pinned_levers`); None for
        every region when the plan pins nothing, and where nothing is feasible without the
        pins."""
        if not pinned_values(plan):
            return [None for _ in choices]
        free = unpinned(plan)
        sizer = Sizer(free, self.model, self.consts, self.coverage, self.sizer.slowdown)
        sizer.share_sizing(self.sizer)
        out: list[Choice | None] = []
        for choice in choices:
            try:
                out.append(choose_region(free, self.model, choice.region, self.consts, sizer)[0])
            except InfeasibleError:  # a pinned value outside the default lever space
                out.append(None)
        return out


def search_setup(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = PROJECT_ROOT
) -> Search:
    """Check the plan and set the search up: constants, model, calibration files, Sizer."""
    check_plan(plan)
    base = consts or fitted()
    sizing = sizing_constants(plan.confidence, base)
    pessimistic = sizing_constants("pessimistic", base)
    model = resolve_model(plan, base_dir)
    coverage = load_calibrations(plan, model, base, base_dir)
    slowdown = calibrated_slowdown(pessimistic) if plan.confidence == "pessimistic" else None
    sizer = Sizer(plan, model, sizing, coverage, slowdown)
    return Search(base, sizing, pessimistic, model, coverage, sizer)


def build_fleet_plan(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = PROJECT_ROOT
) -> FleetPlan:
    """The plan's FleetPlan: searched, or read from `disk_memo` where this plan, the files
    it names and llmfleet's own files are those a search already ran on (with the shipped
    constants; other `consts` always search)."""
    if consts is not None:
        return searched_fleet_plan(plan, consts, base_dir)
    return disk_memo.memoised("fleet-plan", plan_parts(plan, base_dir),
                              lambda: searched_fleet_plan(plan, None, base_dir))


def plan_parts(plan: CapacityPlan, base_dir: Path = PROJECT_ROOT) -> list[str | bytes]:
    """A plan as `disk_memo` keys it: every field, which of them the user set (a field set
    pins, as `model.precision` does, where its default leaves the search free), and the
    bytes of the files it names."""
    named = [plan.model.config_path, *plan.calibration]
    return [plan.model_dump_json(), plan.model_dump_json(exclude_unset=True), str(base_dir),
            *(disk_memo.file_part(base_dir / n) for n in named if n is not None)]


def searched_fleet_plan(
    plan: CapacityPlan, consts: Constants | None = None, base_dir: Path = PROJECT_ROOT
) -> FleetPlan:
    """The plan's FleetPlan from its search (`build_fleet_plan` without the cache)."""
    found = search_setup(plan, consts, base_dir)
    return fleet_plan_of(plan, found, found.choose(plan))


def fleet_plan_of(
    plan: CapacityPlan, found: Search, searched: list[tuple[Choice, list[Alternative]]]
) -> FleetPlan:
    """The FleetPlan of the search's choices (`Search.choose`), for a caller that reads the
    choices too (the drill) and so searches once."""
    base, consts, pessimistic = found.base, found.consts, found.pessimistic
    model, coverage, sizer = found.model, found.coverage, found.sizer
    # Stage 4: the search sized each region to survive the losses it absorbs; record the
    # floors, then give each region its entry point.
    choices = [choice for choice, _ in searched]
    floors = loss_sizing(plan, choices)
    regions = [
        _with_router_alternative(_with_pins(
            _with_routing(plan, build_region_plan(choice, alts, consts, pessimistic, floor), floor),
            choice,
            free,
        ), choice, routed)
        for choice, (_, alts), floor, free, routed in zip(
            choices, searched, floors, found.without_pins(plan, choices),
            found.with_router(plan, choices), strict=True
        )
    ]
    for r in regions:
        check_region_size(
            r.region, r.instance_type, r.gpus_per_node, r.nodes.max,
            plan.traffic.peak_requests_per_s,
        )
    gpus = MinDesiredMax(
        min=sum(r.nodes.min * r.gpus_per_node for r in regions),
        desired=sum(r.nodes.desired * r.gpus_per_node for r in regions),
        max=sum(r.nodes.max * r.gpus_per_node for r in regions),
    )
    return FleetPlan(
        name=plan.name,
        model=build_model_summary(plan, model, regions[0].levers),
        slo=plan.slo,
        traffic=plan.traffic,
        headroom=plan.headroom,
        confidence=plan.confidence,
        cluster=plan.cluster,
        kubernetes_version=plan.kubernetes_version,
        kubernetes_support=plan.kubernetes_support,
        control_plane_support=control_plane_support(plan),
        account_id=plan.account_id,
        regions=regions,
        billed_monthly_cost_usd=round(sum(r.billed_monthly_cost_usd for r in regions), 2),
        billed_monthly_cost_usd_at_trough=round(
            sum(r.billed_monthly_cost_usd_at_trough for r in regions), 2
        ),
        on_demand_monthly_cost_usd=round(sum(r.on_demand_monthly_cost_usd for r in regions), 2),
        gpus=gpus,
        rules_of_thumb=build_rules_of_thumb(model, plan),
        levers_report=build_lever_report(plan, model, [c for c, _ in searched], sizer, consts),
        environment=plan.environment,
        routing=plan.routing,
        dns=plan.dns,
        api_key=plan.api_key,
        edge=plan.edge,
        alerting=plan.alerts,
        resilience=build_resilience(plan, regions, floors),
        traffic_advice=build_traffic_advice(plan, regions),
        startup=plan.startup,
        monthly_cost_usd_day_profile=round(sum(r.costs.total_day_profile for r in regions), 2),
        calibrations=build_calibrations(
            coverage,
            {
                c.path: [r.region for r in regions if r.predicted.calibration == c.path]
                for c in coverage.servers
            },
            base,
        ),
        rollout=build_rollout(plan, regions),
    )


def _with_routing(plan: CapacityPlan, rp: RegionPlan, floor: LossSizing) -> RegionPlan:
    """The region with its entry point, and why its floor rose (when it did)."""
    reasons = list(rp.reasons)
    if floor.worst_case_lost:
        reasons.append(
            f"warm floor {floor.warm_replicas} replicas: carries "
            f"{floor.worst_load_requests_per_s:g} req/s when {', '.join(floor.worst_case_lost)} "
            f"is lost (min/desired/max without resilience "
            f"{'/'.join(str(v) for v in floor.replicas_without_resilience.values())})"
        )
    entry = build_entry_point(
        plan,
        rp.region,
        rp.serving.vllm.served_model_name,
        prestop_sleep_s=rp.serving.prestop_sleep_s,
        shutdown_timeout_s=rp.serving.vllm.shutdown_timeout,
    )
    if entry is not None:
        check = build_capacity_check(
            rp.region, rp.peak_requests_per_s, rp.predicted.requests_per_s, rp.replicas.min,
            rp.workload.pdb_max_unavailable // rp.nodes_per_replica,
        )
        entry = entry.model_copy(update={"capacity_check": check})
    router = build_prefix_router(plan, RegionServing(
        region=rp.region,
        workload=rp.workload,
        predicted=rp.predicted,
        replicas_desired=rp.replicas.desired,
        max_num_seqs=rp.serving.vllm.max_num_seqs,
        serving_port=rp.serving.vllm.port,
        leader_labels=rp.multi_node.leader_labels if rp.multi_node is not None else {},
        disaggregated=rp.disaggregation is not None,
    ), entry)
    if router is not None:
        reasons += router.reasons
    return rp.model_copy(update={"entry_point": entry, "reasons": reasons,
                                 "prefix_router": router})


def _with_router_alternative(rp: RegionPlan, choice: Choice, routed: Choice | None
                             ) -> RegionPlan:
    """The region with what prefix-aware balancing would save, said in its reasons."""
    alt = build_balancing_alternative(choice, routed) if routed is not None else None
    if alt is None:
        return rp
    return rp.model_copy(update={"balancing_alternative": alt,
                                 "reasons": [*rp.reasons, alt.text]})


def _with_pins(rp: RegionPlan, choice: Choice, free: Choice | None) -> RegionPlan:
    """The region with what its lever pins cost, said in its reasons, where they cost."""
    alt = build_pinned_alternative(choice, free) if free is not None else None
    if alt is None:
        return rp
    return rp.model_copy(update={"pinned_alternative": alt, "reasons": [*rp.reasons, alt.text]})


def build_rules_of_thumb(model: ResolvedModel, plan: CapacityPlan) -> list[RuleOfThumb]:
    arch = model.arch
    kv_mb = arch.kv_bytes_per_token(kv_dtype_bytes(plan.model.kv_cache_dtype)) / 1e6
    kv_verdict = (
        f"the rule is {1.5 / kv_mb:.1f}-{2.5 / kv_mb:.1f}x too high for this model"
        if kv_mb < 1.5
        else f"the rule is {kv_mb / 2.5:.1f}x too low for this model"
        if kv_mb > 2.5
        else "within the rule"
    )
    why = (
        f"{arch.kv_heads} KV heads of {arch.heads} (GQA)"
        if arch.mla_kv_dim is None
        else f"MLA latent of {arch.mla_kv_dim} values per layer"
    )
    weights_gb = arch.weight_bytes(plan.model.precision) / GB
    fp16_gb = 2 * arch.total_params / GB
    return [
        RuleOfThumb(
            rule="KV cache per token of context",
            rule_value="1.5-2.5 MB",
            computed=f"{kv_mb:.3f} MB ({why}, {arch.layers} layers)",
            verdict=kv_verdict,
        ),
        RuleOfThumb(
            rule="16-bit weights = 2 bytes x parameters",
            rule_value=f"{fp16_gb:.0f} GB",
            computed=f"{weights_gb:.0f} GB at {plan.model.precision}",
            verdict="matches"
            if plan.model.precision in ("bf16", "fp16")
            else f"{plan.model.precision} saves {1 - weights_gb / fp16_gb:.0%}",
        ),
    ]
