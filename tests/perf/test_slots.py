"""The wait for a batch slot: the birth-death chain on the slots taken, and the fewest slots
an arrival finds all taken at most 1 - p of the time."""

import pytest
from slo_tables import fixed

from llmfleet.perf.slots import completions, slot_chain, slots_needed


def test_a_one_slot_engine_is_an_mm1_queue() -> None:
    # One slot, every period 20 ms, 101 output tokens: a request holds the slot for its 100
    # decode periods, 2 s, so the engine completes 0.5 requests/s and an arrival finds the
    # slot taken with probability rho = lambda / 0.5 (M/M/1).
    table = fixed(0.02, cap=1, output=101)
    for rate, rho in [(0.1, 0.2), (0.25, 0.5), (0.4, 0.8)]:
        chance, at_cap = slot_chain(table, rate, busy=0.0, own_mean_s=0.0)
        assert at_cap == pytest.approx(0.5)
        assert chance == pytest.approx(rho)
    assert slot_chain(table, 0.6, 0.0, 0.0)[0] == 1.0  # above what it completes


def test_a_slot_is_held_through_its_holders_own_prefill_too() -> None:
    # The same engine with a 2 s prefill per prompt: a slot is held 4 s, 0.25 requests/s.
    table = fixed(0.02, cap=1, output=101, prompt_work_s=2.0)
    assert completions(table, 0.0, 2.0, 1)[0] == pytest.approx(0.25)


def test_more_slots_than_an_erlang_b_queue_needs_are_rarely_all_taken() -> None:
    # Ten slots, each held 2 s: an M/M/10/10 loss queue at 2.5 requests/s (offered load 5)
    # is full with Erlang B's 1.84 %; the chain also counts arrivals queued beyond the cap,
    # which only adds to it.
    table = fixed(0.02, cap=10, output=101)
    chance, at_cap = slot_chain(table, 2.5, 0.0, 0.0)
    assert at_cap == pytest.approx(5.0)
    assert 0.0184 < chance < 0.04


def test_the_fewest_slots_keep_the_chance_of_finding_them_taken_within_the_tail() -> None:
    # Offered load 5 (2.5 requests/s, 2 s each): Erlang B is 1.84 % at 10 slots, 0.83 % at
    # 11, 0.34 % at 12; at p99 the engine needs 11 slots, at p99.5 12.
    table = fixed(0.02, cap=64, output=101)
    assert slots_needed(table, 2.5, 0.0, 0.0, tail=0.01) == 11
    assert slots_needed(table, 2.5, 0.0, 0.0, tail=0.005) == 12
