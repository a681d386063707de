"""Read a stack's capacity plan from stacks/Pulumi.<env>.yaml, the file `pulumi` reads too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from llmfleet.errors import StackError
from llmfleet.plan import CapacityPlan

REPO_ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = REPO_ROOT / "stacks"
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
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see README's plan reference)"
        value = err.get("input")
        shown = (
            "" if isinstance(value, dict | list) or err["type"] == "missing" else f" = {value!r}"
        )
        lines.append(f"  {path}{shown}: {msg}")
    return "\n".join(lines)
