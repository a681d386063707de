"""The GitHub workflow users copy: valid YAML with the steps README promises, actions pinned."""

import re
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "llmfleet.yml"


def load() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(job: str) -> list[dict]:
    return load()["jobs"][job]["steps"]


def test_it_runs_on_pull_requests_and_may_comment() -> None:
    doc = load()
    assert "pull_request" in doc["on"]
    assert doc["permissions"]["pull-requests"] == "write"


def test_the_check_job_tests_checks_rendered_and_diffs_against_the_base() -> None:
    job = steps("check")
    checkout = next(s for s in job if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # git show of the base branch needs history
    python = next(s for s in job if s.get("uses", "").startswith("actions/setup-python@"))
    assert python["with"]["python-version"] == "3.11"
    runs = "\n".join(s.get("run", "") for s in job)
    assert "make test" in runs
    assert "venv/bin/llmfleet render --check" in runs
    assert 'venv/bin/llmfleet diff "${base}:${stack}" "${stack}"' in runs
    assert 'base="origin/${BASE_REF}"' in runs
    comment = next(s for s in job if s.get("uses", "").startswith("marocchino/"))
    assert comment["with"] == {"header": "llmfleet-diff", "path": "diff.md"}


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
    doc = load()
    uses = [s["uses"] for job in doc["jobs"].values() for s in job["steps"] if "uses" in s]
    assert len(uses) >= 6
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
