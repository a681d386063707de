"""A new user's stacks keep the suite green: a copy of this repository gains a Qwen3-32B
fleet in Frankfurt and Tokyo with a global name (DNS) and a model from its own config.json in
Ireland, each added as one stacks/Pulumi.<env>.yaml and nothing else; each plans, renders and
previews (the two-region one also as its region and global stacks, which need no file),
`render --check` passes, and the stack tests pass in the copy: the fast suite and the
program tests over every split environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from plans import stack_text

from llmfleet.catalog import model_facts

REPO = Path(__file__).resolve().parents[1]
SKIP = {".git", "venv", ".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache", "__pycache__"}

QWEN_FRANKFURT_TOKYO = {
    "name": "qwen-eu-ap",
    "model": {"id": "Qwen3-32B"},
    "max_model_len": 16384,
    "traffic": {
        "peak_requests_per_s": 40,
        "trough_requests_per_s": 8,
        "input_tokens": {"mean": 1500, "p95": 4000},
        "output_tokens": {"mean": 400, "p95": 1000},
    },
    "slo": {"ttft_ms": 800, "itl_ms": 50, "percentile": 99},
    "regions": [
        {"name": "eu-central-1", "traffic_share": 0.7},
        {"name": "ap-northeast-1", "traffic_share": 0.3},
    ],
    "account_id": "444455556666",  # the user's account: S3 names are global (README)
    "dns": {"zone_name": "example.com", "record_name": "qwen.example.com"},
}
OWN_CONFIG = {
    "name": "mine",
    "model": {"config_path": "models/mistral-ft/config.json", "hf_repo": "acme/mistral-ft"},
    "max_model_len": 8192,
    "traffic": {
        "peak_requests_per_s": 5,
        "trough_requests_per_s": 1,
        "input_tokens": {"mean": 800, "p95": 2000},
        "output_tokens": {"mean": 200, "p95": 600},
    },
    "slo": {"ttft_ms": 1000, "itl_ms": 60, "itl": "tpot", "percentile": 95},
    "regions": [{"name": "eu-west-1", "traffic_share": 1.0}],
    "account_id": "444455556666",
}


def _files(root: Path) -> list[Path]:
    """The checkout's files (tracked and new, not ignored); without git, the tree."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            capture_output=True, check=True,
        )
        names = [n for n in done.stdout.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not SKIP & set(p.relative_to(root).parts)
        ]
    return [root / n for n in names if (root / n).is_file()]


def _run(copy: Path, *argv: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


@pytest.mark.slow  # copies the repository, renders and previews, runs the suite there
def test_a_new_users_stacks_plan_render_preview_and_keep_the_suite_green(tmp_path) -> None:
    copy = tmp_path / "repo"
    for path in _files(REPO):
        target = copy / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    config = model_facts.model_entry("Mistral-7B-Instruct-v0.3").config
    (copy / "models" / "mistral-ft").mkdir(parents=True)
    (copy / "models" / "mistral-ft" / "config.json").write_text(json.dumps(config))
    (copy / "stacks" / "Pulumi.qwen.yaml").write_text(stack_text(QWEN_FRANKFURT_TOKYO))
    (copy / "stacks" / "Pulumi.mine.yaml").write_text(stack_text(OWN_CONFIG))

    for env in ("qwen", "mine"):
        plan = _run(copy, "-m", "llmfleet", "plan", "--stack", env, "--json")
        assert plan.returncode == 0, plan.stderr
    for stack in ("qwen", "qwen.eu-central-1", "qwen.global", "mine"):
        preview = _run(copy, "-m", "llmfleet", "preview", "--stack", stack, "--json")
        assert preview.returncode == 0, preview.stderr
        assert json.loads(preview.stdout), stack
    render = _run(copy, "-m", "llmfleet", "render")
    assert render.returncode == 0, render.stderr
    check = _run(copy, "-m", "llmfleet", "render", "--check")
    assert check.returncode == 0, check.stderr
    listed = check.stdout.split("up to date for ")[1].strip().split(", ")
    assert {"mine", "qwen"} <= set(listed)
    suite = _run(
        copy, "-m", "pytest", "-m", "not validation and not hardening and not slow", "-q",
        "-p", "no:cacheprovider", "-x", "-n", "2", "--dist", "loadfile",  # as `make test`
    )
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    split = _run(
        copy, "-m", "pytest", "-m", "slow", "-q", "-p", "no:cacheprovider",
        "tests/components/test_region_stacks.py",
        "tests/components/test_change_program.py::"
        "test_the_table_covers_every_type_of_every_stack_that_deploys_an_environment",
    )
    assert split.returncode == 0, split.stdout[-4000:] + split.stderr[-2000:]
