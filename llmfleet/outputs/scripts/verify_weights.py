"""Check the region's staged checkpoint before vLLM loads it (llmfleet's init container in
every vLLM pod; see fleetplan/weights.py).

Reads the manifest the staging Job wrote last, refuses a revision other than the plan's, and
compares every listed object's size and S3 SHA-256 checksum (HeadObject with checksum mode,
no download) with the manifest. A missing manifest (staging not finished), a missing,
partial or replaced object fails the pod before a GPU loads anything.

Environment: LLMFLEET_BUCKET, LLMFLEET_PREFIX, LLMFLEET_MANIFEST_KEY, LLMFLEET_REVISION.
Exit status 0: the copy matches; 1: it does not (the message says what)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import boto3


def problems(s3: Any, bucket: str, prefix: str, manifest_key: str, revision: str) -> list[str]:
    try:
        body = s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return [f"no manifest at s3://{bucket}/{manifest_key}: the staging Job has not finished"]
    manifest = json.loads(body)
    if manifest.get("requested_revision") != revision:
        return [f"the manifest holds revision {manifest.get('requested_revision')}, the plan "
                f"serves {revision}"]
    if manifest.get("prefix") != prefix:
        return [f"the manifest is of prefix {manifest.get('prefix')}, not {prefix}"]
    found = []
    for entry in manifest["files"]:
        key = f"{prefix}/{entry['path']}"
        try:
            head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except s3.exceptions.ClientError as e:
            found.append(f"{key}: {e.response['Error'].get('Code', 'error')}")
            continue
        if head["ContentLength"] != entry["size"]:
            found.append(f"{key}: {head['ContentLength']} bytes, the manifest says {entry['size']}")
        elif head.get("ChecksumSHA256") != entry["s3_checksum_sha256"]:
            found.append(f"{key}: S3 checksum {head.get('ChecksumSHA256')}, the manifest says "
                         f"{entry['s3_checksum_sha256']}")
    return found


def main() -> int:
    env = os.environ
    bucket, prefix = env["LLMFLEET_BUCKET"], env["LLMFLEET_PREFIX"]
    found = problems(boto3.client("s3"), bucket, prefix, env["LLMFLEET_MANIFEST_KEY"],
                     env["LLMFLEET_REVISION"])
    for line in found:
        print(f"weights check failed: {line}", file=sys.stderr)
    if not found:
        print(f"weights verified: s3://{bucket}/{prefix} matches its manifest")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
