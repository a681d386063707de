"""An environment with several regions deploys as a stack per region plus a global stack: each
region stack holds its region only, the global stack the DNS and no cluster, and together they
hold exactly the whole environment's preview, resource for resource (the same URNs but for the
stack's name: what lets `pulumi state move` carry an existing stack over).

Runs the real program under mocks for every such environment in stacks/.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from plans import PerStack

import components.preview.run as run_module
from components.preview.monitor import RecordingMonitor
from components.preview.run import PreviewResult, run_program
from components.preview.split import in_stack, split_commands, top_level
from llmfleet.errors import ProgramError
from llmfleet.plan.stacks import (
    deploy_stacks,
    global_stack,
    list_stacks,
    read_plan,
    region_stack,
    splits,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SPLIT = [env for env in list_stacks() if splits(read_plan(env))]
SHARED_TYPES = {"llmfleet:index:Fleet", "pulumi:providers:aws"}
"""In every stack of the split: each program's own Fleet component and Route53 provider (a
provider is copied by `state move`, not moved)."""
REFERENCE = "pulumi:pulumi:StackReference"


@pytest.fixture(scope="module")
def runs() -> PerStack[PreviewResult]:
    """Every split environment's whole preview and each of its stacks' previews, each run on
    first use: one environment's failure errs its own tests only."""
    stacks = [s for env in SPLIT for s in (env, *deploy_stacks(env, read_plan(env)))]
    return PerStack(stacks, run_program)


def of_type(result: PreviewResult, prefix: str) -> list[dict[str, Any]]:
    return [r for r in result.resources if r["type"].startswith(prefix)]


@pytest.mark.parametrize("env", SPLIT)
def test_a_region_stack_holds_its_region_and_no_global_dns(
    env: str, runs: PerStack[PreviewResult]
) -> None:
    plan = read_plan(env)
    for region in plan.regions:
        run = runs[region_stack(env, region.name)]
        providers = {p["name"]: p["inputs"]["region"] for p in of_type(run, "pulumi:providers:aws")}
        assert set(providers.values()) == {region.name, "us-east-1"}
        assert sorted(c["name"] for c in of_type(run, "aws:eks/cluster:Cluster")) == [
            f"{plan.name}-{region.name}"
        ]
        assert of_type(run, "aws:route53/healthCheck") == []
        assert of_type(run, "llmfleet:index:GlobalEndpoint") == []
        assert of_type(run, "llmfleet:index:GlobalValidation") == []
        # Its only Route53 record validates its own name's certificate.
        [record] = of_type(run, "aws:route53/record")
        assert record["name"] == f"{plan.name}-{region.name}-cert-validation-1"
        for r in run.resources:
            if r["type"].startswith("aws:") and providers[r["provider"]] != region.name:
                assert r is record, r["name"]


@pytest.mark.parametrize("env", SPLIT)
def test_the_global_stack_holds_the_routed_records_and_checks_and_no_cluster(
    env: str, runs: PerStack[PreviewResult]
) -> None:
    plan = read_plan(env)
    run = runs[global_stack(env)]
    assert of_type(run, "aws:eks/") == [] and of_type(run, "kubernetes:") == []
    assert of_type(run, "aws:ec2/") == [] and of_type(run, "aws:iam/") == []
    names = {r["name"] for r in of_type(run, "aws:route53/")}
    for region in plan.regions:
        for suffix in ("", "-regional", "-health", "-capacity", "-serving"):
            assert f"{plan.name}-dns-{region.name}{suffix}" in names
    assert sorted(r["inputs"]["name"] for r in of_type(run, REFERENCE)) == sorted(
        f"organization/llmfleet/{region_stack(env, r.name)}" for r in plan.regions
    )
    # The routed records use what the region stacks exported.
    for region in plan.regions:
        exported = runs[region_stack(env, region.name)].outputs["entry_point"]
        [record] = [r for r in run.resources if r["name"] == f"{plan.name}-dns-{region.name}"]
        assert record["inputs"]["aliases"][0]["name"] == exported["lb_hostname"]


@pytest.mark.parametrize("env", SPLIT)
def test_the_region_stacks_and_the_global_stack_together_are_the_whole_environment(
    env: str, runs: PerStack[PreviewResult]
) -> None:
    whole = {
        in_stack(r["urn"], "S"): r["type"]
        for r in runs[env].resources
        if r["type"] not in SHARED_TYPES
    }
    parts: Counter[str] = Counter()
    for stack in deploy_stacks(env, read_plan(env)):
        parts.update(
            in_stack(r["urn"], "S")
            for r in runs[stack].resources
            if r["type"] not in SHARED_TYPES and r["type"] != REFERENCE
        )
    assert parts == Counter(whole.keys())  # every resource once, by URN: same types and counts
    assert Counter(whole.values())["aws:eks/cluster:Cluster"] == len(read_plan(env).regions)


@pytest.mark.parametrize("env", SPLIT)
def test_the_split_commands_move_each_resource_to_the_stack_that_registers_it(
    env: str, runs: PerStack[PreviewResult]
) -> None:
    stacks = deploy_stacks(env, read_plan(env))
    commands = split_commands(env, {s: runs[s].resources for s in stacks})
    whole = runs[env].resources
    children: dict[str, list[dict[str, Any]]] = {}
    for r in whole:
        children.setdefault(r["parent_urn"] or "", []).append(r)

    def subtree(r: dict[str, Any]) -> list[dict[str, Any]]:
        return [r] + [d for c in children.get(r["urn"], []) for d in subtree(c)]

    for stack in stacks:
        [move] = [c for c in commands if f"--dest {stack} \\" in c and "Fleet$llmfleet" in c
                  and "cert-validation-0" not in c]
        moved = {u.strip(" '\\") for u in move.splitlines()[1:]}
        own = top_level(runs[stack].resources)
        assert moved == {in_stack(r["urn"], env) for r in own}
        carried = {
            in_stack(d["urn"], stack) for r in whole if r["urn"] in moved for d in subtree(r)
        }
        registered = {
            r["urn"] for r in runs[stack].resources
            if r["type"] not in SHARED_TYPES and r["type"] != REFERENCE
        }
        assert carried == registered, stack


@pytest.mark.parametrize("env", SPLIT)
def test_the_global_validation_record_adopts_the_first_regions_copy(
    env: str, runs: PerStack[PreviewResult]
) -> None:
    plan = read_plan(env)
    [record] = [
        r for r in runs[global_stack(env)].resources
        if r["name"] == f"{plan.name}-global-cert-validation"
    ]
    first = plan.regions[0].name
    [own] = [r for r in runs[region_stack(env, first)].resources if r["name"].endswith(
        f"{first}-cert-validation-1")]
    assert record["options"]["aliases"] == [
        in_stack(own["urn"], global_stack(env)).replace("-validation-1", "-validation-0")
    ]


@pytest.mark.parametrize("env", SPLIT)
def test_a_region_stack_not_deployed_yet_stops_the_global_stack_before_any_dns(
    env: str, runs: PerStack[PreviewResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = read_plan(env)
    outputs = {region_stack(env, r.name): runs[region_stack(env, r.name)].outputs
               for r in plan.regions}
    missing = region_stack(env, plan.regions[-1].name)
    del outputs[missing]
    registered: list[str] = []

    class Watching(RecordingMonitor):
        def RegisterResource(self, request: Any) -> Any:  # noqa: N802
            registered.append(request.type)
            return super().RegisterResource(request)

    monkeypatch.setattr(run_module, "RecordingMonitor", Watching)
    with pytest.raises(ProgramError, match=f"{missing} have no `entry_point` output"):
        run_program(global_stack(env), stack_outputs=outputs)
    assert registered  # the root stack registered: the program ran
    assert not [t for t in registered if t.startswith("aws:")], registered


@pytest.mark.parametrize("env", SPLIT)
def test_before_any_region_stack_the_global_stack_validates_the_certificate_only(
    env: str,
) -> None:
    run = run_program(global_stack(env), stack_outputs={})
    custom = sorted(r["type"] for r in run.resources if r["id"] and r["type"] != REFERENCE)
    assert custom == [
        "aws:acm/certificate:Certificate",
        "aws:route53/record:Record",
        "pulumi:providers:aws",
    ]
    # What tells a deploy that the global stack has run once (deploy.yml).
    assert set(run.outputs) == {"global_validation_fqdn"}
