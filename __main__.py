"""The Pulumi program: size the stack's environment and build what this stack holds (the
whole environment, one region, or what spans regions: `components.program`)."""

import pulumi

from components.program import deploy, stack_config
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.plan.stacks import resolve_stack

target = resolve_stack(pulumi.get_stack(), stack_config())
fleet_plan = build_fleet_plan(target.plan)
deploy(
    target,
    fleet_plan,
    aws_profile=pulumi.Config("aws").get("profile"),
    # optional: `pulumi config set --secret llmfleet:hfToken hf_...` (gated checkpoints)
    hf_token=pulumi.Config("llmfleet").get_secret("hfToken"),
)
