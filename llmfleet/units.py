"""Unit constants. Memory is GiB (binary) unless a name says GB (decimal)."""

GIB = 1024**3
GB = 1e9
HOURS_PER_MONTH = 730.0


def round_or_none(x: float | None, digits: int) -> float | None:
    """Round a figure that may be undefined (None), e.g. cost per token without traffic."""
    return None if x is None else round(x, digits)
