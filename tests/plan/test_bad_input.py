"""Bad input never crashes: each error names the field, the value and what would work."""

import re

import pytest
from plans import make_plan, plan_dict

from llmfleet.catalog import model_facts
from llmfleet.errors import InfeasibleError, PlanError, StackError, UnknownNameError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import parse_plan, read_plan


def test_an_unknown_model_lists_close_matches():
    with pytest.raises(
        UnknownNameError, match=r"model.id = 'Llama-3.1-8B-Instrct'.*Llama-3.1-8B-Instruct"
    ):
        build_fleet_plan(make_plan(**{"model.id": "Llama-3.1-8B-Instrct"}))


def test_an_unknown_gpu_lists_close_matches():
    with pytest.raises(UnknownNameError, match=r"allowed.gpus\[0\] = 'H1OO'.*H100"):
        build_fleet_plan(make_plan(**{"allowed.gpus": ["H1OO"]}))


def test_an_unknown_instance_type_lists_close_matches():
    with pytest.raises(
        UnknownNameError, match=r"allowed.instance_types\[0\] = 'p5.48xl'.*p5.48xlarge"
    ):
        build_fleet_plan(make_plan(**{"allowed.instance_types": ["p5.48xl"]}))


def test_an_unknown_region_lists_close_matches():
    with pytest.raises(UnknownNameError, match=r"regions\[0\].name = 'us-east-01'.*us-east-1"):
        build_fleet_plan(make_plan(regions=[{"name": "us-east-01", "traffic_share": 1.0}]))


def test_a_model_that_fits_no_allowed_instance_says_what_it_needs_and_what_would_fit():
    plan = make_plan(
        **{
            "model.id": "Llama-3.1-405B-Instruct",
            "allowed.instance_types": ["p5.48xlarge"],
            "allowed.multi_node": False,  # a replica must fit one node
        }
    )
    with pytest.raises(InfeasibleError) as e:
        build_fleet_plan(plan)
    msg = str(e.value)
    assert "Weights need 756 GiB (812 GB)" in msg
    assert "p5.48xlarge, holds 640 GiB" in msg
    assert "set model.precision: fp8 (weights 382 GiB)" in msg
    assert "allow p5en.48xlarge" in msg


def test_an_itl_below_the_physical_floor_gives_the_floor():
    plan = make_plan(**{"slo.itl_ms": 0.5, "allowed.gpus": ["H100"]})
    with pytest.raises(InfeasibleError, match=r"ITL floor \(batch 1\) is \d+\.\d ms") as e:
        build_fleet_plan(plan)
    assert "relax slo.itl_ms to at least" in str(e.value)


def test_a_ttft_no_prefill_can_meet_gives_the_prefill_time():
    plan = make_plan(**{"slo.ttft_ms": 20, "allowed.gpus": ["L4"]})
    with pytest.raises(InfeasibleError, match="relax slo.ttft_ms to at least"):
        build_fleet_plan(plan)


def test_max_model_len_beyond_the_model_context_is_refused():
    with pytest.raises(PlanError, match=r"max_model_len = 200000: .* at most 131,072"):
        build_fleet_plan(make_plan(max_model_len=200_000))


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "traffic.peak_requests_per_s",
            0,
            "plan.traffic.peak_requests_per_s = 0: Input should be greater than 0",
        ),
        ("slo.itl_ms", -5, "plan.slo.itl_ms = -5: Input should be greater than 0"),
        ("headroom", 1.5, "plan.headroom = 1.5: Input should be less than 0.9"),
        ("model.precision", "fp4", "plan.model.precision = 'fp4': Input should be 'bf16'"),
        ("slo.ttft", 500, "plan.slo.ttft = 500: unknown field"),
    ],
)
def test_bad_numbers_and_names_are_reworded_with_the_field_path(path, value, expected):
    with pytest.raises(StackError) as e:
        parse_plan(plan_dict(**{path: value}))
    assert expected in str(e.value)


def test_traffic_shares_must_sum_to_one():
    regions = [
        {"name": "us-east-1", "traffic_share": 0.5},
        {"name": "us-west-2", "traffic_share": 0.4},
    ]
    with pytest.raises(StackError, match="traffic_share must sum to 1.0, not 0.9"):
        parse_plan(plan_dict(regions=regions))


def test_trough_above_peak_is_inconsistent():
    with pytest.raises(
        StackError, match=r"trough_requests_per_s \(20.0\) exceeds peak_requests_per_s \(10.0\)"
    ):
        parse_plan(plan_dict(**{"traffic.trough_requests_per_s": 20}))


def test_model_needs_exactly_one_of_id_and_config_path():
    with pytest.raises(StackError, match="exactly one of model.id"):
        parse_plan(plan_dict(model={"precision": "bf16"}))


def test_a_missing_config_json_names_the_path(tmp_path):
    plan = make_plan(model={"config_path": "nope/config.json", "hf_repo": "org/nope"})
    with pytest.raises(PlanError, match="model.config_path = .*nope/config.json.*no such file"):
        build_fleet_plan(plan, base_dir=tmp_path)


def test_a_config_json_path_sizes_like_the_catalog_model(tmp_path):
    import json


    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(
        json.dumps(model_facts.model_entry("Llama-3.1-8B").config)
    )
    pins = {"precision": "bf16", "kv_cache_dtype": "auto"}  # as make_plan's catalog model
    plan = make_plan(model={"config_path": "m/config.json", "hf_repo": "meta-llama/x", **pins})
    by_path = build_fleet_plan(plan, base_dir=tmp_path)
    by_id = build_fleet_plan(make_plan())
    assert by_path.monthly_cost_usd == by_id.monthly_cost_usd
    assert by_path.model.kv_bytes_per_token == by_id.model.kv_bytes_per_token


def test_a_config_json_path_needs_the_checkpoint_vllm_loads():
    with pytest.raises(PlanError, match="model.hf_repo = None: with model.config_path, name"):
        build_fleet_plan(make_plan(model={"config_path": "m/config.json"}))


def test_a_missing_stack_names_the_file_and_the_stacks_there(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(StackError, match=r"stack 'qa': no file .*Pulumi.qa.yaml; stacks here: dev"):
        read_plan("qa", tmp_path)


def test_a_stack_without_the_plan_key_names_file_and_key(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  aws:region: us-east-1\n")
    with pytest.raises(StackError, match=r"Pulumi.dev.yaml: config has no key `llmfleet:plan`"):
        read_plan("dev", tmp_path)


def test_a_region_without_catalog_prices_asks_for_a_price_override():
    # ap-northeast-3 offers g6e (DescribeInstanceTypeOfferings) but the price sources list none
    plan = make_plan(
        regions=[{"name": "ap-northeast-3", "traffic_share": 1.0}], **{"allowed.gpus": ["L40S"]}
    )
    with pytest.raises(InfeasibleError, match=r"add plan.prices entries .*region: ap-northeast-3"):
        build_fleet_plan(plan)
    priced = make_plan(
        regions=[{"name": "ap-northeast-3", "traffic_share": 1.0}],
        prices=[{"instance_type": "g6e.xlarge", "usd_per_hour": 1.9, "region": "ap-northeast-3"}],
        **{"allowed.gpus": ["L40S"]},
    )
    assert build_fleet_plan(priced).regions[0].instance_type == "g6e.xlarge"


def test_a_public_access_cidr_that_is_not_one_is_named():
    with pytest.raises(StackError, match=r"'10.0.0.300/8' is not a CIDR block"):
        parse_plan(plan_dict(cluster={"public_access_cidrs": ["10.0.0.300/8"]}))


def test_int4_needs_the_prequantized_checkpoint_vllm_loads():
    with pytest.raises(PlanError, match=r"model.hf_repo = None: int4-awq serves an AWQ checkpoint"):
        build_fleet_plan(make_plan(**{"model.precision": "int4-awq"}))
    plan = make_plan(**{"model.precision": "int4-awq", "model.hf_repo": "org/Llama-3.1-8B-AWQ"})
    fp = build_fleet_plan(plan)
    # the region streams its S3 copy of that checkpoint
    assert fp.regions[0].serving.vllm.model == "s3://t-weights-us-east-1-{account}/org/Llama-3.1-8B-AWQ/main"
    assert fp.regions[0].serving.vllm.quantization is None  # vLLM reads it from the checkpoint


@pytest.mark.parametrize(
    ("cidr", "why"),
    [
        ("10.40.0.0/24", "/16 to /20"),
        ("10.32.0.0/12", "/16 to /20"),
        ("10.40.0.1/16", "CIDR notation"),
        ("ten", "CIDR notation"),
    ],
)
def test_a_bad_vpc_cidr_is_refused_by_the_plan_naming_the_region(cidr, why):
    regions = [{"name": "us-east-1", "traffic_share": 1.0, "vpc_cidr": cidr}]
    with pytest.raises(StackError, match=rf"regions.0.vpc_cidr.*{re.escape(why)}"):
        parse_plan(plan_dict(regions=regions))


def test_an_unknown_model_named_after_a_catalog_model_offers_that_model_first():
    """`Qwen3-32B-Instruct-XL` starts with the catalog's Qwen3-32B: that is the likeliest
    meaning, ahead of names that merely look alike."""
    with pytest.raises(UnknownNameError, match=r"did you mean Qwen3-32B,"):
        build_fleet_plan(make_plan(**{"model.id": "Qwen3-32B-Instruct-XL"}))
