"""The Pulumi program: size the stack's capacity plan and build its fleet."""

import pulumi

from components.fleet import Fleet, FleetArgs
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import parse_plan

config = pulumi.Config("llmfleet")
plan = parse_plan(config.require_object("plan"))
fleet_plan = build_fleet_plan(plan)
fleet = Fleet(
    plan.name,
    FleetArgs(
        fleet_plan,
        aws_profile=pulumi.Config("aws").get("profile"),
        # optional: `pulumi config set --secret llmfleet:hfToken hf_...` (gated checkpoints)
        hf_token=config.get_secret("hfToken"),
    ),
)

pulumi.export("monthly_cost_usd", fleet_plan.monthly_cost_usd)
pulumi.export(
    "regions",
    {
        r.region: {
            "instance_type": r.instance_type,
            "nodes": r.nodes.model_dump(),
            "replicas": r.replicas.model_dump(),
        }
        for r in fleet_plan.regions
    },
)
pulumi.export("cluster_names", {r: res.cluster.cluster.name for r, res in fleet.regions.items()})
pulumi.export(
    "kubeconfigs",
    pulumi.Output.secret({r: res.cluster.kubeconfig for r, res in fleet.regions.items()}),
)
if fleet.global_endpoint is not None:
    pulumi.export("hostname", fleet.global_endpoint.hostname)
    pulumi.export("endpoints", fleet.global_endpoint.endpoints)
