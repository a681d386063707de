"""The pinned vLLM release: its flags, metrics and image, derived from its own source and
shipped as `vllm/vllm-<version>.json` (how it was made: `vllm/README.md`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

VLLM_VERSION = "0.33.0"
VLLM_CATALOG = Path(__file__).parent / "vllm" / f"vllm-{VLLM_VERSION}.json"


@cache
def vllm_release() -> dict[str, Any]:
    """Flags, metrics and image of the pinned vLLM release."""
    return dict(json.loads(VLLM_CATALOG.read_text()))
