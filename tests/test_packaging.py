"""The built wheel is the product: every package and data file is in it, and `llmfleet`
runs from an installed wheel outside this checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from plans import write_stacks

from llmfleet.perf.replica import PredictRequest, run_predict

REPO = Path(__file__).resolve().parent.parent
PREDICT = ["predict", "--model", "Llama-3.1-8B-Instruct", "--gpu", "H100",
           "--tensor-parallel-size", "1", "--precision", "bf16", "--input-tokens", "1000",
           "--output-tokens", "200", "--request-rate", "5", "--json"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout (offline) and installed into a bare directory."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         str(REPO), "-w", str(root / "dist")],
        check=True, capture_output=True,
    )
    [wheel] = (root / "dist").glob("llmfleet-*.whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
         str(root / "site"), str(wheel)],
        check=True, capture_output=True,
    )
    return root


def _run(installed: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed / "site")}
    return subprocess.run([sys.executable, "-m", "llmfleet", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_wheel_holds_every_package_and_data_file(installed: Path) -> None:
    [wheel] = (installed / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(REPO)) for p in REPO.glob("llmfleet/**/__init__.py")}
    packages |= {str(p.parent.relative_to(REPO)) for p in REPO.glob("components/**/__init__.py")}
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    data = [p for pattern in ("*.csv", "*.json", "*.j2", "*.md", "scripts/*.py")
            for p in (REPO / "llmfleet").rglob(pattern)]
    assert len(data) > 20
    for path in data:
        assert str(path.relative_to(REPO)) in names, path


@pytest.mark.slow
def test_predict_runs_from_the_installed_wheel_outside_the_checkout(
    installed: Path, tmp_path: Path
) -> None:
    out = _run(installed, PREDICT, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    expected = run_predict(PredictRequest(model="Llama-3.1-8B-Instruct", gpu="H100",
                                          input_tokens=1000, output_tokens=200,
                                          request_rate=5))
    assert shown["ttft_ms"] == pytest.approx(expected.ttft_ms)
    assert shown["kv_cache_tokens"] == expected.kv_cache_tokens


@pytest.mark.slow
def test_a_project_beside_the_wheel_plans_and_renders_its_own_stacks(
    installed: Path, tmp_path: Path
) -> None:
    """A project directory (Pulumi.yaml + stacks/) is found from the working directory;
    the templates ship in the wheel."""
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    write_stacks(tmp_path / "stacks")  # the tests' own stacks, not this checkout's
    plan = _run(installed, ["plan", "--stack", "one-region", "--json"], cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["name"] == "chat-one"
    render = _run(installed, ["render", "--stack", "one-region", "--out", "out"], cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    assert (tmp_path / "out" / "one-region" / "REPORT.md").is_file()
