"""`max_rate`: the SLO-limit rate does not depend on the path its search takes.

A last-bit difference in a margin (numpy's SIMD kernels differ between CPUs) changed the
regula falsi's path and with it the answer by up to its tolerance, which moved max_num_seqs
of the reasoning stack from 823 to 810 between two machines."""

import math

import pytest
from slo_tables import table_8b

from llmfleet.perf.latency import at_rate
from llmfleet.perf.workload import SloTargets
from llmfleet.search.slo_limit import COARSE_TOLERANCE, RATE_TOLERANCE, max_rate

SLO = SloTargets(95, ttft_s=0.8, itl_s=0.04, max_stall_s=0.2)


def test_the_answer_is_the_same_from_any_starting_guess() -> None:
    table = table_8b()
    cold = max_rate(table, SLO)
    # guesses 30 % low to 30 % high start the bracket in other places; the grid is one
    assert {max_rate(table, SLO, guess=cold * g) for g in (0.7, 0.95, 1.0, 1.05, 1.3)} == {cold}


def test_the_fine_answer_meets_the_slo_and_one_step_more_does_not() -> None:
    table = table_8b()
    rate = max_rate(table, SLO)
    assert at_rate(table, rate, SLO.percentile).load_ratio(SLO, exact=False) <= 1
    # the next grid point of the running batch is log(1.003) further: its rate is past the limit
    beyond = rate * (1 + 2 * RATE_TOLERANCE)
    assert at_rate(table, beyond, SLO.percentile).load_ratio(SLO, exact=False) > 1


def test_a_coarse_answer_lies_within_its_tolerance_of_the_fine_one() -> None:
    table = table_8b()
    fine, coarse = max_rate(table, SLO), max_rate(table, SLO, COARSE_TOLERANCE)
    assert math.log(coarse / fine) == pytest.approx(0, abs=math.log1p(COARSE_TOLERANCE))
