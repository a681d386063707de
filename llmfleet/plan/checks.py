"""Checks of a plan against the catalogs, made before any sizing: a value the schema accepts
but that names something that does not exist (a Kubernetes version EKS does not offer, a
price override no region would use, a calibration file for a server the plan cannot
choose) or that would be served differently than it reads (a model alias that loads another
checkpoint). Each raises a PlanError naming what would work."""

from __future__ import annotations

from pathlib import Path

from llmfleet.calibration.server_calibration import (
    Coverage,
    Covered,
    current,
    read_calibration,
    server_key,
)
from llmfleet.catalog import hardware, model_facts
from llmfleet.catalog.constants import Constants
from llmfleet.catalog.kubernetes import eks_versions
from llmfleet.errors import CalibrationError, PlanError, UnknownNameError
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan


def check_kubernetes_version(version: str) -> None:
    offered = eks_versions()
    if version not in offered:
        newest = max(offered, key=lambda v: int(v.split(".")[1]))
        raise PlanError(
            "kubernetes_version",
            version,
            f"EKS does not offer it; offered: {', '.join(offered)} (newest {newest}; "
            f"llmfleet/catalog/eks_versions.csv, {offered[newest].source.split(' from ')[0]})",
        )


def check_prices(plan: CapacityPlan) -> None:
    """Every price override names a catalog instance type, one of the plan's regions, and a
    pair the catalog says is offered: otherwise it would be silently ignored."""
    regions = [r.name for r in plan.regions]
    for k, override in enumerate(plan.prices):
        field = f"prices[{k}]"
        hardware.instance(override.instance_type, f"{field}.instance_type")
        if override.region is not None and override.region not in regions:
            raise UnknownNameError(
                f"{field}.region", override.region, "region of this plan", regions
            )
        where = [override.region] if override.region else regions
        if not any(hardware.is_offered(override.instance_type, r) for r in where):
            raise PlanError(
                f"{field}.instance_type",
                override.instance_type,
                f"not offered in {', '.join(where)}, so this price would never apply; "
                "remove it or name a region that offers the instance type",
            )


def check_model_id(plan: CapacityPlan) -> None:
    """A catalog alias names the architecture, not the checkpoint: `Llama-3.1-8B` has the
    Instruct model's shapes but is another checkpoint. Without model.hf_repo the fleet would
    load the catalog entry's repository, so an alias is refused unless it is that entry's id
    or repository."""
    spec = plan.model
    if spec.id is None or spec.hf_repo is not None:
        return
    entry = model_facts.model_entry(spec.id)
    if spec.id.lower() in (entry.id.lower(), entry.hf_repo.lower()):
        return
    example = spec.id if "/" in spec.id else f"<org>/{spec.id}"
    raise PlanError(
        "model.id",
        spec.id,
        f"an alias of the catalog model {entry.id}, which would serve {entry.hf_repo}; "
        f"give model.id: {entry.id} to serve that checkpoint, or keep this id and name the "
        f"checkpoint to load in model.hf_repo (e.g. {example})",
    )


def check_plan(plan: CapacityPlan) -> None:
    """Every catalog check of a plan, in the order a reader fixes them."""
    check_kubernetes_version(plan.kubernetes_version)
    check_model_id(plan)
    check_prices(plan)


def allowed_gpus(plan: CapacityPlan) -> set[str]:
    """The GPUs the plan's search may choose (every catalog GPU when the plan limits none)."""
    gpus = {i.gpu for i in hardware.instances().values()}
    if plan.allowed.instance_types is not None:
        gpus = {
            hardware.instance(n, f"allowed.instance_types[{k}]").gpu
            for k, n in enumerate(plan.allowed.instance_types)
        }
    if plan.allowed.gpus is not None:
        gpus &= {hardware.gpu(g, f"allowed.gpus[{k}]").gpu for k, g in enumerate(plan.allowed.gpus)}
    return gpus


def load_calibrations(
    plan: CapacityPlan, model: ResolvedModel, consts: Constants, base_dir: Path
) -> Coverage:
    """The plan's calibration files, each checked to be of the plan's model, a vLLM server and
    a GPU the plan allows, one per server; refitted from their runs when they were fitted on
    other shipped constants."""
    config = None
    if plan.model.config_path is not None:
        config = model_facts.load_config_json(base_dir / plan.model.config_path)
    covered: list[Covered] = []
    gpus = allowed_gpus(plan) if plan.calibration else set()
    for k, name in enumerate(plan.calibration):
        field = f"calibration[{k}]"
        try:
            cal = read_calibration(base_dir / name)
        except CalibrationError as e:
            raise PlanError(field, name, str(e).removeprefix(f"{base_dir / name}: ")) from None
        server = cal.server
        theirs = server.hf_repo if server.model.endswith(".json") else server.model
        mine = plan.model.hf_repo if plan.model.config_path is not None else model.id
        if (theirs or "").lower() != (mine or "").lower():
            raise PlanError(
                field, name, f"it calibrates {theirs}, but the plan serves {mine}; calibrate "
                "this plan's model on its own runs"
            )
        if server.engine != "vllm":
            raise PlanError(field, name, f"it calibrates {server.engine}; plans serve vLLM")
        if server.gpu not in gpus:
            raise PlanError(
                field, name, f"it calibrates {server.label}, but the plan allows no "
                f"{server.gpu} ({', '.join(sorted(gpus))}), so it would never apply"
            )
        twin = next((c for c in covered if server_key(c.calibration.server) ==
                     server_key(server)), None)
        if twin is not None:
            raise PlanError(
                field, name, f"{twin.path} already calibrates {server.label}; merge their "
                "runs into one file (calibrate --bench takes several)"
            )
        covered.append(Covered(name, current(cal, consts, config)))
    return Coverage(tuple(covered))
