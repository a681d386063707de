import contextlib
import io
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plans import OWN_STACKS, PerStack, write_stacks

from llmfleet.fleetplan.fleet import FleetPlan, build_fleet_plan
from llmfleet.plan import stacks
from llmfleet.plan.stacks import list_stacks, parse_plan, read_plan

STACKS = list_stacks()


def pytest_configure(config: pytest.Config) -> None:
    """One FleetPlan cache (`llmfleet.disk_memo`) for the run, shared by its xdist workers
    (they inherit the environment) and fresh each run: a plan several tests build is
    searched once, and nothing is read from or left in the user's own cache."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="llmfleet-test-cache-")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    os.environ["LLMFLEET_CACHE_DIR"] = folder


@pytest.fixture(scope="session")
def stack_plans() -> PerStack[FleetPlan]:
    """The FleetPlan of every stack in stacks/, each built on first use, once per test
    session. Tests over it hold for any stack a user adds; a test that needs a particular
    fleet uses `own_plans`."""
    return PerStack(STACKS, lambda env: build_fleet_plan(read_plan(env)))


@pytest.fixture(scope="session")
def own_plans() -> dict[str, FleetPlan]:
    """The FleetPlans of the plans the tests own (`plans.OWN_STACKS`): `three-regions` and
    `one-region`, whatever stacks/ holds."""
    return {env: build_fleet_plan(parse_plan(plan)) for env, plan in OWN_STACKS.items()}


@pytest.fixture
def own_stacks(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stacks folder holding only the tests' own stacks (`three-regions`, `one-region`);
    the CLI's `--stack`, `render` and `diff` read it instead of stacks/."""
    from llmfleet import cli, paths

    folder = write_stacks(tmp_path_factory.mktemp("own") / "stacks")
    monkeypatch.setattr(cli, "read_plan", lambda env: read_plan(env, folder))
    monkeypatch.setattr(cli, "list_stacks", lambda: list_stacks(folder))
    monkeypatch.setattr(stacks, "read_plan", lambda env: read_plan(env, folder))
    monkeypatch.setattr(paths, "STACKS_DIR", folder)
    return folder


# --- secret hygiene: every stack run with sentinel secrets in its config and environment ---

SENTINEL = "llmfleet-sentinel-5f1e0c9a"
"""Stands in for a Hugging Face token, an API key, AWS keys and a decrypted Pulumi secret."""
SENTINEL_CONFIG = {
    "llmfleet:hfToken": SENTINEL,  # a secret config value, as the program sees it decrypted
    "llmfleet:apiKey": {"secure": "v1:" + SENTINEL},  # as the stack file stores it
    "aws:secretKey": SENTINEL,
    "aws:accessKey": SENTINEL,
}
SENTINEL_ENV = {
    "HF_TOKEN": SENTINEL,
    "HUGGING_FACE_HUB_TOKEN": SENTINEL,
    "AWS_SECRET_ACCESS_KEY": SENTINEL,
    "PULUMI_CONFIG_PASSPHRASE": SENTINEL,
    "OPENAI_API_KEY": SENTINEL,
}
COMMANDS = (
    ("plan",),
    ("plan", "--json"),
    ("preview",),
    ("preview", "--json"),
)


@dataclass
class SentinelRun:
    """What a stack's commands printed and logged, and what they wrote, with sentinels set."""

    output: dict[str, str]
    logs: str
    rendered: dict[str, str]
    fleet_json: str
    preview_resources: list[dict[str, Any]]


@pytest.fixture(scope="session")
def sentinel_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SentinelRun]:
    """Each stack's plan, plan --json, preview, preview --json and render, run once through
    the CLI with the sentinel in the stack's config and in the environment."""
    import components.preview.run as preview_module
    from llmfleet import cli

    root = tmp_path_factory.mktemp("sentinel")
    stacks_dir = root / "stacks"
    stacks_dir.mkdir()
    for env in STACKS:
        doc = yaml.safe_load(stacks.stack_path(env).read_text())
        doc["config"].update(SENTINEL_CONFIG)
        stacks.stack_path(env, stacks_dir).write_text(yaml.safe_dump(doc))
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    handler.setLevel(logging.DEBUG)
    runs = {}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in SENTINEL_ENV.items():
            mp.setenv(key, value)
        mp.setattr(cli, "read_plan", lambda env: read_plan(env, stacks_dir))
        mp.setattr(stacks, "list_stacks", lambda: list_stacks(stacks_dir))
        mp.setattr(
            preview_module,
            "stack_config",
            lambda env: stacks.stack_config(env, stacks_dir),
        )
        logging.getLogger().addHandler(handler)
        previous = logging.getLogger().level
        logging.getLogger().setLevel(logging.DEBUG)
        try:
            for env in STACKS:
                output = {}
                for command in COMMANDS:
                    out, err = io.StringIO(), io.StringIO()
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                        code = cli.main([*command, "--stack", env])
                    assert code == 0, (env, command, err.getvalue())
                    output[" ".join(command)] = out.getvalue() + err.getvalue()
                out_dir = root / "rendered"
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    assert cli.main(["render", "--stack", env, "--out", str(out_dir)]) == 0
                output["render"] = out.getvalue()
                runs[env] = SentinelRun(
                    output=output,
                    logs="",
                    rendered={
                        str(p.relative_to(out_dir)): p.read_text()
                        for p in sorted((out_dir / env).rglob("*"))
                        if p.is_file()
                    },
                    fleet_json=output["plan --json"],
                    preview_resources=json.loads(output["preview --json"]),
                )
        finally:
            logging.getLogger().removeHandler(handler)
            logging.getLogger().setLevel(previous)
    for run in runs.values():
        run.logs = logs.getvalue()
    return runs
