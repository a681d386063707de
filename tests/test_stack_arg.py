"""`--stack` takes a stack name or the path of a stack file, in every command that has it;
a region or global stack of a new environment needs no file of its own; `rollout` lists
the files it reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmfleet.cli import main

REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plan_of_a_stack_file_path_is_the_plan_of_its_name(own_stacks, capsys) -> None:
    _, by_name, _ = run(["plan", "--stack", "one-region", "--json"], capsys)
    path = str(own_stacks / "Pulumi.one-region.yaml")
    code, by_path, err = run(["plan", "--stack", path, "--json"], capsys)
    assert code == 0, err
    assert json.loads(by_path) == json.loads(by_name)


def test_a_plan_file_of_any_name_plans_under_its_stem(own_stacks, tmp_path, capsys) -> None:
    mine = tmp_path / "my-plan.yaml"
    shutil.copy(own_stacks / "Pulumi.one-region.yaml", mine)
    code, out, err = run(["rollout", "--stack", str(mine), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["environment"] == "my-plan"


def test_render_of_a_stack_file_path_writes_under_the_stack_name(own_stacks, tmp_path, capsys):
    out_dir = tmp_path / "rendered"
    path = str(own_stacks / "Pulumi.one-region.yaml")
    code, _, err = run(["render", "--stack", path, "--out", str(out_dir)], capsys)
    assert code == 0, err
    assert (out_dir / "one-region" / "REPORT.md").is_file()


@pytest.mark.parametrize("command", ["plan", "drill", "simulate", "rollout", "render"])
def test_a_stack_path_that_does_not_exist_is_named_with_what_would_work(command, capsys):
    argv = [command, "--stack", "stacks/Pulumi.nope.yaml"]
    if command == "drill":
        argv += ["--lose", "us-east-1"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert "--stack stacks/Pulumi.nope.yaml: no such stack file; give a stack name" in err


def test_rollout_lists_the_plan_file_and_says_region_stacks_need_none(own_stacks, capsys):
    code, out, _ = run(["rollout", "--stack", "three-regions", "--json"], capsys)
    assert code == 0
    files = {f["stack"]: f for f in json.loads(out)["files"]}
    assert files["three-regions"] == {"path": "stacks/Pulumi.three-regions.yaml",
                                      "stack": "three-regions", "present": True,
                                      "required": True}
    regional = [f for s, f in files.items() if s != "three-regions"]
    assert len(regional) == 4  # three regions and the global stack
    assert not any(f["present"] or f["required"] for f in regional)
    code, text, _ = run(["rollout", "--stack", "three-regions"], capsys)
    assert "no file needed for three-regions." in text and "pulumi stack select --create" in text


@pytest.mark.slow  # a fresh interpreter imports the Pulumi SDKs
def test_preview_in_a_project_without_its_program_is_an_error_not_a_traceback(tmp_path) -> None:
    """A folder with Pulumi.yaml and stacks/ is a project `plan` works in; `preview` needs
    the Pulumi program too, and says so."""
    (tmp_path / "stacks").mkdir()
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copy(REPO / "stacks" / "Pulumi.dev.yaml", tmp_path / "stacks" / "Pulumi.dev.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "llmfleet"]
    plan = subprocess.run([*argv, "plan", "--stack", "dev"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    done = subprocess.run([*argv, "preview", "--stack", "dev"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path} has Pulumi.yaml and stacks/ but no __main__.py" in done.stderr
