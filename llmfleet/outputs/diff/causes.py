"""Why a region changed between two plans: one line per material change (GPUs, cost, batch,
TP and instance, precision, KV dtype and speculation, the trough's floor), each naming the
constraint that binds and by how much, read from the two FleetPlans only.

- GPUs and cost follow replicas x GPUs per replica: the region's peak, what one replica
  carries inside the SLOs (its `binding`), and the warm floor stage 4 keeps for a lost region.
- A batch (max_num_seqs) moves with its binding constraint ("a lone p99 prompt already
  takes 620 ms of the 800 ms TTFT on A100 TP 8").
- Another instance, TP or lever setting: what became of the old configuration in the new
  search (its alternative's reason: infeasible and why, or its cost), and what the new one
  was before.
- The trough's floor: the trough's replicas, or the warm floor for a lost region."""

from __future__ import annotations

from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.search.optimizer import Alternative

ARROW = " → "


def _levers(rp: RegionPlan) -> tuple[str, str, str | None]:
    lv = rp.levers
    if lv is None:
        return ("", "", None)
    return (lv.precision, lv.kv_cache_dtype, lv.speculative)


def _config(rp: RegionPlan) -> str:
    label = rp.levers.label if rp.levers else ""
    return f"{rp.instance_type} TP {rp.tensor_parallel_size} ({label})"


def _find(rp: RegionPlan, of: RegionPlan) -> Alternative | None:
    """`of`'s configuration among `rp`'s alternatives."""
    want = (of.instance_type, of.tensor_parallel_size, *_levers(of))
    for a in rp.alternatives:
        if (a.instance_type, a.tensor_parallel_size, a.precision, a.kv_cache_dtype,
                a.speculative) == want:
            return a
    return None


def _fate(rp: RegionPlan, of: RegionPlan) -> str:
    """What `rp`'s search made of `of`'s configuration."""
    alt = _find(rp, of)
    if alt is None:
        return f"is not a candidate (not allowed, or not offered in {rp.region})"
    if alt.chosen:
        return "is chosen"
    chosen = next((c for c in rp.alternatives if c.chosen), None)
    usd = alt.on_demand_monthly_cost_usd
    if alt.feasible and chosen is not None and usd == chosen.on_demand_monthly_cost_usd:
        return (
            f"costs the same (${usd or 0:,.0f}/month) and loses the tie-break "
            "(the plainer levers, then fewer GPUs, then more spare capacity)"
        )
    if alt.feasible:
        return f"costs ${usd or 0:,.0f}/month, {alt.reason}"
    return alt.reason


def _own_replicas(fp: FleetPlan, rp: RegionPlan) -> int:
    """Desired replicas without the warm floor for a lost region."""
    for f in fp.resilience.regions:
        if f.region == rp.region:
            return f.replicas_without_resilience["desired"]
    return rp.replicas.desired


def _floor(rp: RegionPlan) -> str:
    notes = [n.removeprefix("floor: ") for n in rp.capacity.notes if n.startswith("floor: ")]
    return notes[0] if notes else f"{rp.nodes.min} node(s) always on"


def _gpus(
    b: RegionPlan, a: RegionPlan, before: FleetPlan, after: FleetPlan, batch_said: bool
) -> str:
    gb, ga = b.nodes.desired * b.gpus_per_node, a.nodes.desired * a.gpus_per_node
    parts = []
    if b.peak_requests_per_s != a.peak_requests_per_s:
        parts.append(
            f"the region's peak {b.peak_requests_per_s:g}{ARROW}{a.peak_requests_per_s:g} req/s"
        )
    cb, ca = b.predicted.requests_per_s, a.predicted.requests_per_s
    if cb != ca:
        why = "the batch above" if batch_said else a.binding.text
        parts.append(f"a replica carries {cb:.2f}{ARROW}{ca:.2f} req/s inside the SLOs ({why})")
    if b.tensor_parallel_size != a.tensor_parallel_size:
        parts.append(
            f"{b.tensor_parallel_size}{ARROW}{a.tensor_parallel_size} GPUs per replica"
        )
    ob, oa = _own_replicas(before, b), _own_replicas(after, a)
    if (b.replicas.desired - ob) != (a.replicas.desired - oa):
        parts.append(
            f"the warm floor for a lost region adds {b.replicas.desired - ob}{ARROW}"
            f"{a.replicas.desired - oa} replicas"
        )
    if not parts:
        parts.append("nodes of another size")
    return (
        f"GPUs at the peak {gb}{ARROW}{ga} ({b.replicas.desired}{ARROW}{a.replicas.desired} "
        f"replicas): " + "; ".join(parts)
    )


def region_causes(
    before: FleetPlan, after: FleetPlan, b: RegionPlan | None, a: RegionPlan | None
) -> list[str]:
    """One line per material change of a region between two plans."""
    if b is None and a is not None:
        return [
            f"added: {_config(a)}, {a.nodes.desired} node(s) for {a.peak_requests_per_s:g} "
            f"req/s at the peak; {a.binding.text}"
        ]
    if a is None or b is None:
        return ["removed from the plan"]
    out = []
    if (b.instance_type, b.tensor_parallel_size, _levers(b)) != (
        a.instance_type, a.tensor_parallel_size, _levers(a)
    ):
        out.append(
            f"configuration {_config(b)}{ARROW}{_config(a)}: the old one now {_fate(a, b)}; "
            f"before, the new one {_fate(b, a)}"
        )
    vb, va = b.serving.vllm.max_num_seqs, a.serving.vllm.max_num_seqs
    batch = vb != va or b.binding.constraint != a.binding.constraint
    if batch:
        out.append(f"batch {vb}{ARROW}{va}: {a.binding.text}")
    if b.nodes.desired * b.gpus_per_node != a.nodes.desired * a.gpus_per_node:
        out.append(_gpus(b, a, before, after, batch))
    usd_b, usd_a = b.billed_monthly_cost_usd, a.billed_monthly_cost_usd
    if usd_b != usd_a:
        same = (b.instance_type, b.price_usd_per_hour) == (a.instance_type, a.price_usd_per_hour)
        out.append(
            f"cost at the peak ${usd_b:,.0f}{ARROW}${usd_a:,.0f}/month: "
            + (
                f"{b.nodes.desired}{ARROW}{a.nodes.desired} x {a.instance_type} at "
                f"${a.price_usd_per_hour:,.2f}/h"
                if same
                else f"{b.nodes.desired} x {b.instance_type} at ${b.price_usd_per_hour:,.2f}/h"
                f"{ARROW}{a.nodes.desired} x {a.instance_type} at ${a.price_usd_per_hour:,.2f}/h"
            )
        )
    trough_b, trough_a = b.billed_monthly_cost_usd_at_trough, a.billed_monthly_cost_usd_at_trough
    if (b.nodes.min, trough_b) != (a.nodes.min, trough_a):
        out.append(
            f"trough floor {b.nodes.min}{ARROW}{a.nodes.min} node(s), "
            f"${trough_b:,.0f}{ARROW}${trough_a:,.0f}"
            f"/month: {_floor(a)}"
        )
    return out
