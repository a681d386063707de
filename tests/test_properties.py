"""Property-based tests: random and mutated plans either size or fail with an llmfleet error
(never another exception, never a zero replica, NaN or infinity), and every sized plan keeps
the invariants a reader relies on. Derandomized with a fixed example budget, so CI runs the
same examples in a few seconds (make hardening-check)."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from plans import plan_dict

from llmfleet import cli
from llmfleet.catalog import hardware
from llmfleet.errors import LlmfleetError
from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.plan.stacks import parse_plan

pytestmark = pytest.mark.hardening

BUDGET = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
MODELS = ["Qwen3-0.6B", "Llama-3.1-8B-Instruct", "Mistral-7B-Instruct-v0.3", "Qwen3-14B"]
GPUS = ["L4", "A10G", "L40S", "H100", "A100-80GB"]
JUNK = st.one_of(
    st.none(), st.integers(-10, 10**12), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                              st.integers(),
                                                                              max_size=2),
)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    """A plausible plan: one region, one GPU family, lengths and SLOs over wide ranges."""
    input_mean = draw(st.integers(16, 4000))
    output_mean = draw(st.integers(8, 1000))
    input_p95 = input_mean * draw(st.sampled_from([1, 2, 3]))
    output_p95 = output_mean * draw(st.sampled_from([1, 2]))
    peak = draw(st.floats(0.05, 400))
    return plan_dict(**{
        "model.id": draw(st.sampled_from(MODELS)),
        "model.precision": draw(st.sampled_from(["bf16", "fp8"])),
        "max_model_len": draw(st.sampled_from([4096, 8192, 16384, 32768])),
        "traffic.peak_requests_per_s": peak,
        "traffic.trough_requests_per_s": peak * draw(st.floats(0.01, 1)),
        "traffic.input_tokens": {"mean": input_mean, "p95": input_p95},
        "traffic.output_tokens": {"mean": output_mean, "p95": output_p95},
        "slo.ttft_ms": draw(st.floats(100, 5000)),
        "slo.itl_ms": draw(st.floats(10, 200)),
        "slo.percentile": draw(st.sampled_from([90, 95, 99])),
        "allowed.gpus": [draw(st.sampled_from(GPUS))],
        "headroom": draw(st.floats(0, 0.5)),
    })


@st.composite
def mutated_plans(draw: st.DrawFn) -> dict[str, Any]:
    """A plausible plan with one field deleted or replaced by a value of any type."""
    plan = copy.deepcopy(draw(plans()))
    node: Any = plan
    path = draw(st.sampled_from([
        "name", "model", "model.id", "model.precision", "max_model_len", "traffic",
        "traffic.peak_requests_per_s", "traffic.input_tokens", "traffic.input_tokens.mean",
        "slo", "slo.ttft_ms", "slo.percentile", "regions", "headroom", "allowed.gpus",
        "gpu_memory_utilization", "kubernetes_version", "prices", "cluster",
    ]))
    *parents, last = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    if draw(st.booleans()):
        node.pop(last, None)
    else:
        node[last] = draw(JUNK)
    return plan


def numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in numbers(v)]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    return [float(value)]


def size(data: dict[str, Any]) -> FleetPlan | None:
    """The FleetPlan, or None when the plan is refused with an llmfleet error."""
    try:
        return build_fleet_plan(parse_plan(data))
    except LlmfleetError:
        return None


def check_invariants(fp: FleetPlan) -> None:
    assert all(math.isfinite(n) for n in numbers(fp.model_dump(mode="json")))
    slo = fp.slo
    for r in fp.regions:
        assert r.replicas.min >= 1 and r.nodes.min >= 1
        assert r.replicas.min <= r.replicas.desired <= r.replicas.max
        # per-GPU memory used within the GPU's memory (and vLLM's share of it)
        m, util = r.memory, r.serving.vllm.gpu_memory_utilization
        used = m.weights_gib_per_gpu + m.activation_gib + m.non_torch_gib + m.kv_cache_gib_per_gpu
        assert m.kv_cache_gib_per_gpu > 0
        assert used <= m.gpu_total_gib * util + 0.02 <= m.gpu_total_gib + 0.02
        assert m.gpu_total_gib <= hardware.gpu(r.gpu).memory_gib + 0.01
        # predicted latencies at the chosen operating point within the SLO
        assert r.predicted.ttft_ms <= slo.ttft_ms * 1.001
        assert r.predicted.itl_ms <= slo.itl_ms * 1.001
        # replicas x capacity carry the peak with the headroom kept free
        capacity = r.replicas.desired * r.predicted.requests_per_s
        assert capacity * (1 - fp.headroom) >= r.peak_requests_per_s * 0.999
        # the nodes at their maximum schedule the replicas at their maximum
        assert r.nodes.max * r.replicas_per_node >= r.replicas.max
        assert r.replicas_per_node * r.tensor_parallel_size <= r.gpus_per_node


@BUDGET
@given(plans())
@example(plan_dict())  # sizes: p5.4xlarge, one replica (the invariants are checked at least once)
def test_a_random_plan_sizes_within_its_invariants_or_is_refused(data) -> None:
    fp = size(data)
    if data == plan_dict():
        assert fp is not None
    if fp is not None:
        check_invariants(fp)


@BUDGET
@given(mutated_plans())
def test_a_mutated_plan_sizes_or_fails_with_an_llmfleet_error(data) -> None:
    fp = size(data)
    if fp is not None:
        check_invariants(fp)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(plans(), st.floats(1.5, 20))
def test_more_load_never_yields_fewer_gpus(data, factor) -> None:
    fp = size(data)
    if fp is None:
        return
    more = copy.deepcopy(data)
    more["traffic"]["peak_requests_per_s"] *= factor
    bigger = size(more)
    if bigger is not None:
        assert bigger.gpus.max >= fp.gpus.max


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    st.sampled_from(["Qwen3-0.6B", "llama-3.1-8b-instruct", "nope", "x.json"]),
    st.sampled_from(["h100", "L4", "B200", "tpu"]),
    st.sampled_from(["BF16", "fp8", "int4-awq", "fp4"]),
    st.integers(-2, 16),
    st.integers(-5, 200_000),
    st.one_of(st.none(), st.floats(-1, 1e6), st.just(math.nan)),
)
def test_predict_on_random_arguments_prints_or_exits_2(model, gpu, precision, tp, tokens,
                                                       rate) -> None:
    argv = ["predict", "--model", model, "--gpu", gpu, "--precision", precision,
            "--tensor-parallel-size", str(tp), "--input-tokens", str(tokens),
            "--output-tokens", str(max(tokens // 4, 1)), "--json"]
    if rate is not None:
        argv += ["--request-rate", str(rate)]
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    assert code in (0, 2)
