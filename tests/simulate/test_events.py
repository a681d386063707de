"""The yardstick: replicas served request by request, engine step by engine step, and the
fluid model measured against it on short windows."""

import math

import numpy as np
import pytest
from plans import three_regions

from llmfleet.perf.step import step_time
from llmfleet.simulate.engine import replica_models
from llmfleet.simulate.events import CHUNK_ROUND, START_ROUND, compare, serve


@pytest.fixture(scope="module")
def models(own_plans):
    """The three-regions plan's replica models (Llama-3.3-70B at TTFT 500 ms / 40 ms p99)."""
    return replica_models(three_regions(), own_plans["three-regions"])


def test_a_lone_request_takes_its_prefill_step_then_one_step_per_token(models) -> None:
    engine = models["us-east-1"].table.engine
    sm = engine.step_model
    got = serve(engine, np.array([0.0]), np.array([128]), np.array([3]))
    prefill = step_time(sm, 0, 0.0, 128.0, 0.0).total_s  # 128 tokens in one chunk
    decode = step_time(sm, 1, 128.0).total_s  # its context rounds to 128
    # the API server's request handling comes before the first token
    assert got.ttft_s[0] == pytest.approx(prefill + sm.ttft_overhead_s)
    assert got.longest_gap_s[0] == pytest.approx(decode)  # the longest of its two gaps


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks(models) -> None:
    engine = models["us-east-1"].table.engine
    sm = engine.step_model
    budget = engine.budget_tokens  # max_num_batched_tokens: a step carries at most this many
    prompt = 2 * budget - 30  # two chunks: a full one, then the rest from where it stopped
    got = serve(engine, np.array([0.0]), np.array([prompt]), np.array([2]))
    up = lambda n: math.ceil(n / CHUNK_ROUND) * CHUNK_ROUND  # noqa: E731 (the step's rounding)
    first = step_time(sm, 0, 0.0, float(up(budget)), 0.0).total_s
    rest_start = budget // START_ROUND * START_ROUND
    second = step_time(sm, 0, 0.0, float(up(prompt - budget)), float(rest_start))
    assert got.ttft_s[0] == pytest.approx(first + second.total_s + sm.ttft_overhead_s)


def test_the_fluid_model_agrees_with_the_events_at_the_sized_load(models, own_plans) -> None:
    rp = own_plans["three-regions"].region("eu-north-1")
    sized = rp.predicted.requests_per_s * 0.8  # the plan's headroom is 20 %
    c = compare(three_regions(), models["eu-north-1"], np.full(600, sized), 6)
    assert c.attainment_events > 0.99 and abs(c.error) < 0.005


def test_the_fluid_model_follows_an_overload_and_its_drain(models, own_plans) -> None:
    # 5 minutes at 80 % of the SLO-limit rate, 10 at 125 % of the highest rate a replica
    # keeps up with, 10 at 60 % of the SLO-limit rate: the backlog builds and drains in both
    # runs within a minute of each other. (Since #28 the SLO-limit rate, 13.27 req/s, is
    # TTFT p99's and the replica keeps up to 15.90, 1.2x it: 110 % of it builds no backlog.
    # At 110 % of 15.90 the fluid model, which fails every arrival from the first overloaded
    # step to the end of the drain, errs by 2.8 %, a minute at each edge. With the path-free
    # SLO-limit rate the replica holds 133 slots, not 124: the minutes differ by 0.021 on
    # average, the share by 0.018, where they differed by less than 0.02.)
    cap = own_plans["three-regions"].region("us-west-2").predicted.requests_per_s
    top = models["us-west-2"].saturation_rate
    rate = np.concatenate([np.full(300, 0.8 * cap), np.full(600, 1.25 * top),
                           np.full(600, 0.6 * cap)])
    c = compare(three_regions(), models["us-west-2"], rate, 10, step_s=2.5)
    assert abs(c.error) < 0.02 and c.minute_mae < 0.025
    assert c.minute_events[4] > 0.99 and c.minute_events[10] < 0.01  # before, during
