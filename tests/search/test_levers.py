"""Stage 3 levers: precisions, FP8 KV and speculative decoding, searched by cost."""

from __future__ import annotations

import math

import pytest
from plans import make_plan, three_regions

from llmfleet.catalog import hardware
from llmfleet.catalog.constants import fitted
from llmfleet.cli import main
from llmfleet.errors import PlanError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.perf.replica import PredictRequest, run_predict
from llmfleet.perf.speculation import expected_tokens
from llmfleet.plan.model import resolve_model
from llmfleet.search.levers import lever_space
from llmfleet.search.operating_point import Rejection, size_replica
from llmfleet.search.optimizer import allowed_instances, price_for
from llmfleet.search.replicas import nodes_for, replicas_for
from llmfleet.search.shapes import Shape
from llmfleet.units import GIB, HOURS_PER_MONTH


def test_llama_70b_weighs_131_gib_in_bf16_and_67_gib_in_fp8() -> None:
    arch = resolve_model(make_plan(**{"model.id": "Llama-3.1-70B-Instruct"})).arch
    assert arch.weight_bytes("bf16") / GIB == pytest.approx(131.4, abs=0.1)
    assert 66 <= arch.weight_bytes("fp8") / GIB <= 68


def test_acceptance_07_with_three_drafted_tokens_yields_2_53_tokens_per_step() -> None:
    assert expected_tokens(0.7, 3) == pytest.approx(2.533, abs=1e-3)


def _itl(concurrency: int, speculative: bool) -> float:
    extra = {"speculative_method": "eagle3", "draft_model": "org/head", "acceptance_rate": 0.7}
    req = PredictRequest(
        model="Llama-3.1-70B-Instruct",
        gpu="H100",
        tensor_parallel_size=4,
        input_tokens=1000,
        output_tokens=200,
        concurrency=concurrency,
        **(extra if speculative else {}),
    )
    itl = run_predict(req).itl_ms
    assert itl is not None
    return itl


def test_speculation_gains_more_than_1_3x_at_batch_1_and_less_at_batch_128() -> None:
    at_1 = _itl(1, False) / _itl(1, True)
    at_128 = _itl(128, False) / _itl(128, True)
    assert at_1 > 1.3
    assert at_128 < at_1


@pytest.mark.hardening
def test_the_search_chooses_the_cheapest_feasible_option_of_the_whole_space() -> None:
    """Enumerate instance x TP x levers without the optimizer's pruning and compare (before
    stage 4 raises the floors, which the search does not see), on the tests' three-region
    plan. An exhaustive property of the search (sizing every candidate: half a minute on 2
    cores), so make hardening-check runs it."""
    plan = three_regions(**{"routing.survive_region_losses": 0})
    model, consts = resolve_model(plan), fitted()
    fp = build_fleet_plan(plan)
    for region, chosen in zip(plan.regions, fp.regions, strict=True):
        costs = []
        for inst in allowed_instances(plan):
            price = price_for(plan, inst.instance_type, region.name)
            if not hardware.offering(inst.instance_type, region.name) or price is None:
                continue
            gpu = hardware.gpu(inst.gpu)
            for tp in (t for t in (1, 2, 4, 8) if t <= inst.gpu_count):
                for lv in lever_space(plan, model):
                    sized = size_replica(model.arch, gpu, inst, Shape(tp), plan, consts, lv)
                    if isinstance(sized, Rejection):
                        continue
                    nodes = nodes_for(
                        replicas_for(plan, region, sized.capacity_requests_per_s),
                        inst.gpu_count // tp,
                    )
                    costs.append(nodes.desired * price[0] * HOURS_PER_MONTH)
        assert chosen.monthly_cost_usd == pytest.approx(min(costs), abs=0.01)


def test_a_published_fp8_checkpoint_is_served_without_a_quantization_flag() -> None:
    region = build_fleet_plan(three_regions()).regions[0]
    assert region.levers is not None and region.levers.precision == "fp8"
    assert region.levers.checkpoint == "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"
    assert "/RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic/" in region.serving.vllm.model
    assert region.serving.vllm.quantization is None
    assert 66 <= region.levers.download_gib <= 68


def test_alternatives_name_every_lever() -> None:
    region = build_fleet_plan(three_regions()).regions[0]
    tried = {(a.precision, a.kv_cache_dtype, a.speculative) for a in region.alternatives}
    # the plan allows fp8 weights (published checkpoint), auto and fp8 KV, no speculation
    assert ("fp8", "auto", None) in tried and ("fp8", "fp8", None) in tried
    feasible = [a for a in region.alternatives if a.feasible]
    assert all(a.on_demand_gpu_at_peak_usd_per_million_output_tokens is not None
               for a in feasible)


def test_a_pinned_precision_is_the_only_one_searched() -> None:
    fp = build_fleet_plan(make_plan())
    assert {a.precision for a in fp.regions[0].alternatives} == {"bf16"}


def test_speculative_config_renders_the_vllm_keys() -> None:
    plan = make_plan(
        **{
            "slo.itl": "tpot",
            "allowed.speculative": [{"method": "eagle3"}],
            "allowed.gpus": ["L4"],
        }
    )
    fp = build_fleet_plan(plan)
    specs = [a.speculative for a in fp.regions[0].alternatives]
    assert "eagle3" in specs
    chosen = fp.regions[0].serving.vllm.speculative_config
    if chosen is not None:
        assert chosen == {
            "method": "eagle3",
            "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
            "num_speculative_tokens": 3,
        }


def test_int4_without_a_published_checkpoint_names_the_field() -> None:
    plan = make_plan(
        **{"model": {"id": "Llama-3.1-8B-Instruct"}, "allowed.precisions": ["int4-awq"]}
    )
    with pytest.raises(PlanError, match=r"allowed.precisions\[0\] = 'int4-awq'.*no int4-awq"):
        build_fleet_plan(plan)


def test_mtp_for_a_model_without_mtp_heads_is_refused() -> None:
    plan = make_plan(**{"allowed.speculative": [{"method": "mtp", "acceptance_rate": 0.8}]})
    with pytest.raises(PlanError, match=r"allowed.speculative\[0\].method = 'mtp'.*no MTP"):
        build_fleet_plan(plan)


def test_a_draft_model_with_another_vocabulary_is_refused() -> None:
    spec = {"method": "draft_model", "draft_model": "Qwen3-0.6B", "acceptance_rate": 0.6}
    plan = make_plan(**{"model.id": "Llama-3.1-70B-Instruct", "allowed.speculative": [spec]})
    with pytest.raises(PlanError, match=r"draft_model = 'Qwen3-0.6B'.*vocabulary"):
        build_fleet_plan(plan)


def test_ngram_needs_an_acceptance_rate() -> None:
    plan = make_plan(**{"allowed.speculative": [{"method": "ngram"}]})
    with pytest.raises(PlanError, match=r"allowed.speculative\[0\].acceptance_rate"):
        build_fleet_plan(plan)


@pytest.mark.parametrize("rate", ["0", "1", "1.5"])
def test_predict_refuses_an_acceptance_rate_outside_0_1(rate: str, capsys) -> None:  # type: ignore[no-untyped-def]
    args = "predict --model Llama-3.1-8B-Instruct --gpu H100 --input-tokens 100"
    args += f" --output-tokens 50 --speculative-method ngram --acceptance-rate {rate}"
    assert main(args.split()) == 2
    assert "acceptance" in capsys.readouterr().err


def test_fp8_moe_on_ampere_is_rejected_with_the_reason() -> None:
    plan = make_plan(
        **{
            "model": {"id": "Qwen3-235B-A22B", "precision": "fp8"},
            "allowed.instance_types": ["p4de.24xlarge"],
            # 8,192: 4,096 refuses 2.4 % of BASE's prompts, more than the p99 SLO allows
            "max_model_len": 8192,
        }
    )
    with pytest.raises(Exception, match="FP8 MoE weights need FP8 tensor cores"):
        build_fleet_plan(plan)


def test_pinning_and_listing_precisions_together_is_an_error() -> None:
    with pytest.raises(Exception, match="give one of them"):
        make_plan(**{"allowed.precisions": ["fp8"]})


def test_report_compares_each_precision_with_bf16() -> None:
    report = build_fleet_plan(three_regions()).levers_report
    assert report is not None
    saved = {m.precision: m.saved_vs_bf16 for m in report.memory}
    assert saved["fp8"] == pytest.approx(0.485, abs=0.005)  # below the seed's 50 %
    assert math.isclose(saved["bf16"], 0.0)
