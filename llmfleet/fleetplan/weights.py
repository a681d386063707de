"""Weights staged by the program: each region's copy of the served checkpoint, at a pinned
revision, with a manifest of what was copied and how to check it.

A Kubernetes Job per region (`weight-staging.yaml`, run on the system nodes before the
Deployment is created) downloads the served checkpoint at `revision` from Hugging Face,
`STAGING_WORKERS` files at a time, checks each file against the hashes Hugging Face publishes
for it (SHA-256 for LFS files, the git blob id for the rest), uploads it to
`s3://<bucket>/<prefix>/` with an S3 SHA-256 checksum and its SHA-256 as object metadata, and
writes `manifest_key` last. It resumes: a file already in S3 whose recorded SHA-256 is the
published one is not fetched again, so a retried or restarted Job (backoffLimit) continues
where it stopped. Its deadline counts the download, the hash and the upload of every file at
the assumed rates below, over the workers: the revision and, per file, its
size, its SHA-256 and the checksum S3 stored. The Job is idempotent (a complete manifest of
the same revision: nothing to do) and named after the revision, so a new revision stages
beside the old one while the old one still serves. Every vLLM pod runs an init container
first that reads the manifest, refuses a revision other than the plan's, and compares every
object's size and S3 checksum with it (HeadObject, no download): a missing, partial or
replaced file stops the pod before the GPU loads anything.

The prefix carries the revision (`<repo>/<revision>`): two revisions never share keys, so
restaging can never change files under running pods. Without `model.revision` (allowed
outside production) the Job stages the repository's `main` once.

Bucket names carry the account (`plan.account_id`): S3 names are global, and a name another
account holds fails with BucketAlreadyExists. A plan without `account_id` (a new user's first
stack) names it `ACCOUNT_PLACEHOLDER`, which the Pulumi program replaces with the deploying
account (`aws.get_caller_identity`) in every name and rendered document before it creates
anything: a real run always knows the caller's account."""

from __future__ import annotations

import math

from pydantic import Field

from llmfleet.data import Data
from llmfleet.fleetplan.workload import NODE_LABEL_PREFIX, Workload
from llmfleet.plan.schema import CapacityPlan

MANIFEST_NAME = "llmfleet-manifest.json"
MAIN_BRANCH = "main"
IGNORE_PATTERNS = ["original/*", "*.pth", "*.pt", "*.bin", "*.gguf", "*.onnx", "*.msgpack",
                   "*.h5", ".gitattributes"]
"""Files a safetensors checkpoint also carries that vLLM's runai_streamer never reads
(consolidated .pth copies, other frameworks' weights): not downloaded, not staged."""
STAGING_WORKERS = 2
"""Files in flight at once: one downloads while another hashes and uploads (the Job's two
cores on an m6i.xlarge system node, beside the controllers)."""
SCRATCH_GIB = 20
"""The Job's scratch volume holds one file per worker (a shard is a few GB; the largest
safetensors shard of the catalog's checkpoints is under 10 GB)."""
HF_DOWNLOAD_GIB_PER_S = 0.1
"""Assumed, not measured: one stream from Hugging Face's CDN through a NAT gateway at about
100 MiB/s. Only the Job's time limit depends on these three rates (twice the estimate)."""
SHA256_GIB_PER_S = 0.5
"""Assumed, not measured: hashlib's SHA-256 on one m6i core, reading the scratch volume."""
S3_UPLOAD_GIB_PER_S = 0.2
"""Assumed, not measured: boto3's multipart upload of one file through the S3 endpoint."""
MIN_TIMEOUT_S = 1800
IMAGE_CHECKS = ("CKV_K8S_43", "CKV_K8S_15")
"""checkov's image-by-digest and pull-policy checks: the Job runs the server's image, so it
fails them exactly when the Deployment does (serving.scanner_skips)."""
JOB_CPU = STAGING_WORKERS
JOB_MEMORY_GIB = 2
"""The Job shares the system nodes (m6i.xlarge) with the controllers: a core per worker; the
files themselves go to the scratch volume, not memory."""
VERIFY_CPU = 1
VERIFY_MEMORY_GIB = 1


class WeightStaging(Data):
    """One region's staged checkpoint and the Job that stages it."""

    bucket: str = Field(description="The region's weight bucket (name carries the account).")
    prefix: str = Field(description="Where the checkpoint lives in it: <repo>/<revision>.")
    reader_prefixes: list[str] = Field(
        description="What the serving pods may read: the revision's prefix and, during a "
        "rollout to it (model.previous_revision), the previous one's."
    )
    repo: str = Field(description="The Hugging Face repository served (levers.checkpoint).")
    revision: str = Field(description="The commit staged (model.revision), or main.")
    pinned: bool = Field(description="False: the branch main, not a commit (development).")
    manifest_key: str = Field(description="The manifest's S3 key, written last.")
    job_name: str = Field(description="Kubernetes Job; its name carries the revision.")
    service_account: str = Field(description="The Job's ServiceAccount (its Pod Identity).")
    labels: dict[str, str] = Field(description="The Job's pods (its NetworkPolicy selects them).")
    node_selector: dict[str, str] = Field(description="The system pool: CPU nodes.")
    ignore_patterns: list[str]
    scratch_gib: int
    timeout_s: int = Field(description="The Job's deadline and how long `pulumi up` waits.")
    workers: int = Field(description="Files in flight at once (download, hash, upload).")
    job_cpu: int
    job_memory_gib: int
    verify_cpu: int
    verify_memory_gib: int
    scanner_skips: dict[str, str] = Field(
        description="checkov checks the Job fails on purpose, each with the reason."
    )
    reasons: list[str]


ACCOUNT_PLACEHOLDER = "{account}"
"""Stands for the deploying account in names of a plan without account_id; the program
replaces it (`components.account.with_account`)."""


def account_of(plan: CapacityPlan) -> str:
    """The account global names carry: plan.account_id, else the ECR cache's account, else
    the placeholder for the deploying account."""
    return plan.account_id or plan.startup.ecr_account_id or ACCOUNT_PLACEHOLDER


def weights_bucket(fleet_name: str, region: str, account_id: str) -> str:
    """The region's weight bucket (S3 names are global: the account id makes it unique)."""
    return f"{fleet_name}-weights-{region}-{account_id}"


def weights_prefix(repo: str, revision: str | None) -> str:
    return f"{repo}/{revision or MAIN_BRANCH}"


def build_weight_staging(
    plan: CapacityPlan, region: str, repo: str, weights_gib: float, workload: Workload,
    image_skips: dict[str, str],
) -> WeightStaging:
    revision = plan.model.revision or MAIN_BRANCH
    prefix = weights_prefix(repo, plan.model.revision)
    previous = plan.model.previous_revision
    readers = [prefix] + ([weights_prefix(repo, previous)] if previous else [])
    per_gib_s = 1 / HF_DOWNLOAD_GIB_PER_S + 1 / SHA256_GIB_PER_S + 1 / S3_UPLOAD_GIB_PER_S
    estimate_s = weights_gib * per_gib_s / STAGING_WORKERS
    timeout = max(MIN_TIMEOUT_S, math.ceil(2 * estimate_s / 60) * 60)
    account = account_of(plan)
    reasons = [
        f"the Job downloads {weights_gib:.1f} GiB of {repo}@{revision[:12]}, "
        f"{STAGING_WORKERS} files at a time, into a {SCRATCH_GIB} GiB scratch volume, checks "
        "each against Hugging Face's hashes and uploads it with an S3 SHA-256 checksum; the "
        "manifest goes last; a retry skips the files already staged",
        f"deadline {timeout} s: twice {estimate_s / 60:.0f} min to download, hash and upload "
        f"each GiB at an assumed {HF_DOWNLOAD_GIB_PER_S:g}, {SHA256_GIB_PER_S:g} and "
        f"{S3_UPLOAD_GIB_PER_S:g} GiB/s (not measured) over {STAGING_WORKERS} workers, at "
        f"least {MIN_TIMEOUT_S // 60} min",
        "every vLLM pod checks the manifest's revision and each object's size and S3 "
        "checksum before it starts (an init container; no download)",
    ]
    if previous:
        reasons.append(
            f"rolling {repo} from {previous[:12]} to {revision[:12]}: the serving pods may read "
            "both prefixes until model.previous_revision is removed (a pod restarting before "
            "the new Job finishes keeps its weights); the Job writes the new one only"
        )
    if plan.model.revision is None:
        reasons.append("model.revision unset: the branch main is staged once and never "
                       "restaged; pin a commit to know what is served")
    if account == ACCOUNT_PLACEHOLDER:
        reasons.append(f"account_id unset: the bucket name carries {ACCOUNT_PLACEHOLDER}, "
                       "which the program replaces with the deploying account "
                       "(aws.get_caller_identity); give account_id to pin it")
    return WeightStaging(
        bucket=weights_bucket(plan.name, region, account),
        prefix=prefix,
        reader_prefixes=readers,
        repo=repo,
        revision=revision,
        pinned=plan.model.revision is not None,
        manifest_key=f"{prefix}/{MANIFEST_NAME}",
        job_name=f"{workload.name}-stage-{revision[:12]}",
        service_account=f"{workload.name}-stager",
        labels={**workload.labels, "app.kubernetes.io/component": "weight-staging"},
        node_selector={f"{NODE_LABEL_PREFIX}/pool": "system"},
        ignore_patterns=list(IGNORE_PATTERNS),
        scratch_gib=SCRATCH_GIB,
        timeout_s=timeout,
        workers=STAGING_WORKERS,
        job_cpu=JOB_CPU,
        job_memory_gib=JOB_MEMORY_GIB,
        verify_cpu=VERIFY_CPU,
        verify_memory_gib=VERIFY_MEMORY_GIB,
        scanner_skips=dict(sorted({
            **{k: v for k, v in image_skips.items() if k in IMAGE_CHECKS},
            "CKV_K8S_40": f"uid {workload.run_as_user} is the vllm user of the image the Job "
            "shares with the server (HOME is the scratch volume here)",
        }.items())),
        reasons=reasons,
    )
