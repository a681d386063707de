"""The wait for a batch slot: the birth-death chain on the running batch, and the share of its
SLO-limit rate a replica carries once a region loss has spent the headroom."""

import numpy as np
import pytest

from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import fitted
from llmfleet.perf.architecture import from_config
from llmfleet.perf.slots import (
    BatchTable,
    batch_table,
    loss_share,
    running_context_tokens,
    slot_chain,
    slot_wait_chance,
)
from llmfleet.perf.step import StepModel


def h100_8b() -> StepModel:
    e = model_facts.model_entry("Llama-3.1-8B-Instruct")
    return StepModel(
        from_config(e.id, e.config), hardware.gpu("H100"), 1, "bf16", "auto", fitted()
    )


ONE_SLOT = BatchTable(cap=1, context_tokens=1.0, chunk=[10**12, 10**12],
                      decode_s=[0.02, 0.02], mixed_s=[0.02, 0.02])
"""One slot, a fixed 20 ms step, no prompt to prefill: with 100 output tokens a request holds
the slot 2 s, so the replica completes 0.5 requests/s."""


def test_the_slot_chain_of_a_one_sequence_engine_is_an_mm1_queue() -> None:
    # One slot, a fixed step: a request holds it o x step / tokens per step seconds, so an
    # arrival waits with probability rho = lambda x that time (M/M/1).
    step, o = 0.02, 100.0
    rates = np.array([5.0, 10.0, 25.0, 60.0])
    chance, at_cap = slot_chain(
        decode_s=np.array([step, step]), mixed_s=np.array([step, step]),
        chunk=np.array([1e12, 1e12]), input_mean=1.0, output_mean=o, tokens_per_step=1.0,
        rates=rates,
    )
    assert list(at_cap) == pytest.approx([1 / (o * step)] * 4)  # 0.5 requests/s
    assert list(chance) == pytest.approx([1.0, 1.0, 1.0, 1.0])  # every rate is above 0.5
    low = slot_chain(np.array([step, step]), np.array([step, step]), np.array([1e12, 1e12]),
                     1.0, o, 1.0, np.array([0.1, 0.25, 0.4]))[0]
    assert list(low) == pytest.approx([0.2, 0.5, 0.8])



def test_a_replica_in_a_loss_runs_where_an_arrival_finds_the_slot_taken_at_most_1_minus_p() -> None:
    # One slot (M/M/1): an arrival finds it taken with probability rho = lambda / 0.5. At p50
    # it may be taken half the time: rho = 0.5, a share of 0.5 of the 0.5 requests/s limit.
    share = loss_share(h100_8b(), ONE_SLOT, 0.0, 100.0, 0.5, percentile=50, floor_share=0.2)
    assert share == pytest.approx(0.5, abs=0.002)
    # At p99 rho <= 1 %: below the everyday share (80 %), which is where it stays.
    assert loss_share(h100_8b(), ONE_SLOT, 0.0, 100.0, 0.5, 99, 0.8) == 0.8


def test_a_batch_that_stays_below_its_cap_keeps_the_whole_slo_limit_rate() -> None:
    # 0.05 requests/s is a tenth of what one slot completes: rho = 0.1 <= 50 %.
    assert loss_share(h100_8b(), ONE_SLOT, 0.0, 100.0, 0.05, 50, 0.8) == 1.0


def test_a_running_sequence_holds_its_prompt_and_half_its_output_weighted_by_its_run() -> None:
    # i + E[o^2] / (2 E[o]) = i + o exp(sigma^2) / 2: 1,000 + 300 x exp(0.25) / 2 = 1,192.6
    assert running_context_tokens(1000, 300, 0.5) == pytest.approx(1000 + 150 * np.exp(0.25))
    assert running_context_tokens(1000, 300, 0.0) == 1150


def test_with_max_num_seqs_at_the_mean_batch_the_slots_are_full_about_half_the_time() -> None:
    # Llama-3.1-8B on one H100 with 64 slots: the rate at which the mean batch is 64, 64 / (o x
    # step(64)), fills them far more than 1 % of the time; 80 % of it does so far less often.
    sm = h100_8b()
    table = batch_table(sm, 1000, 300, 0.5, 64, 64 + 512, 10**9)
    step = table.decode_s[64]
    at_mean = np.array([64 / (300 * step)])
    assert slot_wait_chance(sm, table, 0.0, 300, at_mean)[0] > 0.2
    assert slot_wait_chance(sm, table, 0.0, 300, 0.8 * at_mean)[0] < 0.05


def test_the_searchs_coarse_table_is_the_exact_one_within_a_percent() -> None:
    sm = h100_8b()
    exact = batch_table(sm, 1000, 300, 0.5, 256, 256 + 512, 10**9)
    coarse = batch_table(sm, 1000, 300, 0.5, 256, 256 + 512, 10**9, points=33)
    assert np.allclose(coarse.decode_s, exact.decode_s, rtol=0.01)
    assert np.allclose(coarse.mixed_s, exact.mixed_s, rtol=0.01)
