"""Engines and tables with worked numbers for the SLO model's tests."""

from dataclasses import replace

import numpy as np

from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import fitted
from llmfleet.perf.architecture import from_config
from llmfleet.perf.periods import Engine, Table, table_for
from llmfleet.perf.step import StepModel
from llmfleet.perf.workload import Prompts, ServedTraffic, prompts_of


def h100_8b() -> StepModel:
    """Llama-3.1-8B in bf16 on one H100."""
    e = model_facts.model_entry("Llama-3.1-8B-Instruct")
    return StepModel(from_config(e.id, e.config), hardware.gpu("H100"), 1, "bf16", "auto",
                     fitted())


def workload(mean: float = 1000.0, sigma: float = 0.932, output: float = 250.0,
             output_sigma: float = 0.0, limit: int = 8191) -> ServedTraffic:
    """BASE's traffic by default: prompts of mean 1,000 and p95 3,000 (sigma 0.932), 250
    output tokens, max_model_len 8,192."""
    return ServedTraffic(prompts_of(mean, sigma, limit), output, output_sigma)


def table_8b(slots: int = 256, budget: int = 2048, kv_tokens: int = 10**7,
             wl: ServedTraffic | None = None) -> Table:
    return table_for(Engine(h100_8b(), slots, budget, kv_tokens), wl or workload())


def fixed(period_s: float, cap: int, output: float, prompt_work_s: float = 0.0,
          prompt: float = 100.0) -> Table:
    """A table whose every period takes `period_s` (with or without a chunk), every prompt
    of `prompt` tokens working its lane `prompt_work_s` (its own prefill the same), `cap`
    slots: numbers a test can work by hand."""
    prompts = Prompts(np.array([prompt]), np.array([1.0]), 0.0, prompt)
    wl = ServedTraffic(prompts, output, 0.0)
    base = table_8b(slots=cap, wl=wl)
    n = cap + 1
    one = np.array([[prompt_work_s]])
    counts = np.zeros((1, 1, 5))
    counts[0, 0, 0] = 1.0  # one full period a prompt, at the mean start
    return replace(
        base,
        decode_s=np.full(n, period_s),
        mixed_s=np.full(n, period_s),
        prefill_batches=np.array([0.0]),
        own_s=one,
        work_s=one,
        work_mean_s=np.array([prompt_work_s]),
        work_cv2=np.array([0.0]),
        period_lengths=np.zeros((1, 1, 5)),
        period_weights=counts,
    )
