"""A Grafana dashboard of one region's fleet: the SLO targets beside what vLLM measures, the
load and KV pressure that drive autoscaling, and the GPUs under it (DCGM exporter).

Every panel reads a metric the pinned vLLM release exports (`render` checks the names as it
checks KEDA's queries) or a DCGM exporter default counter; the SLO lines are the plan's."""

from __future__ import annotations

from typing import Any

from llmfleet.fleetplan.alerts import ITL_METRICS, TTFT_METRIC
from llmfleet.fleetplan.autoscaling import selector
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan

DCGM_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE")
"""DCGM exporter default counters (etc/default-counters.csv of dcgm-exporter 4.8.2)."""
DCGM_LABELS = ("util %", "FB used MiB", "power W")
PANEL_WIDTH = 12
PANEL_HEIGHT = 8


def _panel(k: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "id": k + 1,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "gridPos": {
            "h": PANEL_HEIGHT,
            "w": PANEL_WIDTH,
            "x": (k % 2) * PANEL_WIDTH,
            "y": (k // 2) * PANEL_HEIGHT,
        },
        "targets": [
            {"expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
            for i, (legend, expr) in enumerate(targets)
        ],
    }


Panel = tuple[str, str, list[tuple[str, str]]]


def panel_queries(fleet: FleetPlan, region: RegionPlan) -> list[Panel]:
    """(title, unit, [(legend, PromQL)]) of every panel, in order."""
    slo, w = fleet.slo, "5m"
    sel = selector(region.workload.namespace, region.serving.vllm.served_model_name)
    q = slo.percentile / 100
    itl = ITL_METRICS[slo.itl]
    gpu_sel = '{Hostname=~".+",modelName=~".+"}'
    work = region.workload
    replicas = (
        "max(kube_deployment_spec_replicas"
        f'{{namespace="{work.namespace}",deployment="{work.name}"}})'
        if work.kind == "Deployment"  # a LeaderWorkerSet is seen through KEDA's HPA
        else "max(kube_horizontalpodautoscaler_status_current_replicas"
        f'{{namespace="{work.namespace}",horizontalpodautoscaler="keda-hpa-{work.name}"}})'
    )
    return [
        (f"TTFT p{slo.percentile:g} vs SLO", "s", [
            (f"p{slo.percentile:g}", f"histogram_quantile({q:g}, sum by (le) "
             f"(rate({TTFT_METRIC}_bucket{sel}[{w}])))"),
            ("SLO", f"vector({slo.ttft_ms / 1000:g})"),
        ]),
        (f"ITL ({slo.itl}) p{slo.percentile:g} vs SLO", "s", [
            (f"p{slo.percentile:g}", f"histogram_quantile({q:g}, sum by (le) "
             f"(rate({itl}_bucket{sel}[{w}])))"),
            ("SLO", f"vector({slo.itl_ms / 1000:g})"),
        ]),
        ("Requests running and waiting", "short", [
            ("running", f"sum(vllm:num_requests_running{sel})"),
            ("waiting", f"sum(vllm:num_requests_waiting{sel})"),
        ]),
        ("KV cache use per replica", "percentunit", [
            ("{{pod}}", f"max by (pod) (vllm:kv_cache_usage_perc{sel})"),
        ]),
        ("Throughput", "short", [
            ("requests/s", f"sum(rate(vllm:request_success_total{sel}[{w}]))"),
            ("output tokens/s", f"sum(rate(vllm:generation_tokens_total{sel}[{w}]))"),
            ("planned peak requests/s", f"vector({region.peak_requests_per_s:g})"),
        ]),
        ("Preemptions/s", "short", [
            ("preemptions", f"sum(rate(vllm:num_preemptions_total{sel}[{w}]))"),
        ]),
        ("Replicas", "short", [
            ("replicas", replicas),
            ("max", f"vector({region.replicas.max})"),
            ("min", f"vector({region.replicas.min})"),
        ]),
        ("GPU utilisation and memory (DCGM)", "short", [
            (f"{label} {{{{Hostname}}}} gpu {{{{gpu}}}}", f"{metric}{gpu_sel}")
            for label, metric in zip(DCGM_LABELS, DCGM_METRICS, strict=True)
        ]),
    ]


def dashboard(fleet: FleetPlan, region: RegionPlan) -> dict[str, Any]:
    """The dashboard JSON model (Grafana schema 39), deterministic: no ids from a clock."""
    panels = [
        _panel(k, title, unit, targets)
        for k, (title, unit, targets) in enumerate(panel_queries(fleet, region))
    ]
    return {
        "uid": f"llmfleet-{fleet.name}-{region.region}"[:40],
        "title": f"{fleet.name} {region.region}: vLLM fleet",
        "tags": ["llmfleet", "vllm"],
        "schemaVersion": 39,
        "editable": False,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus",
                 "label": "Prometheus"}
            ]
        },
        "panels": panels,
    }
