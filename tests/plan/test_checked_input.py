"""Input vLLM or the model would refuse is refused before it is sized or predicted: each
case exits 2 naming the field in the plan's (or the command line's) words and the fix."""

import json

import pytest
from plans import make_plan, plan_dict

from llmfleet import cli
from llmfleet.catalog import model_facts
from llmfleet.errors import PlanError, StackError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import parse_plan, plan_from_text

MISTRAL = model_facts.model_entry("Mistral-7B-Instruct-v0.3").config


def _config(tmp_path, **changes):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**MISTRAL, **changes}))
    return path


def _predict(capsys, *flags):
    code = cli.main(["predict", *flags])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("key", ["num_key_value_heads", "num_attention_heads", "hidden_size"])
def test_a_config_json_with_a_zero_shape_is_refused_by_predict(tmp_path, capsys, key) -> None:
    # num_key_value_heads 0 divided by zero; num_attention_heads 0 with a head_dim sized a
    # model without attention (10.57B for this Mistral)
    path = _config(tmp_path, **{key: 0, "head_dim": 128})
    code, err = _predict(
        capsys, "--model", str(path), "--gpu", "H100", "--input-tokens", "100",
        "--output-tokens", "10",
    )
    assert code == 2
    assert f"--model = '{path}': config.json has {key}: 0" in err
    assert "at least 1" in err and "Traceback" not in err


def test_a_plans_config_json_with_no_kv_heads_names_model_config_path(tmp_path) -> None:
    path = _config(tmp_path, num_key_value_heads=0)
    plan = make_plan(model={"config_path": str(path), "hf_repo": "org/m"})
    with pytest.raises(PlanError, match=r"model.config_path .*num_key_value_heads: 0"):
        build_fleet_plan(plan, base_dir=tmp_path)


def test_predict_refuses_a_prompt_longer_than_the_models_context(capsys) -> None:
    # Qwen3-32B: max_position_embeddings 40,960
    code, err = _predict(
        capsys, "--model", "Qwen3-32B", "--gpu", "H100", "--tensor-parallel-size", "2",
        "--input-tokens", "50000", "--output-tokens", "100",
    )
    assert code == 2
    assert "--input-tokens = 50000: a request of 50,000 prompt + 100 output tokens" in err
    assert "40,960 tokens of Qwen3-32B's context" in err


def test_predict_refuses_a_request_longer_than_the_max_model_len_given(capsys) -> None:
    code, err = _predict(
        capsys, "--model", "Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "4096",
        "--input-tokens", "1000", "--output-tokens", "3500",
    )
    assert code == 2
    assert "--output-tokens = 3500" in err and "<= 4096" in err


def test_predict_says_vllm_will_not_start_when_one_sequence_overruns_the_kv_pool(capsys) -> None:
    # Llama-3.1-8B in BF16 on one L4: 24,688 KV tokens, but the default max_model_len is the
    # model's 131,072-token context; vLLM refuses to start ("estimated maximum model length")
    code, err = _predict(
        capsys, "--model", "Llama-3.1-8B-Instruct", "--gpu", "L4", "--input-tokens", "1000",
        "--output-tokens", "100",
    )
    assert code == 2
    assert "--max-model-len = 131072: vLLM will not start: set --max-model-len <= 24688" in err
    ok, _ = _predict(
        capsys, "--model", "Llama-3.1-8B-Instruct", "--gpu", "L4", "--input-tokens", "1000",
        "--output-tokens", "100", "--max-model-len", "24688",
    )
    assert ok == 0


def test_an_output_p99_at_or_above_max_model_len_is_refused() -> None:
    data = plan_dict(**{"traffic.output_tokens": {"mean": 250, "p99": 9000}})
    with pytest.raises(StackError, match=r"output_tokens.p99 \(9000\) is at or above "
                       r"max_model_len \(8192\).*raise max_model_len above 10000"):
        parse_plan(data)


def test_an_unquoted_kubernetes_version_says_to_quote_it() -> None:
    text = "config:\n  llmfleet:plan:\n    kubernetes_version: 1.30\n"
    with pytest.raises(StackError) as e:
        plan_from_text(text, "Pulumi.x.yaml")
    assert 'plan.kubernetes_version = 1.3: YAML reads an unquoted version as a number' in str(
        e.value
    )
    assert 'kubernetes_version: "1.30"' in str(e.value)


def test_a_section_given_as_one_value_is_named_without_pydantics_class_names() -> None:
    with pytest.raises(StackError) as e:
        parse_plan(plan_dict(model="Llama-3.1-8B-Instruct"))
    msg = str(e.value)
    assert "ModelSpec" not in msg and "instance of" not in msg
    assert "write model: {id: Llama-3.1-8B-Instruct}" in msg


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--precision", "mxfp4"], "--precision = 'mxfp4'"),
        (
            ["--speculative-method", "draft_model", "--draft-model", "Llama-3.1-8B-Instruct"],
            "--draft-model = 'Llama-3.1-8B-Instruct': is the target model itself",
        ),
        (
            ["--speculative-method", "eagle3", "--draft-model", "org/head"],
            "--acceptance-rate = None",
        ),
    ],
)
def test_predict_names_its_own_flags(capsys, flags, named) -> None:
    code, err = _predict(
        capsys, "--model", "Llama-3.1-8B-Instruct", "--gpu", "H100", "--input-tokens", "100",
        "--output-tokens", "10", "--max-model-len", "8192", *flags,
    )
    assert code == 2
    assert named in err
    assert "----" not in err and "--model." not in err and "--speculative." not in err


def test_a_list_item_given_as_one_value_shows_the_item_to_write() -> None:
    with pytest.raises(StackError) as e:
        parse_plan(plan_dict(regions=["us-east-1"]))
    assert (
        "plan.regions.0 = 'us-east-1': regions[0] takes fields, not one value; write the item "
        "as - {name: us-east-1, traffic_share: ...}"
    ) in str(e.value)
