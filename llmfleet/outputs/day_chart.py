"""The report's day chart (`charts/day.svg`): per minute, the share of requests outside the
SLO and the Ready replicas and nodes of every region, for the simulated days with the default
spike and the worst single-region loss (`simulate.report_days`).

Drawn like the other charts (`charts.STYLE`, no date, text as text) and stamped the same way,
but with its own stamp (this module's code, matplotlib's release, its numbers), so a change
here redraws only this chart. Nothing is computed: the numbers are the `Simulation`'s."""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

from llmfleet.outputs.charts import CHARTS_DIR, METADATA, SLO_COLOR, STAMP, STYLE, Chart, stamp_of
from llmfleet.simulate.result import Simulation

DAY_CHART = Chart(
    f"{CHARTS_DIR}/day.svg",
    "Through the day (simulated): requests outside the SLO and Ready replicas per minute",
    None,
)
REGION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
FLOOR = 1e-5
"""The smallest share outside the SLO the log axis shows (0 is drawn at it)."""


def simulation_chart(
    sims: list[Simulation], drawn: Mapping[str, str] | None = None
) -> tuple[Chart, str]:
    """The day chart of these simulated days, reused from `drawn` when its stamp matches."""
    spec_json = json.dumps(_spec(sims), sort_keys=True)
    stamp = _stamp(spec_json)
    old = (drawn or {}).get(DAY_CHART.path)
    return DAY_CHART, old if old and stamp_of(old) == stamp else _svg(spec_json)


@lru_cache(maxsize=1)
def _drawer() -> str:
    return version("matplotlib") + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _stamp(spec_json: str) -> str:
    return hashlib.sha256(f"day\n{spec_json}\n{_drawer()}".encode()).hexdigest()[:16]


def _sig(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def _outside(attainment: list[float | None]) -> list[float | None]:
    return [_sig(None if a is None else 1 - a) for a in attainment]


def _spec(sims: list[Simulation]) -> dict[str, Any]:
    days = []
    for sim in sims:
        spans = []
        for e in sim.events:
            h, m = (int(x) for x in e.start.split(":")[:2])
            start = h + m / 60
            length = (e.recovery_s if e.recovery_s is not None else (24 - start) * 3600) / 3600
            spans.append([start, start + max(length, 1 / 60)])
        days.append({
            "label": "; ".join(sim.events_text) or sim.scenario,
            "spans": spans,
            "fleet": _outside(sim.minutes.attainment),
            "regions": {
                r.region: {
                    "outside": _outside(r.minutes.attainment),
                    "ready": r.minutes.ready,
                    "nodes": r.minutes.nodes,
                }
                for r in sim.regions
            },
        })
    return {
        "stack": sims[0].stack,
        "target": round(1 - sims[0].attainment_target, 6),
        "slo": sims[0].slo,
        "days": days,
    }


@lru_cache(maxsize=8)
def _svg(spec_json: str) -> str:
    import matplotlib
    from matplotlib.figure import Figure

    spec = json.loads(spec_json)
    with matplotlib.rc_context(cast(Any, STYLE)):
        width = max(8.0, 5.0 * len(spec["days"]))
        fig = Figure(figsize=(width, 5.2))
        fig.subplots_adjust(left=0.75 / width, right=0.99, bottom=0.1, top=0.84, wspace=0.15,
                            hspace=0.3)
        _draw(fig, spec)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata=METADATA)
    declaration, rest = out.getvalue().split("\n", 1)
    text = f"{declaration}\n{STAMP}{_stamp(spec_json)} -->\n{rest}"
    return text if text.endswith("\n") else text + "\n"


def _draw(fig: Any, spec: dict[str, Any]) -> None:
    days = spec["days"]
    axes = fig.subplots(2, len(days), sharex=True, squeeze=False)
    hours = [(k + 0.5) / 60 for k in range(len(days[0]["fleet"]))]
    for col, day in enumerate(days):
        top, bottom = axes[0][col], axes[1][col]
        for ax in (top, bottom):
            for a, b in day["spans"]:
                ax.axvspan(a, b, color="#f4d03f", alpha=0.3, linewidth=0)
        for k, (name, region) in enumerate(sorted(day["regions"].items())):
            color = REGION_COLORS[k % len(REGION_COLORS)]
            ys = [math.nan if v is None else max(v, FLOOR) for v in region["outside"]]
            top.plot(hours, ys, color=color, linewidth=0.8, label=name)
            bottom.step(hours, region["ready"], where="mid", color=color, linewidth=1.0)
            bottom.step(hours, region["nodes"], where="mid", color=color, linewidth=0.8,
                        linestyle=":")
        fleet = [math.nan if v is None else max(v, FLOOR) for v in day["fleet"]]
        top.plot(hours, fleet, color="#222222", linewidth=1.2, label="fleet")
        top.axhline(spec["target"], color=SLO_COLOR, linestyle="--", linewidth=1.0,
                    label=f"SLO: {spec['target']:.0%} may miss")
        top.set_yscale("log")
        top.set_ylim(FLOOR / 2, 1.5)
        top.set_title(day["label"])
        top.set_ylabel("share of requests outside the SLO")
        bottom.set_ylabel("Ready replicas (solid), nodes (dotted)")
        bottom.set_xlabel("hour of the day")
        bottom.set_xlim(0, 24)
        bottom.set_xticks(range(0, 25, 3))
        bottom.set_ylim(0, None)
        top.legend(loc="upper left", frameon=False, fontsize=6.5, ncol=2)
    fig.suptitle(f"{spec['stack']} through the day, simulated ({spec['slo']})\nshaded: each "
                 "event until it recovered", fontsize=9)
