"""A PlanDiff as markdown, ready to post as a pull-request comment.

Every cell reads `before -> after` when the value changed and the value alone when it did
not; a region only on one side shows `-` on the other."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from llmfleet.data import MinDesiredMax
from llmfleet.outputs.diff.compare import PlanDiff, RegionDiff, RegionSide

ARROW = " → "
NONE = "—"


def _usd(v: float) -> str:
    return f"${v:,.0f}"


def _usd2(v: float) -> str:
    return f"${v:,.2f}"


def _mdm(v: MinDesiredMax) -> str:
    return f"{v.min}/{v.desired}/{v.max}"


def _value(v: Any) -> str:
    if v is None:
        return NONE
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v, sort_keys=True)


def pair(before: Any, after: Any, fmt: Callable[[Any], str] = str) -> str:
    """`a` when equal, else `a → b`; None (absent on that side) shows as a dash."""
    a = NONE if before is None else fmt(before)
    b = NONE if after is None else fmt(after)
    return a if a == b else f"{a}{ARROW}{b}"


def pair_said(before: Any, after: Any, fmt: Callable[[Any], str] = str) -> str:
    """`a → b`, or `a (unchanged)`: a line of the summary shows its before value too."""
    text = pair(before, after, fmt)
    return text if ARROW in text else f"{text} (unchanged)"


def delta(before: float, after: float, fmt: Callable[[float], str], pct: bool = True) -> str:
    """`a → b (+d, +p %)`, or `a` when unchanged."""
    if before == after:
        return fmt(before)
    d = after - before
    sign = "+" if d > 0 else "-"
    text = f"{fmt(before)}{ARROW}{fmt(after)} ({sign}{fmt(abs(d))}"
    if pct and before:
        text += f", {d / before:+.0%}"
    return text + ")"


def _side(r: RegionDiff, get: Callable[[RegionSide], Any], fmt: Callable[[Any], str] = str) -> str:
    b = get(r.before) if r.before else None
    a = get(r.after) if r.after else None
    return pair(b, a, fmt)


def _name(r: RegionDiff) -> str:
    return r.region if r.status in ("changed", "unchanged") else f"{r.region} ({r.status})"


def _slo(pred: float, target: float, m: float) -> str:
    return f"{pred:,.4g} / {target:,.4g} ms ({m:.0%})"


def markdown(d: PlanDiff) -> str:
    fb, fa = d.fleet["before"], d.fleet["after"]
    out = [f"### llmfleet diff: `{d.base}`{ARROW}`{d.head}`", ""]
    if d.model_note:
        out += [f"> **Different models**: {d.model_note}.", ""]
    cost = delta(fb.billed_monthly_cost_usd, fa.billed_monthly_cost_usd, _usd)
    cost_trough = delta(
        fb.billed_monthly_cost_usd_at_trough, fa.billed_monthly_cost_usd_at_trough, _usd
    )
    per_mtok = pair_said(
        fb.gpu_at_peak_usd_per_million_output_tokens,
        fa.gpu_at_peak_usd_per_million_output_tokens,
        _usd2,
    )
    per_mtok_trough = pair_said(
        fb.gpu_at_trough_usd_per_million_output_tokens,
        fa.gpu_at_trough_usd_per_million_output_tokens,
        _usd2,
    )
    served = pair(fb.served_as, fa.served_as)
    out += [
        f"{pair(fb.name, fa.name)}: {pair(fb.model, fa.model)} served as {served}.",
        "",
        f"- **GPUs at the peak: {delta(fb.gpus.desired, fa.gpus.desired, str)}**; at the "
        f"trough {delta(fb.gpus.min, fa.gpus.min, str)}",
        f"- **Monthly cost at the peak: {cost}**; at the trough {cost_trough}",
        f"- $ per million output tokens at the peak: {per_mtok}; at the trough {per_mtok_trough}",
    ]
    if d.inputs:
        out.append(
            "- Plan inputs: "
            + "; ".join(f"`{c.key}` {pair(c.before, c.after, _value)}" for c in d.inputs)
        )
    out += _why(d)
    out += [
        "",
        "| region | instance | TP | precision | KV | speculation | batch | GPUs peak (trough) "
        "| nodes min/desired/max |",
        "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in d.regions:
        gpus = f"{_side(r, lambda s: s.gpus.desired)} ({_side(r, lambda s: s.gpus.min)})"
        out.append(
            f"| {_name(r)} | {_side(r, lambda s: s.instance_type)} | "
            f"{_side(r, lambda s: s.tensor_parallel_size)} | {_side(r, lambda s: s.precision)} | "
            f"{_side(r, lambda s: s.kv_cache_dtype)} | "
            f"{_side(r, lambda s: s.speculative or 'none')} | {_side(r, lambda s: s.batch)} | "
            f"{gpus} | {_side(r, lambda s: s.nodes, _mdm)} |"
        )
    out += ["", "#### Cost", ""]
    out += ["| region | $/month peak | $/month trough | $/M output tokens peak | trough |"]
    out += ["| --- | ---: | ---: | ---: | ---: |"]
    for r in d.regions:
        out.append(
            f"| {_name(r)} | {_side(r, lambda s: s.billed_monthly_cost_usd, _usd)} | "
            f"{_side(r, lambda s: s.billed_monthly_cost_usd_at_trough, _usd)} | "
            f"{_side(r, lambda s: s.gpu_at_peak_usd_per_million_output_tokens, _usd2)} | "
            f"{_side(r, lambda s: s.gpu_at_trough_usd_per_million_output_tokens, _usd2)} |"
        )
    pct = f"{fa.inputs['slo.percentile']:g}"
    out += ["", f"#### SLO margins (predicted / target at p{pct}, margin left)", ""]
    out += ["| region | TTFT | ITL |", "| --- | --- | --- |"]
    for r in d.regions:
        ttft = _side(r, lambda s: _slo(s.ttft_ms, s.slo_ttft_ms, s.ttft_margin))
        itl = _side(r, lambda s: _slo(s.itl_ms, s.slo_itl_ms, s.itl_margin))
        out.append(f"| {_name(r)} | {ttft} | {itl} |")
    out += _changed("Engine flags (`vllm-config.yaml`)", d, lambda r: r.engine_flags)
    out += _changed("Autoscaling (KEDA ScaledObject)", d, lambda r: r.autoscaling)
    out += ["", "#### Prices", ""]
    for r in d.regions:
        price = _side(r, lambda s: f"{s.instance_type} {s.price_note}")
        out.append(f"- {_name(r)}: {price}")
    out += _files(d)
    return "\n".join(out) + "\n"


def _why(d: PlanDiff) -> list[str]:
    """One line per material change of each region, with the constraint that binds."""
    lines = ["", "#### Why", ""]
    rows = []
    for r in d.regions:
        if r.causes:
            rows.append(f"- **{_name(r)}**")
            rows += [f"  - {cause}" for cause in r.causes]
    return lines + (rows or ["No material change in any region."])


def charts_section(links: list[tuple[str, str]]) -> str:
    """Markdown embedding the before/after charts (`llmfleet diff --charts DIR`)."""
    lines = ["", "#### Before and after", ""]
    for title, path in links:
        lines += [f"![{title}]({path})", ""]
    return "\n".join(lines)


def _changed(title: str, d: PlanDiff, get: Callable[[RegionDiff], list[Any]]) -> list[str]:
    lines = ["", f"#### {title}", ""]
    rows = [
        f"- {_name(r)}: "
        + ", ".join(f"`{c.key}` {pair(c.before, c.after, _value)}" for c in get(r))
        for r in d.regions
        if get(r) and r.status in ("changed", "unchanged")
    ]
    return lines + (rows or ["No change."])


def _files(d: PlanDiff) -> list[str]:
    f = d.files
    lines = ["", "#### Rendered files", ""]
    if not (f.added or f.removed or f.changed):
        return lines + ["No rendered file changes."]
    for kind, paths in (("changed", f.changed), ("added", f.added), ("removed", f.removed)):
        if paths:
            lines.append(f"- {len(paths)} {kind}: " + ", ".join(f"`{p}`" for p in paths))
    if d.rendered_diff:
        n = d.rendered_diff.count("\n")
        lines += [
            "",
            f"<details><summary>Unified diff of the YAML files ({n} lines)</summary>",
            "",
            "```diff",
            d.rendered_diff.rstrip("\n"),
            "```",
        ]
        if d.rendered_diff_truncated_lines:
            lines += [
                "",
                f"{d.rendered_diff_truncated_lines} more lines not shown: run `llmfleet render` "
                "and `git diff rendered/`.",
            ]
        lines += ["", "</details>"]
    return lines
