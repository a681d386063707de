"""Where a command finds the project it works on: the directory holding Pulumi.yaml and
stacks/ (the current one or one above it, as `pulumi` finds its project), else the checkout
this package sits in. Stacks and rendered files are the project's; catalogs, constants and
templates ship inside the package, so `llmfleet predict` runs from an installed wheel."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent


def project_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "Pulumi.yaml").is_file() and (d / "stacks").is_dir():
            return d
    return CHECKOUT_DIR


PROJECT_ROOT = project_root()
STACKS_DIR = PROJECT_ROOT / "stacks"
RENDERED_DIR = PROJECT_ROOT / "rendered"
TEMPLATES_DIR = PACKAGE_DIR / "outputs" / "templates"
MEASUREMENTS = CHECKOUT_DIR / "benchmarks" / "measurements.csv"
PREFIX_CACHING_CSV = CHECKOUT_DIR / "benchmarks" / "prefix-caching.csv"
"""Published runs of prefix caching and cache-aware balancing (`validate` compares them)."""
"""The published measurements are llmfleet's own data (validate, calibrate), not a project's."""
