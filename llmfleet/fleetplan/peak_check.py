"""What the plan promises at each region's peak, checked on its own replica record: `plan`
exits non-zero rather than print a fleet whose peak falls outside the SLO.

The search sizes every replica inside the SLO at its SLO-limit rate and deploys enough of them
that each serves less at the peak; the FleetPlan's `predicted` figures are the record's own
SLO model at that peak load (`replica_record.slo_at`), the same one `simulate` steps on. A
region is outside when a figure passes its target: TTFT or ITL (as `slo.itl` reads it) at the
percentile, the longest stall, or the chance an arrival finds every slot taken above 1 - p."""

from __future__ import annotations

from llmfleet.fleetplan.fleet import FleetPlan


def outside_slo(fleet: FleetPlan) -> list[str]:
    """One line per region and figure past its target at the region's peak (none: it holds)."""
    slo = fleet.slo
    p = f"p{slo.percentile:g}"
    tail = 1 - slo.percentile / 100
    out = []
    for rp in fleet.regions:
        pr = rp.predicted
        checks = (
            (f"TTFT {p}", pr.ttft_ms, slo.ttft_ms, "ms"),
            (f"ITL ({slo.itl}) {p}", pr.itl_ms, slo.itl_ms, "ms"),
            ("the longest stall", pr.longest_stall_ms, slo.stall_ms, "ms"),
            ("the chance an arrival finds every slot taken", pr.slot_full_chance, tail, ""),
        )
        for name, value, target, unit in checks:
            if value > target * (1 + 1e-9):
                u = f" {unit}" if unit else ""
                out.append(
                    f"{rp.region}: at its peak ({pr.requests_per_s_at_peak:.2f} req/s on each of "
                    f"{rp.replicas.desired} replicas) {name} is {value:g}{u}, over the SLO's "
                    f"{target:g}{u}"
                )
    return out
