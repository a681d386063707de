"""Before/after charts for `llmfleet diff --charts DIR`, drawn beside the markdown.

`fleet.svg`: per region GPUs at the peak and the monthly cost at the peak and the trough,
before and after. `<region>-batch.svg`, for a region on both sides: ITL, TTFT and
throughput against the running batch, the old curve and operating point beside the new,
with each side's SLO. Deterministic SVG in the report's style (charts.py: text kept as
text, a fixed hash salt, no date or version); nothing is computed here, every number is
one of the two FleetPlans'."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any, cast

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.predicted import BatchPoint
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs.charts import METADATA, SLO_COLOR, STYLE

BEFORE, AFTER = "#9aa5b1", "#1f4e79"


def chart_files(before: FleetPlan, after: FleetPlan, base: str, head: str) -> dict[str, str]:
    """File name -> SVG text; `base` and `head` label the two sides."""
    files = {"fleet.svg": _svg((10.0, 3.2), lambda fig: _fleet(fig, before, after, base, head))}
    olds = {r.region: r for r in before.regions}
    for new in after.regions:
        old = olds.get(new.region)
        if old is not None:
            files[f"{new.region}-batch.svg"] = _svg(
                (10.0, 3.0), _batch_drawer(before, after, old, new, base, head)
            )
    return files


def _batch_drawer(
    before: FleetPlan, after: FleetPlan, old: RegionPlan, new: RegionPlan, base: str, head: str
) -> Callable[[Any], None]:
    def draw(fig: Any) -> None:
        _batch(fig, before, after, old, new, base, head)

    return draw


def chart_titles(files: dict[str, str]) -> list[tuple[str, str]]:
    """(title, file name) for the markdown, in file order."""
    out = []
    for name in files:
        if name == "fleet.svg":
            out.append(("GPUs and monthly cost by region, before and after", name))
        else:
            region = name.removesuffix("-batch.svg")
            out.append((f"{region}: ITL, TTFT and throughput against the batch", name))
    return out


def _svg(size: tuple[float, float], draw: Callable[[Any], None]) -> str:
    import matplotlib

    with matplotlib.rc_context(cast(Any, STYLE)):
        out = io.StringIO()
        figure(size, draw).savefig(out, format="svg", metadata=METADATA)
    text = out.getvalue()
    return text if text.endswith("\n") else text + "\n"


def figure(size: tuple[float, float], draw: Callable[[Any], None]) -> Any:
    """One diff chart's figure (call inside the STYLE rc_context)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.2, top=0.78, wspace=0.3)
    draw(fig)
    return fig


LEGEND_CHARS = 60
"""A side's label longer than this is cut from the left (`…` and the last characters): a
revision and path can be any length, the legend has half the figure's width per side."""


def _shown(label: str) -> str:
    return label if len(label) <= LEGEND_CHARS else "…" + label[-(LEGEND_CHARS - 1) :]


def _legend(fig: Any) -> None:
    """One legend for the figure, under its title: the two sides (labels that name a
    revision or a path do not fit a third of the width, inside a panel)."""
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, [_shown(x) for x in labels], loc="upper center",
               bbox_to_anchor=(0.5, 0.93), ncol=2, frameon=False, fontsize=7)


def _fleet(fig: Any, before: FleetPlan, after: FleetPlan, base: str, head: str) -> None:
    names = [r.region for r in after.regions]
    names += [r.region for r in before.regions if r.region not in names]
    sides = ({r.region: r for r in before.regions}, {r.region: r for r in after.regions})

    def values(get: Callable[[RegionPlan], float]) -> tuple[list[float], list[float]]:
        b, a = ([get(s[n]) if n in s else 0.0 for n in names] for s in sides)
        return b, a

    panels = (
        ("GPUs at the peak", values(lambda r: r.nodes.desired * r.gpus_per_node), "{:,.0f}"),
        ("$ per month at the peak", values(lambda r: r.billed_monthly_cost_usd), "${:,.0f}"),
        (
            "$ per month at the trough",
            values(lambda r: r.billed_monthly_cost_usd_at_trough),
            "${:,.0f}",
        ),
    )
    xs = list(range(len(names)))
    width = 0.38
    for ax, (title, (b, a), fmt) in zip(fig.subplots(1, 3), panels, strict=True):
        for shift, vals, color, label in (
            (-width / 2, b, BEFORE, base),
            (width / 2, a, AFTER, head),
        ):
            ax.bar([x + shift for x in xs], vals, width=width, color=color, label=label)
        ax.set_xticks(xs, names)
        ax.set_ylim(0, 1.25 * max([*b, *a, 1.0]))
        ax.yaxis.set_major_formatter(lambda v, _pos, f=fmt: f.format(v))
        ax.set_title(title)
    _legend(fig)
    fig.suptitle(f"{_shown(base)} → {_shown(head)}", fontsize=9)


def _batch(
    fig: Any,
    before: FleetPlan,
    after: FleetPlan,
    old: RegionPlan,
    new: RegionPlan,
    base: str,
    head: str,
) -> None:
    panels: tuple[
        tuple[str, Callable[[BatchPoint], float | None], Callable[[FleetPlan], float] | None],
        ...,
    ] = (
        ("ITL at the percentile, ms", lambda p: p.itl_ms, lambda f: f.slo.itl_ms),
        ("TTFT at the percentile, ms", lambda p: p.ttft_ms, lambda f: f.slo.ttft_ms),
        ("output tokens/s per replica", lambda p: p.output_tokens_per_s, None),
    )
    top = 0.0
    for ax, (title, get, slo) in zip(fig.subplots(1, 3), panels, strict=True):
        peak = 0.0
        for fp, rp, color, label, style in (
            (before, old, BEFORE, base, "--"),
            (after, new, AFTER, head, "-"),
        ):
            xs = [p.requests_per_s for p in rp.batch_curve]
            ys = [math.nan if (v := get(p)) is None else v for p in rp.batch_curve]
            ax.plot(xs, ys, style, color=color, linewidth=1.2, label=f"{label}: {_config(rp)}")
            op = next(p for p in rp.batch_curve if p.operating)
            y = get(op)
            if y is not None:
                ax.plot([op.requests_per_s], [y], "o", color=color)
            peak = max([peak, *(v for v in ys if math.isfinite(v))])
            if slo is not None:
                ax.axhline(slo(fp), color=SLO_COLOR, linestyle=style, linewidth=0.8)
                peak = max(peak, slo(fp))
            top = max(top, *xs)
        ax.set_ylim(0, 1.15 * peak if peak > 0 else 1.0)
        ax.set_title(title)
        ax.set_xlabel("requests/s per replica")
    _legend(fig)
    for ax in fig.axes:
        ax.set_xlim(0, top)
    fig.suptitle(f"{new.region}: {base} → {head} (dots: the SLO-limit rate; red: the SLOs)",
                 fontsize=9)


def _config(rp: RegionPlan) -> str:
    return f"{rp.instance_type} {rp.replica.layout.label}"
