"""What a change to a resource's inputs does, per resource type: the sourced table
`replacements.csv` (replace, refused, recreates, none), read once.

The rows come from the providers' own schemas and diff code (terraform-provider-aws's
ForceNew / RequiresReplace, which pulumi-aws bridges; pulumi-kubernetes's `forceNew` table),
Kubernetes' immutable fields and what the CRDs' CEL rules and the controllers' webhooks
refuse on update. A type is covered when it has a row of its own (a `none` row says it was
read and nothing forces a replacement); `aws:*` and `kubernetes:*` rows add what holds for
every type of the provider.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

TABLE = Path(__file__).with_name("replacements.csv")

Effect = Literal["replace", "refused", "recreates", "none"]
When = Literal["always", "removed", "minor_step", "presence", "active_cluster"]
COMPONENT_PREFIX = "llmfleet:index:"

Path_ = tuple[str, ...]
_SEGMENT = re.compile(r'\["((?:[^"]|"")*)"\]|([^.\[\]]+)')


def parse_path(text: str) -> Path_:
    """`spec.template` -> ("spec", "template"); `annotations["a.b/c"]` keeps the dotted key."""
    return tuple(quoted or plain for quoted, plain in _SEGMENT.findall(text))


def show_path(path: Sequence[str | int]) -> str:
    """The inverse of parse_path; a list index shows as [i]."""
    return "".join(
        f"[{p}]" if isinstance(p, int) else (f'["{p}"]' if "." in p else f".{p}") for p in path
    ).lstrip(".")


@dataclass(frozen=True)
class Rule:
    type: str
    property: Path_
    effect: Effect
    when: When
    source: str

    def applies_to(self, typ: str) -> bool:
        if self.type.endswith("*"):
            return typ.startswith(self.type[:-1])
        return self.type == typ

    def touches(self, changed: Path_) -> bool:
        """A change at `changed` (list indices dropped) is at or under the rule's property,
        or replaces a whole value the property sits in."""
        n = min(len(changed), len(self.property))
        return bool(self.property) and changed[:n] == self.property[:n]


def _rows(text: str) -> Iterator[dict[str, str]]:
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    yield from csv.DictReader(lines)


@cache
def rules() -> tuple[Rule, ...]:
    out = []
    for row in _rows(TABLE.read_text()):
        out.append(
            Rule(
                row["type"],
                parse_path(row["property"]),
                row["effect"],  # type: ignore[arg-type]
                row["when"],  # type: ignore[arg-type]
                row["source"],
            )
        )
    return tuple(out)


def rules_for(typ: str) -> list[Rule]:
    """The rows that hold for `typ`: its own and its provider's (`aws:*`, `kubernetes:*`)."""
    return [r for r in rules() if r.applies_to(typ) and r.property]


def covers(typ: str) -> bool:
    """Whether the table has a row for `typ` itself (components are covered as a class)."""
    return typ.startswith(COMPONENT_PREFIX) or any(r.type == typ for r in rules())
