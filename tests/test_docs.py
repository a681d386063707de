"""The front door and docs/ stay true: README is short and shows what `plan` prints now, its
ten-line plan is valid, every relative link resolves, nothing points at a machine, and
docs/deploy.md's first-`pulumi up` checklist has an item for each the report can list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from plans import make_plan
from test_new_stack import _files

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import front_door, plan_reference, render
from llmfleet.plan.stacks import parse_plan, stack_path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text().splitlines()) <= 200


@pytest.mark.skipif(not stack_path(front_door.STACK).exists(), reason="no dev stack to show")
def test_the_readmes_plan_output_is_what_plan_prints_now() -> None:
    assert front_door.pasted(README.read_text()) == front_door.plan_output(), (
        "README's pasted output is stale: run `make docs`"
    )


def test_the_readmes_ten_line_plan_is_a_valid_plan() -> None:
    [block] = re.findall(r"^```yaml\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
    plan = parse_plan(yaml.safe_load(block)["config"]["llmfleet:plan"])
    assert plan.name == "chat"
    assert len([line for line in block.splitlines() if line.strip()]) <= 12


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
    missing = [link for link in links if "://" not in link and not (doc.parent / link).exists()]
    assert missing == []


def test_no_tracked_file_names_a_path_on_a_machine() -> None:
    files = [str(p.relative_to(REPO)) for p in _files(REPO)]  # a copy without .git too
    texts = [f for f in files if f.endswith((".md", ".py", ".yaml", ".yml", ".txt", ".toml"))]
    found = [f for f in texts for needle in ("/work/", "/Users/", "/root/")
             if needle in (REPO / f).read_text(errors="replace") and f != "tests/test_docs.py"]
    assert found == []


CHECKLIST = {
    "Credentials of AWS account": "Credentials for `account_id`.",
    "`pulumi up` inside the VPC": "A Kubernetes API you can reach.",
    "`pulumi up` from ": "A Kubernetes API you can reach.",
    "The IAM role": "Who else administers the clusters.",
    "The EC2 vCPU quotas": "Quotas.",
    "Reserved capacity in": "Reserved capacity",
    "The public Route 53 hosted zone": "The DNS zone",
    "Your identity provider": "The auth provider",
    "The Cognito user pool": "The auth provider",
    "Receiver `oncall`: in each cluster": "Receivers' Secrets",
    "Receiver `team`: ": "Receivers that answer",
    "The commit `": "The pinned revision.",
    "The API-key Secret": "The API-key Secret",
    "A gated checkpoint": "A gated checkpoint's token",
    "A Docker Hub username": "The pull-through cache's Docker Hub token",
}
"""The report's "Before the first `pulumi up`" items (by how they start) -> docs/deploy.md's
item (its bold label)."""


def _report_items(plan_dict: dict) -> list[str]:
    plan = parse_plan(plan_dict)
    report = render.render_stack(build_fleet_plan(plan))[render.REPORT]
    section = report.split("## Before the first `pulumi up`", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def test_deploy_md_has_an_item_for_each_the_report_lists_and_no_other() -> None:
    example = plan_reference.EXAMPLE
    public = {**example, "environment": "development",
              "cluster": {"endpoint_public_access": True,
                          "public_access_cidrs": ["52.94.76.0/22"]},
              "edge": {"auth": {"cognito": plan_reference.EXTRA_EXAMPLES["edge.auth.cognito"]}}}
    reserved = {**example, "regions": [{**region, "capacity": {
        "type": "reservation", "reservation_ids": ["cr-0123456789abcdef0"],
        "instance_type": "p5.48xlarge", "reserved_nodes": 4}} for region in example["regions"]]}
    items = _report_items(example) + _report_items(public) + _report_items(reserved)
    unmatched = [i for i in items if not any(i.startswith(p) for p in CHECKLIST)]
    assert unmatched == [], "add the item to docs/deploy.md and to CHECKLIST"
    covered = {label for prefix, label in CHECKLIST.items() if any(i.startswith(prefix)
                                                                  for i in items)}
    deploy = (REPO / "docs" / "deploy.md").read_text()
    section = deploy.split("## Before the first `pulumi up`", 1)[1].split("\n## ", 1)[0]
    labels = set(re.findall(r"^- \*\*(.+?)\*\*", section, flags=re.M))
    assert labels == set(CHECKLIST.values()) == covered


def test_a_plan_with_none_of_the_options_lists_only_the_items_every_deploy_needs() -> None:
    items = _report_items(make_plan().model_dump(mode="json", exclude_defaults=True))
    assert [next(label for p, label in CHECKLIST.items() if i.startswith(p)) for i in items] == [
        "Credentials for `account_id`.", "A Kubernetes API you can reach.", "Quotas.",
        "A gated checkpoint's token"]
