"""Where plans are read from: a stack's `llmfleet:plan` in stacks/Pulumi.<env>.yaml (the
file `pulumi` reads too), a plan file, or a stack file at a git revision (`llmfleet diff
origin/main:prod prod`); validation errors reworded with field paths.

Which stacks deploy an environment: an environment with one region deploys as its one stack
(`<env>`); one with more deploys as a stack per region (`<env>.<region>`) plus
`<env>.global` for what spans regions (DNS). Those stack files say only which region they
deploy (`llmfleet:environment`, `llmfleet:region` and `aws:region`); the capacity plan stays
in `Pulumi.<env>.yaml`, sized as a whole. `resolve_stack` reads any of them."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from llmfleet.errors import StackError
from llmfleet.paths import PROJECT_ROOT, STACKS_DIR
from llmfleet.plan.schema import CapacityPlan

PLAN_KEY = "llmfleet:plan"
ENVIRONMENT_KEY = "llmfleet:environment"
REGION_KEY = "llmfleet:region"
AWS_REGION_KEY = "aws:region"
GLOBAL = "global"
"""The `llmfleet:region` of an environment's global stack (`<env>.global`)."""
GLOBAL_AWS_REGION = "us-east-1"
"""The global stack's aws:region: Route53's control plane and its metrics are in us-east-1."""


def stack_path(env: str, stacks_dir: Path = STACKS_DIR) -> Path:
    return stacks_dir / f"Pulumi.{env}.yaml"


def list_stack_files(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Every stack with a file in stacks/: environments, region stacks and global stacks."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def list_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """The environments: stacks whose file holds a capacity plan (`llmfleet:plan`)."""
    return [s for s in list_stack_files(stacks_dir) if _holds_plan(stack_path(s, stacks_dir))]


def _holds_plan(path: Path) -> bool:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return True  # read_stack_config reports it
    config = doc.get("config") if isinstance(doc, dict) else None
    return not isinstance(config, dict) or ENVIRONMENT_KEY not in config


def read_stack_config(env: str, stacks_dir: Path = STACKS_DIR) -> dict[str, Any]:
    path = stack_path(env, stacks_dir)
    if not path.exists():
        known = ", ".join(list_stack_files(stacks_dir)) or "none"
        raise StackError(f"stack {env!r}: no file {path}; stacks here: {known}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StackError(f"{path}: not valid YAML: {e}") from None
    config = (doc or {}).get("config")
    if not isinstance(config, dict):
        raise StackError(f"{path}: has no `config:` mapping")
    return config


def stack_config(stack: str, stacks_dir: Path = STACKS_DIR) -> dict[str, Any]:
    """A stack's config as `pulumi` hands it to the program: its file's, or none for a region
    or global stack (`ENV.REGION`, `ENV.global`) of an environment whose own file exists,
    which `resolve_stack` resolves from its name (a new environment needs no hand-written
    region-stack files)."""
    if _by_name(stack, stacks_dir) and not stack_path(stack, stacks_dir).exists():
        return {}
    return read_stack_config(stack, stacks_dir)


def stack_arg(value: str, stacks_dir: Path = STACKS_DIR) -> tuple[str, Path | None]:
    """`--stack`'s value, a stack name (`prod`, `prod.us-east-1`) or the path of a stack
    file (`stacks/Pulumi.prod.yaml`, `../other/Pulumi.qa.yaml`, `my-plan.yaml`): the stack's
    name and its file (None: a name, read from `stacks_dir`; a path to a file in it is taken
    as its name). A file's stack name is its name less `Pulumi.` and `.yaml`, as pulumi
    names stacks (`render --stack FILE` writes rendered/<name>/)."""
    if not value.endswith((".yaml", ".yml")) and "/" not in value and "\\" not in value:
        return value, None
    path = Path(value)
    if not path.is_file():
        raise StackError(
            f"--stack {value}: no such stack file; give a stack name (one of "
            f"{', '.join(list_stack_files(stacks_dir)) or 'none'}) or the path of a "
            "Pulumi.<name>.yaml file"
        )
    if path.name == "Pulumi.yaml":
        raise StackError(
            f"--stack {value}: that is the project file; give a stack file "
            "(stacks/Pulumi.<name>.yaml) or a stack name"
        )
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
    if path.resolve() == stack_path(name, stacks_dir).resolve():
        return name, None
    return name, path


def stack_file_config(path: Path) -> dict[str, Any]:
    """The config of a stack file given by its path (`--stack FILE`)."""
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    if path.name == f"Pulumi.{name}.yaml":
        return read_stack_config(name, path.parent)
    return read_stack_config_text(path.read_text(), str(path))


def read_stack_config_text(text: str, where: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise StackError(f"{where}: not valid YAML: {' '.join(str(e).split())}") from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise StackError(f"{where}: has no `config:` mapping")
    return config


def read_plan_file(path: Path) -> CapacityPlan:
    """The plan of a stack file given by its path: a `Pulumi.<name>.yaml` with the checks
    of its folder (a region stack's file there), any other file by its text."""
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    if path.name == f"Pulumi.{name}.yaml":
        return read_plan(name, path.parent)
    return plan_from_text(path.read_text(), str(path))


def read_plan(env: str, stacks_dir: Path = STACKS_DIR) -> CapacityPlan:
    config = read_stack_config(env, stacks_dir)
    if PLAN_KEY not in config:
        if ENVIRONMENT_KEY in config:
            owner = config[ENVIRONMENT_KEY]
            raise StackError(
                f"{stack_path(env, stacks_dir)} deploys part of the environment {owner!r}; its "
                f"plan is in {stack_path(str(owner), stacks_dir).name}: use --stack {owner}"
            )
        raise StackError(f"{stack_path(env, stacks_dir)}: config has no key `{PLAN_KEY}`")
    plan = parse_plan(config[PLAN_KEY], where=f"{stack_path(env, stacks_dir).name}: {PLAN_KEY}")
    check_no_removed_region(env, plan, stacks_dir)
    return plan


def check_no_removed_region(env: str, plan: CapacityPlan, stacks_dir: Path = STACKS_DIR) -> None:
    """A region stack whose region the plan no longer lists was removed without its
    retirement: the global stack would stop routing to it while its stack, deletion
    protection on, stays up (and its destroy hangs). StackError naming the fix."""
    names = {r.name for r in plan.regions}
    for stack in list_stack_files(stacks_dir):
        owner, dot, part = stack.partition(".")
        if owner != env or not dot or part == GLOBAL or part in names:
            continue
        raise StackError(
            f"regions: {part} is not in {env}'s plan, but stacks/Pulumi.{stack}.yaml still "
            f"deploys it: a region leaves the global stack first; put it back in regions with "
            f"retire: true, run `llmfleet rollout --stack {env}` (the global stack, then "
            f"{stack} with deletion protection off, then `pulumi destroy -s {stack}`), and "
            "only then remove it and its stack file (docs/day2.md)"
        )


Scope = Literal["environment", "region", "global"]


@dataclass(frozen=True)
class StackTarget:
    """What one stack deploys: its environment's plan, and which part of it.

    scope `environment`: every region and the global part in one stack (a single-region
    environment deploys so; a multi-region one is previewed so); `region`: one region;
    `global`: what spans regions, reading each region stack's outputs."""

    stack: str
    environment: str
    plan: CapacityPlan
    scope: Scope
    region: str | None = None

    @property
    def regions(self) -> list[str]:
        """The regions whose clusters this stack builds."""
        if self.scope == "environment":
            return [r.name for r in self.plan.regions]
        return [self.region] if self.scope == "region" and self.region else []


def region_stack(env: str, region: str) -> str:
    return f"{env}.{region}"


def global_stack(env: str) -> str:
    return f"{env}.{GLOBAL}"


def splits(plan: CapacityPlan) -> bool:
    """An environment with more than one region deploys as region stacks plus a global one."""
    return len(plan.regions) > 1


def deploy_stacks(env: str, plan: CapacityPlan, order: list[str] | None = None) -> list[str]:
    """The stacks `pulumi up` runs for an environment, in order: each region's (in `order`,
    default the plan's), then the global one; a single-region environment's own stack."""
    if not splits(plan):
        return [env]
    regions = order or [r.name for r in plan.regions]
    return [region_stack(env, r) for r in regions] + [global_stack(env)]


def stack_file_text(env: str, region: str) -> str:
    """The whole stack file of a region (or `global`) stack of `env`."""
    aws_region = GLOBAL_AWS_REGION if region == GLOBAL else region
    what = (
        "what spans regions (the global name, Route53 health checks, routed records)"
        if region == GLOBAL
        else f"{env}'s {region} region (its cluster, capacity and serving)"
    )
    return (
        f"# {env}.{region}: {what}.\n# The capacity plan is stacks/Pulumi.{env}.yaml, sized "
        "as a whole.\n"
        f"config:\n  {AWS_REGION_KEY}: {aws_region}\n  {ENVIRONMENT_KEY}: {env}\n"
        f"  {REGION_KEY}: {region}\n"
    )


def missing_stack_files(env: str, plan: CapacityPlan, stacks_dir: Path = STACKS_DIR) -> list[str]:
    """The deploy stacks of `env` without a file in stacks/ (optional: a region or global
    stack is resolved from its name; a file records it for `pulumi config`)."""
    return [s for s in deploy_stacks(env, plan) if not stack_path(s, stacks_dir).exists()]


def _by_name(stack: str, stacks_dir: Path) -> bool:
    """`ENV.PART` where ENV is an environment's file: a region or global stack by its name."""
    env_name, dot, part = stack.partition(".")
    return bool(dot and part) and stack_path(env_name, stacks_dir).exists()


def resolve_stack(
    stack: str, config: Mapping[str, Any] | None = None, stacks_dir: Path = STACKS_DIR
) -> StackTarget:
    """The target of stack `stack` from its config (default: its file in stacks/): an
    environment (its file holds the plan) or a region or global stack of one. A region or
    global stack needs no file of its own: `ENV.REGION` and `ENV.global` name what they
    deploy (a file, when present, must agree with the name)."""
    path = stack_path(stack, stacks_dir)
    if config is None:
        config = {} if _by_name(stack, stacks_dir) and not path.exists() else read_stack_config(
            stack, stacks_dir
        )
    part_keys = [k for k in (ENVIRONMENT_KEY, REGION_KEY) if k in config]
    if PLAN_KEY not in config and not part_keys and _by_name(stack, stacks_dir):
        env_name, _, region_name = stack.partition(".")
        config = {**config, ENVIRONMENT_KEY: env_name, REGION_KEY: region_name}
        config.setdefault(AWS_REGION_KEY, GLOBAL_AWS_REGION if region_name == GLOBAL
                          else region_name)
        part_keys = [ENVIRONMENT_KEY, REGION_KEY]
    if PLAN_KEY in config:
        if part_keys:
            raise StackError(
                f"{path}: holds a plan and {', '.join(part_keys)}; an environment's file holds "
                f"the plan, a region stack's file names its environment and region only"
            )
        return StackTarget(stack, stack, parse_plan(config[PLAN_KEY], f"{path.name}: {PLAN_KEY}"),
                           "environment")
    env, region = config.get(ENVIRONMENT_KEY), config.get(REGION_KEY)
    if not isinstance(env, str) or not isinstance(region, str):
        raise StackError(
            f"{path}: config needs `{PLAN_KEY}` (an environment) or both `{ENVIRONMENT_KEY}` "
            f"and `{REGION_KEY}` (one of its region stacks, or `{GLOBAL}`)"
        )
    plan = read_plan(env, stacks_dir)
    names = [r.name for r in plan.regions]
    if not splits(plan):
        raise StackError(
            f"{path}: {env} has one region ({names[0]}) and deploys as the one stack {env}; "
            f"remove {path.name}"
        )
    if region != GLOBAL and region not in names:
        raise StackError(
            f"{path}: {REGION_KEY} = {region!r} is not a region of {env}; use one of "
            f"{', '.join([*names, GLOBAL])}"
        )
    if stack != region_stack(env, region):
        raise StackError(
            f"stack {stack!r} deploys {env}'s {region}: name it {region_stack(env, region)} "
            f"(stacks/Pulumi.{region_stack(env, region)}.yaml)"
        )
    wanted = GLOBAL_AWS_REGION if region == GLOBAL else region
    if config.get(AWS_REGION_KEY) != wanted:
        raise StackError(
            f"{path}: {AWS_REGION_KEY} = {config.get(AWS_REGION_KEY)!r}; this stack deploys in "
            f"{wanted}: set {AWS_REGION_KEY}: {wanted}"
        )
    if region == GLOBAL:
        return StackTarget(stack, env, plan, "global")
    return StackTarget(stack, env, plan, "region", region)


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
            msg = "unknown field (check the spelling; see docs/plan.md)"
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
    return f"{section} takes fields (a mapping, see docs/plan.md), not one value"


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
