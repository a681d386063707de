"""Previews of a change with the real program under mocks: the replacement table covers every
type the program registers in every layout, a revision runs its own code, and the day-2
procedures (upgrading Kubernetes, a new weights revision, removing a region, a new
environment's first rollout) run as changes from one plan to the next."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from plans import (
    EDGE,
    FRONTIER,
    LONG_PROMPT,
    ONE_REGION,
    PRODUCTION,
    THREE_REGIONS,
    _changed,
    plan_dict,
    stack_text,
)

import components.weights
from components.preview.change_checks import LB_ATTRIBUTES
from components.preview.change_report import (
    ChangePreview,
    preview_change,
    retiring_regions,
    rollout_order,
)
from components.preview.replacements import covers
from components.preview.revision import TREE, before_run
from components.preview.run import run_program
from llmfleet.fleetplan.fleet import build_fleet_plan
from llmfleet.outputs.deploy_order import deploy_order
from llmfleet.paths import PROJECT_ROOT
from llmfleet.plan.stacks import deploy_stacks, list_stacks, parse_plan, read_plan

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

LAYOUTS: dict[str, dict[str, Any]] = {
    "single node": ONE_REGION,
    "single node, production, pull-through cache": plan_dict(
        **PRODUCTION, **EDGE, **{"startup.ecr_account_id": "111122223333"}),
    "multi node": plan_dict(**FRONTIER),
    "disaggregated": plan_dict(**LONG_PROMPT),
    "multi-region with DNS": THREE_REGIONS,
}


@cache
def _run(plan_json: str) -> list[dict[str, Any]]:
    plan = json.loads(plan_json)
    config = {"aws:region": plan["regions"][0]["name"], "llmfleet:plan": plan}
    return run_program("t", config).resources


def run(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return _run(json.dumps(plan, sort_keys=True))


def change(before: dict[str, Any] | None, after: dict[str, Any], **kw: Any) -> ChangePreview:
    """The change of stack `t` from plan `before` (None: nothing deployed) to `after`."""
    return preview_change("t", run(before) if before else [], run(after), "before", **kw)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_table_covers_every_type_the_program_registers(layout: str) -> None:
    missing = sorted({r["type"] for r in run(LAYOUTS[layout]) if not covers(r["type"])})
    assert missing == [], f"add rows to components/preview/replacements.csv for {missing}"


@pytest.mark.parametrize("env", list_stacks())
def test_the_table_covers_every_type_of_every_stack_that_deploys_an_environment(env: str) -> None:
    for stack in deploy_stacks(env, read_plan(env)):
        missing = sorted({r["type"] for r in run_program(stack).resources if not covers(r["type"])})
        assert missing == [], (stack, missing)


def test_a_plan_against_itself_changes_nothing() -> None:
    preview = change(THREE_REGIONS, THREE_REGIONS)
    assert set(preview.ops().values()) == {"same"}
    assert preview.findings == preview.blockers == []


# --- a revision runs its own code ---------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_revision_runs_its_own_program_in_its_own_interpreter(tmp_path: Path) -> None:
    """Two commits of a copy of the project: the first's reader role has another description
    (old code) and another record name (old stack file); both runs read their own."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in TREE:
        if name == "stacks":
            continue
        src = PROJECT_ROOT / name
        copy = shutil.copytree if src.is_dir() else shutil.copy2
        copy(src, repo / name)  # type: ignore[operator]
    (repo / "stacks").mkdir()
    stack_file = repo / "stacks" / "Pulumi.one.yaml"
    stack_file.write_text(stack_text(_changed(ONE_REGION, {"dns.record_name": "old.example.com"})))
    weights = repo / "components" / "weights.py"
    weights.write_text(weights.read_text().replace('"read the weights"', '"read the OLD weights"'))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    stack_file.write_text(stack_text(ONE_REGION))
    shutil.copy2(PROJECT_ROOT / "components" / "weights.py", weights)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "new")

    old, new = (before_run("one", rev, repo).resources for rev in ("HEAD~1", "HEAD"))
    preview = preview_change("one", old, new, "HEAD~1")
    reader = next(c for c in preview.changes if c.name == "chat-one-us-east-1-model-reader"
                  and c.type == "aws:iam/role:Role")
    assert reader.changed == ["description"]
    assert "read the OLD weights" in reader.before["inputs"]["description"]  # type: ignore[index]
    assert preview.ops("aws:route53/record:Record")["chat-one-dns-us-east-1"] == "replace"
    # this process kept its own modules
    assert "OLD" not in Path(components.weights.__file__).read_text()


def test_a_stack_missing_at_the_revision_starts_from_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("no stacks yet\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "empty")
    assert before_run("one", "HEAD", repo).resources == []


# --- day 2: upgrading Kubernetes ------------------------------------------------------------

EXTENDED = {"kubernetes_support": "extended"}
"""1.34 leaves standard support on 2026-12-02: a fleet on it runs in extended support."""


def test_upgrading_kubernetes_updates_the_cluster_in_place_and_rolls_the_nodes() -> None:
    before = _changed(ONE_REGION, {**EXTENDED, "kubernetes_version": "1.34"})
    after = _changed(ONE_REGION, {**EXTENDED, "kubernetes_version": "1.35"})
    preview = change(before, after)
    assert preview.ops("aws:eks/cluster:Cluster") == {"chat-one-us-east-1": "update"}
    assert preview.of("replace") == preview.of("delete") == []
    assert preview.findings == []
    for pool in (c for c in preview.changes if c.type == "aws:eks/nodeGroup:NodeGroup"):
        assert [r.property for r in pool.of("recreates")] == ["version"], pool.name


def test_upgrading_kubernetes_moves_the_add_ons_and_drifts_karpenters_nodes() -> None:
    """1.34 -> 1.35: every managed add-on (kube-proxy and CoreDNS too) moves to EKS's default
    version for 1.35, and the cluster's version change says Karpenter's nodes drift: the
    EC2NodeClass keeps its alias al2023@v20260714, a release with an AMI for both versions,
    which Karpenter resolves for the control plane's version."""
    before = _changed(ONE_REGION, {**EXTENDED, "kubernetes_version": "1.34"})
    after = _changed(ONE_REGION, {**EXTENDED, "kubernetes_version": "1.35"})
    preview = change(before, after)
    addons = {c.name: c.changed for c in preview.changes if c.type == "aws:eks/addon:Addon"}
    assert len(addons) == 5 and all(changed == ["addonVersion"] for changed in addons.values())
    [cluster] = [c for c in preview.changes if c.type == "aws:eks/cluster:Cluster"]
    [drift] = cluster.of("recreates")
    assert drift.property == "version" and "Karpenter" in drift.source
    [node_class] = [c for c in preview.changes
                    if c.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"]
    assert node_class.op == "same"
    terms = node_class.after["inputs"]["spec"]["amiSelectorTerms"]  # type: ignore[index]
    assert terms == [{"alias": "al2023@v20260714"}]


# --- day 2: a new weights revision ----------------------------------------------------------

REVISION_A = "0123456789abcdef0123456789abcdef01234567"
REVISION_B = "fedcba9876543210fedcba9876543210fedcba98"


def _revision(rev: str) -> dict[str, Any]:
    return _changed(ONE_REGION, {"model.revision": rev})


def test_a_new_weights_revision_stages_it_again_and_rolls_the_servers() -> None:
    preview = change(_revision(REVISION_A), _revision(REVISION_B))
    assert preview.ops("kubernetes:batch/v1:Job") == {"chat-one-us-east-1-vllm-job": "replace"}
    [server] = [c for c in preview.changes if c.name == "chat-one-us-east-1-vllm-deployment"]
    assert server.op == "update" and server.of("recreates")
    assert set(preview.ops("aws:s3/bucket:Bucket").values()) == {"same"}  # the weights stay


def _narrowed(preview: ChangePreview) -> list[str]:
    return [f.resource for f in preview.findings if f.check == "permission-narrowed"]


def test_a_new_weights_revision_alone_narrows_the_readers_at_the_start_of_its_rollout() -> None:
    """Without model.previous_revision the readers' policy moves to the new prefix when the
    update starts, while the old pods (which restart) still read the old one."""
    preview = change(_revision(REVISION_A), _revision(REVISION_B))
    assert _narrowed(preview) == ["chat-one-us-east-1-model-reader"]


def test_a_new_weights_revision_with_the_previous_one_keeps_both_readable() -> None:
    """docs/day2.md step 1: revision B, previous_revision A: the readers gain B's prefix and
    keep A's through the rollout."""
    after = _changed(ONE_REGION, {"model.revision": REVISION_B,
                                  "model.previous_revision": REVISION_A})
    preview = change(_revision(REVISION_A), after)
    assert _narrowed(preview) == [] and preview.findings == []
    [reader] = [c for c in preview.changes if c.name == "chat-one-us-east-1-model-reader"
                and c.type == "aws:iam/rolePolicy:RolePolicy"]
    policy = reader.after["inputs"]["policy"]  # type: ignore[index]
    assert f"/{REVISION_A}/*" in policy and f"/{REVISION_B}/*" in policy


def test_dropping_the_previous_revision_after_its_rollout_narrows_without_rolling_a_pod() -> None:
    """docs/day2.md step 3: the readers narrow to B in a change that rolls no server."""
    during = _changed(ONE_REGION, {"model.revision": REVISION_B,
                                   "model.previous_revision": REVISION_A})
    preview = change(during, _revision(REVISION_B))
    assert preview.findings == []
    assert preview.ops("aws:iam/rolePolicy:RolePolicy")["chat-one-us-east-1-model-reader"] == (
        "update")
    assert preview.ops("kubernetes:apps/v1:Deployment") == {
        "chat-one-us-east-1-vllm-deployment": "same"}


# --- day 2: the image cache's credentials are in -----------------------------------------

CACHE = {**PRODUCTION, **EDGE, "startup.ecr_account_id": "111122223333"}


def test_filling_the_image_caches_secret_creates_its_rule_then_the_pods_pull_through_it() -> None:
    """startup.pull_through_ready false -> true: the secret (empty on the first `up`) is only
    tagged; the cache rule and the nodes' pull-through policies are created in this change,
    and the servers and the staging Job switch to the cache's image after them."""
    preview = change(plan_dict(**CACHE), plan_dict(**CACHE, **{"startup.pull_through_ready": True}))
    assert preview.findings == []
    created = sorted(c.type.rsplit(":", 1)[-1] for c in preview.of("create"))
    assert created == ["PullThroughCacheRule", "RolePolicy", "RolePolicy"]
    assert preview.ops("aws:secretsmanager/secret:Secret") == {"t-us-east-1-model-docker-hub":
                                                              "update"}
    [server] = [c for c in preview.changes if c.name == "t-us-east-1-vllm-deployment"]
    assert server.of("recreates")
    image = server.after["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"]  # type: ignore[index]
    assert image.startswith("111122223333.dkr.ecr.us-east-1.amazonaws.com/docker-hub/vllm/")


# --- day 2: removing a region ---------------------------------------------------------------

SURVIVOR_SHARES = [
    {"name": "us-east-1", "traffic_share": 0.55, "vpc_cidr": "10.40.0.0/16"},
    {"name": "us-west-2", "traffic_share": 0.45, "vpc_cidr": "10.41.0.0/16"},
]
AGGREGATED = _changed(THREE_REGIONS, {"allowed.disaggregated": False})
"""THREE_REGIONS as sized (aggregated in every region), its survivors kept aggregated: at the
larger shares disaggregated serving prices cheaper, and since #30 its GPU nodes share one zone,
which moves the survivors' subnets (the test after the next says what that does)."""
TWO_REGIONS = _changed(AGGREGATED, {"regions": SURVIVOR_SHARES})


def test_removing_a_region_deletes_its_stateful_resources_only_when_the_change_says_so() -> None:
    preview = change(AGGREGATED, TWO_REGIONS)
    deleted = {c.name for c in preview.of("delete")}
    assert "chat-three-eu-north-1" in deleted  # the cluster
    assert all("eu-north-1" in name for name in deleted)
    stateful = {f.resource for f in preview.findings if f.check.startswith("stateful-")}
    assert "chat-three-eu-north-1" in stateful
    allowed = change(AGGREGATED, TWO_REGIONS, allow=["*eu-north-1*"])
    assert [f for f in allowed.findings if f.check.startswith("stateful-")] == []


def test_removing_a_region_lists_its_blockers_and_the_global_step_first() -> None:
    preview = change(AGGREGATED, TWO_REGIONS, allow=["*eu-north-1*"])
    blocked = {b.resource: b for b in preview.blockers}
    [ingress] = [b for name, b in blocked.items() if name.endswith("eu-north-1-vllm-ingress")]
    assert "deletion protection" in ingress.what
    assert any("aws s3 rm" in b.step for b in preview.blockers)  # its weights bucket
    survivors, global_part, protection, *rest, last = preview.steps
    assert survivors.startswith("the surviving regions' floors rise in this change "
                                "(chat-three-us-east-1-gpu, chat-three-us-west-2-gpu)")
    assert global_part.startswith("the global part first")
    assert protection == ingress.step  # then deletion protection off
    assert any("aws s3 rm" in step for step in rest)
    assert "chat-three-eu-north-1" in last  # then the destroy


def _retiring(plan: dict[str, Any], region: str) -> dict[str, Any]:
    regions = [{**r, "retire": True} if r["name"] == region else r for r in plan["regions"]]
    return _changed(plan, {"regions": regions})


RETIRING = _retiring(AGGREGATED, "eu-north-1")


def test_retiring_a_region_takes_it_out_of_dns_and_unprotects_it_as_the_plan_says() -> None:
    """docs/day2.md step 1, regions[eu-north-1].retire: its routed records, health checks and
    DNS alarm go (the plan says so: no finding), its ALB loses deletion protection and its
    weight bucket may be emptied by a destroy; nothing else changes."""
    retiring = retiring_regions(build_fleet_plan(parse_plan(RETIRING)))
    assert retiring == ["eu-north-1"]
    preview = change(AGGREGATED, RETIRING, retiring=retiring)
    assert preview.findings == [] and preview.blockers == []
    deleted = sorted(c.type.rsplit(":", 1)[-1] for c in preview.of("delete"))
    assert deleted == ["HealthCheck", "HealthCheck", "HealthCheck", "MetricAlarm", "Record",
                       "Record"]
    assert all("eu-north-1" in c.name for c in preview.changes if c.op != "same")
    protection = f'metadata.annotations["{LB_ATTRIBUTES}"]'
    assert {c.name: c.changed for c in preview.of("update")} == {
        "chat-three-eu-north-1-model-weights": ["forceDestroy"],
        "chat-three-eu-north-1-vllm-ingress": [protection],
        "chat-three-eu-north-1-vllm-ingress-health": [protection]}


def test_after_its_retirement_a_region_goes_with_only_its_controllers_objects_in_the_way() -> None:
    """Step 2 and 3: its weight bucket may empty (force_destroy), its log bucket stays behind
    (retain_on_delete), its ALB is unprotected; left are what controllers made (the ALB's
    security groups, Karpenter's nodes), cleared by deleting Ingresses and NodePools first."""
    preview = change(RETIRING, TWO_REGIONS, allow=["*eu-north-1*"])
    assert {b.source.split(":")[0] for b in preview.blockers} == {
        "EC2 API DeleteVpc and DeleteSubnet; aws-load-balancer-controller security groups; "
        "Karpenter docs, Uninstall", "Karpenter docs, Uninstall"}
    assert not [s for s in preview.steps if "aws s3 rm" in s or "deletion protection" in s]


def test_a_survivor_whose_gpu_zones_narrow_has_its_node_groups_replaced_and_said() -> None:
    """us-west-2, a survivor at 45 %, keeps its GPU nodes in usw2-az1 and usw2-az2 (its
    node_zone_ids; fleetplan.fabric narrows them the same way to one zone for replicas
    across nodes or pools that trade KV), so the cluster's zones drop from 3 to 2
    (usw2-az4's subnets go) and both node groups' subnetIds change: replacements the
    preview names beside the removal the change allows."""
    west = {**SURVIVOR_SHARES[1], "node_zone_ids": ["usw2-az1", "usw2-az2"]}
    after = _changed(THREE_REGIONS, {"regions": [SURVIVOR_SHARES[0], west]})
    preview = change(THREE_REGIONS, after, allow=["*eu-north-1*"])
    replaced = {f.resource for f in preview.findings if f.check == "stateful-replaced"}
    assert replaced == {"chat-three-us-west-2-gpu", "chat-three-us-west-2-system"}
    assert "chat-three-us-west-2-vpc-private-usw2-az4" in {c.name for c in preview.of("delete")}


# --- day 2: a new environment's first rollout -----------------------------------------------


def test_a_first_rollout_creates_everything_and_finds_nothing() -> None:
    preview = change(None, THREE_REGIONS)
    assert set(preview.ops().values()) == {"create"}
    assert preview.findings == preview.blockers == []


def test_a_first_rollout_runs_the_global_stack_first_then_the_regions_then_it_again() -> None:
    """The order `llmfleet rollout` gives (canary first, the global stack last) with the
    global stack once before it: the regions' certificates wait for its validation record."""
    plan = parse_plan(THREE_REGIONS)
    order = [s.stack for s in deploy_order("t", plan, build_fleet_plan(plan)).steps]
    preview = change(None, THREE_REGIONS, order=order)
    assert [step.split("`")[1] for step in preview.steps] == [
        "pulumi up --stack t.global", "pulumi up --stack t.eu-north-1",
        "pulumi up --stack t.us-west-2", "pulumi up --stack t.us-east-1",
        "pulumi up --stack t.global"]
    assert "validation record" in preview.steps[0]


@pytest.mark.parametrize("env", list_stacks())
def test_the_cli_previews_a_change_from_a_file_and_adds_keys_to_the_json(
    env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`preview --from FILE --json` for each stack, from its own file unchanged."""
    from llmfleet.cli import main

    same = tmp_path / f"Pulumi.{env}.yaml"
    same.write_text(yaml.safe_dump({"config": {
        **yaml.safe_load((PROJECT_ROOT / "stacks" / f"Pulumi.{env}.yaml").read_text())["config"]}}))
    code = main(["preview", "--stack", env, "--from", str(same), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # 1: the run's own checks (the shipped stacks' business)
    assert out and all(r["change"]["op"] == "same" for r in out)
    assert {"type", "name", "urn", "inputs", "options"} <= set(out[0])
    order = rollout_order(env, run_program(env).fleet_plan)  # canary first
    assert sorted(order) == sorted(deploy_stacks(env, read_plan(env)))
