"""The layout is the architecture: packages import only downward, nothing imports in a
cycle, and no import hides inside a function (except the CLI's lazy load of components/,
which keeps pulumi out of the core)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORDER = ["catalog", "perf", "calibration", "plan", "search", "fleetplan", "simulate", "outputs"]
"""Each package may import those before it; root modules errors, units, data, paths and disk_memo
import nothing of llmfleet; cli (its flags in cli_parser, predict in cli_predict), drill and
gc_pause sit on top."""
BASE = {"errors", "units", "data", "paths", "disk_memo"}
TOP = {"cli", "cli_parser", "cli_predict", "drill", "gc_pause", "__main__"}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, bool]]]:
    """module -> [(imported llmfleet/components module, inside a function)]"""
    out: dict[str, list[tuple[str, bool]]] = {}
    for path in [*REPO.glob("llmfleet/**/*.py"), *REPO.glob("components/**/*.py")]:
        tree = ast.parse(path.read_text())
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.split(".")[0] in ("llmfleet", "components"):
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        target = sub if (REPO / sub.replace(".", "/")).with_suffix(".py").exists() \
                            or (REPO / sub.replace(".", "/")).is_dir() else node.module
                        found.append((target, node.col_offset > 0))
            elif isinstance(node, ast.Import):
                found += [(a.name, node.col_offset > 0) for a in node.names
                          if a.name.split(".")[0] in ("llmfleet", "components")]
        out[_module(path)] = found
    return out


def _rank(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "llmfleet" or len(parts) < 2:
        return None
    if parts[1] in BASE:
        return -1
    if parts[1] in TOP:
        return len(ORDER)
    return ORDER.index(parts[1]) if parts[1] in ORDER else None


def test_packages_import_only_downward() -> None:
    upward = []
    for module, deps in _imports().items():
        mine = _rank(module)
        for dep, _ in deps:
            theirs = _rank(dep)
            if mine is None or theirs is None:
                continue
            if theirs > mine or (mine == -1 and theirs == -1 and module != dep):
                upward.append(f"{module} -> {dep}")
    assert upward == []


def test_the_core_never_imports_components() -> None:
    leaks = [f"{m} -> {d}" for m, deps in _imports().items() if m.startswith("llmfleet")
             for d, local in deps if d.startswith("components") and not (m == "llmfleet.cli"
                                                                          and local)]
    assert leaks == []


def test_no_import_cycle() -> None:
    graph = {m: {d for d, _ in deps} for m, deps in _imports().items()}
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph or nxt == node:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


LOCAL_IMPORTS = {("components.preview.checks", "components.preview.emulated")}
"""Function-local imports besides the CLI's of components/: moto (about 0.5 s) loads only
when the preview's checks run, never for plan, render, predict or `preview --no-checks`."""


def test_no_import_hides_in_a_function_but_the_clis_components() -> None:
    local = [f"{m} -> {d}" for m, deps in _imports().items() for d, inside in deps
             if inside and not (m == "llmfleet.cli" and d.startswith("components"))
             and (m, d) not in LOCAL_IMPORTS]
    assert local == []


def test_every_package_says_what_lives_there() -> None:
    for init in REPO.glob("llmfleet/*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc.lower(), init.parent.name


def test_the_root_holds_at_most_a_dozen_modules() -> None:
    root = [p.stem for p in (REPO / "llmfleet").glob("*.py") if p.stem not in ("__init__",
                                                                                 "__main__")]
    assert len(root) <= 12, root


def test_moto_loads_only_with_the_preview_checks() -> None:
    """plan, render, predict and the program's runs never import moto or boto3."""
    code = ("import sys, llmfleet.cli, components.preview.run, components.preview.change_report\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'moto', 'boto3'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]"
