"""requirements.lock is what venv/ runs: every locked package is installed at its locked
version, and every requirement of requirements.txt is locked (`make lock` after an edit)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s\\]+)", (REPO / "requirements.lock")
                      .read_text(), flags=re.M)
    return {_canonical(name.split("[")[0]): v for name, v in pins}


def test_every_requirement_is_locked() -> None:
    names = [re.split(r"[<>=!~\[ ]", line.strip())[0] for line in
             (REPO / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert [n for n in names if _canonical(n) not in _locked()] == []


def test_the_venv_runs_the_locked_versions() -> None:
    differ = {}
    for name, locked in _locked().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != locked:
            differ[name] = (locked, installed)
    assert differ == {}, "run `make` (installs requirements.lock)"
