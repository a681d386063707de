"""The region's levers section: which checkpoint a replica loads at the chosen precision,
what it downloads, and the speculation it runs (`fleet.ChosenLevers`)."""

from __future__ import annotations

from llmfleet import fleet
from llmfleet.choice import Choice
from llmfleet.levers import served
from llmfleet.units import GIB


def chosen_levers(choice: Choice) -> fleet.ChosenLevers:
    lv = choice.lever
    ckpt = served(choice.plan, choice.model, lv)
    spec = lv.spec
    return fleet.ChosenLevers(
        precision=lv.precision,
        kv_cache_dtype=lv.kv_cache_dtype,
        checkpoint=ckpt.hf_repo,
        checkpoint_source=ckpt.source,
        download_gib=round(ckpt.download_bytes / GIB, 2),
        speculative=spec.method if spec else None,
        num_speculative_tokens=spec.k if spec else None,
        acceptance_rate=spec.acceptance_rate if spec else None,
        tokens_per_step=round(spec.tokens_per_step, 4) if spec else 1.0,
        draft_model=spec.draft_model if spec else None,
        acceptance_source=spec.source if spec else None,
    )


def download_gib(choice: Choice) -> float:
    """Weights a replica downloads and caches: the checkpoint served plus any drafter."""
    return served(choice.plan, choice.model, choice.lever).download_bytes / GIB
