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
from llmfleet.catalog.images import images
from llmfleet.catalog.kubernetes import (
    SupportType,
    ami_release,
    ami_releases,
    charts_missing,
    default_kubernetes_version,
    eks_support,
    eks_versions,
)
from llmfleet.catalog.vllm_release import VLLM_VERSION
from llmfleet.errors import CalibrationError, PlanError, UnknownNameError
from llmfleet.plan.model import ResolvedModel
from llmfleet.plan.schema import CapacityPlan


def standard_support_days_left(version: str) -> int:
    """Days of EKS standard support `version` has left on the calendar's date (negative:
    past it)."""
    return eks_versions()[version].standard_days_left(eks_support().calendar_as_of)


def control_plane_support(plan: CapacityPlan) -> SupportType:
    """The support EKS bills the plan's clusters at: extended when the plan runs its version
    into extended support (kubernetes_support: extended and under the margin left)."""
    short = standard_support_days_left(plan.kubernetes_version) < (
        eks_support().standard_support_margin_days
    )
    return "extended" if plan.kubernetes_support == "extended" and short else "standard"


def check_kubernetes_version(plan: CapacityPlan) -> None:
    """A version EKS offers, inside its support window on the calendar's date, that every
    pinned chart supports (llmfleet/catalog/eks_versions.csv, charts.csv)."""
    version = plan.kubernetes_version
    offered = {v: row for v, row in eks_versions().items() if row.on_eks}
    announced = eks_versions().get(version)
    if announced is not None and not announced.on_eks:
        raise PlanError(
            "kubernetes_version",
            version,
            f"not on EKS in the catalog's sources (read on {announced.read_on}: "
            f"{announced.source}); use {default_kubernetes_version()} (the default)",
        )
    if version not in offered:
        newest = max(offered, key=lambda v: int(v.split(".")[1]))
        raise PlanError(
            "kubernetes_version",
            version,
            f"EKS does not offer it; offered: {', '.join(offered)} (newest {newest}; "
            "llmfleet/catalog/eks_versions.csv)",
        )
    support = eks_support()
    day = support.calendar_as_of
    row = offered[version]
    default = default_kubernetes_version()
    if row.support_on(day) is None:
        raise PlanError(
            "kubernetes_version",
            version,
            f"EKS extended support for it ended on {row.end_of_extended_support} (calendar of "
            f"{day}): EKS creates no such cluster; use {default} (the default)",
        )
    left = standard_support_days_left(version)
    if left < support.standard_support_margin_days and plan.kubernetes_support == "standard":
        price = support.control_plane_usd_per_hour
        when = (
            f"ended on {row.end_of_standard_support}, {-left} days before"
            if left <= 0
            else f"ends on {row.end_of_standard_support}, {left} days after"
        )
        raise PlanError(
            "kubernetes_version",
            version,
            f"EKS standard support {when} the calendar's {day} (a new fleet needs "
            f"{support.standard_support_margin_days} days left): use {default} (the default), "
            "or set kubernetes_support: extended to run it in extended support at "
            f"${price['extended']:.2f} per cluster-hour instead of ${price['standard']:.2f} "
            "(the cost model then bills it)",
        )
    if ami_release(version) is None:
        releases = ", ".join(f"{r.release} ({r.kubernetes_min}-{r.kubernetes_max})"
                             for r in ami_releases())
        raise PlanError(
            "kubernetes_version",
            version,
            f"no EKS AMI release in llmfleet/catalog/eks_amis.csv has an AL2023 NVIDIA image "
            f"for it ({releases}): Karpenter's pinned alias would find no image; use "
            f"{default} (the default)",
        )
    missing = charts_missing(version)
    if missing:
        windows = ", ".join(f"{c.component} {c.version} ({c.window})" for c in missing)
        raise PlanError(
            "kubernetes_version",
            version,
            f"outside the supported Kubernetes versions of {windows} "
            f"(llmfleet/catalog/charts.csv); use {default} (the default)",
        )


def check_production(plan: CapacityPlan) -> None:
    """What `environment: production` requires beyond the schema: a pinned checkpoint, the
    account in every global name, an authenticated and rate-limited public entry point, and
    someone who hears a critical alert."""
    edge_given = plan.edge.auth is not None or plan.edge.rate_limit is not None
    if edge_given and plan.dns is None:
        raise PlanError(
            "edge", "given", "edge guards the public entry point, which only dns creates: give "
            "dns or remove edge"
        )
    if plan.edge.balancing == "prefix_aware" and plan.dns is None:
        raise PlanError(
            "edge.balancing", plan.edge.balancing, "the cache-aware router sits behind the "
            "region's authenticated entry point, which only dns creates: give dns, or use "
            "least_outstanding"
        )
    if plan.environment != "production":
        return
    if plan.model.revision is None:
        raise PlanError(
            "model.revision",
            None,
            "production serves a pinned checkpoint: give the 40-hex commit of the checkpoint "
            "served (`llmfleet plan --json`: regions[].levers.checkpoint) from its Hugging "
            "Face history or `git ls-remote https://huggingface.co/<repo> main`; the staging "
            "Job copies exactly that commit",
        )
    if plan.account_id is None:
        raise PlanError(
            "account_id",
            None,
            "production needs the AWS account id (12 digits, `aws sts get-caller-identity`): "
            "S3 bucket names are global and carry it, and the program refuses other accounts",
        )
    if plan.dns is not None and plan.edge.auth is None:
        raise PlanError(
            "edge.auth",
            None,
            "production's entry point is public (dns): authenticate at the load balancer "
            "with edge.auth.jwt {issuer, jwks_url} for API clients (bearer tokens from your "
            "identity provider) or edge.auth.cognito for browser sign-in; vLLM's api_key is "
            "one shared static key checked only on the GPU pod and does not count",
        )
    if plan.dns is not None and plan.edge.rate_limit is None:
        raise PlanError(
            "edge.rate_limit",
            None,
            "production's entry point is public (dns): limit each client with "
            "edge.rate_limit {requests, window_s} (an AWS WAF rate-based rule), e.g. "
            "requests: 600, window_s: 60",
        )
    if plan.cluster.break_glass_role_arn is None:
        raise PlanError(
            "cluster.break_glass_role_arn",
            None,
            "production needs a way into the cluster when CI's role cannot (EKS gives only the "
            "creator an access entry): give the ARN of an IAM role operators assume in an "
            "incident, e.g. arn:aws:iam::<account>:role/eks-break-glass (it gets "
            "AmazonEKSClusterAdminPolicy; guard who may assume it and alarm on its use)",
        )
    if plan.dns is not None and not any(r.email for r in plan.alerts.receivers):
        raise PlanError(
            "alerts.receivers",
            [r.name for r in plan.alerts.receivers],
            "production's CloudWatch alarms (the ALB's 5xx share and latency, a region leaving "
            "DNS) reach people through the alert topics' e-mail subscriptions: add a receiver "
            "with email: {addresses: [...]} (a PagerDuty or Opsgenie e-mail integration "
            "address pages through them)",
        )
    if not any("critical" in r.severities for r in plan.alerts.receivers):
        raise PlanError(
            "alerts.receivers",
            [r.name for r in plan.alerts.receivers],
            "production pages someone on a critical alert: add a receiver with severities "
            "[critical], e.g. pagerduty: {secret_name: alertmanager-receivers, secret_key: "
            "routing-key} or email: {addresses: [oncall@example.com]}",
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


def check_image(plan: CapacityPlan) -> None:
    """The serving image is a catalog row (llmfleet/catalog/images.csv) carrying the pinned
    vLLM release: every rendered flag and metric is checked against that release."""
    key = plan.startup.image
    if key is None:
        return
    known = images()
    if key not in known:
        raise PlanError(
            "startup.image", key,
            f"not in llmfleet/catalog/images.csv ({', '.join(known)}); an image you built is "
            "a row you add there, with the vLLM it carries, whether it has the EFA NCCL "
            "plugin, and its source",
        )
    row = known[key]
    if row.vllm_version != VLLM_VERSION:
        raise PlanError(
            "startup.image", key,
            f"it carries vLLM {row.vllm_version}, llmfleet renders for the pinned "
            f"{VLLM_VERSION} (its flags and metrics, catalog/vllm/): build the pinned image "
            "with the EFA installer on top and add it as a row (docs/multi-node.md), or leave "
            "startup.image unset",
        )


def check_retirement(plan: CapacityPlan) -> None:
    """A region leaves the fleet only while the others carry its users: the global stack
    stops routing to it before anything else changes."""
    retiring = [k for k, r in enumerate(plan.regions) if r.retire]
    if not retiring:
        return
    k = retiring[0]
    if len(retiring) == len(plan.regions):
        raise PlanError(f"regions[{k}].retire", True,
                        "every region retires: destroy the environment's stacks instead")
    if len(retiring) > plan.survive_region_losses:
        raise PlanError(
            f"regions[{k}].retire", True,
            f"the other regions are sized to carry {plan.survive_region_losses} lost "
            f"region(s), not the {len(retiring)} retiring: once the global stack stops "
            "routing to it their users would overload the rest; set "
            f"routing.survive_region_losses: {len(retiring)} (or move its traffic_share to "
            "the others) and roll that out first, then retire it",
        )


def check_plan(plan: CapacityPlan) -> None:
    """Every catalog check of a plan, in the order a reader fixes them."""
    check_kubernetes_version(plan)
    check_retirement(plan)
    check_image(plan)
    check_model_id(plan)
    check_prices(plan)
    check_production(plan)


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
