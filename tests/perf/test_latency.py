"""One replica at a load as distributions: Little's law for the running batch, the prefill
lane loaded by its share of time, token gaps at a percentile from the share of gaps that
carry a chunk, TTFT at a percentile over every prompt length, never a sum of percentiles."""

import math
from dataclasses import replace

import numpy as np
import pytest
from slo_tables import fixed, table_8b, workload

from llmfleet.perf.latency import Point, at_rate, at_running, rate_at, running_at
from llmfleet.perf.queueing import lundberg_decay, wait_tail
from llmfleet.perf.workload import SloTargets


def test_the_running_batch_is_the_rate_times_a_requests_decode_periods() -> None:
    # Every period 20 ms, 101 output tokens: a request decodes 100 periods, 2 s; at 5 req/s
    # (no prompt work) 10 sequences run (Little's law).
    table = fixed(0.02, cap=64, output=101)
    assert running_at(table, 5.0) == pytest.approx(10.0, rel=1e-4)
    assert rate_at(table, 10.0) == pytest.approx(5.0)


def test_the_rate_a_batch_settles_at_inverts_the_batch_a_rate_settles_at() -> None:
    table = table_8b()
    for rate in (2.0, 8.0, 15.0):
        assert rate_at(table, running_at(table, rate)) == pytest.approx(rate, rel=1e-3)


def test_the_prefill_lane_is_loaded_by_its_share_of_time_not_of_steps() -> None:
    # Each prompt works its lane 60 ms; at 5 req/s the lane is busy 30 % of the time. A
    # period with a chunk takes 60 ms, one without 20 ms, so per second 0.3 / 0.06 = 5 mixed
    # and 0.7 / 0.02 = 35 plain periods: 12.5 % of the gaps sit in mixed periods, not 30 %.
    table = fixed(0.02, cap=256, output=101, prompt_work_s=0.06)
    table = replace(table, mixed_s=np.full(257, 0.06))
    pt = at_rate(table, 5.0, 99)
    assert pt.lane_utilisation == pytest.approx(0.3)
    assert pt.mixed_time_share == pytest.approx(0.3)
    assert pt.mixed_gap_share == pytest.approx(5 / 40)


def test_the_token_gap_at_p_is_a_decode_period_while_mixed_gaps_stay_within_the_tail() -> None:
    # 12.5 % of the gaps are 60 ms and the rest 20 ms: the gap at p80 is 20 ms, at p95 and
    # p99 60 ms (over 5 % and 1 % of the gaps are mixed).
    table = fixed(0.02, cap=256, output=101, prompt_work_s=0.06)
    table = replace(table, mixed_s=np.full(257, 0.06))
    assert at_rate(table, 5.0, 80).gap_s == pytest.approx(0.02)
    assert at_rate(table, 5.0, 95).gap_s == pytest.approx(0.06)
    gap = at_rate(table, 5.0, 99)
    assert gap.gap_over(0.05) == pytest.approx(0.125)  # the share of gaps over 50 ms


def test_an_mg1_waits_tail_decays_at_its_cramer_lundberg_rate() -> None:
    # A deterministic 0.1 s service at 5 req/s (rho 0.5): the decay g solves
    # 5 (exp(0.1 g) - 1) = g, g = 12.56/s; an exponential service's would be 5/s.
    g = lundberg_decay(5.0, np.array([0.1]), np.array([1.0]))
    assert 5 * (math.exp(0.1 * g) - 1) == pytest.approx(g, rel=1e-6)
    assert g == pytest.approx(12.56, abs=0.01)


def test_two_waits_add_as_their_closed_form_says() -> None:
    # Each waits with chance 1/2 an exponential of mean 1 s: the sum exceeds 1 s with
    # chance 1/4 x 2e^-1 + 2 x 1/4 x e^-1 = e^-1 (Erlang-2 tail for both, one tail each).
    tail = wait_tail(np.array([1.0]), 0.5, 1.0, 0.5, 1.0)[0]
    assert tail == pytest.approx(0.25 * 2 * math.exp(-1) + 0.5 * math.exp(-1))


def test_ttft_at_p_is_of_the_distribution_not_a_sum_of_percentiles() -> None:
    # BASE's prompts on Llama-3.1-8B / H100 at 15 req/s: the p99 prompt's own prefill plus
    # the p99 wait is more than the p99 of their sum (a long prompt rarely also waits long).
    pt = at_rate(table_8b(), 15.0, 99)
    lane = pt.lane
    wait_p99 = lane.wait_s * math.log(lane.wait_chance / 0.01) if lane.wait_chance > 0.01 else 0
    summed = pt.fixed_s + float(pt.own_prefill_s[-3]) + wait_p99  # the p99 bin's own prefill
    assert pt.ttft_at() < summed
    assert pt.ttft_over(pt.ttft_at()) == pytest.approx(0.01, abs=1e-4)


def test_refused_prompts_count_against_the_ttft_budget() -> None:
    # BASE's prompts (lognormal, mu 6.4735, sigma 0.932) with max_model_len 4,096: a share
    # 1 - Phi((ln 4,095 - 6.4735) / 0.932) = 2.39 % exceed 4,095 tokens, so at p95 only
    # 2.61 % of the others may be late, and at p98 TTFT is never met.
    t = table_8b(wl=workload(limit=4095))
    assert t.workload.prompts.refused == pytest.approx(0.0239, abs=1e-4)
    quiet = at_rate(t, 1.0, 95)
    assert quiet.ttft_over(10.0) == pytest.approx(t.workload.prompts.refused)
    assert math.isfinite(quiet.ttft_at())
    assert at_rate(t, 1.0, 98).ttft_at() == math.inf


def test_more_load_never_shortens_ttft_or_the_token_gap() -> None:
    table = table_8b()
    points = [at_rate(table, r, 99) for r in (2.0, 6.0, 10.0, 14.0, 18.0)]
    ttft = [p.ttft_at() for p in points]
    gaps = [p.gap_s for p in points]
    assert ttft == sorted(ttft) and gaps == sorted(gaps)


def test_a_replica_meets_an_slo_only_if_every_share_outside_it_fits_the_tail() -> None:
    table = table_8b()
    slo = SloTargets(99, ttft_s=1.5, itl_s=0.05, max_stall_s=0.25)
    quiet, busy = at_rate(table, 2.0, 99), at_rate(table, 30.0, 99)
    assert quiet.meets(slo) and not busy.meets(slo)
    assert isinstance(at_running(table, 40.0, 99), Point)
