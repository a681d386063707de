"""Checks of a user's Hugging Face config.json beyond "is it JSON": shapes no model has,
which would otherwise be sized as if they worked."""

from __future__ import annotations

from llmfleet.errors import PlanError


def _positive_int(cfg: dict[str, object], key: str) -> int | None:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check_config_heads(cfg: dict[str, object], path: str, field: str) -> None:
    """Grouped-query attention shares each KV head among num_attention_heads /
    num_key_value_heads query heads, so the division must be exact."""
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}  # type: ignore[dict-item]
    heads = _positive_int(cfg, "num_attention_heads")
    kv_heads = _positive_int(cfg, "num_key_value_heads")
    if heads is None or kv_heads is None:
        return
    if heads % kv_heads:
        divisors = [d for d in range(1, heads + 1) if heads % d == 0]
        raise PlanError(
            field,
            path,
            f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads "
            f"({kv_heads}); no model shares KV heads unevenly. KV heads must divide "
            f"{heads}: one of {', '.join(map(str, divisors))}",
        )
