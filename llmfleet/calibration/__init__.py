"""Calibration: the published measurements, each predicted through `perf.replica`'s code
path, the fit of the performance model's constants (catalog/constants.json), and the
validation report; and a user's own `vllm bench serve` runs, read (`bench`), fitted into one
server's correction (`server_fit`) and kept as a calibration file (`server_calibration`).
Imports catalog and perf (never the plan or the search)."""
