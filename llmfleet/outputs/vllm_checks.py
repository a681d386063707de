"""Checks of what is rendered against the pinned vLLM release: every config key is a flag it
takes, every metric a query reads is one it exports, and every quantile a threshold needs
resolves in its histogram buckets."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from llmfleet.catalog.vllm_release import quantile_problem, vllm_release
from llmfleet.fleetplan.region import RegionPlan

METRIC_NAME = re.compile(r"\bvllm:[A-Za-z_][A-Za-z0-9_:]*")


def _option_strings() -> set[str]:
    flags = vllm_release()["flags"]
    names = set(flags)
    for spec in flags.values():
        names.update(spec.get("aliases", []), spec.get("hidden_aliases", []))
    return names


def config_key_problems(args: Mapping[str, Any]) -> list[str]:
    """Keys of a `vllm serve --config` file the pinned release would reject or drop."""
    catalog = vllm_release()
    options = _option_strings()
    stale = catalog["stale_last_seen"]
    problems = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if flag not in options:
            seen = f" (last seen in vLLM {stale[flag]})" if flag in stale else ""
            problems.append(f"{key}: not a flag of vLLM {catalog['version']}{seen}")
        elif value is False and "--no-" + flag[2:] not in options:
            problems.append(f"{key}: false is silently dropped (vLLM has no --no-{flag[2:]})")
    return problems


def metric_problems(queries: Iterable[str]) -> list[str]:
    """Metric names in PromQL queries that the pinned release does not export."""
    catalog = vllm_release()
    series = {s for spec in catalog["metrics"].values() for s in spec["series"]}
    stale = catalog["stale_last_seen"]
    problems = []
    for query in queries:
        for name in METRIC_NAME.findall(query):
            if name in series:
                continue
            base = re.sub(r"_(bucket|sum|count|total)$", "", name)
            seen = next(
                (f" (last seen in vLLM {stale[n]})" for n in (name, base) if n in stale), ""
            )
            problems.append(f"{name}: not a metric of vLLM {catalog['version']}{seen}")
    return problems


def resolution_problems(region: RegionPlan) -> list[str]:
    """Quantile triggers whose threshold the histogram's buckets (the release's defaults or
    the config's --custom-histogram-buckets) cannot resolve."""
    custom = region.serving.vllm.custom_histogram_buckets
    problems = []
    for trigger in region.autoscaling.triggers:
        if trigger.quantile is None:
            continue
        problem = quantile_problem(trigger.metric, trigger.threshold, custom)
        if problem:
            problems.append(f"trigger {trigger.name}: {problem}")
    return problems


def prometheus_queries(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every Prometheus query among `docs`: ScaledObject triggers, PrometheusRule rules and
    the dashboard's panels."""
    docs = list(docs)
    triggers = [
        t["metadata"]["query"]
        for d in docs
        if d.get("kind") == "ScaledObject"
        for t in d["spec"]["triggers"]
        if t["type"] == "prometheus"
    ]
    rules = [
        r["expr"]
        for d in docs
        if d.get("kind") == "PrometheusRule"
        for g in d["spec"]["groups"]
        for r in g["rules"]
    ]
    panels = [
        t["expr"]
        for d in docs
        if d.get("kind") == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]
        for text in d["data"].values()
        for p in json.loads(text)["panels"]
        for t in p["targets"]
    ]
    return triggers + rules + panels
