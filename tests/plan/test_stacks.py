"""Which stacks deploy an environment: its own (one region), or a stack per region plus a
global one (several), whose files say only which region they deploy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from plans import plan_dict

from llmfleet.errors import PlanError, StackError
from llmfleet.plan.stacks import (
    deploy_stacks,
    list_stack_files,
    list_stacks,
    missing_stack_files,
    parse_plan,
    read_plan,
    resolve_stack,
    stack_file_text,
)

PART = {"aws:region": "us-west-2", "llmfleet:environment": "qa", "llmfleet:region": "us-west-2"}
TWO = [
    {"name": "us-east-1", "traffic_share": 0.6},
    {"name": "us-west-2", "traffic_share": 0.4, "vpc_cidr": "10.41.0.0/16"},
]


def write_env(stacks: Path, env: str, **changes: object) -> None:
    doc = {"config": {"aws:region": "us-east-1", "llmfleet:plan": plan_dict(**changes)}}
    (stacks / f"Pulumi.{env}.yaml").write_text(yaml.safe_dump(doc))


def write_part(stacks: Path, env: str, region: str) -> None:
    (stacks / f"Pulumi.{env}.{region}.yaml").write_text(stack_file_text(env, region))


@pytest.fixture
def split(tmp_path: Path) -> Path:
    """A two-region environment `qa` with its region stacks and global stack."""
    write_env(tmp_path, "qa", regions=TWO)
    for region in ("us-east-1", "us-west-2", "global"):
        write_part(tmp_path, "qa", region)
    return tmp_path


def test_a_region_stack_file_is_valid_pulumi_config_naming_its_environment_and_region() -> None:
    doc = yaml.safe_load(stack_file_text("qa", "us-west-2"))
    assert doc == {
        "config": {
            "aws:region": "us-west-2",
            "llmfleet:environment": "qa",
            "llmfleet:region": "us-west-2",
        }
    }
    assert yaml.safe_load(stack_file_text("qa", "global"))["config"]["aws:region"] == "us-east-1"


def test_environments_are_the_stack_files_that_hold_a_plan(split: Path) -> None:
    assert list_stacks(split) == ["qa"]
    assert list_stack_files(split) == ["qa", "qa.global", "qa.us-east-1", "qa.us-west-2"]


def test_a_region_stack_deploys_one_region_of_its_environments_plan(split: Path) -> None:
    target = resolve_stack("qa.us-west-2", stacks_dir=split)
    assert (target.environment, target.scope, target.region) == ("qa", "region", "us-west-2")
    assert target.regions == ["us-west-2"]
    assert [r.name for r in target.plan.regions] == ["us-east-1", "us-west-2"]


def test_the_global_stack_builds_no_region_and_the_environment_stack_every_one(
    split: Path,
) -> None:
    assert resolve_stack("qa.global", stacks_dir=split).regions == []
    assert resolve_stack("qa", stacks_dir=split).regions == ["us-east-1", "us-west-2"]


def test_region_stacks_deploy_in_the_rollout_order_and_the_global_stack_last() -> None:
    plan = parse_plan(plan_dict(regions=TWO))
    assert deploy_stacks("qa", plan, ["us-west-2", "us-east-1"]) == [
        "qa.us-west-2",
        "qa.us-east-1",
        "qa.global",
    ]


def test_a_single_region_environment_keeps_its_one_stack(tmp_path: Path) -> None:
    write_env(tmp_path, "dev")
    assert deploy_stacks("dev", read_plan("dev", tmp_path)) == ["dev"]
    write_part(tmp_path, "dev", "us-east-1")
    with pytest.raises(StackError, match="dev has one region .* deploys as the one stack dev"):
        resolve_stack("dev.us-east-1", stacks_dir=tmp_path)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {**PART, "llmfleet:region": "eu-west-1"},
            "llmfleet:region = 'eu-west-1' is not a region of qa; use one of us-east-1, us-west-2, "
            "global",
        ),
        (
            {**PART, "aws:region": "us-east-1"},
            "aws:region = 'us-east-1'; this stack deploys in us-west-2",
        ),
        ({"aws:region": "us-west-2"}, "config needs `llmfleet:plan` .* or both"),
        (
            {"llmfleet:plan": {}, "llmfleet:region": "us-west-2"},
            "holds a plan and llmfleet:region",
        ),
    ],
)
def test_a_region_stack_file_that_cannot_deploy_says_what_would(
    split: Path, config: dict[str, object], message: str
) -> None:
    with pytest.raises(StackError, match=message):
        resolve_stack("qa.us-west-2", config, stacks_dir=split)


def test_a_region_stack_named_for_another_region_says_its_name(split: Path) -> None:
    config = yaml.safe_load(stack_file_text("qa", "us-west-2"))["config"]
    with pytest.raises(StackError, match="name it qa.us-west-2"):
        resolve_stack("qa.west", config, stacks_dir=split)


def test_plan_of_a_region_stack_points_at_its_environment(split: Path) -> None:
    with pytest.raises(StackError, match="its plan is in Pulumi.qa.yaml: use --stack qa"):
        read_plan("qa.us-east-1", split)


def test_missing_region_stack_files_are_named(split: Path) -> None:
    (split / "Pulumi.qa.global.yaml").unlink()
    assert missing_stack_files("qa", read_plan("qa", split), split) == ["qa.global"]


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (["us-west-2", "eu-west-1"], "eu-west-1 not a listed region; us-east-1 missing"),
        (["us-west-2", "us-west-2", "us-east-1"], "us-west-2 listed twice"),
        (["us-west-2"], "us-east-1 missing"),
    ],
)
def test_the_rollout_order_names_every_region_once(order: list[str], message: str) -> None:
    with pytest.raises((StackError, PlanError), match=message):
        parse_plan(plan_dict(regions=TWO, rollout={"order": order}))


def test_every_multi_region_environment_has_its_region_and_global_stack_files() -> None:
    """Over whatever environments stacks/ holds: each deploys from files that exist."""
    for env in list_stacks():
        plan = read_plan(env)
        assert missing_stack_files(env, plan) == [], env
        for stack in deploy_stacks(env, plan):
            assert resolve_stack(stack).environment == env
