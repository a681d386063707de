"""The yardstick: replicas served request by request, engine step by engine step, and the
fluid model measured against it on short windows."""

import math

import numpy as np
import pytest

from llmfleet.perf.step import step_time
from llmfleet.plan.stacks import read_plan
from llmfleet.simulate.engine import replica_models
from llmfleet.simulate.events import CHUNK_ROUND, START_ROUND, compare, serve


@pytest.fixture(scope="module")
def prod_models(stack_plans):
    return replica_models(read_plan("prod"), stack_plans["prod"])


def test_a_lone_request_takes_its_prefill_step_then_one_step_per_token(prod_models) -> None:
    m = prod_models["us-east-1"]
    got = serve(m, np.array([0.0]), np.array([128]), np.array([3]), "token_gap")
    prefill = step_time(m.step_model, 0, 0.0, 128.0, 0.0).total_s  # 128 tokens in one chunk
    decode = step_time(m.step_model, 1, 128.0).total_s  # its context rounds to 128
    assert got.ttft_s[0] == pytest.approx(prefill)
    assert got.itl_s[0] == pytest.approx(decode)  # the longest of its two gaps


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks(prod_models) -> None:
    m = prod_models["us-east-1"]
    budget = m.budget_tokens  # max_num_batched_tokens: a step carries at most this many
    prompt = 2 * budget - 30  # two chunks: a full one, then the rest from where it stopped
    got = serve(m, np.array([0.0]), np.array([prompt]), np.array([2]), "token_gap")
    up = lambda n: math.ceil(n / CHUNK_ROUND) * CHUNK_ROUND  # noqa: E731 (the step's rounding)
    first = step_time(m.step_model, 0, 0.0, float(up(budget)), 0.0).total_s
    rest_start = budget // START_ROUND * START_ROUND
    second = step_time(m.step_model, 0, 0.0, float(up(prompt - budget)), float(rest_start))
    assert got.ttft_s[0] == pytest.approx(first + second.total_s)


def test_the_fluid_model_agrees_with_the_events_at_the_sized_load(prod_models, stack_plans) -> None:
    rp = stack_plans["prod"].region("eu-north-1")
    sized = rp.predicted.requests_per_s * 0.8  # prod's headroom is 20 %
    c = compare(read_plan("prod"), prod_models["eu-north-1"], np.full(600, sized), 6)
    assert c.attainment_events > 0.99 and abs(c.error) < 0.005


def test_the_fluid_model_follows_an_overload_and_its_drain(prod_models, stack_plans) -> None:
    # 5 minutes at 80 % of the SLO-limit rate, 10 at 110 %, 10 at 60 %: the backlog builds
    # and drains in both runs within a minute of each other
    cap = stack_plans["prod"].region("us-west-2").predicted.requests_per_s
    rate = np.concatenate([np.full(300, 0.8 * cap), np.full(600, 1.1 * cap),
                           np.full(600, 0.6 * cap)])
    c = compare(read_plan("prod"), prod_models["us-west-2"], rate, 10, step_s=2.5)
    assert abs(c.error) < 0.02 and c.minute_mae < 0.02
    assert c.minute_events[4] > 0.99 and c.minute_events[10] < 0.01  # before, during
