"""Disaggregated serving in the FleetPlan: when the search chose a prefill pool and a decode
pool (`search.disagg`), what each runs, how each scales, and the router in front.

- The decode pool is the region's main serving (`RegionPlan.serving`, its Deployment,
  replicas and ScaledObject); the prefill pool is a second Deployment (`prefill`) with its
  own engine arguments, replicas and ScaledObject.
- Both run vLLM's NixlConnector (`--kv-transfer-config`, kv_role kv_both: the router assigns
  the roles per request) over NIXL's LIBFABRIC backend when the image carries libfabric
  (EFA's path), else UCX over TCP (docs/features/nixl_connector_usage.md; the region's
  `fabric`, which also keeps both pools in one zone); each pod publishes its address for
  NIXL's side channel (`VLLM_NIXL_SIDE_CHANNEL_HOST`).
- The router is vllm-project/router (`vllm-router`, image `vllm/vllm-router`): it finds the
  pools' pods through the Kubernetes API by their role label (`--service-discovery
  --prefill-selector --decode-selector`), sends each request to a prefill pod for its KV and
  first token, then to a decode pod that pulls the KV and streams the rest. It runs on the
  system nodes, two replicas; the Service and entry point send clients to it.
- Each pool scales on its own signal: the prefill pool on its queue (prompts waiting), the
  decode pool on its KV cache use; the scrape carries the pod's role label so the two read
  their own pods (ServiceMonitor `podTargetLabels`)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from llmfleet.data import Data, MinDesiredMax
from llmfleet.fleetplan.autoscaling import (
    COOLDOWN_PERIOD_S,
    FALLBACK_FAILURE_THRESHOLD,
    POLLING_INTERVAL_S,
    RATE_WINDOW,
    Autoscaling,
    Trigger,
    queue_depth_threshold,
    stabilization_s,
)
from llmfleet.fleetplan.cold_start import ColdStart
from llmfleet.fleetplan.multi_node import ROLE_LABEL
from llmfleet.fleetplan.serving import Serving, build_serving, docker_hub_ref
from llmfleet.fleetplan.workload import NODE_LABEL_PREFIX, PORT
from llmfleet.perf.latency import Point, at_rate
from llmfleet.search.choice import Choice, PrefillPool
from llmfleet.search.replica_slo import ttft_prompt_tokens

CONNECTOR = "NixlConnector"


def kv_transfer_config(backend: str) -> dict[str, object]:
    """vLLM's NixlConnector (docs/features/nixl_connector_usage.md): kv_role is a placeholder
    (the router assigns roles per request); NIXL's `backend` (fabric.kv_backend: LIBFABRIC
    over EFA, UCX over TCP) carries the KV."""
    return {
        "kv_connector": CONNECTOR,
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"backends": [backend]},
    }


NIXL_SIDE_CHANNEL_PORT = 5600
"""VLLM_NIXL_SIDE_CHANNEL_PORT, set explicitly: its default moved between releases (the docs
say 5600, vLLM 0.11.0's envs.py 5557)."""
ROUTER_IMAGE = "vllm/vllm-router:v0.1.17"
"""vllm-project/router release 0.1.17 (PyPI vllm-router 0.1.17); its release pipeline
publishes `vllm/vllm-router:v<version>` (.buildkite/scripts/publish-release-images.sh). The
tag on Docker Hub was not verified offline."""
ROUTER_REPLICAS = 2
ROUTER_METRICS_PORT = 29000
ROUTER_CPU = "2"
ROUTER_MEMORY_GIB = 4
"""The router project's own Kubernetes example requests 2 CPUs and 4 GiB
(scripts/k8s/llama3/vllm-router/pd-disagg/router-deployment.yaml)."""
PROMETHEUS_ROLE_LABEL = ROLE_LABEL.replace(".", "_").replace("/", "_")
"""The pod's role label as Prometheus names it on every scraped series."""


class PrefillPoolPlan(Data):
    """The prefill pool: its engine, replicas, nodes and autoscaling."""

    tensor_parallel_size: int
    replicas: MinDesiredMax
    nodes: MinDesiredMax
    serving: Serving
    autoscaling: Autoscaling
    requests_per_s: float = Field(description="Prompts/s one replica takes inside the TTFT.")
    kv_cache_tokens: int


class Router(Data):
    """vllm-router in front of the two pools."""

    name: str
    image: str
    replicas: int
    port: int
    metrics_port: int
    labels: dict[str, str]
    node_selector: dict[str, str]
    cpu: str
    memory_gib: int
    args: list[str] = Field(description="The router's command line, flag by flag.")


class Disaggregation(Data):
    connector: str
    kv_backend: str
    nixl_side_channel_port: int
    role_label: str
    prometheus_role_label: str
    prefill_labels: dict[str, str] = Field(description="The prefill pods' role label.")
    decode_labels: dict[str, str]
    kv_transfer_ms: float = Field(description="The p-th prompt's KV to the decode pool.")
    kv_prompt_tokens: int
    prompt_prefill_ms: float
    prefill: PrefillPoolPlan
    router: Router
    reasons: list[str]


def prefill_choice(choice: Choice, pool: PrefillPool) -> Choice:
    """The prefill pool as a Choice of its own, so the serving builders size its pods."""
    return Choice(
        plan=choice.plan,
        model=choice.model,
        region=choice.region,
        instance=choice.instance,
        step_model=pool.step_model,
        sizing=pool.sizing,
        price_usd_per_hour=choice.price_usd_per_hour,
        price_source=choice.price_source,
        replicas=pool.replicas,
        nodes=pool.nodes,
        searched_levers=choice.searched_levers,
        shape=None if pool.shape.plain else pool.shape,
    )


def percentile_prompt(choice: Choice, pool: PrefillPool) -> tuple[int, float, float]:
    """(tokens, its prefill alone, its KV's transfer) of the prompt bin nearest the SLO
    percentile's prompt: what the reasons quote."""
    prompt = ttft_prompt_tokens(choice.plan)
    table = pool.sizing.point.table
    bins = table.workload.prompts.tokens
    k = int(np.argmin(np.abs(bins - prompt)))
    return prompt, float(table.own_s[0][k]), float(pool.transfer_s[k])


def with_kv_transfer(serving: Serving, backend: str) -> Serving:
    vllm = serving.vllm.model_copy(update={"kv_transfer_config": kv_transfer_config(backend)})
    return serving.model_copy(update={"vllm": vllm})


def _selector(namespace: str, served_model_name: str, role: str) -> str:
    return (
        f'{{namespace="{namespace}",model_name="{served_model_name}",'
        f'{PROMETHEUS_ROLE_LABEL}="{role}"}}'
    )


def _scaling(triggers: list[Trigger], reasons: list[str], container_s: float) -> Autoscaling:
    return Autoscaling(
        polling_interval_s=POLLING_INTERVAL_S,
        cooldown_period_s=COOLDOWN_PERIOD_S,
        scale_down_stabilization_s=stabilization_s(container_s),
        fallback_failure_threshold=FALLBACK_FAILURE_THRESHOLD,
        triggers=triggers,
        reasons=reasons,
    )


def build_decode_autoscaling(
    choice: Choice, namespace: str, served_model_name: str, container_s: float
) -> Autoscaling:
    """The decode pool scales on its KV cache use at the load a replica was sized for."""
    plan, s = choice.plan, choice.sizing
    rate = s.capacity_requests_per_s * (1 - plan.headroom)
    running = at_rate(s.point.table, rate, plan.slo.percentile).running
    context = s.point.table.workload.context_tokens
    kv_use = min(running * context / s.memory.kv_cache_tokens, 0.95)
    sel = _selector(namespace, served_model_name, "decode")
    trigger = Trigger(
        name="kv-cache-usage",
        metric="vllm:kv_cache_usage_perc",
        query=f"sum(avg_over_time(vllm:kv_cache_usage_perc{sel}[{RATE_WINDOW}]))",
        threshold=round(kv_use, 3),
        reason=f"{running:.1f} running sequences at the sized load ({rate:.2f} req/s a "
        f"replica), each holding {context:,.0f} tokens on average, fill {kv_use:.1%} of "
        f"{s.memory.kv_cache_tokens:,} KV tokens",
    )
    return _scaling(
        [trigger],
        [
            f"a decode replica sustains {s.capacity_requests_per_s:.2f} req/s at the ITL "
            f"target; with {plan.headroom:.0%} headroom it is sized for {rate:.2f} req/s",
            "the decode pool's own signal is its KV cache: every request it holds brings "
            "its whole prompt's KV from the prefill pool",
        ],
        container_s,
    )


def build_prefill_autoscaling(
    choice: Choice, pool: PrefillPool, namespace: str, served_model_name: str, container_s: float
) -> Autoscaling:
    """The prefill pool scales on its queue (prompts waiting) at the sized load."""
    plan = choice.plan
    rate = pool.capacity_requests_per_s * (1 - plan.headroom)
    lane = Point(pool.sizing.point.table, rate, 0.0, plan.slo.percentile).lane
    wait_mean_s = lane.wait_chance * lane.wait_s
    queued = rate * wait_mean_s
    sel = _selector(namespace, served_model_name, "prefill")
    trigger = Trigger(
        name="queue-depth",
        metric="vllm:num_requests_waiting",
        query=f"sum(vllm:num_requests_waiting{sel})",
        threshold=queue_depth_threshold(queued, POLLING_INTERVAL_S),
        reason=f"{queued:.2f} prompts wait per prefill replica at the sized load (Little's "
        f"law: {rate:.2f} req/s x {wait_mean_s * 1000:.0f} ms mean wait); the count one "
        "replica exceeds by chance at most about once a day of polls (a geometric tail)",
    )
    return _scaling(
        [trigger],
        [
            f"a prefill replica takes {pool.capacity_requests_per_s:.2f} prompts/s inside the "
            f"TTFT target; with {plan.headroom:.0%} headroom it is sized for {rate:.2f}",
            "the prefill pool's own signal is its queue: a prompt waiting is TTFT spent",
        ],
        container_s,
    )


def router_image(choice: Choice) -> str:
    return docker_hub_ref(choice.plan.startup, ROUTER_IMAGE, choice.region.name)


def build_router(
    choice: Choice, namespace: str, prefill: dict[str, str], decode: dict[str, str]
) -> Router:
    name = choice.plan.name
    labels = {
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/name": "vllm-router",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "llmfleet",
    }

    def pairs(labels: dict[str, str]) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(labels.items())]

    args = [
        "--host", "0.0.0.0",
        "--port", str(PORT),
        "--vllm-pd-disaggregation",
        "--kv-connector", "nixl",
        "--service-discovery",
        "--service-discovery-namespace", namespace,
        "--service-discovery-port", str(PORT),
        "--prefill-selector", *pairs(prefill),
        "--decode-selector", *pairs(decode),
        "--prefill-policy", "cache_aware",
        "--decode-policy", "power_of_two",
        "--prometheus-host", "0.0.0.0",
        "--prometheus-port", str(ROUTER_METRICS_PORT),
    ]  # fmt: skip
    return Router(
        name=f"{name}-router",
        image=router_image(choice),
        replicas=ROUTER_REPLICAS,
        port=PORT,
        metrics_port=ROUTER_METRICS_PORT,
        labels=dict(sorted(labels.items())),
        node_selector={f"{NODE_LABEL_PREFIX}/pool": "system"},
        cpu=ROUTER_CPU,
        memory_gib=ROUTER_MEMORY_GIB,
        args=args,
    )


def build_disaggregation(
    choice: Choice,
    weights_gib: float,
    cold: ColdStart,
    workload_labels: dict[str, str],
    namespace: str,
    served_model_name: str,
    kv_backend: str,
) -> Disaggregation | None:
    """The region's disaggregated serving, or None when it serves aggregated (`kv_backend`:
    NIXL's, from the region's fabric)."""
    pool = choice.prefill
    if pool is None:
        return None
    pre = prefill_choice(choice, pool)
    prefill_labels = {**workload_labels, ROLE_LABEL: "prefill"}
    decode_labels = {**workload_labels, ROLE_LABEL: "decode"}
    prompt, prefill_s, moved_s = percentile_prompt(choice, pool)
    p = choice.plan.slo.percentile
    return Disaggregation(
        connector=CONNECTOR,
        kv_backend=kv_backend,
        nixl_side_channel_port=NIXL_SIDE_CHANNEL_PORT,
        role_label=ROLE_LABEL,
        prometheus_role_label=PROMETHEUS_ROLE_LABEL,
        prefill_labels=dict(sorted(prefill_labels.items())),
        decode_labels=dict(sorted(decode_labels.items())),
        kv_transfer_ms=round(moved_s * 1000, 2),
        kv_prompt_tokens=prompt,
        prompt_prefill_ms=round(prefill_s * 1000, 1),
        prefill=PrefillPoolPlan(
            tensor_parallel_size=pool.tp,
            replicas=pool.replicas,
            nodes=pool.nodes,
            serving=with_kv_transfer(build_serving(pre, weights_gib, cold), kv_backend),
            autoscaling=build_prefill_autoscaling(
                choice, pool, namespace, served_model_name, cold.container_s
            ),
            requests_per_s=round(pool.capacity_requests_per_s, 3),
            kv_cache_tokens=pool.sizing.memory.kv_cache_tokens,
        ),
        router=build_router(
            choice, namespace, {k: prefill_labels[k] for k in sorted(prefill_labels)},
            {k: decode_labels[k] for k in sorted(decode_labels)},
        ),
        reasons=[
            f"disaggregated: {pool.replicas.desired} prefill replicas ({pool.shape.label}) "
            f"and {choice.replicas.desired} decode replicas ({choice.layout.label}) cost less "
            "than any aggregated candidate: no prompt chunk rides a decode step, so a decode "
            f"step ({choice.sizing.point.decode_s * 1000:.1f} ms at "
            f"{choice.sizing.running:.0f} running sequences) is the token gap",
            f"TTFT p{p:g}: the p{p:g} prompt ({prompt:,} tokens) prefills in "
            f"{prefill_s * 1000:.0f} ms and its KV reaches the decode pool in "
            f"{moved_s * 1000:.1f} ms over {pool.link.name.upper()} (NIXL {kv_backend}); "
            f"TTFT at the peak is the distribution of both pools' waits, every prompt's own "
            "prefill and its KV's transfer",
            "vLLM's docs: disaggregation controls tail ITL and sizes each phase for its SLO; "
            "it does not add throughput by itself (docs/features/disagg_prefill.md)",
            f"the router ({ROUTER_IMAGE}) finds both pools' pods through the Kubernetes API "
            f"by their {ROLE_LABEL} label",
        ],
    )
