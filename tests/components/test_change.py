"""A preview of a change, on resources written out by hand (what two runs under mocks
record): which inputs change, what the sourced table makes of them, how a replacement
travels, and the checks on top."""

from __future__ import annotations

import json
from typing import Any

from components.preview.change import compare
from components.preview.change_checks import blockers, change_findings
from components.preview.change_report import preview_change

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def res(typ: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A resource as the monitor records it (wire.collect)."""
    urn = f"urn:pulumi:t::llmfleet::{typ}::{name}"
    return {
        "type": typ, "name": name, "urn": urn, "id": f"{name}-id",
        "provider_urn": options.pop("provider_urn", None), "parent_urn": None,
        "inputs": inputs,
        "options": {"ignore_changes": [], "depends_on_urns": [], "aliases": [],
                    "property_dependency_urns": {}, "delete_before_replace": False,
                    "replace_on_changes": [], **options},
    }


def urn(typ: str, name: str) -> str:
    return f"urn:pulumi:t::llmfleet::{typ}::{name}"


def op_of(before: list, after: list, name: str) -> Any:
    [change] = [c for c in compare(before, after) if c.name == name]
    return change


def gpu_pool(**inputs: Any) -> dict[str, Any]:
    base = {"clusterName": "c", "instanceTypes": ["p5.48xlarge"],
            "scalingConfig": {"minSize": 2, "maxSize": 4, "desiredSize": 2}, "version": "1.35"}
    return res(NODE_GROUP, "gpu", {**base, **inputs})


def test_a_new_instance_type_replaces_a_node_group_and_says_which_row() -> None:
    change = op_of([gpu_pool()], [gpu_pool(instanceTypes=["p5en.48xlarge"])], "gpu")
    assert change.op == "replace"
    assert change.changed == ["instanceTypes[0]"]
    [reason] = change.of("replace")
    assert reason.property == "instanceTypes"
    assert "node_group.go" in reason.source and "ForceNew" in reason.source


def test_a_floor_change_is_an_update_and_a_version_change_rolls_the_nodes() -> None:
    floor = op_of([gpu_pool()], [gpu_pool(scalingConfig={"minSize": 3, "maxSize": 4,
                                                         "desiredSize": 3})], "gpu")
    assert (floor.op, floor.reasons) == ("update", [])
    version = op_of([gpu_pool()], [gpu_pool(version="1.36")], "gpu")
    assert version.op == "update"
    assert [r.property for r in version.of("recreates")] == ["version"]


def test_ignored_inputs_do_not_change() -> None:
    after = gpu_pool(scalingConfig={"minSize": 2, "maxSize": 4, "desiredSize": 3})
    after["options"]["ignore_changes"] = ["scalingConfig.desiredSize"]
    assert op_of([gpu_pool()], [after], "gpu").op == "same"


def test_an_eks_version_may_move_one_minor_up_and_no_other_way() -> None:
    cluster = "aws:eks/cluster:Cluster"
    one = op_of([res(cluster, "c", {"version": "1.35"})], [res(cluster, "c", {"version": "1.36"})],
                "c")
    assert (one.op, one.of("refused")) == ("update", [])
    two = op_of([res(cluster, "c", {"version": "1.35"})], [res(cluster, "c", {"version": "1.37"})],
                "c")
    assert [r.property for r in two.of("refused")] == ["version"]
    down = op_of([res(cluster, "c", {"version": "1.35"})], [res(cluster, "c", {"version": "1.34"})],
                 "c")
    assert down.of("refused")


def test_a_replacement_travels_to_the_inputs_that_read_it() -> None:
    """The launch template is renamed (replaced): the node group's launchTemplate reads its
    id, a ForceNew input, so the pool is replaced too."""
    lt_urn = urn(LAUNCH_TEMPLATE, "lt")
    pool = gpu_pool(launchTemplate={"id": "lt-id", "version": "1"})
    pool["options"]["property_dependency_urns"] = {"launchTemplate": [lt_urn]}
    before = [res(LAUNCH_TEMPLATE, "lt", {"name": "gpu-a"}), pool]
    after = [res(LAUNCH_TEMPLATE, "lt", {"name": "gpu-b"}), pool]
    change = op_of(before, after, "gpu")
    assert change.op == "replace"
    assert change.of("replace")[0].detail == "reads lt, which is replaced"


def test_a_launch_template_update_rolls_the_nodes_of_the_group_that_reads_it() -> None:
    """EC2 makes a new template version per update; the mocks answer version 1 both times."""
    lt_urn = urn(LAUNCH_TEMPLATE, "lt")
    pool = gpu_pool(launchTemplate={"id": "lt-id", "version": "1"})
    pool["options"]["property_dependency_urns"] = {"launchTemplate": [lt_urn]}
    before = [res(LAUNCH_TEMPLATE, "lt", {"name": "gpu", "imageId": "ami-1"}), pool]
    after = [res(LAUNCH_TEMPLATE, "lt", {"name": "gpu", "imageId": "ami-2"}), pool]
    change = op_of(before, after, "gpu")
    assert change.op == "update"
    assert [r.property for r in change.of("recreates")] == ["launchTemplate.version"]


def test_every_resource_of_a_replaced_provider_is_replaced() -> None:
    provider = "pulumi:providers:kubernetes"
    p_urn = urn(provider, "k8s")
    deploy = res(DEPLOYMENT, "vllm", {"metadata": {"name": "vllm"}}, provider_urn=p_urn)

    def kubeconfig(server: str) -> str:
        return json.dumps({"current-context": "c", "contexts": [{"name": "c", "context": {
            "cluster": "c"}}], "clusters": [{"name": "c", "cluster": {"server": server}}]})

    same = [res(provider, "k8s", {"kubeconfig": kubeconfig("https://a")}), deploy]
    moved = [res(provider, "k8s", {"kubeconfig": kubeconfig("https://b")}), deploy]
    assert op_of(same, moved, "vllm").op == "replace"
    assert op_of(same, moved, "vllm").of("replace")[0].detail == "k8s is replaced"


def test_a_kubeconfig_for_the_same_cluster_replaces_nothing() -> None:
    provider = "pulumi:providers:kubernetes"

    def kubeconfig(user: str) -> str:
        return json.dumps({"current-context": "c", "users": [{"name": user}], "contexts": [
            {"name": "c", "context": {"cluster": "c"}}],
            "clusters": [{"name": "c", "cluster": {"server": "https://a"}}]})

    change = op_of([res(provider, "k8s", {"kubeconfig": kubeconfig("a")})],
                   [res(provider, "k8s", {"kubeconfig": kubeconfig("b")})], "k8s")
    assert change.op == "update"


def test_an_aliased_resource_continues_the_old_one() -> None:
    old = gpu_pool()
    new = {**gpu_pool(), "urn": urn(NODE_GROUP, "gpu-moved"), "name": "gpu-moved"}
    new["options"] = {**new["options"], "aliases": [old["urn"]]}
    assert [c.op for c in compare([old], [new])] == ["same"]


def test_a_refused_update_is_a_finding_unless_the_resource_replaces_on_it() -> None:
    lws = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"

    def group(size: int, **options: Any) -> dict[str, Any]:
        spec = {"leaderWorkerTemplate": {"size": 2, "subGroupPolicy": {"subGroupSize": size}}}
        return res(lws, "lws", {"metadata": {"name": "lws"}, "spec": spec}, **options)

    changes = compare([group(2)], [group(4)])
    [finding] = change_findings(changes, [group(2)])
    assert finding.check == "update-refused"
    assert "leaderworkerset_webhook.go" in finding.message
    forced = compare([group(2)], [group(4, replace_on_changes=["spec.leaderWorkerTemplate"])])
    assert forced[0].op == "replace"


# --- stateful resources, collisions, blockers ------------------------------------------


def test_a_warm_node_group_replaced_is_a_finding_unless_the_change_says_so() -> None:
    before, after = [gpu_pool()], [gpu_pool(instanceTypes=["p5en.48xlarge"])]
    [finding] = change_findings(compare(before, after), before)
    assert finding.check == "stateful-replaced"
    assert "--allow-replace gpu" in finding.message
    assert change_findings(compare(before, after), before, allow=["gp*"]) == []
    cold = [gpu_pool(scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 0})]
    assert change_findings(compare(cold, [gpu_pool(instanceTypes=["g6.xlarge"],
                                                   scalingConfig={"minSize": 0})]), cold) == []


def test_a_replaced_resource_with_a_fixed_name_collides_unless_deleted_first() -> None:
    """EKS names a node group once per cluster: create-before-delete makes a second `gpu`."""
    before, after = [gpu_pool(nodeGroupName="gpu")], [gpu_pool(nodeGroupName="gpu", diskSize=200)]
    [finding] = change_findings(compare(before, after), before, allow=["gpu"])
    assert finding.check == "replace-collides" and "NodeGroup already exists" in finding.message
    role = "aws:iam/role:Role"
    old, new = res(role, "r", {"name": "r", "path": "/a/"}), res(role, "r", {"name": "r",
                                                                                "path": "/b/"})
    [finding] = change_findings(compare([old], [new]), [old])
    assert finding.check == "replace-collides" and "EntityAlreadyExists" in finding.message
    new["options"]["delete_before_replace"] = True
    assert change_findings(compare([old], [new]), [old]) == []


def test_deleting_a_bucket_of_data_is_a_finding_and_lists_emptying_it_first() -> None:
    bucket = res("aws:s3/bucket:Bucket", "weights", {"bucket": "w-111122223333",
                                                      "forceDestroy": False})
    changes = compare([bucket], [])
    assert [f.check for f in change_findings(changes, [bucket])] == ["stateful-deleted"]
    [blocker] = blockers(changes)
    assert "BucketNotEmpty" in blocker.what
    assert "aws s3 rm s3://w-111122223333 --recursive" in blocker.step


def test_a_bucket_deleted_with_retain_on_delete_is_left_in_place_and_blocks_nothing() -> None:
    """A retiring region's log bucket: the engine drops it from the stack and leaves it."""
    bucket = res("aws:s3/bucket:Bucket", "logs", {"bucket": "l-111122223333"},
                 retain_on_delete=True)
    changes = compare([bucket], [])
    assert change_findings(changes, [bucket]) == [] and blockers(changes) == []


def test_the_records_of_a_region_the_plan_retires_go_as_the_plan_says() -> None:
    """regions[].retire says the change means the region's resources go: no --allow-replace
    needed for them, and a record of another region is still a finding."""
    records = [res("aws:route53/record:Record", f"chat-dns-{r}", {"name": "chat.example.com"})
               for r in ("eu-north-1", "us-east-1")]
    preview = preview_change("prod.global", records, [], "HEAD~1", retiring=["eu-north-1"])
    assert [(f.check, f.resource) for f in preview.findings] == [
        ("stateful-deleted", "chat-dns-us-east-1")]


def test_an_ingress_behind_a_protected_alb_lists_turning_protection_off() -> None:
    ingress = res("kubernetes:networking.k8s.io/v1:Ingress", "ing", {"metadata": {
        "name": "ing", "annotations": {
            "alb.ingress.kubernetes.io/load-balancer-attributes":
                "deletion_protection.enabled=true,idle_timeout.timeout_seconds=656"}}})
    [blocker] = blockers(compare([ingress], []))
    assert "deletion protection" in blocker.what
    assert blocker.step.startswith("turn deletion protection off first")


def test_a_finalized_object_deleted_with_its_controller_must_wait_for_it() -> None:
    release = res("kubernetes:helm.sh/v3:Release", "keda", {"chart": "keda", "name": "keda"})
    scaled = res("kubernetes:keda.sh/v1alpha1:ScaledObject", "so", {"metadata": {"name": "so"}})
    # (the keda chart installs the CRDs: deleting it is a stateful delete, allowed here)
    [finding] = change_findings(compare([release, scaled], []), [release, scaled], ["keda"])
    assert finding.check == "delete-order" and "finalizer.keda.sh" in finding.message
    scaled["options"]["depends_on_urns"] = [release["urn"]]
    assert change_findings(compare([release, scaled], []), [release, scaled], ["keda"]) == []


# --- permissions narrowed before the rollout ------------------------------------------


def reader_policy(prefix: str) -> str:
    return json.dumps({"Statement": [{
        "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::w/{prefix}/*"}]})


def weights_readers(prefixes: list[str], image: str) -> list[dict[str, Any]]:
    role = res("aws:iam/role:Role", "reader", {"name": "reader"})
    policy = res("aws:iam/rolePolicy:RolePolicy", "reader", {
        "role": "reader", "policy": json.dumps({"Statement": [{
            "Effect": "Allow", "Action": "s3:GetObject",
            "Resource": [f"arn:aws:s3:::w/{p}/*" for p in prefixes]}]})},
        property_dependency_urns={"role": [role["urn"]]})
    association = res("aws:eks/podIdentityAssociation:PodIdentityAssociation", "reader", {
        "namespace": "llm", "serviceAccount": "vllm", "roleArn": "arn:aws:iam::1:role/reader"},
        property_dependency_urns={"roleArn": [role["urn"]]})
    deployment = res(DEPLOYMENT, "vllm", {
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {"template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {
            "serviceAccountName": "vllm", "containers": [{"image": image}]}}}})
    return [role, policy, association, deployment]


def test_a_reader_rescoped_at_the_start_of_its_rollout_is_a_finding() -> None:
    """The weights revision moves from rev-a to rev-b: pods of rev-a read rev-a/ until the
    rollout replaces them, but the policy says rev-b/ only from the first step of the update."""
    before = weights_readers(["rev-a"], "vllm:a")
    after = weights_readers(["rev-b"], "vllm:b")
    [finding] = change_findings(compare(before, after), before)
    assert finding.check == "permission-narrowed"
    assert "s3:GetObject on arn:aws:s3:::w/rev-a/*" in finding.message
    assert "vllm's pods (service account vllm)" in finding.message


def test_readers_that_keep_both_prefixes_through_the_rollout_are_fine() -> None:
    before = weights_readers(["rev-a"], "vllm:a")
    both = weights_readers(["rev-a", "rev-b"], "vllm:b")
    assert change_findings(compare(before, both), before) == []
    narrowed_later = weights_readers(["rev-b"], "vllm:b")  # the next change, pods unchanged
    assert change_findings(compare(both, narrowed_later), both) == []


def test_a_network_policy_rule_dropped_while_its_pods_roll_is_a_finding() -> None:
    def policy(ports: list[int], image: str) -> list[dict[str, Any]]:
        netpol = res("kubernetes:networking.k8s.io/v1:NetworkPolicy", "vllm", {
            "metadata": {"name": "vllm", "namespace": "llm"},
            "spec": {"podSelector": {"matchLabels": {"app": "vllm"}},
                     "policyTypes": ["Egress"],
                     "egress": [{"ports": [{"port": p, "protocol": "TCP"} for p in ports]}]}})
        return [netpol, weights_readers(["a"], image)[-1]]

    before = policy([443, 8443], "vllm:a")
    [finding] = change_findings(compare(before, policy([443], "vllm:b")), before)
    assert finding.check == "permission-narrowed" and "8443" in finding.message
    assert change_findings(compare(before, policy([443], "vllm:a")), before) == []


# --- the report -----------------------------------------------------------------------


def test_the_text_lists_each_change_with_its_reason_and_the_json_keys_are_added() -> None:
    before, after = [gpu_pool()], [gpu_pool(instanceTypes=["p5en.48xlarge"])]
    preview = preview_change("t", before, after, "origin/main", allow=["gpu"])
    assert preview.counts() == {"create": 0, "update": 0, "replace": 1, "delete": 0}
    text = preview.text()
    assert "+- replace aws:eks/nodeGroup:NodeGroup gpu: instanceTypes[0]" in text
    assert "replace: instanceTypes: terraform-provider-aws" in text
    [annotated] = preview.annotate(after)
    assert annotated["inputs"] == after[0]["inputs"]  # every key of preview --json stays
    assert annotated["change"]["op"] == "replace"
    assert annotated["change"]["replace_because"][0]["property"] == "instanceTypes"


def test_a_deleted_region_stack_lists_the_global_stack_first_then_its_blockers() -> None:
    cluster = res("aws:eks/cluster:Cluster", "eu", {"name": "eu"})
    bucket = res("aws:s3/bucket:Bucket", "weights", {"bucket": "w"})
    preview = preview_change("prod.eu-north-1", [cluster, bucket], [], "HEAD~1", allow=["*"])
    assert preview.findings == []
    first, *middle, last = preview.steps
    assert first.startswith("global stack first: `pulumi up --stack prod.global`")
    assert any("aws s3 rm s3://w" in step for step in middle)
    assert last.startswith("`pulumi destroy --stack prod.eu-north-1`")


def test_a_first_rollout_runs_the_stacks_in_the_rollout_order() -> None:
    order = ["prod.global", "prod.us-east-1"]
    preview = preview_change("prod", [], [gpu_pool()], "nothing", order=order)
    assert preview.counts()["create"] == 1
    assert preview.steps == ["a first rollout: `pulumi up --stack prod.global`",
                             "a first rollout: `pulumi up --stack prod.us-east-1`"]


def test_a_from_that_is_neither_a_file_nor_a_revision_is_an_error_naming_both(
    capsys: Any,
) -> None:
    from llmfleet.cli import main

    code = main(["preview", "--stack", "dev", "--from", "no-such-revision-or-file"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--from no-such-revision-or-file: neither a file nor a revision git can read" in err
    assert "Traceback" not in err
