"""Render a FleetPlan into the files a reviewer reads and Pulumi deploys.

Per region: `vllm-config.yaml` (the `vllm serve --config` file, exactly `serving.vllm`) and
one Kubernetes object per file (Namespace, ConfigMap, Deployment, Service,
PodDisruptionBudget, NetworkPolicy, ServiceMonitor, KEDA ScaledObject); per stack a
`REPORT.md`. Each YAML template is rendered, parsed, checked against the pinned vLLM
release (every config key a flag, every metric in a query a metric it exports), and dumped
back with sorted keys, so the same plan always gives byte-identical files and the files are
exactly the documents `components.VllmService` deploys.

The report's charts (`charts/*.svg`, deterministic SVG text) are drawn by charts.py.

Pure: templates are read from templates/, and their compiled code kept in `disk_memo`'s
folder (`CompiledTemplates`); nothing else is touched. Writing and comparing files (`write`,
`drift`) is in llmfleet/rendered_files.py, used by the CLI."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from llmfleet import disk_memo
from llmfleet.errors import RenderError
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.serving import image_notes
from llmfleet.outputs import charts, economics
from llmfleet.outputs.dashboard import dashboard
from llmfleet.outputs.day_chart import simulation_chart
from llmfleet.outputs.karpenter_manifests import KARPENTER_VERSION, karpenter_manifests
from llmfleet.outputs.router_checks import router_flag_problems, router_metric_problems
from llmfleet.outputs.simulation import report_context
from llmfleet.outputs.vllm_checks import (
    config_key_problems,
    metric_problems,
    prometheus_queries,
    resolution_problems,
)
from llmfleet.paths import TEMPLATES_DIR
from llmfleet.simulate.run import ReportDays

VLLM_CONFIG = "vllm-config.yaml"
VLLM_CONFIG_PREFILL = "vllm-config-prefill.yaml"


REPORT = "REPORT.md"


MANIFESTS = (
    "namespace",
    "serviceaccount",
    "configmap",
    "deployment",
    "service",
    "poddisruptionbudget",
    "networkpolicy",
    "servicemonitor",
    "scaledobject",
    "prometheusrule",
    "dashboard",
    "weights-configmap",
    "stager-serviceaccount",
    "stager-networkpolicy",
    "stage-weights",
)
"""One template and one file per Kubernetes object. The first object of each kind is the
server's (components.VllmService names the others by their suffix); the program orders them
by their dependencies, not by this list."""


ENTRY_MANIFESTS = ("ingress",)
"""Rendered after MANIFESTS in regions with an entry point (plan.dns)."""
HEALTH_INGRESS = "ingress-health"
"""With edge.auth: the unauthenticated /health Ingress of the same ALB."""
SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"
SCRIPTS = ("stage_weights.py", "verify_weights.py")
"""The weight-staging Job's and the init container's scripts, shipped in a ConfigMap."""
SCRIPTS_PATH = "/opt/llmfleet"
"""Where the pods mount them."""


MULTI_NODE_MANIFESTS = {"deployment": "leaderworkerset"}
"""Where a replica spans nodes, a LeaderWorkerSet runs the replicas instead of a Deployment."""
PEER_MANIFESTS = ("networkpolicy-peers",)
"""Rendered after the NetworkPolicy where a replica's pods talk to each other (NCCL's
bootstrap and torch.distributed across nodes)."""


DISAGGREGATED_MANIFESTS = {
    "configmap": ("configmap-prefill",),
    "deployment": (
        "deployment-prefill",
        "router-serviceaccount",
        "router-role",
        "router-rolebinding",
        "router-deployment",
    ),
    "service": ("service-engines",),
    "networkpolicy": ("networkpolicy-peers", "networkpolicy-router"),
    "scaledobject": ("scaledobject-prefill",),
}
"""Disaggregated: each rendered after the kind it follows (the prefill pool, the router)."""


PREFIX_ROUTER_MANIFESTS = (
    "prefix-router-serviceaccount",
    "prefix-router-role",
    "prefix-router-rolebinding",
    "prefix-router-service",
    "prefix-router-networkpolicy",
    "prefix-router-poddisruptionbudget",
    "ingress",
    "prefix-router-deployment",
    "prefix-router-servicemonitor",
    "prefix-router-prometheusrule",
)
"""With edge.balancing prefix_aware (`region.prefix_router`), deployed by
`components.prefix_router`: the router's objects and the API Ingress that targets it,
in apply order (its Service before the Ingress, its pods after it)."""


def manifest_kinds(region: RegionPlan) -> tuple[str, ...]:
    kinds: tuple[str, ...] = MANIFESTS
    if region.multi_node is not None:
        kinds = tuple(MULTI_NODE_MANIFESTS.get(k, k) for k in kinds)
        at = kinds.index("networkpolicy") + 1
        kinds = kinds[:at] + PEER_MANIFESTS + kinds[at:]
    if region.disaggregation is not None:
        kinds = tuple(k for kind in kinds for k in (kind, *DISAGGREGATED_MANIFESTS.get(kind, ())))
    entry = region.entry_point
    if entry is None:
        return kinds
    if region.prefix_router is not None:  # the API Ingress is the router's
        return kinds + (HEALTH_INGRESS,)
    return kinds + ENTRY_MANIFESTS + ((HEALTH_INGRESS,) if entry.health_paths else ())


@cache
def staging_scripts() -> dict[str, str]:
    return {name: (SCRIPTS_DIR / name).read_text() for name in SCRIPTS}


def staging_env(region: RegionPlan) -> dict[str, str]:
    """What both scripts read: where the copy is and which revision it must hold."""
    s = region.staging
    return {
        "LLMFLEET_BUCKET": s.bucket,
        "LLMFLEET_PREFIX": s.prefix,
        "LLMFLEET_MANIFEST_KEY": s.manifest_key,
        "LLMFLEET_REVISION": s.revision,
    }


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Stable YAML: no anchors/aliases, multi-line strings as literal blocks (libyaml's
    emitter where PyYAML has it: the same text as SafeDumper's, several times faster)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it (its manylinux and macOS wheels do): the same safe
types as SafeLoader, several times faster, and parsing the templates' output is most of the
time a render or a preview spends in YAML."""


def load_yaml(text: str) -> Any:
    """Parse a rendered template (our own output, never a user's file)."""
    return yaml.load(text, Loader=_LOADER)


def dump_yaml(data: Any) -> str:
    """The one YAML serialisation of every rendered file: sorted keys, block style."""
    text: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=4096
    )
    return text


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _num(value: float, digits: int | None = None) -> str:
    if digits is None:
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _usd(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def _pct(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}%}"


def _md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


FILTERS: dict[str, Any] = {
    "json": _json,
    "json_block": lambda value: json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False),
    "yaml": dump_yaml,
    "sha256": lambda text: hashlib.sha256(text.encode()).hexdigest(),
    "gib": lambda n: f"{n}Gi",
    "dirname": posixpath.dirname,
    "basename": posixpath.basename,
    "num": _num,
    "usd": _usd,
    "pct": _pct,
    "md": _md,
}
"""Every filter the templates may use, registered in one place."""


class CompiledTemplates(jinja2.BytecodeCache):
    """Jinja's compiled templates, kept on disk in `disk_memo`'s folder (`templates/`):
    compiling the templates is most of a `render` whose FleetPlan and days are read back
    (0.77 of 1.25 s for prod, on 2 cores). Jinja names an entry by the template and checks
    the template's source and the Python version it was compiled for; the entry's key adds
    jinja's version and llmfleet's own files (`disk_memo.key`), where `environment`'s lexer
    settings live, which jinja's check does not cover. `LLMFLEET_CACHE=off` compiles every
    time; an entry that cannot be read is compiled again, and one that cannot be written is
    skipped."""

    def _path(self, bucket: jinja2.bccache.Bucket) -> Path | None:
        folder = disk_memo.kind_dir("templates")
        name = disk_memo.key([jinja2.__version__, bucket.key])
        return None if folder is None else folder / f"{name}.cache"

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        path = self._path(bucket)
        if path is None:
            return
        try:
            bucket.bytecode_from_string(path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        path = self._path(bucket)
        if path is not None:
            disk_memo.store_bytes(path, bucket.bytecode_to_string())


@cache
def environment(templates_dir: Path = TEMPLATES_DIR) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        bytecode_cache=CompiledTemplates(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


def _template(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def vllm_config(region: RegionPlan, prefill: bool = False) -> str:
    """The region's `vllm serve --config` file (disaggregated: the decode pool's, or with
    `prefill` the prefill pool's)."""
    vllm = region.serving.vllm
    name = VLLM_CONFIG
    if prefill:
        assert region.disaggregation is not None
        vllm, name = region.disaggregation.prefill.serving.vllm, VLLM_CONFIG_PREFILL
    args = load_yaml(_template("vllm-config.yaml.j2", vllm=vllm))
    problems = config_key_problems(args)
    if problems:
        raise RenderError(f"{region.region}/{name}:\n  " + "\n  ".join(problems))
    return dump_yaml(args)


def _context(fleet: FleetPlan, region: RegionPlan) -> dict[str, Any]:
    """What every Kubernetes template of the region may read."""
    return {
        "fleet": fleet,
        "region": region,
        "serving": region.serving,
        "workload": region.workload,
        "autoscaling": region.autoscaling,
        "vllm_config": vllm_config(region),
        "prefill_config": vllm_config(region, prefill=True) if region.disaggregation else "",
        "dashboard": dashboard(fleet, region),
        "staging_scripts": staging_scripts(),
        "staging_scripts_path": SCRIPTS_PATH,
        "staging_env": staging_env(region),
    }


def region_manifests(fleet: FleetPlan, region: RegionPlan) -> list[dict[str, Any]]:
    """The region's Kubernetes objects, parsed, in apply order (MANIFESTS)."""
    context = _context(fleet, region)
    docs = [
        load_yaml(_template(f"kubernetes/{kind}.yaml.j2", **context))
        for kind in manifest_kinds(region)
    ]
    problems = metric_problems(prometheus_queries(docs)) + resolution_problems(region)
    if problems:
        raise RenderError(f"{region.region} queries:\n  " + "\n  ".join(problems))
    return docs


def prefix_router_manifests(fleet: FleetPlan, region: RegionPlan) -> list[dict[str, Any]]:
    """The cache-aware router's objects, parsed, in apply order (PREFIX_ROUTER_MANIFESTS);
    none without `region.prefix_router`. Its alerts read the router's metrics, checked
    against the pinned vllm-router's (`fleetplan.prefix_router.ROUTER_METRICS`)."""
    if region.prefix_router is None:
        return []
    context = _context(fleet, region)
    docs = [load_yaml(_template(f"kubernetes/{kind}.yaml.j2", **context))
            for kind in PREFIX_ROUTER_MANIFESTS]
    problems = router_flag_problems(region.prefix_router.args) + router_metric_problems(
        prometheus_queries(docs))
    if problems:
        raise RenderError(f"{region.region} router:\n  " + "\n  ".join(problems))
    return docs


def region_files(fleet: FleetPlan, region: RegionPlan) -> dict[str, str]:
    """`<region>/<file>` -> text for one region."""
    files = {f"{region.region}/{VLLM_CONFIG}": vllm_config(region)}
    if region.disaggregation is not None:
        files[f"{region.region}/{VLLM_CONFIG_PREFILL}"] = vllm_config(region, prefill=True)
    for kind, doc in zip(manifest_kinds(region), region_manifests(fleet, region), strict=True):
        files[f"{region.region}/{kind}.yaml"] = dump_yaml(doc)
    if region.prefix_router is not None:
        routed = zip(PREFIX_ROUTER_MANIFESTS, prefix_router_manifests(fleet, region), strict=True)
        for kind, doc in routed:
            files[f"{region.region}/{kind}.yaml"] = dump_yaml(doc)
    for stem, doc in karpenter_manifests(fleet, region).items():
        files[f"{region.region}/{stem}.yaml"] = dump_yaml(doc)
    return files


def render_stack(
    fleet: FleetPlan, drawn: Mapping[str, str] | None = None,
    simulated: ReportDays | str | None = None,
) -> dict[str, str]:
    """Every file of a stack, relative to rendered/<env>/, sorted by path: a template pass
    over the FleetPlan and, when given, the simulator's days for the report
    (`simulate.run.report_simulation`: its days, or why the fleet is not simulated). `drawn`:
    charts already on disk, reused where their stamp matches (`drawn_charts`)."""
    files: dict[str, str] = {}
    per_region: dict[str, list[str]] = {}
    for region in fleet.regions:
        produced = region_files(fleet, region)
        files.update(produced)
        per_region[region.region] = sorted(produced)
    files.update(charts.chart_files(fleet, drawn))
    review = review_context(fleet)
    days = None
    unsimulated = simulated if isinstance(simulated, str) else None
    if isinstance(simulated, ReportDays):
        shown = [simulated.spike] + ([simulated.loss] if simulated.loss is not None else [])
        chart, svg = simulation_chart(shown, drawn)
        files[chart.path] = svg
        days = report_context(simulated)
        days["chart"] = chart
    files[REPORT] = _template(
        "REPORT.md.j2",
        fleet=fleet,
        files=per_region,
        review=review,
        simulated=days,
        unsimulated=unsimulated,
        fleet_karpenter_version=KARPENTER_VERSION,
        image_notes=image_notes(fleet.startup),
    )
    return dict(sorted(files.items()))


def drawn_charts(root: Path) -> dict[str, str]:
    """The charts under `root` (rendered/<env>/), by their path relative to it."""
    folder = root / charts.CHARTS_DIR
    if not folder.is_dir():
        return {}
    return {f"{charts.CHARTS_DIR}/{p.name}": p.read_text() for p in sorted(folder.glob("*.svg"))}


def review_context(fp: FleetPlan) -> dict[str, Any]:
    """The report's charts, cost per token and price provenance (its review block)."""
    per_mtok = economics.gpu_usd_per_million_output_tokens
    return {
        "charts": charts.chart_index(fp),
        "prices": economics.price_notes(fp),
        "usd_per_mtok": {
            name: {load: per_mtok(fp, rp, load) for load in ("peak", "trough")}
            for name, rp in [("fleet", None), *((r.region, r) for r in fp.regions)]
        },
    }
