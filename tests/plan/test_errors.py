"""Clear errors for what a new user hits, and docs/errors.md kept true: every case below is
an example there, with the message it prints (the test reads the doc)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from plans import (
    EDGE,
    FRONTIER,
    OFFICE_EGRESS,
    PRODUCTION,
    make_plan,
    plan_dict,
    production_plan,
)

from llmfleet import cli
from llmfleet.catalog import model_facts
from llmfleet.errors import LlmfleetError, PlanError, RenderError, StackError
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render, rendered_files
from llmfleet.plan.stacks import parse_plan

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"

PLAN_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "a rollout order that leaves a region out",
        {
            "regions": [
                {"name": "us-east-1", "traffic_share": 0.6},
                {"name": "us-west-2", "traffic_share": 0.4, "vpc_cidr": "10.41.0.0/16"},
            ],
            "rollout": {"order": ["us-west-2"]},
        },
        "rollout.order ['us-west-2'] must name every region once, canary first (us-east-1 "
        "missing); e.g. ['us-east-1', 'us-west-2']",
    ),
    (
        "max_model_len below a p95 request",
        {"max_model_len": 3100, "traffic.output_tokens": {"mean": 250, "p95": 800}},
        "max_model_len (3100) is below a p95 request (input p95 3000 + output p95 800 = 3800)",
    ),
    (
        "a price override for an unknown instance type",
        {"prices": [{"instance_type": "p9.48xlarge", "usd_per_hour": 10}]},
        "prices[0].instance_type = 'p9.48xlarge': unknown instance type",
    ),
    (
        "a price override for a region outside the plan",
        {"prices": [{"instance_type": "p5.48xlarge", "usd_per_hour": 10, "region": "us-west-2"}]},
        "prices[0].region = 'us-west-2': unknown region of this plan",
    ),
    (
        "a price override the region does not offer",
        {"prices": [{"instance_type": "p5.48xlarge", "usd_per_hour": 10, "region": "eu-west-1"}],
         "regions": [{"name": "eu-west-1", "traffic_share": 1.0}]},
        "prices[0].instance_type = 'p5.48xlarge': not offered in eu-west-1, so this price would "
        "never apply",
    ),
    (
        "a Kubernetes version EKS does not offer",
        {"kubernetes_version": "1.27"},
        "kubernetes_version = '1.27': EKS does not offer it; offered: 1.29, 1.30, 1.31, 1.32, "
        "1.33, 1.34, 1.35, 1.36",
    ),
    (
        "a Kubernetes version EKS has not announced",
        {"kubernetes_version": "1.37"},
        "kubernetes_version = '1.37': not on EKS in the catalog's sources (read on 2026-12-01: "
        "not on EKS in any source read",
    ),
    (
        "a model alias that would load another checkpoint",
        {"model.id": "Llama-3.1-8B"},
        "model.id = 'Llama-3.1-8B': an alias of the catalog model Llama-3.1-8B-Instruct, which "
        "would serve meta-llama/Llama-3.1-8B-Instruct",
    ),
    (
        "a production API open to the world",
        {"environment": "production"},
        "environment is production but cluster.public_access_cidrs has 0.0.0.0/0",
    ),
    (
        "a model revision that is not a commit",
        {"model.revision": "main"},
        "plan.model.revision = 'main': String should match pattern '^[0-9a-f]{40}$'",
    ),
    (
        "a Kubernetes version past EKS standard support",
        {"kubernetes_version": "1.33"},
        "kubernetes_version = '1.33': EKS standard support ended on 2026-07-29, 125 days before "
        "the calendar's 2026-12-01 (a new fleet needs 90 days left): use 1.36 (the default), "
        "or set kubernetes_support: extended",
    ),
    (
        "a Kubernetes version a pinned chart does not support",
        {"kubernetes_version": "1.33", "kubernetes_support": "extended"},
        "kubernetes_version = '1.33': outside the supported Kubernetes versions of keda 2.21.1 "
        "(1.34-1.36)",
    ),
    (
        "an API allow-list of a documentation range",
        {**PRODUCTION, "cluster.public_access_cidrs": ["203.0.113.0/24"]},
        "plan.cluster.public_access_cidrs: 203.0.113.0/24 is not a public address range (a "
        "documentation, private or reserved block, RFC 5737/1918/6598)",
    ),
    (
        "production without a break-glass role",
        {**PRODUCTION, "cluster": {"public_access_cidrs": [OFFICE_EGRESS]}},
        "cluster.break_glass_role_arn = None: production needs a way into the cluster when "
        "CI's role cannot",
    ),
    (
        "an image of another vLLM release",
        {**FRONTIER, "startup.image": "aws-dlc-vllm-0.27.1"},
        "startup.image = 'aws-dlc-vllm-0.27.1': it carries vLLM 0.27.1, llmfleet renders for "
        "the pinned 0.33.0",
    ),
    (
        "a replica across nodes without EFA while EFA is required",
        {**FRONTIER, "startup.require_efa": True},
        "startup.require_efa = True: us-east-1's layout (TP 8 x PP 2) sends each pipeline hop "
        "across nodes, and startup.image vllm-openai-v0.33.0 has no EFA NCCL plugin",
    ),
    (
        "a production replica across nodes without reserved capacity",
        {**FRONTIER, **PRODUCTION},
        "regions[0].capacity.type = 'on_demand': a replica spans 2 nodes: 2 p5.48xlarge at once "
        "in one cluster placement group per replica",
    ),
    (
        "production alarms without an e-mail receiver",
        {**PRODUCTION, **EDGE, "alerts": {"receivers": [
            {"name": "oncall", "severities": ["critical"],
             "pagerduty": {"secret_name": "am", "secret_key": "k"}}]}},
        "alerts.receivers = ['oncall']: production's CloudWatch alarms (the ALB's 5xx share and "
        "latency, a region leaving DNS) reach people through the alert topics' e-mail",
    ),
    (
        "a production entry point without authentication",
        {**PRODUCTION, **EDGE, "edge": {"rate_limit": {"requests": 600}}},
        "edge.auth = None: production's entry point is public (dns): authenticate at the load "
        "balancer with edge.auth.jwt {issuer, jwks_url}",
    ),
    (
        "a production entry point without a rate limit",
        {**PRODUCTION, **EDGE, "edge": {"auth": EDGE["edge"]["auth"]}},
        "edge.rate_limit = None: production's entry point is public (dns): limit each client",
    ),
    (
        "an unpinned model revision in production",
        {**PRODUCTION, "model.revision": None},
        "model.revision = None: production serves a pinned checkpoint: give the 40-hex commit",
    ),
    (
        "production without the account id",
        {**PRODUCTION, "account_id": None},
        "account_id = None: production needs the AWS account id",
    ),
    (
        "production without a receiver for critical alerts",
        {**PRODUCTION, "alerts": {"receivers": []}},
        "alerts.receivers = []: production pages someone on a critical alert",
    ),
    (
        "an alert receiver without a target",
        {"alerts": {"receivers": [{"name": "oncall", "severities": ["critical"]}]}},
        "plan.alerts.receivers.0: receiver 'oncall' has none: give exactly one target",
    ),
    (
        "a rate limit per token without authentication",
        {**EDGE, "edge": {"rate_limit": {"requests": 600, "per": "token"}}},
        "edge.rate_limit.per: token counts per Authorization header",
    ),
    (
        "traffic beyond what AWS sells in a region",
        {"traffic.peak_requests_per_s": 1e9},
        "traffic.peak_requests_per_s = 1000000000.0: sizes",
    ),
    (
        "a calibration file of another model",
        {"calibration": ["stacks/calibrations/gpt-oss-120b-b200-tp1.json"]},
        "calibration[0] = 'stacks/calibrations/gpt-oss-120b-b200-tp1.json': it calibrates "
        "gpt-oss-120b, but the plan serves Llama-3.1-8B-Instruct; calibrate this plan's model "
        "on its own runs",
    ),
    (
        "an output p99 at or above max_model_len",
        {"traffic.output_tokens": {"mean": 250, "p99": 9000}},
        "traffic.output_tokens.p99 (9000) is at or above max_model_len (8192)",
    ),
    (
        "an unquoted Kubernetes version",
        {"kubernetes_version": 1.3},
        "plan.kubernetes_version = 1.3: YAML reads an unquoted version as a number (1.3: 1.30 "
        'becomes 1.3); quote it: kubernetes_version: "1.30" or "1.3"',
    ),
    (
        "a section given as one value",
        {"model": "Llama-3.1-8B-Instruct"},
        "plan.model = 'Llama-3.1-8B-Instruct': model takes fields, not one value; write model: "
        "{id: Llama-3.1-8B-Instruct}",
    ),
    (
        "an SLO no allowed GPU can meet",
        {"slo.itl_ms": 0.5, "allowed.gpus": ["H100"]},
        "Nearest feasible change: relax slo.itl_ms to at least 4 ms or set model.precision: fp8 "
        "or allow p6-b200.48xlarge (8 x B200)",
    ),
]


def _error(changes: dict[str, Any]) -> str:
    with pytest.raises(LlmfleetError) as e:
        build_fleet_plan(parse_plan(plan_dict(**changes)))
    return str(e.value)


@pytest.mark.parametrize(
    ("title", "changes", "message"), PLAN_CASES, ids=[c[0] for c in PLAN_CASES]
)
def test_a_plan_that_cannot_work_is_refused_saying_why(title, changes, message) -> None:
    assert message in _error(changes)


def test_docs_errors_shows_every_case_with_its_message() -> None:
    doc = DOC.read_text()
    cli_cases = [(t, {}, m.format(out="out.txt")) for t, m in CLI_CASES]
    for title, _, message in PLAN_CASES + cli_cases:
        assert f"### {title}" in doc, title
        assert message in doc, title


def test_an_alias_with_its_own_checkpoint_is_served_as_named() -> None:
    fp = build_fleet_plan(make_plan(**{"model.id": "Llama-3.1-8B",
                                       "model.hf_repo": "meta-llama/Llama-3.1-8B"}))
    # served from the region's S3 copy of that checkpoint
    assert fp.regions[0].serving.vllm.model.endswith("/meta-llama/Llama-3.1-8B/main")
    assert fp.regions[0].levers is not None
    assert fp.regions[0].levers.checkpoint == "meta-llama/Llama-3.1-8B"


def test_the_catalog_repository_is_accepted_as_the_model_id() -> None:
    fp = build_fleet_plan(make_plan(**{"model.id": "meta-llama/Llama-3.1-8B-Instruct"}))
    assert fp.model.id == "Llama-3.1-8B-Instruct"


def test_a_pinned_revision_reaches_the_vllm_config() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    fp = build_fleet_plan(make_plan(**{"model.revision": commit}))
    assert render.vllm_config(fp.regions[0]).count(f"revision: {commit}") == 1


def test_precision_is_case_insensitive_in_a_plan_as_gpus_are() -> None:
    assert make_plan(**{"model.precision": "BF16"}).model.precision == "bf16"


def test_a_production_plan_with_narrowed_cidrs_sizes() -> None:
    assert build_fleet_plan(production_plan()).environment == "production"


def test_a_production_entry_point_with_auth_and_a_rate_limit_sizes() -> None:
    entry = build_fleet_plan(production_plan(**EDGE)).regions[0].entry_point
    assert entry is not None and entry.auth == "jwt" and entry.rate_rule is not None


def test_an_older_kubernetes_in_extended_support_is_billed_at_extended_support() -> None:
    """$0.60 per cluster-hour x 730 h = $438 a month, not $73 (1.34 leaves standard support
    on 2026-12-02, a day after the calendar's date)."""
    fp = build_fleet_plan(make_plan(kubernetes_version="1.34", kubernetes_support="extended"))
    assert fp.control_plane_support == "extended"
    assert fp.regions[0].costs.eks_control_plane == 438.0
    assert build_fleet_plan(make_plan()).regions[0].costs.eks_control_plane == 73.0


def test_a_version_past_extended_support_is_refused_even_when_paid_for() -> None:
    with pytest.raises(PlanError, match="extended support for it ended on 2026-11-26"):
        build_fleet_plan(make_plan(kubernetes_version="1.31", kubernetes_support="extended"))


def test_the_default_kubernetes_is_the_newest_every_chart_supports_in_standard_support() -> None:
    """1.36: KEDA 2.21 is tested on 1.34-1.36, Karpenter 1.14 supports up to 1.36 and the AMI
    release v20260714 has 1.36's NVIDIA image; 1.37 is not on EKS in the catalog's sources."""
    assert make_plan().kubernetes_version == "1.36"


def test_every_region_names_the_vcpu_quota_it_needs() -> None:
    fp = build_fleet_plan(make_plan())
    r = fp.regions[0]
    [need] = r.capacity.quotas
    # g6e.xlarge: 4 vCPUs per node, at the ceiling (a p5.4xlarge, P instances at 16 vCPUs,
    # before #29's refit)
    assert r.instance_type == "g6e.xlarge"
    assert need.quota_name == "Running On-Demand G and VT instances"
    assert need.vcpus_needed == 4 * r.nodes.max


# --- the command line -------------------------------------------------------------------------

BAD_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 5, "num_hidden_layers": 32, "intermediate_size": 14336,
              "vocab_size": 128256, "max_position_embeddings": 8192}

CLI_CASES: list[tuple[str, str]] = [
    ("render --out onto a file", "--out: {out} is a file, not a directory; give a directory"),
    ("render --out into a folder you cannot write", "--out: cannot write"),
    (
        "a config.json whose heads do not divide by its KV heads",
        "num_attention_heads (32) is not a multiple of num_key_value_heads (5)",
    ),
    (
        "a config.json with no KV heads",
        "--model = 'config.json': config.json has num_key_value_heads: 0, but it counts the KV "
        "heads every attention layer reads",
    ),
    (
        "a prompt longer than the model's context",
        "--input-tokens = 50000: a request of 50,000 prompt + 100 output tokens is longer than "
        "the 40,960 tokens of Qwen3-32B's context, and vLLM refuses it",
    ),
    (
        "a max_model_len whose sequence the KV pool cannot hold",
        "--max-model-len = 131072: vLLM will not start: set --max-model-len <= 24688",
    ),
]


def test_render_onto_a_file_exits_2_naming_it(tmp_path, capsys, own_stacks) -> None:
    target = tmp_path / "a-file"
    target.write_text("")
    assert cli.main(["render", "--stack", "one-region", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llmfleet: error: ")
    assert CLI_CASES[0][1].format(out=target) in err


def test_render_into_a_folder_it_cannot_write_exits_2(
    tmp_path, capsys, monkeypatch, own_stacks
) -> None:
    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    assert cli.main(["render", "--stack", "one-region", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert CLI_CASES[1][1] in err and "Permission denied" in err


def test_write_raises_a_render_error_not_an_os_error(tmp_path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(RenderError):
        rendered_files.write({"a.yaml": "a"}, tmp_path / "x" / "dev")


def test_uneven_kv_heads_are_refused_with_the_divisors(tmp_path, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BAD_CONFIG))
    argv = ["predict", "--model", str(path), "--gpu", "H100", "--input-tokens", "100",
            "--output-tokens", "100"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert CLI_CASES[2][1] in err and "one of 1, 2, 4, 8, 16, 32" in err


def test_uneven_kv_heads_in_a_plan_name_the_config_path(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BAD_CONFIG))
    plan = make_plan(model={"config_path": str(path), "hf_repo": "org/m"})
    with pytest.raises(PlanError, match=r"model.config_path .*not a multiple"):
        build_fleet_plan(plan, base_dir=tmp_path)


def test_predict_never_prints_a_negative_kv_pool(capsys) -> None:
    argv = ["predict", "--model", "Llama-3.1-70B-Instruct", "--gpu", "L4", "--input-tokens",
            "100", "--output-tokens", "100"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert not re.search(r"KV pool -", out)
    # 70B in BF16 on one 22 GiB L4: the weights alone overrun it by 113 GiB (with the
    # activations, the non-torch memory and the pinned release's 0.4 GiB CUDA-graph pool)
    assert (
        "no KV pool: weights, activations and runtime exceed the usable memory by 113.46 GiB/GPU"
        in out
    )


def test_precision_and_gpu_are_both_case_insensitive(capsys) -> None:
    base = ["predict", "--model", "Qwen3-0.6B", "--input-tokens", "100", "--output-tokens",
            "10", "--json"]
    assert cli.main([*base, "--gpu", "h100", "--precision", "BF16"]) == 0
    upper = capsys.readouterr().out
    assert cli.main([*base, "--gpu", "H100", "--precision", "bf16"]) == 0
    assert capsys.readouterr().out == upper


def test_plan_text_names_the_quota_to_request(capsys, own_stacks) -> None:
    assert cli.main(["plan", "--stack", "one-region"]) == 0
    out = capsys.readouterr().out
    assert "Service quotas to request before `pulumi up`" in out
    assert "us-east-1: Running On-Demand G and VT instances (L-DB2E81BA) >= " in out


def test_a_stack_error_is_a_plan_error_family_member() -> None:
    assert issubclass(StackError, LlmfleetError)


def test_a_request_longer_than_the_models_context_says_the_model_cannot_hold_it() -> None:
    # Qwen3-32B holds 40,960 tokens: a p95 request of 51,200 cannot be served at any
    # max_model_len (it used to say "raise max_model_len to 51200")
    with pytest.raises(LlmfleetError) as e:
        make_plan(**{"model.id": "Qwen3-32B", "max_model_len": 40960,
                     "traffic.input_tokens": {"mean": 30000, "p95": 50000},
                     "traffic.output_tokens": {"mean": 500, "p95": 1200}})
    assert "Qwen3-32B holds at most 40,960 tokens (max_position_embeddings), so no " \
        "max_model_len serves 51,200" in str(e.value)
    assert "raise max_model_len" not in str(e.value)


def test_a_request_the_model_holds_asks_for_a_longer_max_model_len() -> None:
    with pytest.raises(LlmfleetError, match="raise max_model_len to 36200 or more"):
        make_plan(**{"model.id": "Qwen3-32B", "max_model_len": 32768,
                     "traffic.input_tokens": {"mean": 20000, "p95": 35000},
                     "traffic.output_tokens": {"mean": 500, "p95": 1200}})


def test_a_config_json_with_a_top_k_of_zero_exits_2_naming_the_field(tmp_path, capsys) -> None:
    cfg = dict(model_facts.model_entry("Qwen3-235B-A22B").config, num_experts_per_tok=0)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = ["predict", "--model", str(path), "--gpu", "H100", "--tensor-parallel-size", "8",
            "--input-tokens", "1000", "--output-tokens", "200"]
    assert cli.main(args) == 2
    assert "num_experts_per_tok: 0" in capsys.readouterr().err
