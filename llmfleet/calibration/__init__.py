"""Calibration: the published measurements, each predicted through `perf.replica`'s code
path, the fit of the performance model's constants (catalog/constants.json), and the
validation report. Imports catalog and perf (never the plan or the search)."""
