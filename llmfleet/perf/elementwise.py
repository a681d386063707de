"""The step model's arithmetic on a number or an array of them: `step_time` takes a running
batch, a context, a chunk and its start as floats (one step) or as numpy arrays (a table of
steps, computed in one pass: `step.step_times`). Python's `max`, `min` and `if value:` do
not broadcast; these do, and keep the scalar path as fast as plain floats."""

from __future__ import annotations

from typing import TypeVar, cast

import numpy as np

Num = TypeVar("Num", float, np.ndarray)


def emax(a: Num, b: float | Num) -> Num:
    """The larger, elementwise (either may be an array)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return cast(Num, np.maximum(a, b))
    return a if a >= b else b


def emin(a: Num, b: float | Num) -> Num:
    """The smaller, elementwise (either may be an array)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return cast(Num, np.minimum(a, b))
    return a if a <= b else b


def present(x: Num) -> Num:
    """1 where a quantity is present (> 0), else 0: `if prefill:` that broadcasts."""
    if isinstance(x, np.ndarray):
        return (x > 0).astype(float)
    return 1.0 if x > 0 else 0.0
