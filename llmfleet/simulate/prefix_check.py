"""`simulate`'s check of what a prefix-heavy plan claims: each region's replicas at its peak
behind its balancing, conversations over per-replica caches (`simulate.prefix_fleet`), the
simulated hit rate against the replica record's and TTFT at the SLO percentile against the
target. Ten minutes of the peak after the caches warm; one seed (the fixed seed keeps the
output reproducible)."""

from __future__ import annotations

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.replica_record import engine_of
from llmfleet.perf.prefix_cache import ROUTER_REPLICAS
from llmfleet.plan.model import resolve_model
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.prefix_hold import balancing_of
from llmfleet.simulate.prefix_fleet import (
    ConversationTraffic,
    RouterSettings,
    simulate_prefix_fleet,
)
from llmfleet.simulate.result import Check

PEAK_WINDOW_S = 600.0
HIT_RATE_SLACK = 0.02
"""The plan's hit rate holds if the simulation's is at most this much lower: one seed's
spread over ten minutes of a replica's peak (docs/simulate.md, "Prefix caches")."""


def prefix_checks(plan: CapacityPlan, fleet: FleetPlan) -> list[Check]:
    """One check per region whose replica was sized with a prefix cache."""
    regions = [rp for rp in fleet.regions if rp.replica.prefix_cache is not None]
    if not regions:
        return []
    model = resolve_model(plan)
    t = plan.traffic
    traffic = ConversationTraffic(
        prompt_mean_tokens=t.input_tokens.mean, output_mean_tokens=t.output_tokens.mean,
        prompt_sigma=t.input_tokens.sigma, output_sigma=t.output_tokens.sigma,
        shared_prefix_tokens=t.shared_prefix_tokens, turns=t.turns,
        think_time_s=t.think_time_s,
    )
    p = plan.slo.percentile
    out = []
    for rp in regions:
        claimed = rp.replica.prefix_cache
        assert claimed is not None
        router = rp.prefix_router
        settings = RouterSettings(
            replicas=router.replicas if router else ROUTER_REPLICAS,
            abs_threshold=router.balance_abs_threshold if router else 1,
        )
        run = simulate_prefix_fleet(
            engine_of(rp.replica, model), traffic, rate_per_s=rp.peak_requests_per_s,
            replicas=rp.replicas.desired, balancing=balancing_of(plan), router=settings,
            duration_s=PEAK_WINDOW_S, max_model_len=plan.max_model_len,
        )
        s = run.summary(p)
        ttft_ms = s.ttft_s * 1000
        holds = s.hit_rate >= claimed.hit_rate - HIT_RATE_SLACK and ttft_ms <= plan.slo.ttft_ms
        out.append(Check(
            check=f"{rp.region}'s prefix cache at its peak",
            plan=f"{claimed.hit_rate:.1%} of prompt tokens cached ({claimed.balancing} over "
            f"{rp.replicas.desired} replicas), TTFT p{p:g} <= {plan.slo.ttft_ms:g} ms",
            simulated=f"{s.hit_rate:.1%} cached, TTFT p{p:g} {ttft_ms:.0f} ms over "
            f"{s.requests:,} requests at {rp.peak_requests_per_s:g} req/s"
            + (f"; {s.forced_share:.0%} routed away from their cache"
               if claimed.balancing == "prefix_aware" else ""),
            holds=holds,
        ))
    return out
