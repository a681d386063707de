"""The run a preview of a change starts from: the stack at a git revision, or as an edited
stack or plan file says, run under the mocks.

A revision runs its own code: its files are checked out (`git archive`) into a temporary
folder and a fresh interpreter runs that folder's program with that folder's `llmfleet` and
`components` first on its path, so the old code never meets this process's modules (same
venv: the Pulumi SDKs are this checkout's). An edited environment file runs here with this
code; an edited file for a region or global stack runs in a copy of this tree that holds it.
A stack that does not deploy at a revision (its environment has no file there, or no longer
has the region) starts from nothing: every resource is a create.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.preview.run import run_program
from llmfleet.errors import StackError
from llmfleet.paths import PROJECT_ROOT
from llmfleet.plan.stacks import (
    GLOBAL,
    PLAN_KEY,
    read_plan,
    read_stack_config,
    resolve_stack,
    stack_path,
)

RUN_TIMEOUT_S = 600
TREE = ("llmfleet", "components", "stacks", "__main__.py", "Pulumi.yaml")
"""What a run of the program reads."""

RUNNER = """
import json, os, sys
stack, root = sys.argv[1], os.path.realpath(sys.argv[2])
import llmfleet
if not os.path.realpath(llmfleet.__file__).startswith(root + os.sep):
    sys.exit(f"llmfleet was imported from {llmfleet.__file__}, not from {root}")
from llmfleet.plan import stacks
env, _, part = stack.partition(".")
if not stacks.stack_path(env).exists():
    print("[]"); raise SystemExit(0)
if part and part != "global":
    regions = [r.name for r in stacks.read_plan(env).regions]
    if part not in regions:
        print("[]"); raise SystemExit(0)
from components.preview import run
if hasattr(run, "run_program"):
    resources = run.run_program(stack).resources
else:
    resources = run.run_preview(stack)
json.dump(resources, sys.stdout)
"""
"""Runs in the other tree with its own code: the stack's resources as JSON (`[]` where the
stack does not deploy there)."""


@dataclass(frozen=True)
class Before:
    """The resources a change starts from, and how the user named them."""

    label: str
    resources: list[dict[str, Any]]


def deploys(stack: str) -> bool:
    """Whether `stack` deploys anything in this tree (its environment has a file, and a
    region stack's region is in the plan)."""
    env, _, part = stack.partition(".")
    if not stack_path(env).exists():
        return False
    if part and part != GLOBAL:
        return part in [r.name for r in read_plan(env).regions]
    return True


def before_run(stack: str, source: str, repo: Path = PROJECT_ROOT) -> Before:
    """The run of `stack` that `--from SOURCE` names: an existing file (a stack file, or a
    plan) or else a git revision."""
    path = Path(source)
    if path.is_file():
        return Before(source, _from_file(stack, path))
    present = _tree_of(source, repo)
    if f"stacks/Pulumi.{stack.partition('.')[0]}.yaml" not in present:
        return Before(source, [])  # the environment did not exist there
    with tempfile.TemporaryDirectory(prefix="llmfleet-rev-") as tmp:
        _archive(source, [n for n in TREE if n in present or f"{n}/" in present], repo,
                 Path(tmp))
        return Before(source, _run_in(Path(tmp), stack))


def _tree_of(rev: str, repo: Path) -> set[str]:
    """The top-level names (folders with a slash) and stack files of revision `rev`."""
    top = _git(repo, rev, "ls-tree", "--name-only", rev)
    folders = set(_git(repo, rev, "ls-tree", "-d", "--name-only", rev).split())
    stacks = "stacks" in folders and _git(repo, rev, "ls-tree", "--name-only", rev, "stacks/")
    return {f"{n}/" if n in folders else n for n in top.split()} | set((stacks or "").split())


def _git(repo: Path, rev: str, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                              timeout=RUN_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise StackError(f"--from {rev}: git is not installed") from None
    if done.returncode != 0:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise StackError(
            f"--from {rev}: neither a file nor a revision git can read "
            f"({why.removeprefix('fatal: ')}); give a stack or plan file, or a branch, tag or "
            "commit of this repository (e.g. origin/main)"
        )
    return done.stdout.decode()


def _from_file(stack: str, path: Path) -> list[dict[str, Any]]:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StackError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(doc, dict):
        raise StackError(f"{path}: neither a stack file (config: ...) nor a plan (a mapping)")
    env = stack.partition(".")[0]
    if isinstance(doc.get("config"), dict):
        config = doc["config"]
    else:  # a plan: the environment's stack config with this plan
        config = {**read_stack_config(env), PLAN_KEY: doc}
    if PLAN_KEY in config and stack == env:
        resolve_stack(stack, config)  # a bad file is a StackError naming it
        return run_program(stack, config).resources
    with tempfile.TemporaryDirectory(prefix="llmfleet-file-") as tmp:
        root = Path(tmp)
        for name in TREE:
            src = PROJECT_ROOT / name
            if src.is_dir():
                shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, root / name)
        (root / "stacks" / f"Pulumi.{env}.yaml").write_text(yaml.safe_dump({"config": config}))
        return _run_in(root, stack)


def _archive(rev: str, names: list[str], repo: Path, dest: Path) -> None:
    """The files of `rev` the program reads, written under `dest`."""
    tar_bytes = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, *names],
        capture_output=True, timeout=RUN_TIMEOUT_S, check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        tar.extractall(dest, filter="data")


def _run_in(root: Path, stack: str) -> list[dict[str, Any]]:
    """Run the program of the tree at `root` for `stack` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, stack, str(root)],
        cwd=root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )
    if done.returncode != 0:
        lines = [x for x in done.stderr.strip().splitlines() if x.strip()]
        raise StackError(
            f"the program at that revision could not be run for stack {stack}: "
            f"{lines[-1] if lines else 'exit ' + str(done.returncode)}"
        )
    resources: list[dict[str, Any]] = json.loads(done.stdout)
    return resources
