"""Views of a simulated day: the text `llmfleet simulate` prints, and what the report's
"Through the day" section and its chart read (`report_context`)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from llmfleet.simulate.result import Simulation
from llmfleet.simulate.run import ReportDays


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.3%}"


def _seconds(value: float | None) -> str:
    return "not by midnight" if value is None else f"{value:g} s"


def simulation_text(sim: Simulation) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=160, color_system=None, force_terminal=False, markup=False,
                  highlight=False)
    con.print(f"Simulated day of {sim.stack}: {sim.scenario} (seed {sim.seed})")
    con.print(f"SLO {sim.slo}: {sim.requests:,} requests, {_pct(sim.attainment)} inside "
              f"(target {sim.attainment_target:.0%}); GPU cost ${sim.cost_usd:,.0f} (plan's day "
              f"${sim.plan_cost_usd:,.0f})")
    t = Table(title="Per region")
    for col in ("region", "requests", "inside", "failed", "replicas", "nodes", "launches",
                "cost $", "plan $"):
        t.add_column(col, justify="left" if col == "region" else "right")
    for r in sim.regions:
        t.add_row(r.region, f"{r.requests:,}", _pct(r.attainment), f"{r.failed_requests:,}",
                  f"{r.replicas_min}-{r.replicas_max}", f"{r.nodes_min}-{r.nodes_max}",
                  str(r.node_launches), f"{r.cost_usd:,.0f}", f"{r.plan_cost_usd:,.0f}")
    con.print(t)
    if sim.violations:
        t = Table(title="Violations (a region's share inside below the target)")
        for col in ("region", "from", "seconds", "cause", "requests outside"):
            t.add_column(col, justify="right" if col in ("seconds", "requests outside") else "left")
        for v in sim.violations:
            t.add_row(v.region, v.start, f"{v.seconds:g}", cause_label(sim, v.cause),
                      f"{v.requests_outside_slo:,} of {v.requests:,}")
        con.print(t)
    else:
        con.print("No violations.")
    for e in sim.events:
        con.print(f"{e.kind} at {e.start} ({e.label}): recovered in {_seconds(e.recovery_s)}; "
                  f"plan: {_seconds(e.plan_recovery_s) if e.plan_recovery_s is not None else '-'}"
                  f" ({e.plan_basis})")
    for c in sim.checks:
        mark = "holds" if c.holds else "CONTRADICTS THE PLAN"
        con.print(f"  [{mark}] {c.check}: plan {c.plan}; simulated {c.simulated}")
    con.print(f"Method: {sim.method}.")
    return buf.getvalue()


def cause_label(sim: Simulation, cause: str) -> str:
    """A violation's cause as the text shows it: the ITL cause (JSON `token_gap`) named for
    the plan's definition of ITL, so a `slo.itl: tpot` stack reads `tpot`."""
    return sim.itl if cause == "token_gap" else cause


def _causes(sim: Simulation) -> str:
    """Violations by cause: how many, and the requests outside the SLO in them."""
    by: dict[str, list[int]] = {}
    for v in sim.violations:
        n = by.setdefault(cause_label(sim, v.cause), [0, 0])
        n[0] += 1
        n[1] += v.requests_outside_slo
    return "; ".join(f"{cause} x{n} ({out:,} outside)" for cause, (n, out) in sorted(by.items()))


def _events(sim: Simulation) -> str:
    return "; ".join(
        f"{e.kind} at {e.start}: {_seconds(e.recovery_s)} (plan: "
        f"{'none promised' if e.plan_recovery_s is None else _seconds(e.plan_recovery_s)})"
        for e in sim.events
    )


def report_context(days: ReportDays) -> dict[str, Any]:
    """The report's section: one row per simulated day and every check that fails."""
    sims = [days.quiet, days.spike] + ([days.loss] if days.loss is not None else [])
    rows = [
        {
            "scenario": sim.scenario,
            "requests": sim.requests,
            "attainment": sim.attainment,
            "worst_minute": min((a for a in sim.minutes.attainment if a is not None),
                                default=1.0),
            "violations": len(sim.violations),
            "causes": _causes(sim) or "-",
            "events": _events(sim) or "-",
            "cost_usd": sim.cost_usd,
            "plan_cost_usd": sim.plan_cost_usd,
        }
        for sim in sims
    ]
    contradictions = [(sim.scenario, c) for sim in sims for c in sim.checks if not c.holds]
    return {"days": rows, "contradictions": contradictions, "quiet": days.quiet,
            "sims": sims}
