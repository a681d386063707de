"""The cache-aware router a region deploys with `edge.balancing: prefix_aware`, and what
the region's replicas are expected to cache with it and without it.

What runs: vllm-project/router (`vllm-router`, the image the disaggregated router uses,
`disaggregation.ROUTER_IMAGE`: one pin) with `--policy cache_aware`, between the region's
authenticated entry point and its vLLM pods. The ALB (auth, WAF, TLS) sends `/v1` to the
router's pods; the router finds the vLLM pods through the Kubernetes API by their labels
(`--service-discovery --selector`, this namespace only) and sends each prompt to the
replica whose approximate radix tree holds its longest prefix, unless its own in-flight
counts say the replicas are imbalanced, then to the least loaded one (policies/
cache_aware.rs). `/health` stays on the vLLM pods (a second Ingress of the same ALB), so
the ALB's healthy targets there still count Ready replicas for the capacity alarm, and the
router's own target group is checked on `/readiness` (ready with one healthy worker): its
`/health` answers 503 as soon as any one worker is unhealthy, which would take every
router out at once.

Why this router, not the Gateway API Inference Extension: it is one Deployment behind the
ALB the region already has (auth, WAF, Route 53 checks unchanged), maintained (release
0.1.17, 2026-11, PyPI), already pinned here for disaggregated serving, with Kubernetes pod
discovery and Prometheus metrics. An InferencePool needs a Gateway implementation with
ext_proc (Envoy Gateway, kgateway, Istio) as a second proxy tier behind the ALB, the
Gateway API and InferencePool CRDs' lifecycle and the endpoint picker: more to run for the
same decision at this scale (docs/prefix-caching.md).

Every flag is one both of the package's command lines accept (the Python launcher
`vllm_router/router_args.py` and the Rust binary `src/main.rs` of vllm-router 0.1.17's
sdist; `ROUTER_FLAGS`), since which one the image's `vllm-router` runs was not verified
offline. Set from the plan: the Kubernetes selector and port, `--request-timeout-secs` (the
longest request, as the ALB's idle timeout), `--balance-abs-threshold` (below).

Sizing: two replicas spread over zones (one may be drained: PodDisruptionBudget
minAvailable 1), each requesting the router project's own Kubernetes example (2 CPUs,
4 GiB: `disaggregation.ROUTER_CPU`). No published per-request CPU cost of vllm-router was
found, so the replica count is not derived from the request rate: the reasons say so.
Each router replica learns only the prefixes it routed itself; with two, a conversation's
next turn meets the router that routed the one before half the time (the physics:
`perf.prefix_cache.same_replica_probability`).

The imbalance threshold: vllm-router counts requests in flight per worker from its own
traffic (1/R of it with R routers). A replica running `max_num_seqs x headroom` more
requests than its least loaded peer is at the slots the headroom keeps free, so the router
balances past `max_num_seqs x headroom / R` (its default, 64, would let a replica queue
before it reacts); the relative threshold keeps the default 1.5."""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.alerts import AlertRule
from llmfleet.fleetplan.disaggregation import (
    ROUTER_CPU,
    ROUTER_IMAGE,
    ROUTER_MEMORY_GIB,
    ROUTER_METRICS_PORT,
)
from llmfleet.fleetplan.entry_point import (
    FAST_BURN,
    ROUTER_READINESS_PATH,
    EntryPoint,
    runbook,
)
from llmfleet.fleetplan.predicted import Predicted
from llmfleet.fleetplan.serving import docker_hub_ref
from llmfleet.fleetplan.workload import NODE_LABEL_PREFIX, PORT, Workload, bounded_name
from llmfleet.perf.prefix_cache import (
    BALANCE_REL_THRESHOLD,
    CACHE_THRESHOLD,
    ROUTER_REPLICAS,
    balance_abs_threshold,
    imbalance_share,
    prefix_cache,
    running_kv_tokens,
)
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.prefix_hold import conversations_of

POLICY = "cache_aware"
READINESS_PATH = ROUTER_READINESS_PATH
"""vllm-router's regular router: 200 with at least one healthy worker (routers/http/
router.rs `readiness`); `/health` is 503 while any single worker is unhealthy."""
LIVENESS_PATH = "/liveness"
PRESTOP_SLEEP_S = 15
"""The ALB stops sending new requests to a draining target within its deregistration; the
pause keeps the router accepting until then (vLLM's pods use the same pause)."""
NAME_LIMIT = 63
"""A Service's name is a DNS-1035 label: 63 characters at most."""
ROUTER_FLAGS = (
    "--balance-abs-threshold", "--balance-rel-threshold", "--cache-threshold", "--host",
    "--policy", "--port", "--prometheus-host", "--prometheus-port", "--request-timeout-secs",
    "--selector", "--service-discovery", "--service-discovery-namespace",
    "--service-discovery-port",
)
"""Flags both vllm-router 0.1.17 command lines accept (router_args.py's argparse and
main.rs's clap CliArgs), the ones this module sets. `--eviction-interval` is the Rust
binary's spelling and `--eviction-interval-secs` the launcher's: left at its default."""
ROUTER_METRICS = (
    "vllm_router_prefix_routing_decisions_total",
    "vllm_router_request_errors_total",
    "vllm_router_requests_total",
    "vllm_router_active_workers",
    "up",
)
"""What the router's alerts read: counters and a gauge vllm-router 0.1.17 exports
(src/metrics.rs: `record_prefix_routing_decision` with labels policy, stage and outcome
prefix_hit | prefix_miss | load_imbalance | missing_tokens; `record_request`,
`record_request_error` by route; `set_active_workers`), and Prometheus's own `up`."""
IMBALANCE_ALERT_SHARE = 0.25
MISSING_TOKENS_ALERT_SHARE = 0.05
ALERT_FOR = "15m"


class RegionServing(Data):
    """What the router needs of its region (RegionPlan holds the router, so the router reads
    these rather than the RegionPlan)."""

    region: str
    workload: Workload
    predicted: Predicted
    replicas_desired: int
    max_num_seqs: int
    serving_port: int
    leader_labels: dict[str, str] = Field(
        description="A replica across nodes: its leader's labels (only the leader serves)."
    )
    disaggregated: bool


class CacheForecast(Data):
    """A replica's prefix cache at the region's peak, under one balancing."""

    balancing: str
    cached_tokens_per_prompt: float
    uncached_tokens_per_prompt: float
    hit_rate: float
    same_replica_probability: float
    turnover_s: float
    history_demand_kv_tokens: float
    cache_kv_tokens: float


class PrefixRouterPlan(Data):
    """vllm-router in front of the region's vLLM replicas (`components.prefix_router`)."""

    name: str = Field(description="Its Deployment, Service, ServiceAccount, Role and more.")
    image: str
    replicas: int
    port: int
    metrics_port: int
    labels: dict[str, str] = Field(description="The router pods' labels (not the engines').")
    engine_selector: dict[str, str] = Field(
        description="The vLLM pods it discovers (`--selector`)."
    )
    node_selector: dict[str, str]
    cpu: str
    memory_gib: int
    balance_abs_threshold: int
    request_timeout_s: int
    prestop_sleep_s: int
    termination_grace_s: int
    readiness_path: str
    liveness_path: str
    pdb_min_available: int
    args: list[str] = Field(description="The router's command line, flag by flag.")
    forced_share: float = Field(
        description="Share of requests its load balance sends away from their cache at the "
        "peak (perf.prefix_cache.imbalance_share)."
    )
    with_router: CacheForecast
    without_router: CacheForecast
    alerts: list[AlertRule]
    reasons: list[str]


def router_name(workload_name: str) -> str:
    return bounded_name(f"{workload_name}-router", NAME_LIMIT)


def forecast(
    plan: CapacityPlan, rp: RegionServing, balancing: str, router_replicas: int,
    forced_share: float,
) -> CacheForecast:
    """A replica's cache at the region's peak: its share of the peak, its KV pool and the
    sequences it runs (Little: rate x output tokens x the decode step)."""
    t = plan.traffic
    rate = rp.predicted.requests_per_s_at_peak
    running = rate * t.output_tokens.mean * rp.predicted.decode_only_itl_ms / 1000
    context = t.input_tokens.mean + t.output_tokens.mean / 2
    r = prefix_cache(
        conversations_of(plan),
        balancing="prefix_aware" if balancing == "prefix_aware" else "least_outstanding",
        replicas=rp.replicas_desired,
        requests_per_s_per_replica=rate,
        kv_pool_tokens=rp.predicted.kv_cache_tokens,
        running_kv_tokens=running_kv_tokens(running, context, t.shared_prefix_tokens),
        router_replicas=router_replicas,
        forced_share=forced_share,
        match_threshold=CACHE_THRESHOLD,
    )
    return CacheForecast(
        balancing=balancing,
        cached_tokens_per_prompt=round(r.cached_tokens_per_prompt, 1),
        uncached_tokens_per_prompt=round(r.uncached_tokens_per_prompt, 1),
        hit_rate=round(r.hit_rate, 4),
        same_replica_probability=round(r.same_replica_probability, 4),
        turnover_s=round(min(r.turnover_s, 1e9), 1),
        history_demand_kv_tokens=round(r.history_demand_kv_tokens),
        cache_kv_tokens=round(r.cache_kv_tokens),
    )


def in_flight_per_replica(plan: CapacityPlan, rp: RegionServing) -> float:
    """Requests a replica holds at the peak: its rate x (TTFT + output x the decode step)."""
    t = plan.traffic
    seconds = (rp.predicted.ttft_ms + t.output_tokens.mean * rp.predicted.decode_only_itl_ms) / 1000
    return rp.predicted.requests_per_s_at_peak * seconds


def router_alerts(plan: CapacityPlan, rp: RegionServing, name: str, namespace: str,
                  forced_share: float) -> list[AlertRule]:
    """The router's own alerts: down, erroring, balancing against the cache, routing blind."""
    budget = 1 - plan.slo.percentile / 100
    errors = round(min(1.0, FAST_BURN * budget), 4)
    sel = f'namespace="{namespace}",service="{name}"'
    decisions = f'vllm_router_prefix_routing_decisions_total{{{sel},policy="{POLICY}"}}'

    def share(outcome: str) -> str:
        return (f'sum(rate({decisions[:-1]},outcome="{outcome}"}}[{ALERT_FOR}])) / '
                f"sum(rate({decisions}[{ALERT_FOR}]))")

    url = plan.alerts.runbook_url
    imbalance = max(IMBALANCE_ALERT_SHARE, round(2 * forced_share, 2))
    return [
        AlertRule(
            name="PrefixRouterDown",
            severity="critical",
            expr=f"sum(up{{{sel}}}) < 1",
            for_duration="5m",
            summary=f"no {name} pod is scraped in {rp.region}: the entry point has no router",
            reason="every /v1 request passes the router; the ALB answers 503 without one",
            runbook_url=runbook(url, "prefixrouterdown"),
        ),
        AlertRule(
            name="PrefixRouterNoWorkers",
            severity="critical",
            expr=f"max(vllm_router_active_workers{{{sel}}}) < 1",
            for_duration="5m",
            summary=f"{name} in {rp.region} has discovered no vLLM pod",
            reason="its Kubernetes discovery (pods of the namespace by label) finds no Ready "
            "engine: check the Role, the selector and the engines' readiness",
            runbook_url=runbook(url, "prefixrouternoworkers"),
        ),
        AlertRule(
            name="PrefixRouterErrors",
            severity="warning",
            expr=(f"sum(rate(vllm_router_request_errors_total{{{sel}}}[{ALERT_FOR}])) / "
                  f"(sum(rate(vllm_router_requests_total{{{sel}}}[{ALERT_FOR}])) + "
                  f"sum(rate(vllm_router_request_errors_total{{{sel}}}[{ALERT_FOR}]))) "
                  f"> {errors:g}"),
            for_duration=ALERT_FOR,
            summary=f"over {errors:.2%} of {name}'s requests fail in {rp.region}",
            reason=f"{FAST_BURN:g}x the SLO's error budget of {budget:.1%}",
            runbook_url=runbook(url, "prefixroutererrors"),
        ),
        AlertRule(
            name="PrefixRouterLoadImbalance",
            severity="warning",
            expr=f"{share('load_imbalance')} > {imbalance:g}",
            for_duration=ALERT_FOR,
            summary=f"{name} sends over {imbalance:.0%} of prompts away from their cache to "
            "balance load",
            reason=f"sized for {forced_share:.1%} at the peak (Poisson in-flight counts); "
            "more means conversations pile onto some replicas: more replicas, or a larger "
            "--balance-abs-threshold if TTFT holds",
            runbook_url=runbook(url, "prefixrouterloadimbalance"),
        ),
        AlertRule(
            name="PrefixRouterRoutesBlind",
            severity="warning",
            expr=f"{share('missing_tokens')} > {MISSING_TOKENS_ALERT_SHARE:g}",
            for_duration=ALERT_FOR,
            summary=f"{name} could not read over {MISSING_TOKENS_ALERT_SHARE:.0%} of prompts' "
            "tokens and balanced them by load alone",
            reason="it asks the engines' /render (or /tokenize) for every prompt's token ids "
            "within 1 s; without them a prompt goes to the least loaded replica",
            runbook_url=runbook(url, "prefixrouterroutesblind"),
        ),
    ]


def build_prefix_router(
    plan: CapacityPlan, region: RegionServing, entry: EntryPoint | None
) -> PrefixRouterPlan | None:
    """The region's router, or None unless the plan asks for prefix_aware balancing and the
    region has an entry point and serves aggregated (a disaggregated region's router already
    balances prefills cache-aware)."""
    if plan.edge.balancing != "prefix_aware" or entry is None or region.disaggregated:
        return None
    rp = region
    w = rp.workload
    name = router_name(w.name)
    labels = {
        "app.kubernetes.io/component": "prefix-router",
        "app.kubernetes.io/name": "vllm-router",
        "app.kubernetes.io/instance": w.name,
        "app.kubernetes.io/managed-by": "llmfleet",
    }
    engines = dict(w.labels)
    engines.update(rp.leader_labels)  # across nodes only each group's leader serves the API
    engines = dict(sorted(engines.items()))
    replicas = ROUTER_REPLICAS
    abs_threshold = balance_abs_threshold(rp.max_num_seqs, plan.headroom, replicas)
    per_router = in_flight_per_replica(plan, rp) / replicas
    forced = imbalance_share(rp.replicas_desired, per_router, abs_threshold,
                             BALANCE_REL_THRESHOLD)
    timeout = entry.idle_timeout_s
    args = [
        "--host", "0.0.0.0",
        "--port", str(PORT),
        "--policy", POLICY,
        "--cache-threshold", f"{CACHE_THRESHOLD:g}",
        "--balance-abs-threshold", str(abs_threshold),
        "--balance-rel-threshold", f"{BALANCE_REL_THRESHOLD:g}",
        "--service-discovery",
        "--service-discovery-namespace", w.namespace,
        "--service-discovery-port", str(rp.serving_port),
        "--selector", *[f"{k}={v}" for k, v in engines.items()],
        "--request-timeout-secs", str(timeout),
        "--prometheus-host", "0.0.0.0",
        "--prometheus-port", str(ROUTER_METRICS_PORT),
    ]  # fmt: skip
    with_router = forecast(plan, rp, "prefix_aware", replicas, forced)
    without = forecast(plan, rp, "least_outstanding", replicas, 0.0)
    grace = PRESTOP_SLEEP_S + entry.deregistration_delay_s
    reasons = [
        f"prefix-aware balancing: the ALB sends /v1 to {replicas} vllm-router replicas "
        f"({ROUTER_IMAGE}, --policy {POLICY}), which send each prompt to the replica holding "
        "its longest prefix; /health stays on the vLLM pods, whose healthy count is the "
        "region's capacity",
        f"expected cached per prompt at the peak: {with_router.cached_tokens_per_prompt:,.0f} "
        f"of {plan.traffic.input_tokens.mean:,} tokens ({with_router.hit_rate:.0%}) with the "
        f"router, {without.cached_tokens_per_prompt:,.0f} ({without.hit_rate:.0%}) with "
        "the ALB's least outstanding requests",
        f"an earlier turn is on the replica the router picks with probability "
        f"{with_router.same_replica_probability:.2f} ({replicas} routers each learn the "
        f"prefixes they routed; {forced:.1%} of prompts balanced away from their cache), "
        f"against 1/{rp.replicas_desired} without it",
        f"--balance-abs-threshold {abs_threshold}: max_num_seqs "
        f"{rp.max_num_seqs} x headroom {plan.headroom:.0%} / {replicas} routers "
        "(each counts only its own requests in flight)",
        f"each router requests {ROUTER_CPU} CPUs and {ROUTER_MEMORY_GIB} GiB (the router "
        "project's Kubernetes example); no published per-request CPU cost of vllm-router was "
        f"found, so {replicas} replicas are for availability, not sized from the rate",
    ]
    if plan.traffic.turns == 1 and plan.traffic.shared_prefix_tokens == 0:
        reasons.append(
            "traffic.turns is 1 and traffic.shared_prefix_tokens 0: as the plan describes "
            "the traffic, the router finds no prefix to keep"
        )
    return PrefixRouterPlan(
        name=name,
        image=docker_hub_ref(plan.startup, ROUTER_IMAGE, rp.region),
        replicas=replicas,
        port=PORT,
        metrics_port=ROUTER_METRICS_PORT,
        labels=dict(sorted(labels.items())),
        engine_selector=engines,
        node_selector={f"{NODE_LABEL_PREFIX}/pool": "system"},
        cpu=ROUTER_CPU,
        memory_gib=ROUTER_MEMORY_GIB,
        balance_abs_threshold=abs_threshold,
        request_timeout_s=timeout,
        prestop_sleep_s=PRESTOP_SLEEP_S,
        termination_grace_s=grace,
        readiness_path=READINESS_PATH,
        liveness_path=LIVENESS_PATH,
        pdb_min_available=replicas - 1,
        args=args,
        forced_share=round(forced, 4),
        with_router=with_router,
        without_router=without,
        alerts=router_alerts(plan, rp, name, w.namespace, forced),
        reasons=reasons,
    )
