"""Results already computed, kept on disk under the hash of everything they are computed
from: a command run again on the same inputs (`render` after `plan`, `preview` after
`render`, the tests' many builds of one plan) reads the FleetPlan and the simulated days
instead of searching and simulating again.

The key covers llmfleet's own files (code, catalog, constants, templates), the Python,
numpy and scipy versions and the caller's inputs, so any change to any of them computes
afresh; a result is a pure function of its key, so a hit is byte-for-byte what computing
gives. `LLMFLEET_CACHE_DIR` names the folder (default `$XDG_CACHE_HOME/llmfleet`, else
`~/.cache/llmfleet`); `LLMFLEET_CACHE=off` computes everything. Entries are pickles of
llmfleet's own objects, read only by the llmfleet whose files made the key."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import TypeVar

import numpy
import scipy

T = TypeVar("T")

PACKAGE_DIR = Path(__file__).resolve().parent
KEEP_ENTRIES = 400
"""Entries kept per kind: past this the oldest half go (a test run writes a few hundred)."""


@cache
def code_fingerprint() -> str:
    """sha256 of every file of the llmfleet package (not its bytecode), by relative path."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    for version in (sys.version, numpy.__version__, scipy.__version__):
        h.update(version.encode() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path | None:
    """The cache's folder, or None when `LLMFLEET_CACHE=off`."""
    if os.environ.get("LLMFLEET_CACHE", "").lower() in ("off", "0", "no", "false"):
        return None
    named = os.environ.get("LLMFLEET_CACHE_DIR")
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "llmfleet"


def key(parts: Iterable[str | bytes]) -> str:
    """The entry's name: the code's fingerprint and each part, hashed."""
    h = hashlib.sha256(code_fingerprint().encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def file_part(path: Path) -> bytes:
    """A file an input names, as a key part: its bytes, or that it is missing (computing
    then says so, and nothing is stored)."""
    try:
        return b"file:" + path.read_bytes()
    except OSError:
        return b"missing:" + str(path).encode()


def kind_dir(kind: str) -> Path | None:
    """The folder of one kind of entry, or None when `LLMFLEET_CACHE=off`."""
    folder = cache_dir()
    return None if folder is None else folder / kind


def memoised(kind: str, parts: Iterable[str | bytes], compute: Callable[[], T]) -> T:
    """`compute()`, read from the cache when an entry of `kind` has these parts' key, else
    computed and stored (an error is raised, never stored). A cache that cannot be read or
    written is skipped, never an error."""
    folder = kind_dir(kind)
    if folder is None:
        return compute()
    path = folder / f"{key(parts)}.pickle"
    try:
        value: T = pickle.loads(path.read_bytes())
        return value
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    value = compute()
    _store(path, value)
    return value


def _store(path: Path, value: object) -> None:
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except pickle.PicklingError:
        return
    store_bytes(path, data)


def store_bytes(path: Path, data: bytes) -> None:
    """Write an entry whole or not at all (a reader sees the whole entry or none), then
    prune its folder; a folder that cannot be written is skipped, never an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        _prune(path.parent, path.suffix)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _prune(folder: Path, suffix: str) -> None:
    entries = list(folder.glob(f"*{suffix}"))
    if len(entries) <= KEEP_ENTRIES:
        return
    by_age = sorted(entries, key=lambda p: p.stat().st_mtime)
    for old in by_age[: len(entries) // 2]:
        old.unlink(missing_ok=True)
