"""Unit constants. Memory is GiB (binary) unless a name says GB (decimal)."""

GIB = 1024**3
MIB = 1024**2
GB = 1e9
HOURS_PER_MONTH = 730.0
MS_PER_S = 1000.0
