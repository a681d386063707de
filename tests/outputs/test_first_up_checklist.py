"""README's list of what a first `pulumi up` needs and the fleet report's "Before the first
`pulumi up`" agree: every item the report can list is one of README's topics, and every topic
of README's list is one the report lists for a fleet that has it (a production fleet on
reserved p5 nodes, behind a global name and a JWT edge, with e-mail and PagerDuty receivers,
an API key, a second deployer and an image cache not yet filled)."""

from __future__ import annotations

import re

import pytest
from plans import EDGE, PRODUCTION, make_plan

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs import render
from llmfleet.paths import CHECKOUT_DIR

TOPICS = {
    "Credentials of AWS account": "Credentials for `account_id`.",
    "`pulumi up` from": "A Kubernetes API you can reach.",
    "`pulumi up` inside the VPC": "A Kubernetes API you can reach.",
    "The IAM role": "Who else administers the clusters.",
    "The EC2 vCPU quotas": "Quotas.",
    "Reserved capacity in": "Reserved capacity",
    "The public Route 53 hosted zone": "The DNS zone",
    "Your identity provider": "The auth provider",
    "The Cognito user pool": "The auth provider",
    "Receiver `oncall`: in each cluster": "Secrets to create",
    "Receiver `team`": "Receivers that answer.",
    "The commit": "The pinned revision.",
    "The API-key Secret": "Secrets to create",
    "A gated checkpoint": "Secrets to create",
    "A Docker Hub username": "Secrets to create",
}
"""How each item of the report's list begins -> README's topic (its bold lead) for it."""

EVERYTHING = {
    **PRODUCTION,
    **EDGE,
    "allowed.instance_types": ["p5.48xlarge"],
    "regions": [{"name": "us-east-1", "traffic_share": 1.0, "capacity": {
        "type": "reservation", "reservation_ids": ["cr-0123456789abcdef0"],
        "instance_type": "p5.48xlarge", "reserved_nodes": 1}}],
    "cluster.deploy_role_arn": "arn:aws:iam::111122223333:role/ci-deploy",
    "alerts": {"receivers": [
        {"name": "oncall", "severities": ["critical"],
         "pagerduty": {"secret_name": "alertmanager-receivers",
                       "secret_key": "pagerduty-routing-key"}},
        {"name": "team", "severities": ["critical", "warning"],
         "email": {"addresses": ["llm-oncall@example.com"]}},
    ]},
    "api_key": {"secret_name": "api-keys"},
    "startup.ecr_account_id": "111122223333",
}


def readme_topics() -> list[str]:
    """The bold leads of README's list under 'What a first `pulumi up` needs'."""
    text = (CHECKOUT_DIR / "README.md").read_text()
    start = text.index("What a first `pulumi up` needs")
    section = text[start:].split("\n\n", 2)[1]  # the list after its introducing sentence
    return re.findall(r"^- \*\*(.+?)\*\*", section, flags=re.MULTILINE)


def report_items() -> list[str]:
    fleet = build_fleet_plan(make_plan(**EVERYTHING))
    report = render.render_stack(fleet)["REPORT.md"]
    section = report.split("## Before the first `pulumi up`\n", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


@pytest.fixture(scope="module")
def items() -> list[str]:
    return report_items()


def test_every_item_the_report_lists_is_a_topic_of_readmes_list(items: list[str]) -> None:
    unmatched = [i for i in items if not any(i.startswith(lead) for lead in TOPICS)]
    assert unmatched == []
    assert {TOPICS[lead] for i in items for lead in TOPICS if i.startswith(lead)} <= set(
        readme_topics())


def test_every_topic_of_readmes_list_is_one_the_report_lists(items: list[str]) -> None:
    listed = {TOPICS[lead] for i in items for lead in TOPICS if i.startswith(lead)}
    assert set(readme_topics()) == listed
