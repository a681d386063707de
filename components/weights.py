"""ModelStore: where a region's pods get the weights and the image from.

- The weight bucket (`RegionPlan.staging.bucket`: one per region, its name carrying the
  account, private, SSE-S3, TLS only), which the weight-staging Job fills with the served
  checkpoint at the pinned revision and its manifest (`llmfleet.fleetplan.weights`); every
  pod streams `RegionPlan.cold_start.weights_uri` from it. Two roles trusted by EKS Pod
  Identity, each given to one ServiceAccount by a `PodIdentityAssociation` that waits for
  the cluster's agent add-on: the vLLM pods' may list the revision's prefix and read its
  objects (and, during a rollout to a new revision, the previous revision's:
  `WeightStaging.reader_prefixes`, so a pod restarting before the new Job finishes keeps its
  weights); the staging Job's may also write them (and nothing outside the prefix).
- With `startup.ecr_account_id`: the credentials Secret ECR requires for a pull-through cache
  of Docker Hub (created empty: put a Docker Hub username and access token in it; llmfleet
  never holds them). Once the plan says it is filled (`startup.pull_through_ready`, then the
  secret carries `CREDENTIALS_TAG`): the cache rule (prefix `serving.ECR_PREFIX`) and on every
  node role the two actions a first pull through the cache needs (create the repository,
  import the upstream image), scoped to the prefix, and the pods pull through it. Not before:
  ECR reads the secret when it creates the rule (ECR user guide, "Creating a pull through
  cache rule": the credentials are stored first; CreatePullThroughCacheRule fails with
  UnableToAccessSecretException or UnableToDecryptSecretValueException), so a rule over the
  empty secret would fail the first `pulumi up`, and a pod pulling through it would sit in
  ErrImagePull to its deadline. Until then the pods pull from Docker Hub directly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_aws as aws

from components import iam
from components.account import with_account
from components.iam import partition
from llmfleet.fleetplan.fleet import FleetPlan
from llmfleet.fleetplan.region import RegionPlan
from llmfleet.fleetplan.serving import DOCKER_HUB, ECR_PREFIX
from llmfleet.plan.cluster import Startup

CREDENTIALS_TAG = "llmfleet.io/credentials"
"""On the pull-through cache's secret once the plan says it holds credentials
(`startup.pull_through_ready`): `filled-by-hand` (the preview's pull-through check reads it)."""


def read_weights_policy(bucket_arn: str, prefixes: Sequence[str]) -> str:
    """The serving pods': list and read the revisions' prefixes (the plan's, and during a
    rollout the previous one's: `WeightStaging.reader_prefixes`)."""
    listed = sorted({p for prefix in prefixes for p in (f"{prefix}/*", prefix)})
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListTheModelPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": listed}},
            },
            {
                "Sid": "ReadTheModel",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": sorted(f"{bucket_arn}/{prefix}/*" for prefix in prefixes),
            },
        ],
    }
    return json.dumps(doc, sort_keys=True)


def stage_weights_policy(bucket_arn: str, prefix: str) -> str:
    """The staging Job's: read and write the revision's prefix (multipart uploads included),
    nothing else of the bucket."""
    doc = json.loads(read_weights_policy(bucket_arn, [prefix]))
    doc["Statement"].append(
        {
            "Sid": "WriteTheModel",
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": f"{bucket_arn}/{prefix}/*",
        }
    )
    return json.dumps(doc, sort_keys=True)


def tls_only_policy(bucket_arn: str) -> str:
    """Refuse every request to the bucket that is not over TLS."""
    doc = {"Version": "2012-10-17", "Statement": [iam.tls_only_statement(bucket_arn)]}
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
    account: pulumi.Input[str] = ""
    """The deploying account (`components.account`): a plan without account_id names the
    bucket with the placeholder this replaces."""


class ModelStore(pulumi.ComponentResource):
    """Children: the bucket `{name}-weights` (public access block, SSE-S3, TLS-only policy),
    the roles, policies and Pod Identity associations `{name}-reader` (vLLM) and
    `{name}-stager` (the staging Job: `stager_association`), and the image cache's secret
    `{name}-docker-hub` (its rule and node policies once the secret is filled)."""

    bucket: aws.s3.Bucket
    stager_association: aws.eks.PodIdentityAssociation
    reader_association: aws.eks.PodIdentityAssociation

    def __init__(
        self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:ModelStore", name, None, opts)
        fp, rp = args.fleet_plan, args.region_plan
        startup: Startup = fp.startup
        child = pulumi.ResourceOptions(parent=self)
        staging = rp.staging
        self.bucket = aws.s3.Bucket(
            f"{name}-weights",
            bucket=with_account(staging.bucket, args.account),
            # a copy of the checkpoint: a retiring region's destroy may empty it
            force_destroy=rp.retiring,
            opts=child,
        )
        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-weights",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights",
            bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-weights",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(tls_only_policy),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block]),
        )
        roles = {
            "reader": (rp.workload.name, "read the weights",
                       partial(read_weights_policy, prefixes=staging.reader_prefixes)),
            "stager": (staging.service_account, "stage the weights",
                       partial(stage_weights_policy, prefix=staging.prefix)),
        }
        associations: dict[str, aws.eks.PodIdentityAssociation] = {}
        for kind, (account, what, document) in roles.items():
            role = aws.iam.Role(
                f"{name}-{kind}",
                assume_role_policy=iam.pod_identity_trust(),
                description=f"{account} of {fp.name} in {rp.region}: {what}",
                opts=child,
            )
            grant = aws.iam.RolePolicy(
                f"{name}-{kind}",
                role=role.id,
                policy=self.bucket.arn.apply(document),
                opts=child,
            )
            associations[kind] = aws.eks.PodIdentityAssociation(
                f"{name}-{kind}",
                cluster_name=args.cluster_name,
                namespace=rp.workload.namespace,
                service_account=account,
                role_arn=role.arn,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, grant]),
            )
        self.reader_association = associations["reader"]
        self.stager_association = associations["stager"]
        if startup.ecr_account_id:
            secret = aws.secretsmanager.Secret(
                f"{name}-docker-hub",
                name=f"ecr-pullthroughcache/{fp.name}-docker-hub",
                description="Docker Hub username and access token for the ECR pull-through "
                "cache (put the value in by hand; llmfleet never holds it)",
                tags={CREDENTIALS_TAG: "filled-by-hand"} if startup.pull_through_ready else {},
                opts=child,
            )
            if startup.pull_through_ready:
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
