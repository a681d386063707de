"""Every chart's legend fits: inside the figure, clear of the titles, and a legend placed in
its panel inside that panel, whatever the labels: a diff's sides may be long revisions or
paths."""

from __future__ import annotations

from typing import Any, cast

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox
from plans import three_regions

from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.outputs import charts
from llmfleet.outputs.diff import before_after_charts

LONG_BASE = "origin/release/2026-q1-capacity-review:stacks/Pulumi.three-regions.yaml"
LONG_HEAD = "../checkouts/a-very-long-folder-name/stacks/Pulumi.three-regions-doubled.yaml"


def _misfits(fig: Any) -> list[str]:
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    if fig._suptitle is not None:
        titles.append(fig._suptitle.get_window_extent(renderer))
    # a legend placed in its panel stays in it; one anchored elsewhere stays in the figure
    legends = [(ax.get_legend(), ax.get_window_extent(renderer)) for ax in fig.axes]
    legends = [(leg, panel if leg is not None and _anchored_in(leg, panel) else fig.bbox)
               for leg, panel in legends]
    legends += [(legend, fig.bbox) for legend in fig.legends]
    out = []
    for legend, room in legends:
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        if not _inside(box, room):
            out.append(f"legend {[round(v) for v in box.extents]} outside {room.extents}")
        out += [f"legend over a title {t.extents}" for t in titles if box.overlaps(t)]
    return out


def _anchored_in(legend: Any, panel: Bbox) -> bool:
    anchor = legend.get_bbox_to_anchor()
    return bool(abs(anchor.x0 - panel.x0) < 1 and abs(anchor.y1 - panel.y1) < 1)


def _inside(box: Bbox, room: Bbox) -> bool:
    return (box.x0 >= room.x0 - 1 and box.x1 <= room.x1 + 1 and box.y0 >= room.y0 - 1
            and box.y1 <= room.y1 + 1)


@pytest.fixture(scope="module")
def doubled(own_plans: dict[str, FleetPlan]) -> tuple[FleetPlan, FleetPlan]:
    return own_plans["three-regions"], build_fleet_plan(
        three_regions(**{"traffic.peak_requests_per_s": 600}))


def test_the_diff_charts_legends_fit_with_long_revision_labels(doubled) -> None:
    before, after = doubled
    with matplotlib.rc_context(cast(Any, charts.STYLE)):
        drawn = before_after_charts
        figures = {"fleet": drawn.figure(
            (10.0, 3.2), lambda f: drawn._fleet(f, before, after, LONG_BASE, LONG_HEAD))}
        for old, new in zip(before.regions, after.regions, strict=True):
            figures[new.region] = drawn.figure((10.0, 3.0), drawn._batch_drawer(
                before, after, old, new, LONG_BASE, LONG_HEAD))
        misfits = {name: _misfits(fig) for name, fig in figures.items()}
    assert misfits == {name: [] for name in figures}


def test_the_report_charts_legends_fit(own_plans: dict[str, FleetPlan]) -> None:
    misfits = {}
    with matplotlib.rc_context(cast(Any, charts.STYLE)):
        for env, fp in own_plans.items():
            specs = [("cost", charts._cost_spec(fp)), ("memory", charts._memory_spec(fp))]
            specs += [("batch", charts._batch_spec(fp, rp)) for rp in fp.regions]
            for kind, spec in specs:
                misfits[f"{env} {kind}"] = _misfits(charts._figure(kind, spec))
    assert misfits == {name: [] for name in misfits}
