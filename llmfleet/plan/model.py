"""Which model a plan serves: a catalog entry, or a config.json the user points to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmfleet.catalog import model_facts
from llmfleet.catalog.model_facts import published
from llmfleet.errors import PlanError
from llmfleet.paths import PROJECT_ROOT
from llmfleet.perf.architecture import Arch, check_config, from_config, with_defaults
from llmfleet.plan.schema import CapacityPlan


@dataclass(frozen=True)
class ResolvedModel:
    id: str
    hf_repo: str  # the checkpoint vLLM loads
    source: str
    arch: Arch
    native_precision: str


# INT4 weights cannot be made at load time: vLLM must load a checkpoint quantized offline.
PREQUANTIZED = {"int4-awq": "AWQ", "int4-gptq": "GPTQ"}


def resolve_model(plan: CapacityPlan, base_dir: Path = PROJECT_ROOT) -> ResolvedModel:
    spec = plan.model
    scheme = PREQUANTIZED.get(spec.precision)
    listed = spec.id is not None and published(model_facts.model_entry(spec.id).id, spec.precision)
    if scheme and spec.hf_repo is None and not listed:
        raise PlanError(
            "model.hf_repo",
            None,
            f"{spec.precision} serves an {scheme} checkpoint quantized offline; name it "
            f"(e.g. an org/<model>-{scheme} repository), or use precision fp8, which vLLM "
            "quantizes at load time",
        )
    if spec.id is not None:
        entry = model_facts.model_entry(spec.id)
        model = ResolvedModel(
            entry.id,
            spec.hf_repo or entry.hf_repo,
            entry.source,
            from_config(entry.id, entry.config),
            entry.native_precision,
        )
    else:
        assert spec.config_path is not None
        if spec.hf_repo is None:
            raise PlanError(
                "model.hf_repo",
                None,
                "with model.config_path, name the checkpoint vLLM loads (e.g. org/model)",
            )
        path = (base_dir / spec.config_path).resolve()
        cfg = model_facts.load_config_json(path)
        check_config(cfg, spec.config_path, "model.config_path")
        quant = cfg.get("quantization_config")
        native = str(quant.get("quant_method", "bf16")) if isinstance(quant, dict) else "bf16"
        defaults = with_defaults(cfg)[1]
        model = ResolvedModel(
            spec.hf_repo,
            spec.hf_repo,
            f"config.json at {spec.config_path}"
            + (f" (defaults applied: {'; '.join(defaults)})" if defaults else ""),
            from_config(spec.hf_repo, cfg),
            native,
        )
    ctx = model.arch.max_context
    if ctx and plan.max_model_len > ctx:
        raise PlanError(
            "max_model_len",
            plan.max_model_len,
            f"{model.id} supports at most {ctx:,} tokens (max_position_embeddings)",
        )
    return model
