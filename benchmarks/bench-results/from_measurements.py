"""Write InferenceMAX's gpt-oss-120b runs (benchmarks/measurements.csv, source S40) in the
shape of a `vllm bench serve --save-result --append-result` file: one JSON object per run,
one file per server and nominal ISL/OSL. See README.md here for what is a published figure
and what is derived. Run from the repository root: python benchmarks/bench-results/from_measurements.py
"""

import csv
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = HERE.parent / "measurements.csv"
SOURCE = (
    "InferenceMAX run 20667906037 (2026-01-02), vLLM v0.13.0, via benchmarks/measurements.csv "
    "rows {rows} (source S40)"
)
DERIVED = (
    "duration, total_input_tokens, total_output_tokens and request_throughput are derived "
    "(see README.md); completed = num_prompts (no failure reported)"
)


def per_gpu_note(notes: str, name: str) -> float | None:
    m = re.search(rf"{name} ([0-9.]+) tok/s/GPU", notes)
    return float(m.group(1)) if m else None


def run(r: dict[str, str]) -> dict[str, object]:
    tp = int(r["tensor_parallel"])
    out_s = float(r["output_tok_s"]) if r["output_tok_s"] else per_gpu_note(r["notes"], "output") * tp
    tot_s = float(r["total_tok_s"]) if r["total_tok_s"] else per_gpu_note(r["notes"], "total") * tp
    e2e, ttft, tpot = (float(r[k]) for k in ("e2e_latency_mean_ms", "ttft_mean_ms", "tpot_mean_ms"))
    n = int(r["num_prompts"])
    # A request's mean output by the benchmark's own TPOT definition; input from the rates.
    mean_out = 1 + (e2e - ttft) / tpot
    mean_in = mean_out * (tot_s / out_s - 1)
    duration = n * mean_out / out_s
    return {
        "backend": "vllm",
        "model_id": r["model"],
        "num_prompts": n,
        "source": SOURCE.format(rows=r["row_id"]),
        "derived": DERIVED,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": int(float(r["concurrency"])),
        "duration": round(duration, 3),
        "completed": n,
        "total_input_tokens": round(n * mean_in),
        "total_output_tokens": round(n * mean_out),
        "request_throughput": round(n / duration, 4),
        "output_throughput": out_s,
        "total_token_throughput": tot_s,
        "mean_ttft_ms": ttft,
        "p99_ttft_ms": float(r["ttft_p99_ms"]),
        "mean_tpot_ms": tpot,
        "mean_e2el_ms": e2e,
        "median_e2el_ms": float(r["e2e_latency_p50_ms"]),
    }


def main() -> None:
    rows = [r for r in csv.DictReader(ROWS.open()) if r["source_id"] == "S40"]
    files: dict[str, list[dict[str, object]]] = {}
    for r in sorted(rows, key=lambda r: (r["gpu"], r["tensor_parallel"], float(r["concurrency"]))):
        gpu = r["gpu"].split()[-1].lower()
        name = f"gpt-oss-120b-{gpu}-tp{r['tensor_parallel']}-{r['input_len']}-{r['output_len']}.jsonl"
        files.setdefault(name, []).append(run(r))
    for name, runs in sorted(files.items()):
        (HERE / name).write_text("".join(json.dumps(o) + "\n" for o in runs))
        print(f"wrote {name}: {len(runs)} runs")


if __name__ == "__main__":
    main()
