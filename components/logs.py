"""LogBucket: a region's log bucket (`RegionPlan.logs_bucket`, its name carrying the account):
the ALB's access logs under `alb/` and a new VPC's flow logs under `vpc-flow-logs/`.

Private, SSE-S3 (the only encryption ALB access logs support: ELB user guide,
enable-access-logging, "Bucket requirements"), TLS only, kept `retention_days`. Its policy
lets the two log deliveries write their prefix only:

- ALB access logs: regions opened before December 2021 deliver from the region's Elastic
  Load Balancing account (`aws.elb.get_service_account`); later ones from the service
  principal `logdelivery.elasticloadbalancing.amazonaws.com` (the provider's note on
  getServiceAccount: "For AWS Regions opened since Jakarta (ap-southeast-3) in December 2021,
  AWS documents that a service principal name should be used").
- VPC flow logs: `delivery.logs.amazonaws.com` (VPC user guide, flow-logs-s3 "Amazon S3
  bucket permissions for flow logs"), limited to this account's deliveries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.account import with_account
from components.iam import partition, tls_only_statement
from llmfleet.fleetplan.entry_point import ACCESS_LOG_PREFIX

FLOW_LOG_PREFIX = "vpc-flow-logs"
ELB_LOG_DELIVERY = "logdelivery.elasticloadbalancing.amazonaws.com"
LOG_DELIVERY = "delivery.logs.amazonaws.com"
REGIONS_WITH_ELB_SERVICE_PRINCIPAL = frozenset(
    {
        "ap-southeast-3",  # Jakarta, 2021-12
        "me-central-1",  # UAE, 2022-08
        "eu-central-2",  # Zurich, 2022-11
        "eu-south-2",  # Spain, 2022-11
        "ap-south-2",  # Hyderabad, 2022-11
        "ap-southeast-4",  # Melbourne, 2023-01
        "il-central-1",  # Tel Aviv, 2023-08
        "ca-west-1",  # Calgary, 2023-12
        "ap-southeast-5",  # Malaysia, 2024-08
        "ap-southeast-7",  # Thailand, 2025-01
        "mx-central-1",  # Mexico, 2025-01
    }
)
"""Regions opened since Jakarta (December 2021), from AWS's region launch announcements
(launch months as commented; not read from one AWS list)."""
RETENTION_DAYS = 90


def log_bucket_policy(
    bucket_arn: str, region: str, account: str, elb_account_arn: str | None
) -> str:
    """Writes of the ALB's access logs and the VPC's flow logs to their prefixes; TLS only."""
    alb_principal = (
        {"Service": ELB_LOG_DELIVERY} if elb_account_arn is None else {"AWS": elb_account_arn}
    )
    source = {
        "StringEquals": {"aws:SourceAccount": account},
        "ArnLike": {"aws:SourceArn": f"arn:{partition(region)}:logs:{region}:{account}:*"},
    }
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AlbAccessLogs",
                "Effect": "Allow",
                "Principal": alb_principal,
                "Action": "s3:PutObject",
                "Resource": f"{bucket_arn}/{ACCESS_LOG_PREFIX}/AWSLogs/{account}/*",
            },
            {
                "Sid": "AWSLogDeliveryWrite",
                "Effect": "Allow",
                "Principal": {"Service": LOG_DELIVERY},
                "Action": "s3:PutObject",
                "Resource": f"{bucket_arn}/{FLOW_LOG_PREFIX}/AWSLogs/{account}/*",
                "Condition": {
                    **source,
                    "StringEquals": {
                        "aws:SourceAccount": account,
                        "s3:x-amz-acl": "bucket-owner-full-control",
                    },
                },
            },
            {
                "Sid": "AWSLogDeliveryAclCheck",
                "Effect": "Allow",
                "Principal": {"Service": LOG_DELIVERY},
                "Action": ["s3:GetBucketAcl", "s3:ListBucket"],
                "Resource": bucket_arn,
                "Condition": source,
            },
            tls_only_statement(bucket_arn),
        ],
    }
    return json.dumps(doc, sort_keys=True)


@dataclass(frozen=True)
class LogBucketArgs:
    """bucket: RegionPlan.logs_bucket. region, account_id: the region and the plan's account.
    aws_provider: the region's."""

    bucket: str
    region: str
    account_id: pulumi.Input[str]
    """The deploying account; it also replaces the placeholder in `bucket` (components.account)."""
    aws_provider: aws.Provider
    retention_days: int = RETENTION_DAYS
    retiring: bool = False
    """A retiring region: `pulumi destroy` leaves the bucket (its logs expire on their own
    lifecycle) rather than fail on a non-empty bucket."""


class LogBucket(pulumi.ComponentResource):
    """Children `{name}` (bucket: `bucket`), its public access block, encryption, lifecycle
    and policy (`policy`: what the ALB's access logs wait for)."""

    bucket: aws.s3.Bucket
    policy: aws.s3.BucketPolicy

    def __init__(
        self, name: str, args: LogBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmfleet:index:LogBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)
        self.bucket = aws.s3.Bucket(
            name, bucket=with_account(args.bucket, args.account_id), force_destroy=False,
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(retain_on_delete=args.retiring)
            ),
        )
        block = aws.s3.BucketPublicAccessBlock(
            name,
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            name,
            bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            name,
            bucket=self.bucket.id,
            rules=[
                {
                    "id": "expire-logs",
                    "status": "Enabled",
                    "filter": {},
                    "expiration": {"days": args.retention_days},
                }
            ],
            opts=child,
        )
        if args.region in REGIONS_WITH_ELB_SERVICE_PRINCIPAL:
            elb_arn: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        else:
            elb_arn = aws.elb.get_service_account_output(
                region=args.region, opts=pulumi.InvokeOutputOptions(provider=args.aws_provider)
            ).arn
        document = pulumi.Output.all(self.bucket.arn, elb_arn, args.account_id).apply(
            lambda a: log_bucket_policy(a[0], args.region, a[2], a[1])
        )
        self.policy = aws.s3.BucketPolicy(
            name,
            bucket=self.bucket.id,
            policy=document,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[block])),
        )
        self.register_outputs({"bucket": self.bucket.bucket})
