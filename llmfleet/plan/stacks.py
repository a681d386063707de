"""Where plans are read from: a stack's `llmfleet:plan` in stacks/Pulumi.<env>.yaml (the
file `pulumi` reads too), a plan file, or a stack file at a git revision (`llmfleet diff
origin/main:prod prod`); validation errors reworded with field paths."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from llmfleet.errors import StackError
from llmfleet.paths import PROJECT_ROOT, STACKS_DIR
from llmfleet.plan.schema import CapacityPlan

PLAN_KEY = "llmfleet:plan"


def stack_path(env: str, stacks_dir: Path = STACKS_DIR) -> Path:
    return stacks_dir / f"Pulumi.{env}.yaml"


def list_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_stack_config(env: str, stacks_dir: Path = STACKS_DIR) -> dict[str, Any]:
    path = stack_path(env, stacks_dir)
    if not path.exists():
        known = ", ".join(list_stacks(stacks_dir)) or "none"
        raise StackError(f"stack {env!r}: no file {path}; stacks here: {known}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StackError(f"{path}: not valid YAML: {e}") from None
    config = (doc or {}).get("config")
    if not isinstance(config, dict):
        raise StackError(f"{path}: has no `config:` mapping")
    return config


def read_plan(env: str, stacks_dir: Path = STACKS_DIR) -> CapacityPlan:
    config = read_stack_config(env, stacks_dir)
    if PLAN_KEY not in config:
        raise StackError(f"{stack_path(env, stacks_dir)}: config has no key `{PLAN_KEY}`")
    return parse_plan(config[PLAN_KEY], where=f"{stack_path(env, stacks_dir).name}: {PLAN_KEY}")


def parse_plan(data: object, where: str = PLAN_KEY) -> CapacityPlan:
    """Validate a plan; pydantic errors become one line per dotted field path."""
    try:
        return CapacityPlan.model_validate(data)
    except ValidationError as e:
        raise StackError(f"{where} is invalid:\n" + format_validation_error(e)) from None


def format_validation_error(e: ValidationError, as_flags: bool = False) -> str:
    """One line per error: `plan.dotted.path = value: message` (or `--flag = value: ...`)."""
    lines = []
    for err in e.errors():
        path = "plan." + (".".join(str(p) for p in err["loc"]) or "(plan)")
        if as_flags:
            path = "--" + "-".join(str(p) for p in err["loc"]).replace("_", "-")
        msg = err["msg"].removeprefix("Value error, ")
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see README's plan reference)"
        elif err["type"] in MAPPING_ERRORS:
            msg = _mapping_hint(path, value, as_flags)
        shown = (
            "" if isinstance(value, dict | list) or err["type"] == "missing" else f" = {value!r}"
        )
        lines.append(f"  {path}{shown}: {msg}")
    return "\n".join(lines)


MAPPING_ERRORS = ("model_type", "model_attributes_type", "dict_type")
"""pydantic's "Input should be a valid dictionary or instance of <Class>": a section given
as a single value. The message names the section with an example instead of the class."""
MAPPING_EXAMPLES = {
    "plan.model": "{{id: {value}}} (a catalog model) or {{config_path: ..., hf_repo: ...}}",
    "plan.traffic.input_tokens": "{{mean: {value}, p95: ...}}",
    "plan.traffic.output_tokens": "{{mean: {value}, p95: ...}}",
    "plan.regions[]": "{{name: {value}, traffic_share: ...}}",
    "plan.allowed.speculative[]": "{{method: {value}}}",
}


def _mapping_hint(path: str, value: object, as_flags: bool) -> str:
    """A section written as one value: say it takes fields, with an example where known."""
    *parents, last = path.split(".")
    if last.isdigit():  # a list item: regions.0 -> regions[0], examples under regions[]
        section, key = f"{parents[-1]}[{last}]", ".".join(parents) + "[]"
    else:
        section, key = last, path
    example = MAPPING_EXAMPLES.get(key)
    if example and not isinstance(value, dict | list):
        write = "the item as - " if key.endswith("[]") else f"{section}: "
        return f"{section} takes fields, not one value; write {write}" + example.format(
            value=value
        )
    return f"{section} takes fields (a mapping, see README's plan reference), not one value"


GIT_TIMEOUT_S = 30


@dataclass(frozen=True)
class PlanSource:
    """A plan and how the user named it (shown in the diff's header)."""

    label: str
    plan: CapacityPlan


def plan_source(spec: str, repo: Path = PROJECT_ROOT) -> PlanSource:
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


def git_show(rev: str, rel_path: str, repo: Path = PROJECT_ROOT) -> str:
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
