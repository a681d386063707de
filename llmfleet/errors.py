"""Every llmfleet error, in one place. Each names the field, the value and what would work.

The CLI prints them without a traceback and exits 2; under Pulumi they stop the program
with the same message.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LlmfleetError(Exception):
    """Base of every error the user can fix by changing their input."""


class PlanError(LlmfleetError):
    """A plan field has a value that cannot work."""

    def __init__(self, field: str, value: object, hint: str) -> None:
        self.field = field
        self.value = value
        self.hint = hint
        super().__init__(f"{field} = {value!r}: {hint}")


class UnknownNameError(PlanError):
    """A catalog lookup (model, GPU, instance, region) found nothing."""

    def __init__(self, field: str, value: str, kind: str, choices: Iterable[str]) -> None:
        names = sorted(set(choices))
        close = close_matches(value, names)
        if close:
            hint = f"unknown {kind}; did you mean {', '.join(close)}?"
        else:
            hint = f"unknown {kind}; known: {', '.join(names)}"
        super().__init__(field, value, hint)


class ArgumentError(LlmfleetError):
    """Command-line values that do not validate."""


class StackError(LlmfleetError):
    """A stack file or a key in it is missing or malformed."""


class RenderError(LlmfleetError):
    """A rendered file would use something the pinned vLLM release does not have."""


class ProgramError(LlmfleetError):
    """The Pulumi program met something the FleetPlan or a component cannot deploy."""


class MeasurementsError(LlmfleetError):
    """The measurements file cannot be read as measurements."""


class BenchError(LlmfleetError):
    """A benchmark result file (`vllm bench serve --save-result`) that cannot calibrate a
    server: not JSON, keys missing, no completed request, or another model's."""


class CalibrationError(LlmfleetError):
    """A calibration file that cannot be read, or that is for another server."""


class InfeasibleError(LlmfleetError):
    """No allowed configuration meets the plan; says why and the nearest change."""

    def __init__(self, summary: str, reasons: list[str], nearest: str) -> None:
        self.summary = summary
        self.reasons = reasons
        self.nearest = nearest
        lines = [summary]
        lines += [f"  - {r}" for r in reasons]
        lines.append(f"Nearest feasible change: {nearest}")
        super().__init__("\n".join(lines))


def close_matches(value: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Case-insensitive close matches, in the choices' own spelling: first the names the value
    starts with, longest first (`Qwen3-32B-Instruct-XL` -> Qwen3-32B; an organisation prefix
    such as `Qwen/` is ignored for this), then difflib's nearest, then names containing it."""
    by_lower = {c.lower(): c for c in choices}
    wanted = value.lower()
    stem = wanted.rsplit("/", 1)[-1]
    prefixes = sorted(
        (lc for lc in by_lower if len(lc.rsplit("/", 1)[-1]) >= 3 and lc != wanted
         and stem.startswith(lc.rsplit("/", 1)[-1])),
        key=lambda lc: (-len(lc.rsplit("/", 1)[-1]), "/" in lc, lc),
    )
    hits = [h for h in difflib.get_close_matches(wanted, list(by_lower), n=n, cutoff=0.5)
            if h not in prefixes]
    contains = sorted(c for lc, c in by_lower.items()
                      if wanted in lc and lc not in hits and lc not in prefixes)
    ordered = [by_lower[lc] for lc in (*prefixes, *hits)] + contains
    return ordered[:n]
