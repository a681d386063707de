"""README.md's pasted `llmfleet plan --stack dev` output, kept true: `make docs` rewrites the
block between the markers with what the command prints now, and a test fails while the two
differ (a change of the model, the catalogs or the dev stack changes the numbers)."""

from __future__ import annotations

import sys
from pathlib import Path

from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs.console import fleet_text
from llmfleet.plan.stacks import read_plan

STACK = "dev"
BEGIN = f"<!-- `llmfleet plan --stack {STACK}`, pasted by `make docs` -->"
END = "<!-- end of the pasted output -->"


def plan_output(stack: str = STACK) -> str:
    """What `llmfleet plan --stack dev` prints on stdout."""
    return fleet_text(build_fleet_plan(read_plan(stack)))


def pasted(readme: str) -> str:
    """The output README shows between the markers (without the code fence)."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[start:end].strip("\n").removeprefix("```text\n").removesuffix("\n```") + "\n"


def with_output(readme: str, output: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n```text\n" + output.rstrip("\n") + "\n```\n" + readme[end:]


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else Path("README.md")
    path.write_text(with_output(path.read_text(), plan_output()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
