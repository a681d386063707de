"""Models the catalog knows: their architectures (models/*.json, Hugging Face config.json
keys verbatim), a user's own config.json, the published pre-quantized checkpoints
(levers/checkpoints.json), the speculative drafters and acceptance rates
(levers/speculative.json) and the output lengths of a ShareGPT run (workloads/)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from llmfleet.catalog.hardware import DATA_DIR, CatalogRow
from llmfleet.errors import PlanError, UnknownNameError


class ModelEntry(CatalogRow):
    id: str
    hf_repo: str
    aliases: list[str]
    native_precision: str
    published_params_b: float | None
    published_active_params_b: float | None
    source: str
    config: dict[str, object]


@cache
def model_entries() -> dict[str, ModelEntry]:
    out: dict[str, ModelEntry] = {}
    for path in sorted((DATA_DIR / "models").glob("*.json")):
        entry = ModelEntry.model_validate(json.loads(path.read_text()))
        out[entry.id] = entry
    return out


@cache
def sharegpt_length_shape() -> tuple[float, ...]:
    """ShareGPT output lengths over their mean, ascending: the spread of a dataset workload."""
    doc = json.loads((DATA_DIR / "workloads" / "sharegpt-output-lengths.json").read_text())
    lengths = [float(v) for v in doc["output_lens"]]
    mean = sum(lengths) / len(lengths)
    return tuple(sorted(v / mean for v in lengths))


def model_entry(name: str, field: str = "model.id") -> ModelEntry:
    table = model_entries()
    if name in table:
        return table[name]
    for entry in table.values():
        if name in entry.aliases or name.lower() in (a.lower() for a in entry.aliases + [entry.id]):
            return entry
    names = list(table) + [a for e in table.values() for a in e.aliases]
    raise UnknownNameError(field, name, "model (or give model.config_path)", names)


def load_config_json(path: Path, field: str = "model.config_path") -> dict[str, object]:
    """Read a Hugging Face config.json the user points to."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(field, str(path), "no such file; give a path to a config.json") from None
    except json.JSONDecodeError as e:
        raise PlanError(field, str(path), f"not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict):
        raise PlanError(field, str(path), "a config.json holds a JSON object")
    return data


CHECKPOINTS = DATA_DIR / "levers" / "checkpoints.json"


class Checkpoint(BaseModel):
    """A published pre-quantized checkpoint: a plan served at fp8 or int4 loads real
    quantized weights, not the 16-bit ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    precision: str
    hf_repo: str
    source: str


@cache
def checkpoints() -> tuple[Checkpoint, ...]:
    rows = json.loads(CHECKPOINTS.read_text())["checkpoints"]
    return tuple(Checkpoint.model_validate(r) for r in rows)


def published(model_id: str, precision: str) -> Checkpoint | None:
    return next(
        (c for c in checkpoints() if c.model == model_id and c.precision == precision), None
    )


SPECULATIVE = DATA_DIR / "levers" / "speculative.json"


@cache
def speculative_defaults() -> dict[str, Any]:
    """Drafters and acceptance rates per model and method, and the default k."""
    return dict(json.loads(SPECULATIVE.read_text()))


def default_k() -> int:
    return int(speculative_defaults()["default_num_speculative_tokens"]["value"])


def model_default(model_id: str, method: str) -> dict[str, Any] | None:
    """The catalog's drafter and acceptance rate for this model and method, if any."""
    for row in speculative_defaults()["models"]:
        if row["model"] == model_id and row["method"] == method:
            return dict(row)
    return None
