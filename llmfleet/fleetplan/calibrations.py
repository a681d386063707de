"""The plan's calibration files as the FleetPlan reports them: which server each fits, on
how many of the user's runs, its factors and held-out error, its band beside the shipped
one, and which regions it covers (those whose chosen server it is)."""

from __future__ import annotations

from pydantic import Field

from llmfleet.calibration.server_calibration import Coverage
from llmfleet.catalog import hardware
from llmfleet.catalog.constants import Constants
from llmfleet.data import Data

BAND_METRICS = ("ttft_ms", "itl_ms", "output_tokens_per_s")


class CalibrationUse(Data):
    path: str = Field(description="As plan.calibration names it.")
    server: str = Field(description="The server it fits: model, GPU, TP, precision, KV dtype.")
    runs: int
    factors: dict[str, float] = Field(
        description="On the shipped constants: HBM time (memory), tensor time (compute), host "
        "time per step and sequence (overhead), request handling (ttft_overhead)."
    )
    held_out_error_pct: dict[str, float] = Field(
        description="Median absolute error of each prompt length's runs predicted by the "
        "factors fitted on the other lengths."
    )
    band: dict[str, tuple[float, float]] = Field(
        description="p10-p90 of measured/predicted from its runs (held out), per metric."
    )
    shipped_band: dict[str, tuple[float, float]] = Field(
        description="The same for the shipped constants (leave one source out), which it "
        "replaces in the regions it covers."
    )
    regions: list[str] = Field(description="Regions whose chosen server it covers.")


def build_calibrations(
    coverage: Coverage, covered_regions: dict[str, list[str]], consts: Constants
) -> list[CalibrationUse]:
    """One entry per plan.calibration file, in the plan's order; `covered_regions` maps a
    file's path to the regions that chose its server."""
    out = []
    for c in coverage.servers:
        cal = c.calibration
        out.append(
            CalibrationUse(
                path=c.path,
                server=cal.server.label,
                runs=len(cal.runs),
                factors=cal.factors.model_dump(),
                held_out_error_pct=cal.errors.held_out,
                band={m: (r["p10"], r["p90"]) for m, r in sorted(cal.ranges.items())},
                shipped_band={
                    m: (consts.ratio(m, "p10", arch), consts.ratio(m, "p90", arch))
                    for m in BAND_METRICS
                    if m in cal.ranges
                    for arch in (hardware.gpu(cal.server.gpu).architecture,)
                },
                regions=covered_regions.get(c.path, []),
            )
        )
    return out
