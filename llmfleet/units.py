"""Unit constants. Memory is GiB (binary) unless a name says GB (decimal)."""

GIB = 1024**3
GB = 1e9
HOURS_PER_MONTH = 730.0
