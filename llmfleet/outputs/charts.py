"""The report's charts as deterministic SVG text, drawn with matplotlib from FleetPlan numbers.

Charts live beside REPORT.md (`charts/*.svg`) and are committed with the rest of rendered/,
so they must diff cleanly: fixed figure sizes and fonts, text kept as text
(`svg.fonttype: none`), a fixed `svg.hashsalt` for element ids, and no date or version in
the metadata. matplotlib is imported only when a chart is drawn (its import is slow), and a
chart is drawn once per process for a given set of numbers. Each file carries a stamp of
what drew it (its numbers, matplotlib's version and this module's code), so `llmfleet
render` reuses a file on disk whose stamp matches instead of drawing it again (`render
--check` always draws).

Nothing is computed here: the load curve is `RegionPlan.batch_curve` (predicted.py), the
memory split is `RegionPlan.memory`, the costs are the RegionPlan's."""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan

CHARTS_DIR = "charts"
STYLE: dict[str, Any] = {
    "svg.hashsalt": "llmfleet",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8.0,
    "axes.titlesize": 9.0,
    "figure.dpi": 72.0,
    "savefig.dpi": 72.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
METADATA: dict[str, str | None] = {"Date": None, "Creator": None}
"""No timestamp and no matplotlib version in the file: re-renders are byte-identical."""
SLO_COLOR = "#c0392b"
POINT_COLOR = "#1f4e79"
MEMORY_PARTS = (
    ("weights", "#1f77b4"),
    ("activation peak", "#ff7f0e"),
    ("non-torch", "#9467bd"),
    ("KV pool", "#2ca02c"),
    ("unused", "#d9d9d9"),
)


@dataclass(frozen=True)
class Chart:
    path: str  # relative to rendered/<env>/
    title: str
    region: str | None  # None: one chart for the whole fleet


def chart_index(fp: FleetPlan) -> list[Chart]:
    """Every chart of a stack, in the order the report shows them."""
    charts = [
        Chart(f"{CHARTS_DIR}/cost.svg", "Monthly cost by region at the peak and the trough", None),
        Chart(f"{CHARTS_DIR}/memory.svg", "GPU memory per GPU: weights, runtime, KV pool", None),
    ]
    charts += [
        Chart(
            f"{CHARTS_DIR}/{rp.region}-batch.svg",
            f"{rp.region}: ITL, TTFT and throughput against the load per replica",
            rp.region,
        )
        for rp in fp.regions
    ]
    return charts


def chart_files(fp: FleetPlan, drawn: Mapping[str, str] | None = None) -> dict[str, str]:
    """`charts/<name>.svg` -> SVG text for every chart of `chart_index`. `drawn`: the files
    already on disk (same paths); one whose stamp matches is kept rather than drawn again."""
    files: dict[str, str] = {}
    for chart in chart_index(fp):
        if chart.region is None:
            kind = "cost" if chart.path.endswith("cost.svg") else "memory"
            spec = _cost_spec(fp) if kind == "cost" else _memory_spec(fp)
        else:
            kind, spec = "batch", _batch_spec(fp, fp.region(chart.region))
        spec_json = json.dumps(spec, sort_keys=True)
        stamp = _stamp(kind, spec_json)
        old = (drawn or {}).get(chart.path)
        files[chart.path] = old if old and stamp_of(old) == stamp else _svg(kind, spec_json)
    return files


STAMP = "<!-- llmfleet chart "


@lru_cache(maxsize=1)
def _drawer() -> str:
    """What draws a chart besides its numbers: matplotlib's release and this module."""
    return version("matplotlib") + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _stamp(kind: str, spec_json: str) -> str:
    return hashlib.sha256(f"{kind}\n{spec_json}\n{_drawer()}".encode()).hexdigest()[:16]


def stamp_of(svg: str) -> str | None:
    """The stamp on a drawn chart's second line (after the XML declaration), if any."""
    lines = svg.split("\n", 2)
    if len(lines) < 2 or not lines[1].startswith(STAMP):
        return None
    return lines[1].removeprefix(STAMP).removesuffix(" -->")


# --- what each chart shows (plain numbers, the cache key) -----------------------------------


def _label(rp: RegionPlan) -> str:
    return f"{rp.region}\n{rp.instance_type} TP {rp.tensor_parallel_size}"


def _cost_spec(fp: FleetPlan) -> dict[str, Any]:
    return {
        "labels": [_label(rp) for rp in fp.regions],
        "peak": [rp.monthly_cost_usd for rp in fp.regions],
        "trough": [rp.monthly_cost_usd_at_trough for rp in fp.regions],
    }


def _memory_spec(fp: FleetPlan) -> dict[str, Any]:
    parts = []
    for rp in fp.regions:
        m = rp.memory
        used = m.weights_gib_per_gpu + m.activation_gib + m.non_torch_gib + m.kv_cache_gib_per_gpu
        unused = max(0.0, m.gpu_total_gib - used)
        parts.append(
            [
                m.weights_gib_per_gpu,
                m.activation_gib,
                m.non_torch_gib,
                m.kv_cache_gib_per_gpu,
                round(unused, 2),
            ]
        )
    return {"labels": [_label(rp) for rp in fp.regions], "parts": parts}


def _batch_spec(fp: FleetPlan, rp: RegionPlan) -> dict[str, Any]:
    curve = rp.batch_curve
    return {
        "title": f"{rp.region}: {rp.instance_type}, {rp.replica.layout.label}, "
        f"{fp.model.id} {fp.model.precision}",
        "percentile": fp.slo.percentile,
        "itl": "token gap" if fp.slo.itl == "token_gap" else "TPOT",
        "load": [p.requests_per_s for p in curve],
        "itl_ms": [p.itl_ms for p in curve],
        "ttft_ms": [p.ttft_ms for p in curve],
        "tokens_per_s": [p.output_tokens_per_s for p in curve],
        "slo_itl_ms": fp.slo.itl_ms,
        "slo_ttft_ms": fp.slo.ttft_ms,
        "operating": next(k for k, p in enumerate(curve) if p.operating),
    }


# --- drawing --------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _svg(kind: str, spec_json: str) -> str:
    import matplotlib

    with matplotlib.rc_context(cast(Any, STYLE)):
        out = io.StringIO()
        _figure(kind, json.loads(spec_json)).savefig(out, format="svg", metadata=METADATA)
    declaration, rest = out.getvalue().split("\n", 1)
    text = f"{declaration}\n{STAMP}{_stamp(kind, spec_json)} -->\n{rest}"
    return text if text.endswith("\n") else text + "\n"


def _figure(kind: str, spec: dict[str, Any]) -> Any:
    """The figure of one chart. Fixed sizes and margins: an automatic layout would take longer
    than the drawing and could move with the text."""
    from matplotlib.figure import Figure

    if kind == "batch":
        fig = Figure(figsize=(10.0, 3.0))
        fig.subplots_adjust(left=0.05, right=0.99, bottom=0.15, top=0.82, wspace=0.22)
        _draw_batch(fig, spec)
    elif kind == "memory":
        height = 1.3 + 0.55 * len(spec["labels"])
        fig = Figure(figsize=(8.0, height))
        fig.subplots_adjust(left=0.2, right=0.98, bottom=0.9 / height, top=1 - 0.35 / height)
        _draw_memory(fig, spec)
    else:
        fig = Figure(figsize=(8.0, 3.0))
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.17, top=0.9)
        _draw_cost(fig, spec)
    return fig


def _draw_batch(fig: Any, spec: dict[str, Any]) -> None:
    load = spec["load"]
    k = spec["operating"]
    pct = f"p{spec['percentile']:g}"
    ttft = [math.nan if v is None else v for v in spec["ttft_ms"]]
    itl = [math.nan if v is None else v for v in spec["itl_ms"]]
    panels = (
        (f"ITL ({spec['itl']}) {pct}, ms", itl, spec["slo_itl_ms"]),
        (f"TTFT {pct}, ms", ttft, spec["slo_ttft_ms"]),
        ("output tokens/s per replica", spec["tokens_per_s"], None),
    )
    axes = fig.subplots(1, 3, sharex=True)
    for ax, (name, ys, slo) in zip(axes, panels, strict=True):
        ax.plot(load, ys, color="#555555", linewidth=1.2)
        if slo is not None:
            ax.axhline(slo, color=SLO_COLOR, linestyle="--", linewidth=1.0, label=f"SLO {slo:g}")
            ax.set_ylim(0, max(2.0 * slo, 1.15 * (ys[k] if math.isfinite(ys[k]) else slo)))
        else:
            ax.set_ylim(0, 1.1 * max(ys))
        ax.plot([load[k]], [ys[k]], "o", color=POINT_COLOR,
                label=f"SLO limit {load[k]:.3g} req/s: {ys[k]:,.0f}")
        ax.set_title(name)
        ax.set_xlabel("requests/s per replica")
        ax.set_xlim(0, max(load))
        ax.legend(loc="upper left", frameon=False)
    fig.suptitle(spec["title"], fontsize=9)


def _draw_memory(fig: Any, spec: dict[str, Any]) -> None:
    ax = fig.subplots()
    labels = spec["labels"]
    rows = list(range(len(labels)))
    left = [0.0] * len(labels)
    for j, (name, color) in enumerate(MEMORY_PARTS):
        widths = [parts[j] for parts in spec["parts"]]
        ax.barh(rows, widths, left=left, color=color, label=name, height=0.6)
        for row, (x0, w) in enumerate(zip(left, widths, strict=True)):
            if w >= 6:
                ax.text(x0 + w / 2, row, f"{w:.1f}", ha="center", va="center", fontsize=7)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(rows, labels)
    ax.invert_yaxis()
    ax.set_xlabel("GiB per GPU")
    ax.set_xlim(0, 1.02 * max(left))
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.5 / len(labels) - 0.1), ncol=5, frameon=False
    )
    ax.set_title("GPU memory per GPU at the operating point (vLLM's start-up accounting)")


def _draw_cost(fig: Any, spec: dict[str, Any]) -> None:
    ax = fig.subplots()
    labels = spec["labels"]
    xs = list(range(len(labels)))
    width = 0.38
    for shift, key, color, name in (
        (-width / 2, "peak", "#1f4e79", "peak (desired nodes)"),
        (width / 2, "trough", "#8fb3d9", "trough (min nodes)"),
    ):
        values = spec[key]
        ax.bar([x + shift for x in xs], values, width=width, color=color, label=name)
        for x, v in zip(xs, values, strict=True):
            ax.text(x + shift, v, f"${v / 1000:,.0f}k", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs, labels)
    ax.set_ylabel("USD per month")
    ax.set_ylim(0, 1.3 * max(spec["peak"]))
    ax.yaxis.set_major_formatter(lambda v, _pos: f"${v / 1000:,.0f}k")
    ax.legend(loc="upper left", ncol=2, frameon=False)
    ax.set_title("Monthly cost by region (730 h at the price in the report)")
