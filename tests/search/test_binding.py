"""What binds a replica's batch at its operating point, said with the numbers."""

import pytest
from plans import make_plan

from llmfleet.fleetplan.fleet import build_fleet_plan


def test_ttft_binds_the_three_regions_b200_replica_and_says_what_a_lone_prompt_takes(
    own_plans,
) -> None:
    rp = own_plans["three-regions"].region("us-east-1")
    b = rp.binding
    assert (b.constraint, b.batch) == ("ttft", rp.serving.vllm.max_num_seqs)
    # 199 sequences would take TTFT p99 past 500 ms; the 4,057-token p99 prompt alone
    # takes 139 ms of it in 1,024-token chunks on B200 TP 4 (the request waits for the step
    # under way since #23: 195 and 145.8 ms before; 191 and 145.1 ms before #29's refit)
    assert b.next_ms is not None and b.slo_ms == 500 and b.next_ms > 500
    assert b.lone_prompt_ttft_ms == pytest.approx(139.3, abs=0.1)
    assert b.text.startswith("TTFT binds: 199 running sequences would take TTFT p99 to 503 ms")
    assert "a lone p99 prompt (4,057 tokens) already takes 139 ms of it on B200 TP 4 (28%)" in (
        b.text
    )
    assert b.text in rp.reasons


def test_a_tight_tpot_binds_on_itl() -> None:
    plan = make_plan(**{"slo.itl": "tpot", "slo.itl_ms": 9.5, "slo.ttft_ms": 20000,
                        "allowed.gpus": ["H100"]})
    b = build_fleet_plan(plan).regions[0].binding
    assert b.constraint == "itl" and b.slo_ms == 9.5
    assert b.next_ms is not None and b.next_ms > 9.5 >= b.lone_itl_ms
    assert "TPOT p99" in b.text and "one sequence alone already takes" in b.text


def test_loose_slos_on_a_small_gpu_leave_the_kv_pool_binding() -> None:
    plan = make_plan(**{"slo.ttft_ms": 20000, "slo.itl_ms": 200, "allowed.gpus": ["L4"]})
    rp = build_fleet_plan(plan).regions[0]
    b = rp.binding
    assert b.constraint == "kv_cache" and b.slo_ms is None
    assert b.batch == b.kv_sequences  # one more mean request does not fit
    assert f"hold {b.kv_sequences} mean requests (1,250 tokens each)" in b.text


def test_a_tiny_token_gap_fills_every_step_with_prefill() -> None:
    # 2,000-token prompts under a 12 ms gap (1,000-token ones since #29's refit made H100's
    # prefill faster leave the gap, not the prefill, binding)
    plan = make_plan(**{"slo.itl_ms": 12, "slo.ttft_ms": 20000, "allowed.gpus": ["H100"],
                        "traffic.input_tokens": {"mean": 2000, "p95": 4000}})
    b = build_fleet_plan(plan).regions[0].binding
    assert b.constraint == "prefill"
    assert "every step would carry a 256-token prefill chunk" in b.text


def test_every_stacks_binding_is_one_more_sequence_than_the_operating_point(stack_plans) -> None:
    for fp in stack_plans.values():
        for rp in fp.regions:
            b = rp.binding
            assert b.batch == rp.serving.vllm.max_num_seqs
            if b.constraint in ("ttft", "itl"):
                assert b.next_ms is not None and b.slo_ms is not None
                assert b.next_ms > b.slo_ms * 0.99, (fp.name, rp.region)
