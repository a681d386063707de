"""Text views: the fleet (`llmfleet plan`), one replica (`llmfleet predict`), the
calibration's errors (`llmfleet validate`), one server's calibration (`llmfleet calibrate
--bench`) and the capacity lines of a region."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from llmfleet.calibration.server_calibration import ServerCalibration
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.perf.replica import PredictResult


def _console(buf: io.StringIO) -> Console:
    return Console(
        file=buf, width=160, color_system=None, force_terminal=False, markup=False, highlight=False
    )


def _region_layout(r: RegionPlan) -> str:
    """The TP column: the TP, or the layout beyond it (nodes a replica spans, the pools)."""
    if r.disaggregation is not None:
        d = r.disaggregation
        return f"P {d.prefill.tensor_parallel_size} x {d.prefill.replicas.desired} + D {r.layout}"
    text = str(r.tensor_parallel_size) if r.layout == f"TP {r.tensor_parallel_size}" else r.layout
    return text + (f", {r.nodes_per_replica} nodes" if r.nodes_per_replica > 1 else "")


def fleet_text(fp: FleetPlan) -> str:
    buf = io.StringIO()
    con = _console(buf)
    m = fp.model
    con.print(
        f"Fleet {fp.name}: {m.id} ({m.params_b:g}B params, {m.active_params_b:g}B active) "
        f"served as {fp.served_as()}; weights {m.weights_gib:.1f} GiB at {m.precision}, KV "
        f"{m.kv_bytes_per_token:,.0f} bytes/token at KV {m.kv_cache_dtype}"
    )
    con.print(
        f"SLO: TTFT <= {fp.slo.ttft_ms:g} ms, ITL ({fp.slo.itl}) <= {fp.slo.itl_ms:g} ms at "
        f"p{fp.slo.percentile:g}; peak {fp.traffic.peak_requests_per_s:g} req/s, trough "
        f"{fp.traffic.trough_requests_per_s:g} req/s; headroom {fp.headroom:.0%}; "
        f"sizing confidence {fp.confidence}"
    )
    t = Table(title="Sized fleet (per replica predictions at the region's peak)")
    for col in (
        "region",
        "instance",
        "GPU",
        "TP",
        "replicas min/des/max",
        "nodes min/des/max",
        "TTFT ms",
        "ITL ms",
        "out tok/s",
        "KV tokens",
        "$/month",
    ):
        t.add_column(col, justify="left" if col in ("region", "instance", "GPU") else "right")
    for r in fp.regions:
        p = r.predicted
        t.add_row(
            r.region,
            r.instance_type,
            r.gpu,
            _region_layout(r),
            f"{r.replicas.min}/{r.replicas.desired}/{r.replicas.max}",
            f"{r.nodes.min}/{r.nodes.desired}/{r.nodes.max}",
            f"{p.ttft_ms:.0f} / {fp.slo.ttft_ms:g}",
            f"{p.itl_ms:.1f} / {fp.slo.itl_ms:g}",
            f"{p.output_tokens_per_s:,.0f}",
            f"{p.kv_cache_tokens:,}",
            f"{r.billed_monthly_cost_usd:,.0f}",
        )
    con.print(t)
    con.print(
        f"Total: {fp.gpus.desired} GPUs at peak ({fp.gpus.min} at trough), "
        f"${fp.billed_monthly_cost_usd:,.0f}/month provisioned for the peak "
        f"(${fp.billed_monthly_cost_usd_at_trough:,.0f} at trough)"
    )
    res = fp.resilience
    con.print(
        f"Routing {res.policy}, survives {res.survive_region_losses} region loss(es): "
        f"${fp.billed_monthly_cost_usd:,.0f}/month with resilience, "
        f"${res.monthly_cost_usd_without_resilience:,.0f} without"
        + (f"; recovery {res.recovery.worst_s} s at worst" if res.recovery else "")
    )
    for line in [*res.reasons, *(f"flag: {f}" for f in res.flags)]:
        con.print(f"  - {line}")
    for cal in fp.calibrations:
        where = ", ".join(cal.regions) if cal.regions else "no region (its server was not chosen)"
        con.print(
            f"Calibration {cal.path}: {cal.server} on {cal.runs} of your runs covers {where}; "
            "band (measured/predicted p10-p90) "
            + ", ".join(
                f"{m} {lo:g}-{hi:g} (shipped {cal.shipped_band[m][0]:g}-{cal.shipped_band[m][1]:g})"
                for m, (lo, hi) in cal.band.items()
                if m in cal.shipped_band
            )
        )
    if fp.traffic_advice is not None:
        con.print("Where the traffic should go:")
        for s in fp.traffic_advice.shifts:
            con.print(f"  - {'MOVE' if s.within_budget else 'over budget'}: {s.text}")
        for line in fp.traffic_advice.notes:
            con.print(f"  - {line}")
    for r in fp.regions:
        con.print(f"\n{r.region}: why {r.instance_type} TP {r.tensor_parallel_size}")
        rng = r.predicted.ranges
        own = f" (from {r.predicted.calibration}'s runs)" if r.predicted.calibration else ""
        con.print(
            f"  calibration range (p10-p90 of measured/predicted){own}: "
            + ", ".join(f"{k} {lo:,.1f}-{hi:,.1f}" for k, (lo, hi) in rng.items())
        )
        risk = r.risk
        flag = "" if risk.slo_holds_at_p90 else "RISK: "
        con.print(f"  {flag}{risk.summary}")
        for line in r.reasons:
            con.print(f"  - {line}")
        runners = [a for a in r.alternatives if a.feasible and not a.chosen][:3]
        for a in runners:
            con.print(
                f"  - not {a.instance_type} TP {a.tensor_parallel_size} ({a.differs}): {a.reason}"
            )
        rejected = [a for a in r.alternatives if not a.feasible and not a.no_price]
        unpriced = sorted({a.instance_type for a in r.alternatives if a.no_price})
        if unpriced:
            con.print(f"  - offered without a known price (not sized): {', '.join(unpriced)}")
        if rejected:
            con.print(
                f"  - {len(rejected)} candidates infeasible, e.g. {rejected[0].instance_type} "
                f"TP {rejected[0].tensor_parallel_size}: {rejected[0].reason}"
            )
    for line in capacity_lines(fp):
        con.print(line)
    rt = Table(title="The seed article's rules of thumb against this model")
    for col in ("rule", "rule says", "computed", "verdict"):
        rt.add_column(col)
    for rule in fp.rules_of_thumb:
        rt.add_row(rule.rule, rule.rule_value, rule.computed, rule.verdict)
    con.print()
    con.print(rt)
    return buf.getvalue()


def _kv_pool(gib_per_gpu: float) -> str:
    """The KV pool, or by how much the weights, activations and runtime overrun the usable
    memory."""
    if gib_per_gpu >= 0:
        return f"KV pool {gib_per_gpu:.2f} GiB/GPU"
    return (
        f"no KV pool: weights, activations and runtime exceed the usable memory by "
        f"{-gib_per_gpu:.2f} GiB/GPU (more GPUs, a smaller precision or a larger GPU)"
    )


def _layout(r: PredictResult) -> str:
    """`8 x H100`, or `TP 8 x PP 2 = 16 x H100 on 2 p5.48xlarge nodes (TCP)`."""
    plain = r.pipeline_parallel_size == 1 and r.data_parallel_size == 1
    if plain and not r.expert_parallel and r.nodes == 1:
        return f"{r.tensor_parallel_size} x {r.gpu}"
    parts = [f"TP {r.tensor_parallel_size}"]
    if r.pipeline_parallel_size > 1:
        parts.append(f"PP {r.pipeline_parallel_size}")
    if r.data_parallel_size > 1:
        parts.append(f"DP {r.data_parallel_size}")
    text = " x ".join(parts) + f" = {r.gpus} x {r.gpu}"
    if r.expert_parallel:
        text += f", experts over EP {r.tensor_parallel_size * r.data_parallel_size}"
    if r.nodes > 1:
        text += f" on {r.nodes} {r.instance_type} nodes ({(r.inter_node or 'efa').upper()})"
    return text


def predict_text(r: PredictResult) -> str:
    lines = [
        f"{r.model} on {_layout(r)} ({r.precision}, KV {r.kv_cache_dtype}), {r.mode} load",
        f"  weights {r.weights_gib_per_gpu:.2f} GiB/GPU, "
        f"activation peak {r.activation_gib:.2f} GiB, " + _kv_pool(r.kv_cache_gib_per_gpu),
        f"  KV cache {r.kv_cache_tokens:,} tokens ({r.kv_bytes_per_token:,.0f} bytes/token); "
        f"max concurrency {r.max_concurrency:.2f}x at {r.max_model_len:,} tokens",
    ]
    lines += [f"  config.json default applied: {note}" for note in r.config_defaults]
    if r.kv_cache_tokens_per_rank is not None:
        lines.append(
            f"  {r.data_parallel_size} data-parallel ranks, each with its own pool of "
            f"{r.kv_cache_tokens_per_rank:,} tokens"
        )
    if r.balancing is not None:
        per = r.requests_per_s_per_replica or 0.0
        lines.append(
            f"  {r.replicas} replica(s) behind one entry point ({r.balancing.replace('_', '-')}"
            f"), {per:.3f} req/s each; the throughput below is theirs together"
        )
    if r.prefix_cache_hit_rate is not None:
        lines.append(
            f"  prefix cache: {r.cached_tokens_per_prompt or 0:,.0f} of "
            f"each prompt's tokens cached ({r.prefix_cache_hit_rate:.1%} hit rate)"
        )
    if r.overloaded:
        lines.append(f"  OVERLOADED: {r.ttft_reason}")
    if r.fits and r.ttft_ms is None and r.itl_ms is not None:
        lines.append(
            f"  batch {r.batch_size:.1f} ({r.step_bound}-bound): TTFT unbounded, ITL "
            f"{r.itl_ms:.2f} ms, {r.output_tokens_per_s:,.0f} output tok/s at capacity"
        )
    elif r.fits and r.ttft_ms is not None and r.itl_ms is not None:
        lines.append(
            f"  batch {r.batch_size:.1f} ({r.step_bound}-bound): TTFT {r.ttft_ms:.1f} ms, ITL "
            f"{r.itl_ms:.2f} ms, {r.output_tokens_per_s:,.0f} output tok/s, "
            f"{r.total_tokens_per_s:,.0f} total tok/s, {r.requests_per_s:.3f} req/s"
        )
        if r.e2e_latency_ms is not None:
            lines.append(f"  a request's mean latency (E2E) {r.e2e_latency_ms / 1000:.2f} s")
    else:
        lines.append("  does not fit: the KV pool cannot hold one request")
    band = ", ".join(f"{m} {lo:g}-{hi:g}" for m, (lo, hi) in (r.ranges or {}).items())
    if r.calibration:
        lines.append(
            f"  calibrated by {r.calibration}"
            + (f"; expected (p10-p90 of its held-out runs): {band}" if band else "")
        )
    elif band:
        lines.append(
            f"  expected (p10-p90 of the shipped band, each source held out): {band}"
        )
    if r.calibration_warning:
        lines.append(f"  WARNING: {r.calibration_warning}")
    return "\n".join(lines) + "\n"


def calibration_text(cal: ServerCalibration) -> str:
    """What `calibrate --bench` fitted and how far off the runs were before and after."""
    f = cal.factors
    lines = [
        f"calibrated {cal.server.label} on {len(cal.runs)} run(s) from {len(cal.files)} "
        f"file(s)",
        f"  factors on the shipped constants: HBM time x{f.memory:g}, tensor time "
        f"x{f.compute:g}, host time x{f.overhead:g}, request handling x{f.ttft_overhead:g}",
        *(f"  fitted {k}: {why}" for k, why in cal.fitted.items()),
        *(f"  held {k} at 1: {why}" for k, why in cal.held.items()),
        "  median abs error   before    after    held out (each prompt length, fitted on the "
        "others)",
    ]
    for m in sorted(cal.errors.before):
        held = cal.errors.held_out.get(m)
        lines.append(
            f"    {m:20s} {cal.errors.before[m]:6.1f}%  {cal.errors.after.get(m, 0):6.1f}%  "
            + (f"{held:6.1f}%" if held is not None else "     -")
        )
    if cal.ranges:
        band = ", ".join(f"{m} {r['p10']:g}-{r['p90']:g}" for m, r in cal.ranges.items())
        lines.append(f"  band (measured / predicted, p10-p90 held out): {band}")
    else:
        lines.append(
            "  runs at one prompt length: no held-out band (a length left out is the test), "
            "plans keep the shipped band for this server"
        )
    if cal.prompt_tokens:
        lo, hi = cal.prompt_tokens
        lines.append(f"  tested prompt lengths: {lo:,.0f}-{hi:,.0f} tokens")
    if cal.output_tokens:
        lo, hi = cal.output_tokens
        lines.append(f"  tested output lengths: {lo:,.0f}-{hi:,.0f} tokens")
    if not cal.ranges:
        lines.append(
            "  WARNING: calibrated at one prompt length: at other prompt and output lengths "
            "TTFT under load may move either way (benchmarks/README.md, \"Calibrated on one "
            "sweep\"); `predict --calibration` warns when a request is outside the tested "
            "lengths"
        )
    return "\n".join(lines) + "\n"


def validation_text(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    con = _console(buf)
    con.print(f"{report['rows']} measurement rows predicted, {len(report['skipped'])} skipped")
    con.print(
        _error_table(
            "Absolute percentage error: median / p90 (n)",
            "engine",
            report["in_sample"],
            report["leave_one_source_out"],
        )
    )
    for key, title in (
        ("one_group", "Sources of one TP group (fitted on)"),
        ("beyond_one_group", "Rows beyond one TP group (pipeline stages, DP, EP; not fitted on)"),
    ):
        if key in report:
            part = report[key]
            con.print(
                _error_table(title, "engine", part["in_sample"], part["leave_one_source_out"])
            )
    con.print(
        _error_table("By source", "source", report["by_source"], report["by_source_held_out"])
    )
    con.print(_ttft_table(report["ttft_by_prompt_tokens"]))
    con.print(_ttft_source_table(report["ttft_by_source"]))
    con.print(_band_table(report["band"]))
    if report.get("risk_at_p90"):
        con.print(_risk_table(report["risk_at_p90"]))
    if report["below_compute_floor"]:
        rows = ", ".join(
            f"{r['row_id']} ({r['ttft_ms']:g} ms < {r['floor_ms']:g})"
            for r in report["below_compute_floor"]
        )
        con.print(f"TTFT below the prefill's compute floor (prefix-cache hits), not fitted: {rows}")
    if report["by_source_own_runs"]:
        con.print(_own_runs_table(report["by_source_own_runs"]))
    if report.get("calibrated_on_one_sweep", {}).get("cases"):
        con.print(_one_sweep_table(report["calibrated_on_one_sweep"]))
    reasons: dict[str, int] = {}
    for skip in report["skipped"]:
        reason = skip["reason"].split(" is not")[0].split(" (")[0]
        reasons[reason] = reasons.get(reason, 0) + 1
    con.print("Skipped rows: " + "; ".join(f"{k} x{v}" for k, v in sorted(reasons.items())))
    return buf.getvalue()


def _error_table(title: str, group: str, sample: dict[str, Any], held_out: dict[str, Any]) -> Table:
    """One row per (group, metric): the in-sample error beside the held-out one."""
    t = Table(title=title)
    for col in (group, "metric", "in sample", "leave one source out"):
        t.add_column(col)
    for key, metrics in sample.items():
        for metric, s in metrics.items():
            held = held_out.get(key, {}).get(metric)
            t.add_row(key, metric, _fmt(s), _fmt(held) if held else "-")
    return t


def _ttft_table(bands: dict[str, Any]) -> Table:
    """TTFT of vLLM rows by prompt length: error and bias, in sample and held out."""
    t = Table(
        title="TTFT by prompt tokens (vLLM rows): median abs error, median predicted/measured (n)"
    )
    for col in ("prompt tokens", "in sample", "leave one source out"):
        t.add_column(col)
    held = bands["leave_one_source_out"]
    for band, s in bands["in_sample"].items():
        h = held.get(band)
        t.add_row(band, _bias(s), _bias(h) if h else "-")
    return t


def _ttft_source_table(by_source: dict[str, Any]) -> Table:
    """Median predicted/measured TTFT per source: the rows plans are sized with, and bursts
    through an API server apart."""
    t = Table(title="TTFT median predicted/measured per source (n): sized-with rows | bursts")
    for col in ("source", "in sample", "leave one source out"):
        t.add_column(col)
    held = by_source["leave_one_source_out"]
    for source, parts in by_source["in_sample"].items():
        t.add_row(source, _parts(parts), _parts(held.get(source, {})))
    return t


def _parts(parts: dict[str, Any]) -> str:
    return " | ".join(
        f"{name} x{p['median_predicted_over_measured']:.2f} ({p['n']})" for name, p in parts.items()
    ) or "-"


def _band_table(band: dict[str, Any]) -> Table:
    """The sizing band (held-out measured/predicted, p10-p90) and how often a source's
    held-out measurements land in the band the other sources make; per regime too, and the
    band of a GPU architecture no measurement covers."""
    measured = ", ".join(band.get("measured_architectures", [])) or "-"
    t = Table(title="Band: measured/predicted p10-p90 (held out), and its coverage of each "
              "source's held-out rows by the band of the others (nominal 80 %); measured "
              f"architectures: {measured}")
    for col in ("regime", "metric", "p10-p90", "coverage (n)"):
        t.add_column(col)
    parts = [("sizing", band["sizing"], band["coverage"])]
    parts += [
        ("sizing, measured arch.", band["sizing"], band.get("coverage_measured", {})),
        ("unmeasured arch.", band.get("unmeasured_architecture", {}),
         band.get("coverage_unmeasured", {})),
    ]
    parts += [(r, b, band["coverage_by_regime"].get(r, {})) for r, b in band["by_regime"].items()]
    for regime, ratios, cov in parts:
        for metric, q in ratios.items():
            c = cov.get(metric)
            if regime != "sizing" and regime.startswith("sizing") and not c:
                continue
            t.add_row(
                regime, metric, f"{q['p10']:.2f}-{q['p90']:.2f}",
                f"{c['inside_p10_p90']:.0%} ({c['n']})" if c else "-",
            )
    return t


def _risk_table(risk: dict[str, Any]) -> Table:
    t = Table(title="Cost sized at the band's p90 end (fleetplan.risk) against the plan")
    for col in ("stack", "region", "$/month", "at p90", "ratio"):
        t.add_column(col)
    for env, regions in risk.items():
        for region, r in regions.items():
            at = r["at_p90_monthly_cost_usd"]
            t.add_row(
                env, region, f"{r['monthly_cost_usd']:,.0f}",
                f"{at:,.0f}" if at is not None else "cannot hold the SLO",
                f"{r['at_p90_over_plan']:.2f}x" if r["at_p90_over_plan"] else "-",
            )
    return t


def _bias(s: dict[str, Any]) -> str:
    return f"{s['median_ape']:.1f}%, x{s['median_predicted_over_measured']:.2f} ({s['n']})"


def _own_runs_table(by_source: dict[str, Any]) -> Table:
    """Per source: each run with the constants fitted without its source, and with them
    calibrated on its server's other runs in that source (`calibrate --bench`, held out by
    run)."""
    t = Table(
        title="Calibrated on your own runs: each run predicted by the constants fitted without "
        "its source, then calibrated on its server's other runs (median abs error, n)"
    )
    for col in ("source", "metric", "constants without the source", "+ own other runs"):
        t.add_column(col)
    for source, metrics in by_source.items():
        for metric, s in metrics.items():
            t.add_row(
                source, metric, f"{s['median_ape_held_out']:.1f}% ({s['n']})",
                f"{s['median_ape_own_runs']:.1f}%",
            )
    return t


def _one_sweep_table(one: dict[str, Any]) -> Table:
    """Per server and sweep calibrated on (`calibrate --bench` on one prompt and output
    length): each other sweep's median abs error per metric, uncalibrated -> calibrated."""
    pooled = one["pooled"]
    t = Table(
        title="Calibrated on one sweep: the server's other sweeps, constants fitted without the "
        "source -> calibrated (median abs error per metric; over all their runs and metrics); "
        f"{pooled['within_target']} of {pooled['cases']} within {pooled['target_pct']:g} %"
    )
    for col in ("server", "calibrated on", "held out", "ttft_ms", "itl_ms", "output tok/s", "all"):
        t.add_column(col)
    for case in one["cases"]:
        for k, cell in enumerate(case["cells"]):
            def cell_text(metric: str, cell: dict[str, Any] = cell) -> str:
                if metric not in cell["after"]:
                    return "-"
                b, a = cell["before"][metric], cell["after"][metric]
                return f"{b:.1f} -> {a:.1f}%" + (" WORSE" if a > b else "")
            t.add_row(
                case["server"] if k == 0 else "", case["calibrated_on"] if k == 0 else "",
                cell["held_out"], cell_text("ttft_ms"), cell_text("itl_ms"),
                cell_text("output_tokens_per_s"),
                f"{case['pooled_before']:.1f} -> {case['pooled_after']:.1f}%" if k == 0 else "",
            )
    for metric, s in one["summary"].items():
        t.add_row(
            "summary", "", metric, "", "", "",
            f"{s['median_before']:.1f} -> {s['median_after']:.1f}%, worse in {s['worse']} of "
            f"{s['cells']}",
        )
    return t


def _fmt(s: dict[str, Any]) -> str:
    if s["median_ape"] is None:
        text = "no prediction"
    else:
        text = f"{s['median_ape']:.1f}% / {s['p90_ape']:.1f}% ({int(s['n'])})"
    if s.get("infeasible"):
        text += f" +{int(s['infeasible'])} wrongly infeasible"
    return text


def capacity_lines(fp: FleetPlan) -> list[str]:
    lines = ["", "Capacity (Karpenter above an always-on floor; zones by ID):"]
    for r in fp.regions:
        cap, cold, cost = r.capacity, r.cold_start, r.costs
        zones = ", ".join(cap.node_zone_ids) + (" (ONE ZONE ONLY)" if cap.single_zone else "")
        lines += [
            f"  {r.region}: {cap.purchase}; floor {cap.floor_nodes} node(s), ceiling "
            f"{cap.ceiling_nodes} (Karpenter nvidia.com/gpu <= {cap.karpenter_gpu_limit}); "
            f"GPU zones {zones}",
            f"    cold start {cold.total_s:.0f} s (node {cold.node_s:.0f} s, container "
            f"{cold.container_s:.0f} s; startup probe {cold.startup_budget_s} s); weights "
            f"{cold.weights_uri}",
            f"    $/month: GPUs {cost.gpu_peak:,.0f} at peak, {cost.gpu_trough:,.0f} at trough, "
            f"{cost.gpu_day_profile:,.0f} over the day; all-in {cost.total_day_profile:,.0f}"
            + (
                f" = ${cost.usd_per_million_output_tokens:.2f} per million output tokens"
                if cost.usd_per_million_output_tokens is not None
                else " (no traffic of its own: a standby)"
            ),
        ]
    lines += ["", "Service quotas to request before `pulumi up` (EC2, per region):"]
    for r in fp.regions:
        for q in r.capacity.quotas:
            lines.append(
                f"  {r.region}: {q.quota_name} ({q.quota_code}) >= {q.vcpus_needed:,} vCPUs"
            )
        if not r.capacity.quotas:
            lines.append(f"  {r.region}: none counted in vCPUs ({r.capacity.purchase})")
    return lines
