import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llmfleet.assemble import build_fleet_plan  # noqa: E402
from llmfleet.fleet import FleetPlan  # noqa: E402
from llmfleet.stack import list_stacks, read_plan  # noqa: E402

STACKS = list_stacks()


@pytest.fixture(scope="session")
def stack_plans() -> dict[str, FleetPlan]:
    """The FleetPlan of every stack in stacks/, built once per test session."""
    return {env: build_fleet_plan(read_plan(env)) for env in STACKS}
