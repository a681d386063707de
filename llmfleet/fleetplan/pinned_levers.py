"""What the levers a plan pins cost: `model.precision` and `model.kv_cache_dtype`, when given,
pin one value and the search tries nothing else. A reviewer signing a budget should know
when a pin is what makes the fleet expensive, so each region is searched once more with the
pins lifted (the default lever space: the native precision and FP8 where a checkpoint is
published, auto and FP8 KV); where that finds a cheaper configuration, the region carries it
(`RegionPlan.pinned_alternative`) and its reasons say it, with the price."""

from __future__ import annotations

from pydantic import Field

from llmfleet.data import Data
from llmfleet.plan.schema import CapacityPlan
from llmfleet.search.choice import Choice

PINS = ("precision", "kv_cache_dtype")
"""The plan's `model.*` keys that pin a lever."""


class PinnedAlternative(Data):
    """The cheapest configuration of the region with the plan's lever pins lifted, where it
    costs less than the pinned one."""

    pins: dict[str, str] = Field(description="model.* keys the plan pins, with their values.")
    precision: str
    kv_cache_dtype: str
    speculative: str | None = Field(description="Method, or None without speculation.")
    instance_type: str
    layout: str = Field(description="The replica's layout, e.g. TP 8 or TP 8 x PP 2.")
    nodes: int = Field(description="GPU nodes at the peak (desired).")
    monthly_cost_usd: float
    pinned_monthly_cost_usd: float = Field(description="The search's cost with the pins.")
    cost_multiple: float = Field(description="pinned_monthly_cost_usd / monthly_cost_usd.")

    @property
    def text(self) -> str:
        """The line the reasons (plan and the report) show, from the fields above."""
        free = {"precision": self.precision, "kv_cache_dtype": self.kv_cache_dtype}
        lifted = {k: v for k, v in self.pins.items() if free[k] != v}
        changed = [
            f"{self.precision.upper()} weights" if k == "precision"
            else "an FP8 KV cache" if self.kv_cache_dtype == "fp8" else "16-bit KV"
            for k in lifted
        ]
        changed += [f"{self.speculative} speculation"] if self.speculative else []
        pins = " and ".join(
            f"{v if k == 'precision' else 'KV ' + v} (model.{k})" for k, v in lifted.items()
        )
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        what = " with ".join(changed)
        return (
            f"{what[:1].upper() + what[1:]} would serve this on {nodes} ({self.instance_type}, "
            f"{self.layout}) at ${self.monthly_cost_usd:,.0f}/month; the plan pins {pins}, "
            f"which costs {self.cost_multiple:.1f}x that (${self.pinned_monthly_cost_usd:,.0f}"
            "/month)"
        )


def pinned_values(plan: CapacityPlan) -> dict[str, str]:
    """The lever pins of the plan: {"precision": "bf16"}, or {} when it pins none."""
    model = plan.model
    return {k: str(getattr(model, k)) for k in PINS if k in model.model_fields_set}


def unpinned(plan: CapacityPlan) -> CapacityPlan:
    """The plan with its lever pins lifted (the search then tries the default lever space)."""
    data = plan.model_dump(exclude_unset=True)
    for key in PINS:
        data["model"].pop(key, None)
    return CapacityPlan.model_validate(data)


def build_pinned_alternative(choice: Choice, free: Choice) -> PinnedAlternative | None:
    """`free` (the region's choice without the pins) as the pins' price, or None where the
    pins cost nothing."""
    pins = pinned_values(choice.plan)
    pinned_usd, free_usd = choice.on_demand_monthly_cost_usd, free.on_demand_monthly_cost_usd
    if not pins or free_usd >= pinned_usd * (1 - 1e-9):
        return None
    lv = free.served_levers
    return PinnedAlternative(
        pins=pins,
        precision=lv.precision,
        kv_cache_dtype=lv.kv_cache_dtype,
        speculative=lv.speculative,
        instance_type=free.instance.instance_type,
        layout=free.layout.label
        if free.prefill is None
        else f"disaggregated: prefill TP {free.prefill.tp}, decode TP {free.tp}",
        nodes=free.nodes.desired,
        monthly_cost_usd=round(free_usd, 2),
        pinned_monthly_cost_usd=round(pinned_usd, 2),
        cost_multiple=round(pinned_usd / free_usd, 2),
    )
