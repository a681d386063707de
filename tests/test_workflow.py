"""The GitHub workflows users copy: valid YAML with the steps README promises, actions pinned,
least privilege (zizmor finds nothing of medium or high severity), and a deploy that runs
the plan's rollout in order and stops at a failed gate (its script run against stubs)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from plans import make_plan

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs.deploy_order import DeployOrder, deploy_order

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "llmfleet.yml"
DEPLOY = WORKFLOWS / "deploy.yml"


def load(path: Path = WORKFLOW) -> dict:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(job: str, path: Path = WORKFLOW) -> list[dict]:
    return load(path)["jobs"][job]["steps"]


def test_it_runs_on_pull_requests_and_only_its_jobs_may_comment() -> None:
    doc = load()
    assert "pull_request" in doc["on"]
    assert doc["permissions"] == {}
    for job in ("check", "preview"):
        assert doc["jobs"][job]["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_no_checkout_keeps_its_token() -> None:
    for path in (WORKFLOW, DEPLOY):
        for job in load(path)["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, path.name


def test_zizmor_finds_nothing_of_medium_or_high_severity() -> None:
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).parent / "zizmor")
    done = subprocess.run(
        [zizmor, "--offline", "--min-severity", "medium", str(WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_job_tests_checks_rendered_and_diffs_against_the_base() -> None:
    job = steps("check")
    checkout = next(s for s in job if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # git show of the base branch needs history
    python = next(s for s in job if s.get("uses", "").startswith("actions/setup-python@"))
    assert python["with"]["python-version"] == "3.11"
    runs = "\n".join(s.get("run", "") for s in job)
    assert "make test" in runs
    assert "venv/bin/llmfleet render --check" in runs
    assert 'venv/bin/llmfleet diff --resources "${allow[@]}" "${base}:${stack}" "${stack}"' in runs
    assert 'base="origin/${BASE_REF}"' in runs
    comment = next(s for s in job if s.get("uses", "").startswith("marocchino/"))
    assert comment["with"] == {"header": "llmfleet-diff", "path": "diff.md"}


def test_the_check_job_previews_the_change_and_stops_on_its_findings_after_posting() -> None:
    """Per resource what the PR does (docs/preview.md): changed stack files through `diff
    --resources`, a change to the program through `preview --from` the base for every
    environment; replacements the commits mean are their Llmfleet-Allow-Replace trailers."""
    job = steps("check")
    runs = "\n".join(s.get("run", "") for s in job)
    assert "%(trailers:key=Llmfleet-Allow-Replace,valueonly)" in runs
    assert 'allow+=(--allow-replace "$pattern")' in runs
    assert 'venv/bin/llmfleet preview --stack "$env" --from "$base" "${allow[@]}"' in runs
    names = [s.get("name", "") for s in job]
    assert names.index("Stop on a finding of the change") > names.index(
        "Post the diff as a PR comment")
    assert names[-1] == "Stop on a finding of the change"


def test_pulumi_preview_runs_only_with_a_pulumi_token() -> None:
    job = load()["jobs"]["preview"]
    assert job["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    preview = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert preview["if"] == "env.PULUMI_ACCESS_TOKEN != ''"
    assert preview["with"]["command"] == "preview"
    assert {"stack-name", "work-dir", "comment-on-pr"} <= set(preview["with"])
    note = next(s for s in job["steps"] if s.get("if") == "env.PULUMI_ACCESS_TOKEN == ''")
    assert "::notice" in note["run"] and "skipped" in note["run"]


def test_every_action_is_pinned_to_a_commit() -> None:
    uses = [
        s["uses"]
        for path in (WORKFLOW, DEPLOY)
        for job in load(path)["jobs"].values()
        for s in job["steps"]
        if "uses" in s
    ]
    assert len(uses) >= 9
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref


def test_the_pull_request_previews_the_stacks_the_rollout_deploys() -> None:
    [step] = [s for s in steps("check") if s.get("id") == "stacks"]
    assert "list_stacks" in step["run"]
    assert 'venv/bin/llmfleet rollout --stack "$env" --json' in step["run"]


# --- the deploy workflow ---

DEPLOY_STEP = "Deploy each stack in order, gated"
THREE = [
    {"name": "us-east-1", "traffic_share": 0.5},
    {"name": "us-west-2", "traffic_share": 0.3, "vpc_cidr": "10.41.0.0/16"},
    {"name": "eu-north-1", "traffic_share": 0.2, "vpc_cidr": "10.42.0.0/16"},
]
DNS = {"zone_name": "example.com", "record_name": "llm.example.com"}


def test_deploys_run_by_hand_for_one_environment_with_least_privilege() -> None:
    doc = load(DEPLOY)
    assert set(doc["on"]) == {"workflow_dispatch"}
    assert doc["on"]["workflow_dispatch"]["inputs"]["environment"]["required"] is True
    assert doc["permissions"] == {}
    [job] = doc["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    assert job["environment"] == "${{ inputs.environment }}"  # its secrets and reviewers
    assert doc["concurrency"]["cancel-in-progress"] is False
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'llmfleet rollout --stack "$ENVIRONMENT" --json' in runs
    assert "${{" not in runs  # inputs reach scripts through env, never spliced into them


@pytest.fixture(scope="module")
def order() -> DeployOrder:
    """A three-region environment's rollout, as `llmfleet rollout --json` prints it."""
    plan = make_plan(regions=THREE, dns=DNS)
    return deploy_order("qa", plan, build_fleet_plan(plan))


STUBS = {
    "pulumi": """#!/bin/sh
echo "pulumi $*" >> "$LOG"
case "$*" in
  *"stack output kubeconfigs"*) echo "$STUB_KUBECONFIGS";;
  *"stack output global_validation_fqdn"*) [ -z "$STUB_NEW" ] || exit 255; echo x.example.com;;
esac
""",
    "kubectl": """#!/bin/sh
echo "kubectl $*" >> "$LOG"
case "$*" in
  *"rollout status"*) [ -z "$STUB_NOT_READY" ] || exit 1;;
  *"get --raw"*) echo "$STUB_ALERTS";;
esac
""",
    "sleep": """#!/bin/sh
echo "sleep $*" >> "$LOG"
""",
}


def deploy(
    tmp_path: Path, order: DeployOrder, firing: tuple[str, ...] = (), **env: str
) -> tuple[int, list[str], str]:
    """Run the workflow's deploy script on `order` with stub pulumi, kubectl and sleep: its
    exit code, the calls it made in order, and what it printed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    rollout = tmp_path / "rollout.json"
    rollout.write_text(json.dumps(order.model_dump(mode="json")))
    log = tmp_path / "calls.log"
    log.write_text("")
    alerts = [{"state": "firing", "labels": {"alertname": a}} for a in firing]
    [step] = [s for s in steps("deploy", DEPLOY) if s.get("name") == DEPLOY_STEP]
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LOG": str(log),
        "ROLLOUT": str(rollout),
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "PULUMI_ORG": "",
        "PULUMI_CLOUD_URL": "",
        "STUB_KUBECONFIGS": json.dumps({r["name"]: {"kind": "Config"} for r in THREE}),
        "STUB_ALERTS": json.dumps({"status": "success", "data": {"alerts": alerts}}),
        "STUB_NOT_READY": "",
        "STUB_NEW": "",
        **env,
    }
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
        env=environ, capture_output=True, text=True, check=False,
    )
    return done.returncode, log.read_text().splitlines(), done.stdout + done.stderr


def ups(calls: list[str]) -> list[str]:
    return [c.split("--stack ")[1] for c in calls if c.startswith("pulumi up")]


def test_the_deploy_runs_every_stack_in_the_rollout_order_global_last(
    tmp_path: Path, order: DeployOrder
) -> None:
    code, calls, _ = deploy(tmp_path, order)
    assert code == 0
    assert ups(calls) == [s.stack for s in order.steps]
    assert ups(calls)[-1] == "qa.global"
    waits = [c for c in calls if "rollout status" in c]
    assert waits == [
        f"kubectl -n t rollout status deployment/t --timeout {s.ready_timeout_s}s"
        for s in order.steps
        if s.region
    ]
    assert [c for c in calls if c.startswith("sleep")] == ["sleep 660"]  # the canary's bake


def test_a_firing_burn_rate_alert_on_the_canary_stops_the_rollout(
    tmp_path: Path, order: DeployOrder
) -> None:
    code, calls, out = deploy(tmp_path, order, firing=("ItlBudgetBurnFast", "KvCacheNearFull"))
    assert code != 0
    assert "canary qa.eu-north-1: ItlBudgetBurnFast firing after 660 s" in out
    assert ups(calls) == ["qa.eu-north-1"]


def test_an_alert_outside_the_gate_does_not_stop_it(tmp_path: Path, order: DeployOrder) -> None:
    code, calls, _ = deploy(tmp_path, order, firing=("KvCacheNearFull",))
    assert code == 0 and len(ups(calls)) == len(order.steps)


def test_a_canary_not_ready_within_its_cold_start_stops_the_rollout_before_the_bake(
    tmp_path: Path, order: DeployOrder
) -> None:
    code, calls, out = deploy(tmp_path, order, STUB_NOT_READY="1")
    assert code != 0
    assert "qa.eu-north-1: t not Ready within" in out
    assert ups(calls) == ["qa.eu-north-1"]
    assert not [c for c in calls if c.startswith("sleep")]


def test_stacks_carry_the_pulumi_organization_when_one_is_set(
    tmp_path: Path, order: DeployOrder
) -> None:
    code, calls, _ = deploy(tmp_path, order, PULUMI_ORG="acme")
    assert code == 0
    assert ups(calls) == [f"acme/{s.stack}" for s in order.steps]


def test_a_new_environments_global_stack_goes_first_once_for_the_certificate_validation(
    tmp_path: Path, order: DeployOrder
) -> None:
    code, calls, _ = deploy(tmp_path, order, STUB_NEW="1")
    assert code == 0
    assert ups(calls) == ["qa.global"] + [s.stack for s in order.steps]
    # Every stack exists (the global one reads the region stacks) before the first `up`.
    first_up = next(i for i, c in enumerate(calls) if c.startswith("pulumi up"))
    created = [c.split("--stack ")[1] for c in calls[:first_up] if "stack select --create" in c]
    assert created == [s.stack for s in order.steps]
