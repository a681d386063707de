"""Speed and error of `llmfleet simulate` (no timed assertions in tests; run by hand or from
`make bench`).

Speed: a day of prod (quiet, the default spike, the worst loss, and the peak held all day,
about 26 million requests) timed with time.perf_counter, median of 3, against the issue's
budget of 20 s, beside a floor measured in the same run: drawing the day's Poisson arrivals
for every region and step plus a bare Python loop over those region-steps (what any stepped
simulation of the day pays), and beside what the request-by-request run would take for the
whole day (its measured cost per request times the day's requests).

Error: the fluid model against the request-by-request run (`simulate.events.compare`) on
windows of 15 minutes: steady loads at shares of a replica's SLO-limit rate, and an overload
with its drain, for every region type of the shipped stacks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import list_stacks, read_plan
from llmfleet.simulate.day import STEP_S, WARMUP_S
from llmfleet.simulate.engine import replica_models
from llmfleet.simulate.events import compare
from llmfleet.simulate.run import simulate, worst_loss
from llmfleet.simulate.scenario import DAY_S, scenario_from_args

BUDGET_S = 20.0


def median_s(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    runs, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), out


def floor_s(region_steps: int, rate: float) -> float:
    def loop() -> float:
        counts = np.random.default_rng(0).poisson(rate * STEP_S, region_steps).tolist()
        x = 0.0
        for c in counts:
            x = x * 0.5 + c
        return x

    return median_s(loop)[0]


def speed() -> None:
    plan = read_plan("prod")
    fp = build_fleet_plan(plan)
    steps = int((DAY_S + WARMUP_S) / STEP_S) * len(fp.regions)
    rate = plan.traffic.peak_requests_per_s / len(fp.regions)
    print(f"floor: arrivals and a bare loop, {steps:,} region-steps {floor_s(steps, rate):6.2f} s")
    lost = worst_loss(plan, fp)
    cases = {
        "quiet day (plan's profile)": {},
        "+50 % spike at 14:00 for 30 min": {"spike": "50@14:00"},
        f"{lost} lost at 14:00": {"lose": f"{lost}@14:00"},
        "the peak all day": {"day": "peak"},
    }
    worst = 0.0
    for label, args in cases.items():
        def run(args: dict[str, str] = args) -> object:
            # the whole command's work: the replica tables, the day, the summary
            return simulate(plan, fp, scenario_from_args(plan, **args), "prod")

        seconds, result = median_s(run)
        worst = max(worst, seconds)
        requests = getattr(result, "requests", 0)
        print(f"prod, {label:<36} {seconds:6.2f} s  {requests / 1e6:5.1f} M requests")
    verdict = "under" if worst < BUDGET_S else "OVER"
    print(f"slowest prod day {worst:.2f} s: {verdict} the {BUDGET_S:g} s budget")
    rp = fp.regions[0]
    rate = np.full(600, 0.8 * rp.predicted.requests_per_s)
    models = replica_models(plan, fp)
    start = time.perf_counter()
    c = compare(plan, models[rp.region], rate, rp.replicas.max, sample=2, step_s=STEP_S)
    per_request = (time.perf_counter() - start) / max(1, c.requests)
    print(f"request by request: {per_request * 1e6:.0f} us a request; prod's peak day "
          f"(25.9 M) would take about {per_request * 25.9e6 / 60:.0f} min")


def error() -> None:
    print("\nfluid against request-by-request (15-minute windows, 2 sampled replicas):")
    print(f"{'stack/region':<22} {'load':>22} {'events':>8} {'fluid':>8} {'error':>8} "
          f"{'minute MAE':>10} {'events s':>8}")
    for env in list_stacks():
        plan = read_plan(env)
        fp = build_fleet_plan(plan)
        models = replica_models(plan, fp)
        seen: set[str] = set()
        for rp in fp.regions:
            if rp.instance_type in seen:
                continue
            seen.add(rp.instance_type)
            cap = rp.predicted.requests_per_s
            loads = {f"{share:.0%} of SLO-limit": np.full(900, share * cap)
                     for share in (0.5, 0.8, 0.9, 0.95)}
            loads["80/110/60 % (overload)"] = np.concatenate(
                [np.full(300, 0.8 * cap), np.full(600, 1.1 * cap), np.full(600, 0.6 * cap)]
            )
            for name, rate in loads.items():
                start = time.perf_counter()
                c = compare(plan, models[rp.region], rate, rp.replicas.max, step_s=STEP_S)
                took = time.perf_counter() - start
                print(f"{env + '/' + rp.region:<22} {name:>22} {c.attainment_events:8.4f} "
                      f"{c.attainment_fluid:8.4f} {c.error:+8.4f} {c.minute_mae:10.4f} "
                      f"{took:8.2f}")


def main() -> None:
    speed()
    error()


if __name__ == "__main__":
    main()
