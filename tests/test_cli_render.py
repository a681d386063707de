"""`llmfleet render`: writes rendered/<env>/ byte-identically; `--check` names what drifted.

The committed rendered/ is checked against whatever stacks stacks/ holds; the rest renders
the tests' own stacks (`plans.OWN_STACKS`) into a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfleet.cli import main
from llmfleet.plan.stacks import list_stacks


def render(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["render", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_committed_rendered_dir_is_current(capsys) -> None:
    """Whatever stacks the project holds (a user adds their own), rendered/ matches them."""
    code, out, err = render(capsys, "--check")
    assert code == 0, err
    assert f"up to date for {', '.join(list_stacks())}" in out


def test_render_writes_a_stack_and_rerendering_changes_nothing(
    tmp_path: Path, capsys, own_stacks
) -> None:
    assert render(capsys, "--stack", "one-region", "--out", str(tmp_path))[0] == 0
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert tmp_path / "one-region" / "REPORT.md" in files
    assert tmp_path / "one-region" / "us-east-1" / "vllm-config.yaml" in files
    code, out, _ = render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    assert code == 0 and "0 changed" in out
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files


def test_check_names_stale_missing_and_extra_files_and_writes_nothing(
    tmp_path, capsys, own_stacks
) -> None:
    render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    region = tmp_path / "one-region" / "us-east-1"
    (region / "deployment.yaml").write_text("edited by hand\n")
    (region / "service.yaml").unlink()
    (region / "old.yaml").write_text("kind: Leftover\n")
    code, _, err = render(capsys, "--stack", "one-region", "--out", str(tmp_path), "--check")
    assert code == 1
    assert f"stale: {region / 'deployment.yaml'}" in err
    assert f"missing: {region / 'service.yaml'}" in err
    assert f"extra: {region / 'old.yaml'}" in err
    assert (region / "deployment.yaml").read_text() == "edited by hand\n"
    assert not (region / "service.yaml").exists()


def test_a_first_render_says_it_wrote_every_file_and_none_is_missing(
    tmp_path, capsys, own_stacks
) -> None:
    code, out, _ = render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    written = sorted(p for p in (tmp_path / "one-region").rglob("*") if p.is_file())
    assert code == 0 and "missing:" not in out
    n = len(written)
    root = tmp_path / "one-region"
    assert f"{root}: {n} files, {n} changed ({n} written, 0 updated, 0 removed)" in out
    assert sorted(line.split("wrote: ")[1] for line in out.splitlines()[1:]) == [
        str(p) for p in written
    ]


def test_render_repairs_a_drifted_directory_and_says_how(
    tmp_path, capsys, own_stacks
) -> None:
    render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    region = tmp_path / "one-region" / "us-east-1"
    (region / "deployment.yaml").write_text("edited by hand\n")
    (region / "service.yaml").unlink()
    (region / "old.yaml").write_text("kind: Leftover\n")
    (region / "notes.txt").write_text("mine\n")
    code, out, _ = render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    assert code == 0
    assert "3 changed (1 written, 1 updated, 1 removed)" in out
    assert f"  wrote: {region / 'service.yaml'}\n" in out
    assert f"  updated: {region / 'deployment.yaml'}\n" in out
    assert f"  removed: {region / 'old.yaml'}\n" in out
    assert f"  kept: {region / 'notes.txt'} (not a rendered file)\n" in out
    assert not (region / "old.yaml").exists() and (region / "notes.txt").exists()
    (region / "notes.txt").unlink()
    assert render(capsys, "--stack", "one-region", "--out", str(tmp_path), "--check")[0] == 0


@pytest.mark.slow  # whole plans, drills or renders: program-check
def test_check_of_every_stack_names_a_missing_stack_and_an_unknown_one(
    tmp_path, capsys, own_stacks
) -> None:
    render(capsys, "--stack", "one-region", "--out", str(tmp_path))
    (tmp_path / "staging").mkdir()
    code, _, err = render(capsys, "--out", str(tmp_path), "--check")
    assert code == 1
    assert f"missing: {tmp_path / 'three-regions' / 'REPORT.md'}" in err
    assert f"extra: {tmp_path / 'staging'}" in err


def test_an_unknown_stack_is_a_user_error(capsys, own_stacks) -> None:
    code, _, err = render(capsys, "--stack", "nope", "--check")
    assert code == 2 and "no file" in err
