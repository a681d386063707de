"""Where `llmfleet diff` reads a plan from: a stack name, a stack file, or a git revision.

`REV:STACK` reads `stacks/Pulumi.<STACK>.yaml` (or `REV:path/to/file.yaml`) as it was at
revision REV of the repository llmfleet runs in, with `git show`, so a pull request can be
compared with its base (`origin/main:prod`) without checking anything out. The plan is
sized with the current code and catalogs: the diff shows what the change to the stack file
does, not what other commits did to the model.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from llmfleet.errors import StackError
from llmfleet.plan import CapacityPlan
from llmfleet.stack import PLAN_KEY, REPO_ROOT, STACKS_DIR, parse_plan, read_plan, stack_path

GIT_TIMEOUT_S = 30


@dataclass(frozen=True)
class PlanSource:
    """A plan and how the user named it (shown in the diff's header)."""

    label: str
    plan: CapacityPlan


def load(spec: str, repo: Path = REPO_ROOT) -> PlanSource:
    """A stack name (`prod`), a stack file path, or `REV:STACK` / `REV:path.yaml`."""
    if Path(spec).is_file():
        return PlanSource(spec, plan_from_text(Path(spec).read_text(), spec))
    if ":" in spec:
        rev, _, stack = spec.rpartition(":")
        if not rev or not stack:
            raise StackError(f"{spec!r}: give REV:STACK, e.g. origin/main:prod or HEAD:prod")
        rel = stack if stack.endswith((".yaml", ".yml")) else _stack_rel(stack)
        return PlanSource(spec, plan_from_text(git_show(rev, rel, repo), f"{rev}:{rel}"))
    if spec.endswith((".yaml", ".yml")) or "/" in spec:
        raise StackError(f"{spec!r}: no such stack file")
    return PlanSource(spec, read_plan(spec))


def _stack_rel(stack: str) -> str:
    return stack_path(stack).relative_to(STACKS_DIR.parent).as_posix()


def git_show(rev: str, rel_path: str, repo: Path = REPO_ROOT) -> str:
    """The text of `rel_path` at revision `rev`; a StackError naming both if git cannot."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "show", f"{rev}:{rel_path}"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise StackError(f"{rev}:{rel_path}: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise StackError(f"{rev}:{rel_path}: git show took over {GIT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["git show failed"])[-1]
        raise StackError(
            f"{rev}:{rel_path}: git cannot read it ({why.removeprefix('fatal: ')}); give a "
            "revision of this repository (a branch, tag or commit, e.g. origin/main) and a "
            "stack that exists there"
        )
    return done.stdout


def plan_from_text(text: str, where: str) -> CapacityPlan:
    """The `llmfleet:plan` of a stack file's text."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise StackError(f"{where}: not valid YAML: {' '.join(str(e).split())}") from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict) or PLAN_KEY not in config:
        raise StackError(f"{where}: not a stack file (no `config: {PLAN_KEY}:`)")
    return parse_plan(config[PLAN_KEY], where=f"{where}: {PLAN_KEY}")
