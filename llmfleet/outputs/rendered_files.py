"""Writing rendered files to disk and comparing them with what is there.

`drift` is what `render --check` reports (stale, missing, extra: the words are a contract);
`write` makes a directory hold exactly the rendered files and says what it did (wrote,
updated, removed), so `render` never reports as missing a file it has just written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llmfleet.errors import RenderError

RENDERED_SUFFIXES = (".yaml", ".md", ".svg")
"""Files of these kinds under an output directory are ours: `write` deletes stray ones."""


def _show(rel: str, root: Path | None) -> str:
    return str(root / rel) if root is not None else rel


@dataclass(frozen=True)
class Drift:
    """How a directory differs from what would be rendered (paths relative to the out dir)."""

    stale: list[str]
    missing: list[str]
    extra: list[str]

    def __bool__(self) -> bool:
        return bool(self.stale or self.missing or self.extra)

    def lines(self, root: Path | None = None) -> list[str]:
        """`stale: <path>` etc., paths under `root` when given."""
        return (
            [f"stale: {_show(p, root)}" for p in self.stale]
            + [f"missing: {_show(p, root)}" for p in self.missing]
            + [f"extra: {_show(p, root)}" for p in self.extra]
        )


@dataclass(frozen=True)
class Written:
    """What `write` did to a directory (paths relative to it)."""

    total: int
    """How many files were rendered (written or already current)."""
    wrote: list[str]
    """Files that were not there."""
    updated: list[str]
    """Files whose content changed."""
    removed: list[str]
    """Rendered files (*.yaml, *.md) no longer rendered, deleted."""
    kept: list[str]
    """Other files found there, left alone (`render --check` reports them as extra)."""

    @property
    def changed(self) -> int:
        return len(self.wrote) + len(self.updated) + len(self.removed)

    def lines(self, root: Path | None = None) -> list[str]:
        """`wrote: <path>`, `updated: ...`, `removed: ...`, `kept: ...`."""
        return (
            [f"wrote: {_show(p, root)}" for p in self.wrote]
            + [f"updated: {_show(p, root)}" for p in self.updated]
            + [f"removed: {_show(p, root)}" for p in self.removed]
            + [f"kept: {_show(p, root)} (not a rendered file)" for p in self.kept]
        )

    def report(self, root: Path) -> str:
        """A headline with the counts, then one indented line per file touched."""
        head = (
            f"{root}: {self.total} files, {self.changed} changed ({len(self.wrote)} written, "
            f"{len(self.updated)} updated, {len(self.removed)} removed)"
        )
        return "".join(f"{line}\n" for line in [head, *(f"  {x}" for x in self.lines(root))])


def _on_disk(root: Path) -> set[str]:
    if not root.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def drift(expected: Mapping[str, str], root: Path) -> Drift:
    """Compare `expected` (relative path -> text) with the files under `root`."""
    present = _on_disk(root)
    stale = [p for p in expected if p in present and (root / p).read_text() != expected[p]]
    return Drift(
        stale=sorted(stale),
        missing=sorted(set(expected) - present),
        extra=sorted(present - set(expected)),
    )


def write(expected: Mapping[str, str], root: Path) -> Written:
    """Make `root` hold exactly `expected`: write changed or missing files, delete rendered
    files (*.yaml, *.md, *.svg) that are no longer rendered. Returns what was done; a file
    in the way or a folder it cannot write is a RenderError naming --out."""
    for parent in (root, *root.parents):
        if parent.exists() and not parent.is_dir():
            raise RenderError(f"--out: {parent} is a file, not a directory; give a directory")
    before = drift(expected, root)
    removed = [rel for rel in before.extra if rel.endswith(RENDERED_SUFFIXES)]
    try:
        for rel in before.stale + before.missing:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(expected[rel])
        for rel in removed:
            (root / rel).unlink()
        for d in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
    except OSError as e:
        raise RenderError(
            f"--out: cannot write {e.filename or root} ({e.strerror}); give a directory you "
            "can write to"
        ) from None
    return Written(
        total=len(expected),
        wrote=before.missing,
        updated=before.stale,
        removed=removed,
        kept=[rel for rel in before.extra if rel not in removed],
    )
