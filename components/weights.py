"""ModelStore: where a region's pods get the weights and the image from.

- The weight bucket (`cold_start.weights_bucket`: one per region, private, versioned off,
  encrypted at rest by S3's default), staged once (README, "Before the first deploy");
  every pod streams `RegionPlan.cold_start.weights_uri` from it. A role trusted by EKS Pod
  Identity may only list that prefix and read its objects; a `PodIdentityAssociation` gives
  it to the vLLM ServiceAccount.
- With `startup.ecr_account_id`: an ECR pull-through cache rule for Docker Hub (prefix
  `images.ECR_PREFIX`) with the credentials Secret ECR requires for Docker Hub (created
  empty: put a Docker Hub username and access token in it, README), and on every node
  role the two actions a first pull through the cache needs (create the repository,
  import the upstream image), scoped to the prefix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import iam
from components.iam import partition
from llmfleet.fleetplan.cold_start import weights_bucket
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.serving import DOCKER_HUB, ECR_PREFIX
from llmfleet.plan.cluster import Startup


def read_weights_policy(bucket_arn: str, prefix: str) -> str:
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListTheModelPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}},
            },
            {
                "Sid": "ReadTheModel",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"{bucket_arn}/{prefix}/*",
            },
        ],
    }
    return json.dumps(doc, sort_keys=True)


def pull_through_policy(region: str, account: str) -> str:
    """What a node needs beyond ECR read-only to pull through the cache the first time."""
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PullThroughCache",
                "Effect": "Allow",
                "Action": ["ecr:CreateRepository", "ecr:BatchImportUpstreamImage"],
                "Resource": f"arn:{partition(region)}:ecr:{region}:{account}:repository/"
                f"{ECR_PREFIX}/*",
            }
        ],
    }
    return json.dumps(doc, sort_keys=True)


@dataclass(frozen=True)
class ModelStoreArgs:
    """fleet_plan, region_plan: bucket name, model prefix, ServiceAccount, startup inputs.
    cluster_name: the EKS cluster of the Pod Identity association.
    node_roles: roles of every GPU node (floor node group and Karpenter's).
    depends_on: the Pod Identity agent add-on.
    """

    fleet_plan: FleetPlan
    region_plan: RegionPlan
    cluster_name: pulumi.Input[str]
    node_roles: Sequence[aws.iam.Role]
    depends_on: Sequence[pulumi.Resource] = ()


class ModelStore(pulumi.ComponentResource):
    bucket: aws.s3.Bucket

    def __init__(
        self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:ModelStore", name, None, opts)
        fp, rp = args.fleet_plan, args.region_plan
        startup: Startup = fp.startup
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = aws.s3.Bucket(
            f"{name}-weights",
            bucket=weights_bucket(fp.name, rp.region, startup.ecr_account_id),
            force_destroy=False,
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-weights",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        prefix = rp.cold_start.weights_uri.split("/", 3)[3]
        reader = aws.iam.Role(
            f"{name}-reader",
            assume_role_policy=iam.pod_identity_trust(),
            description=f"vLLM pods of {fp.name} in {rp.region}: read the weights",
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-reader",
            role=reader.id,
            policy=self.bucket.arn.apply(lambda arn: read_weights_policy(arn, prefix)),
            opts=child,
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-reader",
            cluster_name=args.cluster_name,
            namespace=rp.workload.namespace,
            service_account=rp.workload.name,
            role_arn=reader.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        if startup.ecr_account_id:
            secret = aws.secretsmanager.Secret(
                f"{name}-docker-hub",
                name=f"ecr-pullthroughcache/{fp.name}-docker-hub",
                description="Docker Hub username and access token for the ECR pull-through "
                "cache (put the value in by hand; llmfleet never holds it)",
                opts=child,
            )
            aws.ecr.PullThroughCacheRule(
                f"{name}-docker-hub",
                ecr_repository_prefix=ECR_PREFIX,
                upstream_registry_url=DOCKER_HUB,
                credential_arn=secret.arn,
                opts=child,
            )
            policy = pull_through_policy(rp.region, startup.ecr_account_id)
            for k, role in enumerate(args.node_roles):
                aws.iam.RolePolicy(
                    f"{name}-pull-through-{k}", role=role.id, policy=policy, opts=child
                )
        self.register_outputs({"bucket": self.bucket.bucket, "weights": rp.cold_start.weights_uri})
