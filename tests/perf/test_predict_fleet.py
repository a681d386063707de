"""`predict` for a fleet behind one entry point (#32): --replicas N share --request-rate,
--balancing says how the entry point spreads them, --turns / --shared-prefix-tokens /
--think-time-s what their prompts share; the JSON gives the fleet's throughput, the
per-request means and the cache hit rate (`prefix_cache_hit_rate`).

Llama-3.1-8B on one L40S, prompts of 1,000 tokens, outputs of 250, 24 req/s over 4
replicas (6 each)."""

from __future__ import annotations

import json

import pytest

from llmfleet.cli import main
from llmfleet.perf.replica import PredictRequest, run_predict

BASE = dict(model="Llama-3.1-8B", gpu="L40S", input_tokens=1000, output_tokens=250)


def _fleet(**kw: object):
    return run_predict(PredictRequest(**{**BASE, "request_rate": 24.0, "replicas": 4, **kw}))


def test_a_lone_replica_predicts_as_before_and_says_no_cache() -> None:
    r = run_predict(PredictRequest(**BASE, request_rate=6.0))
    assert (r.replicas, r.balancing, r.prefix_cache_hit_rate) == (1, None, None)


def test_the_fleets_throughput_is_its_replicas_together_and_each_serves_its_share() -> None:
    """No reuse: 4 replicas at 24 req/s are 4 lone replicas at 6 req/s each: the same
    TTFT and ITL, 4 x 1,500 output tokens/s."""
    fleet = _fleet()
    one = run_predict(PredictRequest(**BASE, request_rate=6.0))
    assert fleet.requests_per_s_per_replica == pytest.approx(6.0)
    assert fleet.requests_per_s == pytest.approx(24.0)
    assert fleet.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s) == 6000
    assert fleet.ttft_ms == pytest.approx(one.ttft_ms)
    assert fleet.itl_ms == pytest.approx(one.itl_ms)


def test_a_shared_prefix_is_a_hit_on_every_replica_whatever_the_balancing() -> None:
    """Single-turn prompts of 1,000 tokens, 400 of them shared: 40 % of every prompt is
    cached, round robin or prefix-aware, and TTFT falls with the computed tokens."""
    plain = _fleet()
    for balancing in ("round_robin", "least_outstanding", "prefix_aware"):
        r = _fleet(balancing=balancing, shared_prefix_tokens=400)
        assert r.prefix_cache_hit_rate == pytest.approx(0.4)
        assert r.cached_tokens_per_prompt == pytest.approx(400)
        assert r.ttft_ms < plain.ttft_ms


def test_prefix_aware_balancing_keeps_conversations_where_their_cache_is() -> None:
    """4-turn conversations (30 s think): least outstanding finds a turn's earlier context
    on its replica 1 time in 4, prefix-aware (one router) nearly always; more of each
    prompt is cached and TTFT is lower."""
    conv = dict(turns=4, shared_prefix_tokens=400, think_time_s=30)
    spread = _fleet(balancing="least_outstanding", **conv)
    kept = _fleet(balancing="prefix_aware", **conv)
    assert kept.prefix_cache_hit_rate > spread.prefix_cache_hit_rate > 0.4
    assert kept.ttft_ms < spread.ttft_ms


def test_round_robin_finds_a_conversation_less_often_over_more_replicas() -> None:
    conv = dict(turns=4, think_time_s=30, balancing="round_robin")
    two = run_predict(PredictRequest(**BASE, request_rate=12.0, replicas=2, **conv))
    eight = run_predict(PredictRequest(**BASE, request_rate=48.0, replicas=8, **conv))
    assert two.prefix_cache_hit_rate > eight.prefix_cache_hit_rate


def test_the_cli_takes_the_fleet_flags_and_prints_the_hit_rate(capsys) -> None:
    code = main(["predict", "--model", "Llama-3.1-8B", "--gpu", "L40S", "--input-tokens",
                 "1000", "--output-tokens", "250", "--request-rate", "24", "--replicas", "4",
                 "--balancing", "prefix-aware", "--turns", "4", "--shared-prefix-tokens",
                 "400", "--think-time-s", "30", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["balancing"] == "prefix_aware" and out["replicas"] == 4
    assert 0.4 < out["prefix_cache_hit_rate"] <= 1


def test_a_fleet_needs_an_open_loop_rate(capsys) -> None:
    code = main(["predict", "--model", "Llama-3.1-8B", "--gpu", "L40S", "--input-tokens",
                 "1000", "--output-tokens", "250", "--concurrency", "24", "--replicas", "4"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--replicas = 4" in err and "--request-rate" in err


def test_more_turns_than_the_prompt_holds_is_refused_with_what_fits(capsys) -> None:
    code = main(["predict", "--model", "Llama-3.1-8B", "--gpu", "L40S", "--input-tokens",
                 "1000", "--output-tokens", "250", "--request-rate", "6", "--turns", "9"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--turns = 9" in err and "at most" in err
