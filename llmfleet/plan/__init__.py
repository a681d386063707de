"""The capacity plan: its schema (what a user may write), its checks against the catalogs,
which model it serves, and where plans are read from (stack files, git revisions).
Imports catalog and perf (shapes and precisions)."""
