"""docs/plan.md is generated from the schema (`llmfleet.outputs.plan_reference`): it is
current, every field has a meaning and an example, and the examples form a valid plan."""

from __future__ import annotations

from pathlib import Path

from llmfleet.outputs import plan_reference
from llmfleet.plan.stacks import parse_plan

DOC = Path(__file__).resolve().parents[2] / plan_reference.DOC


def test_docs_plan_md_is_what_the_schema_generates() -> None:
    assert DOC.read_text() == plan_reference.markdown(), (
        "docs/plan.md is stale: run `make docs` (python -m llmfleet.outputs.plan_reference "
        "> docs/plan.md) and commit it"
    )


def test_every_plan_field_has_a_description_and_an_example() -> None:
    lacking = [
        r.path for table in plan_reference.rows() for r in table
        if not r.description or not r.example
    ]
    assert lacking == []


def test_the_reference_example_is_a_valid_plan() -> None:
    plan = parse_plan(plan_reference.EXAMPLE)
    assert plan.dns is not None and len(plan.regions) == 2


def test_every_field_of_the_plan_has_a_row() -> None:
    """Nested sections too: `alerts.receivers[].email.addresses` is the deepest kind."""
    paths = {r.path for table in plan_reference.rows() for r in table}
    assert {"name", "regions", "regions[].capacity.reservation_ids", "edge.auth.jwt.issuer",
            "alerts.receivers[].email.addresses", "day_profile.peak_hours"} <= paths
