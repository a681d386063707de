"""No secret reaches anything llmfleet writes or prints: every stack is planned, previewed
and rendered through the CLI with a sentinel standing in for a Hugging Face token, an API
key, AWS keys and a decrypted Pulumi secret (in the stack's config and in the environment),
and the sentinel appears nowhere (conftest.sentinel_runs)."""

from __future__ import annotations

import pytest
from conftest import SENTINEL, SENTINEL_CONFIG, STACKS
from plans import make_plan

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render

pytestmark = pytest.mark.hardening


def test_every_stack_ran_with_the_sentinel_in_its_config(sentinel_runs) -> None:
    assert sorted(sentinel_runs) == STACKS
    assert any(SENTINEL in str(v) for v in SENTINEL_CONFIG.values())


def test_no_sentinel_in_cli_output(sentinel_runs) -> None:
    for env, run in sentinel_runs.items():
        assert set(run.output) == {"plan", "plan --json", "preview", "preview --json", "render"}
        for command, text in run.output.items():
            assert text, (env, command)
            assert SENTINEL not in text, (env, command)


def test_no_sentinel_in_rendered_files(sentinel_runs) -> None:
    for env, run in sentinel_runs.items():
        assert any(name.endswith("deployment.yaml") for name in run.rendered), env
        for name, text in run.rendered.items():
            assert SENTINEL not in text, (env, name)


def test_no_sentinel_in_the_fleet_plan_or_logs(sentinel_runs) -> None:
    for env, run in sentinel_runs.items():
        assert '"regions"' in run.fleet_json
        assert SENTINEL not in run.fleet_json, env
        assert SENTINEL not in run.logs, env


def test_secrets_reach_pods_only_as_secret_references(sentinel_runs) -> None:
    """Pods stream weights from the region's S3 copy, so they hold no Hugging Face token;
    any secret-like variable (a token or key, e.g. VLLM_API_KEY) comes from a Secret."""
    for env, run in sentinel_runs.items():
        for r in run.preview_resources:
            if r["type"] != "kubernetes:apps/v1:Deployment":
                continue
            [container] = r["inputs"]["spec"]["template"]["spec"]["containers"]
            names = [e["name"] for e in container["env"]]
            assert "HF_TOKEN" not in names, env
            for e in container["env"]:
                if _secret_like(e["name"]):
                    assert set(e) == {"name", "valueFrom"}, (env, e["name"])
                    assert "secretKeyRef" in e["valueFrom"], (env, e["name"])


def _secret_like(name: str) -> bool:
    return any(word in name for word in ("TOKEN", "KEY", "SECRET", "PASSWORD"))


def test_an_api_key_reaches_the_pod_as_a_secret_reference_only() -> None:
    """A stack may have no API key; this plan has one, so the check above has a case."""
    fp = build_fleet_plan(make_plan(api_key={"secret_name": "vllm-key", "secret_key": "k"}))
    [deployment] = [
        d for d in render.region_manifests(fp, fp.regions[0]) if d["kind"] == "Deployment"
    ]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    secret_like = [e for e in container["env"] if _secret_like(e["name"])]
    assert [e["name"] for e in secret_like] == ["VLLM_API_KEY"]
    assert secret_like[0] == {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "vllm-key", "key": "k"}},
    }
