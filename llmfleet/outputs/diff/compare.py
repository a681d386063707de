"""What a change to a capacity plan does: GPUs, cost, cost per token, SLO margins, flags,
and why (one line per material change, `causes`).

`llmfleet diff BASE HEAD` sizes both plans and compares the FleetPlans region by region
(regions only on one side are added or removed), then the files each would render. Pure:
both plans are given; reading them (a stack, a file, a git revision) is
`llmfleet.plan.stacks`'. The markdown view is `markdown`'s."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, computed_field

from llmfleet.data import Data, MinDesiredMax
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.outputs import economics
from llmfleet.outputs.diff.causes import region_causes
from llmfleet.outputs.render import REPORT, render_stack
from llmfleet.units import round_or_none

MAX_DIFF_LINES = 400
"""Lines of unified diff kept; a PR comment is limited to 65,536 characters."""
DIFF_CONTEXT_LINES = 1
AUTOSCALING_FIELDS = (
    "fallback_failure_threshold",
    "polling_interval_s",
    "cooldown_period_s",
    "scale_down_stabilization_s",
)
"""The KEDA ScaledObject's settings (`Autoscaling`); each trigger's threshold is added as
`trigger.<name>` and the replica bounds come from `RegionPlan.replicas`."""


class SideCosts(Data):
    """A side's GPU cost (search.cost): billed at the peak and the trough, and per million
    output tokens of the GPU nodes at each load; the keys before #31 stay as aliases."""

    billed_monthly_cost_usd: float = Field(
        description="GPU nodes at desired for a month as their purchase bills them."
    )
    billed_monthly_cost_usd_at_trough: float
    gpu_at_peak_usd_per_million_output_tokens: float | None = Field(
        description="The GPU nodes billed for an hour at the peak over the output tokens the "
        "peak serves in it (economics.py); None without traffic."
    )
    gpu_at_trough_usd_per_million_output_tokens: float | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd(self) -> float:
        """Alias of billed_monthly_cost_usd (docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def monthly_cost_usd_at_trough(self) -> float:
        """Alias of billed_monthly_cost_usd_at_trough (docs/cli.md#aliases)."""
        return self.billed_monthly_cost_usd_at_trough

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_million_output_tokens(self) -> float | None:
        """Alias of gpu_at_peak_usd_per_million_output_tokens (docs/cli.md#aliases)."""
        return self.gpu_at_peak_usd_per_million_output_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_per_million_output_tokens_at_trough(self) -> float | None:
        """Alias of gpu_at_trough_usd_per_million_output_tokens (docs/cli.md#aliases)."""
        return self.gpu_at_trough_usd_per_million_output_tokens


class RegionSide(SideCosts):
    """One region of one plan, as the diff compares it."""

    instance_type: str
    gpu: str
    tensor_parallel_size: int
    precision: str
    kv_cache_dtype: str
    gpus: MinDesiredMax = Field(description="GPUs in the GPU node pool (nodes x GPUs per node).")
    nodes: MinDesiredMax
    replicas: MinDesiredMax
    ttft_ms: float
    slo_ttft_ms: float
    ttft_margin: float = Field(description="(SLO - predicted) / SLO; negative: over the SLO.")
    itl_ms: float
    slo_itl_ms: float
    itl_margin: float
    price_usd_per_hour: float
    price_source: str
    price_override: bool
    price_note: str
    engine_args: dict[str, Any] = Field(description="vllm-config.yaml (Serving.args).")
    autoscaling: dict[str, int | float] = Field(
        description="AUTOSCALING_FIELDS of the ScaledObject."
    )
    speculative: str | None = Field(default=None, description="Speculative method, if any.")
    batch: int = Field(default=0, description="max_num_seqs at the operating point.")
    binding: str = Field(default="", description="What stops the batch (RegionPlan.binding).")
    capacity_requests_per_s: float = Field(
        default=0.0, description="What one replica carries inside the SLOs."
    )


class Change(Data):
    key: str
    before: Any
    after: Any


class RegionDiff(Data):
    region: str
    status: Literal["added", "removed", "changed", "unchanged"]
    before: RegionSide | None
    after: RegionSide | None
    engine_flags: list[Change] = Field(description="vllm-config.yaml keys that differ.")
    autoscaling: list[Change] = Field(description="ScaledObject numbers that differ.")
    causes: list[str] = Field(
        default_factory=list,
        description="One line per material change (GPUs, cost, batch, TP, levers, the "
        "floor) naming the constraint that binds (diff/causes.py).",
    )


class FleetSide(SideCosts):
    name: str
    model: str
    precision: str
    kv_cache_dtype: str
    served_as: str = Field(
        default="", description="Precision, KV dtype and speculation per region (served_as)."
    )
    gpus: MinDesiredMax
    inputs: dict[str, Any] = Field(description="The plan's SLO, traffic, headroom, confidence.")


class FileChanges(Data):
    added: list[str]
    removed: list[str]
    changed: list[str]


class PlanDiff(Data):
    base: str
    head: str
    same_model: bool
    model_note: str | None = Field(description="Says so when the two plans serve other models.")
    fleet: dict[str, FleetSide] = Field(description="`before` and `after`.")
    inputs: list[Change] = Field(description="Plan inputs (SLO, traffic, ...) that differ.")
    regions: list[RegionDiff]
    files: FileChanges
    rendered_diff: str = Field(description="Unified diff of the rendered YAML files, truncated.")
    rendered_diff_truncated_lines: int


def _region(fp: FleetPlan, name: str) -> RegionPlan | None:
    return next((r for r in fp.regions if r.region == name), None)


def margin(predicted: float, target: float) -> float:
    """Share of the target left unused: 0.25 is 25 % below it; negative is over it."""
    return (target - predicted) / target


def _gpus(rp: RegionPlan) -> MinDesiredMax:
    n = rp.gpus_per_node
    return MinDesiredMax(min=rp.nodes.min * n, desired=rp.nodes.desired * n, max=rp.nodes.max * n)


def region_side(fp: FleetPlan, rp: RegionPlan) -> RegionSide:
    per_mtok = economics.gpu_usd_per_million_output_tokens
    note = economics.price_note(rp)
    a = rp.autoscaling
    scaling: dict[str, Any] = {k: getattr(a, k) for k in AUTOSCALING_FIELDS}
    scaling.update({f"trigger.{t.name}": t.threshold for t in a.triggers})
    return RegionSide(
        instance_type=rp.instance_type,
        gpu=rp.gpu,
        tensor_parallel_size=rp.tensor_parallel_size,
        precision=rp.levers.precision if rp.levers else fp.model.precision,
        kv_cache_dtype=rp.levers.kv_cache_dtype if rp.levers else fp.model.kv_cache_dtype,
        gpus=_gpus(rp),
        nodes=rp.nodes,
        replicas=rp.replicas,
        billed_monthly_cost_usd=rp.billed_monthly_cost_usd,
        billed_monthly_cost_usd_at_trough=rp.billed_monthly_cost_usd_at_trough,
        gpu_at_peak_usd_per_million_output_tokens=round_or_none(per_mtok(fp, rp, "peak"), 4),
        gpu_at_trough_usd_per_million_output_tokens=round_or_none(
            per_mtok(fp, rp, "trough"), 4
        ),
        ttft_ms=rp.predicted.ttft_ms,
        slo_ttft_ms=fp.slo.ttft_ms,
        ttft_margin=round(margin(rp.predicted.ttft_ms, fp.slo.ttft_ms), 4),
        itl_ms=rp.predicted.itl_ms,
        slo_itl_ms=fp.slo.itl_ms,
        itl_margin=round(margin(rp.predicted.itl_ms, fp.slo.itl_ms), 4),
        price_usd_per_hour=rp.price_usd_per_hour,
        price_source=rp.price_source,
        price_override=note.override,
        price_note=note.text(),
        engine_args=rp.serving.vllm.config(),
        autoscaling=scaling,
        speculative=rp.levers.speculative if rp.levers else None,
        batch=rp.serving.vllm.max_num_seqs,
        binding=rp.binding.text,
        capacity_requests_per_s=rp.predicted.requests_per_s,
    )


def fleet_side(fp: FleetPlan) -> FleetSide:
    per_mtok = economics.gpu_usd_per_million_output_tokens
    return FleetSide(
        name=fp.name,
        model=fp.model.id,
        precision=fp.model.precision,
        kv_cache_dtype=fp.model.kv_cache_dtype,
        served_as=fp.served_as(),
        gpus=fp.gpus,
        billed_monthly_cost_usd=fp.billed_monthly_cost_usd,
        billed_monthly_cost_usd_at_trough=fp.billed_monthly_cost_usd_at_trough,
        gpu_at_peak_usd_per_million_output_tokens=round_or_none(per_mtok(fp, None, "peak"), 4),
        gpu_at_trough_usd_per_million_output_tokens=round_or_none(
            per_mtok(fp, None, "trough"), 4
        ),
        inputs={
            **{f"slo.{k}": v for k, v in sorted(fp.slo.model_dump().items())},
            **{
                f"traffic.{k}": v
                for k, v in sorted(_flat(fp.traffic.model_dump()).items())
            },
            "headroom": fp.headroom,
            "confidence": fp.confidence,
            "max_model_len": fp.regions[0].serving.vllm.max_model_len,
            "kubernetes_version": fp.kubernetes_version,
        },
    )


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"input_tokens": {"mean": 1}} -> {"input_tokens.mean": 1}."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """Keys whose values differ, sorted; a key on one side only has None on the other."""
    return [
        Change(key=k, before=before.get(k), after=after.get(k))
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    ]


def region_diff(
    region: str,
    before: RegionSide | None,
    after: RegionSide | None,
    causes: list[str] | None = None,
) -> RegionDiff:
    if before is None or after is None:
        status: Literal["added", "removed", "changed", "unchanged"] = (
            "added" if before is None else "removed"
        )
    else:
        status = "unchanged" if before == after else "changed"
    return RegionDiff(
        region=region,
        status=status,
        before=before,
        after=after,
        engine_flags=changes(
            before.engine_args if before else {}, after.engine_args if after else {}
        ),
        autoscaling=changes(
            before.autoscaling if before else {}, after.autoscaling if after else {}
        ),
        causes=causes or [],
    )


def rendered_changes(
    before: dict[str, str], after: dict[str, str], max_lines: int = MAX_DIFF_LINES
) -> tuple[FileChanges, str, int]:
    """Which rendered files change, and a unified diff of the YAML ones (the report and the
    charts are listed, not shown: the diff's tables summarise them). Returns the diff
    truncated to `max_lines` and how many lines were cut."""
    files = FileChanges(
        added=sorted(set(after) - set(before)),
        removed=sorted(set(before) - set(after)),
        changed=sorted(p for p in set(before) & set(after) if before[p] != after[p]),
    )
    lines: list[str] = []
    for path in sorted(set(before) | set(after)):
        if path == REPORT or path.endswith(".svg"):
            continue
        old, new = before.get(path, ""), after.get(path, "")
        if old == new:
            continue
        lines += difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile=f"a/{path}" if path in before else "/dev/null",
            tofile=f"b/{path}" if path in after else "/dev/null",
            n=DIFF_CONTEXT_LINES,
            lineterm="",
        )
    cut = max(0, len(lines) - max_lines)
    return files, "\n".join(lines[:max_lines]) + ("\n" if lines else ""), cut


def diff_plans(base: str, before: FleetPlan, head: str, after: FleetPlan) -> PlanDiff:
    """Compare two sized plans; `base` and `head` are how the user named them."""
    same_model = before.model.id == after.model.id
    note = None
    if not same_model:
        note = (
            f"the plans serve different models ({before.model.id} {before.model.precision} -> "
            f"{after.model.id} {after.model.precision}): GPUs, cost and margins compare two "
            "services, not one service before and after"
        )
    old = {rp.region: region_side(before, rp) for rp in before.regions}
    new = {rp.region: region_side(after, rp) for rp in after.regions}
    order = [rp.region for rp in after.regions]
    order += [rp.region for rp in before.regions if rp.region not in new]
    fb, fa = fleet_side(before), fleet_side(after)
    files, text, cut = rendered_changes(render_stack(before), render_stack(after))
    return PlanDiff(
        base=base,
        head=head,
        same_model=same_model,
        model_note=note,
        fleet={"before": fb, "after": fa},
        inputs=changes(fb.inputs, fa.inputs),
        regions=[
            region_diff(
                r,
                old.get(r),
                new.get(r),
                region_causes(before, after, _region(before, r), _region(after, r)),
            )
            for r in order
        ],
        files=files,
        rendered_diff=text,
        rendered_diff_truncated_lines=cut,
    )
