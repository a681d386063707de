"""docs/first-stack.md works: every ```sh block of it runs, in order, in a copy of this
repository (the new user's checkout), and each command exits 0."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_new_stack import _files

REPO = Path(__file__).resolve().parents[1]
WALKTHROUGH = REPO / "docs" / "first-stack.md"


def blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_walkthrough_has_its_steps() -> None:
    joined = "\n".join(blocks(WALKTHROUGH.read_text()))
    for command in ("plan --stack chat", "render --check", "preview --stack chat.global",
                    "diff chat", "rollout --stack chat"):
        assert command in joined


@pytest.mark.slow  # copies the repository, plans, renders and previews a two-region stack
def test_every_command_of_the_first_stack_walkthrough_runs(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for path in _files(REPO):
        target = copy / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (copy / "venv").symlink_to(REPO / "venv")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    for n, block in enumerate(blocks(WALKTHROUGH.read_text()), 1):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=copy, env=env,
                              capture_output=True, text=True, timeout=600)
        output = done.stdout[-2000:] + done.stderr[-3000:]
        assert done.returncode == 0, f"block {n}:\n{block}\n{output}"
    assert (copy / "rendered" / "chat" / "REPORT.md").is_file()
