"""Stage a Hugging Face checkpoint into the region's S3 bucket at a pinned revision, with a
manifest of what was copied (llmfleet's weight-staging Job; see fleetplan/weights.py).

Runs in the vLLM image (python3, huggingface_hub, boto3) with the Job's Pod Identity
credentials. LLMFLEET_WORKERS files at a time, each: download into the scratch volume, check
it against the hashes Hugging Face publishes (SHA-256 for LFS files, the git blob id for the
others), upload it with an S3 SHA-256 checksum and its SHA-256 as object metadata, delete it.
A file already in S3 whose recorded SHA-256 (and size) is what Hugging Face publishes is not
fetched again: a retried Job resumes. The manifest goes last, so a manifest means every file
is there. A manifest already holding the requested revision: nothing to do.

Environment: LLMFLEET_REPO, LLMFLEET_REVISION (a commit, or a branch such as main),
LLMFLEET_BUCKET, LLMFLEET_PREFIX, LLMFLEET_MANIFEST_KEY, LLMFLEET_IGNORE (JSON list of glob
patterns), LLMFLEET_SCRATCH (a directory), LLMFLEET_WORKERS (files in flight, default 1);
HF_TOKEN_PATH (optional, gated repositories).
Exit status 0: staged (or already staged); 1: a check failed (the message says which)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from huggingface_hub import HfApi, hf_hub_download

MANIFEST_FORMAT = 1
CHUNK = 8 * 2**20
SHA256_METADATA = "sha256"
"""The object metadata key (x-amz-meta-sha256) holding the file's SHA-256, for a resume."""


class StagingError(Exception):
    """A file or the manifest does not match what it must be."""


@dataclass(frozen=True)
class Config:
    repo: str
    revision: str
    bucket: str
    prefix: str
    manifest_key: str
    ignore: list[str]
    scratch: Path
    workers: int = 1

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Config:
        return cls(
            repo=env["LLMFLEET_REPO"],
            revision=env["LLMFLEET_REVISION"],
            bucket=env["LLMFLEET_BUCKET"],
            prefix=env["LLMFLEET_PREFIX"],
            manifest_key=env["LLMFLEET_MANIFEST_KEY"],
            ignore=list(json.loads(env.get("LLMFLEET_IGNORE", "[]"))),
            scratch=Path(env.get("LLMFLEET_SCRATCH", "/scratch")),
            workers=max(1, int(env.get("LLMFLEET_WORKERS", "1"))),
        )


def wanted(path: str, ignore: list[str]) -> bool:
    return not any(fnmatch.fnmatch(path, pattern) for pattern in ignore)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_id(path: Path) -> str:
    """The id git gives the file's content (what Hugging Face lists for a non-LFS file)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 (git's id)
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def expected_files(api: Any, cfg: Config) -> tuple[str, list[dict[str, Any]]]:
    """The commit `cfg.revision` resolves to, and every wanted file with its published
    size and hash."""
    info = api.model_info(cfg.repo, revision=cfg.revision, files_metadata=True)
    files = []
    for sibling in sorted(info.siblings, key=lambda s: s.rfilename):
        if not wanted(sibling.rfilename, cfg.ignore):
            continue
        lfs = getattr(sibling, "lfs", None)
        files.append({
            "path": sibling.rfilename,
            "size": sibling.size,
            "sha256": lfs.sha256 if lfs is not None else None,
            "blob_id": getattr(sibling, "blob_id", None),
        })
    if not files:
        raise StagingError(f"{cfg.repo}@{cfg.revision}: no file left after {cfg.ignore}")
    return str(info.sha), files


def check_download(local: Path, entry: dict[str, Any]) -> str:
    """The file's SHA-256, after checking it against what Hugging Face publishes."""
    if entry["size"] is not None and local.stat().st_size != entry["size"]:
        raise StagingError(
            f"{entry['path']}: {local.stat().st_size} bytes, Hugging Face lists {entry['size']}"
        )
    sha = file_sha256(local)
    if entry["sha256"] is not None and sha != entry["sha256"]:
        raise StagingError(f"{entry['path']}: SHA-256 {sha}, Hugging Face lists {entry['sha256']}")
    if entry["sha256"] is None and entry["blob_id"] and git_blob_id(local) != entry["blob_id"]:
        raise StagingError(f"{entry['path']}: git blob id differs from {entry['blob_id']}")
    return sha


def staged_manifest(s3: Any, cfg: Config) -> dict[str, Any] | None:
    try:
        body = s3.get_object(Bucket=cfg.bucket, Key=cfg.manifest_key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    manifest: dict[str, Any] = json.loads(body)
    return manifest


def already_staged(s3: Any, cfg: Config, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The file's manifest entry when S3 holds it already as published (a resumed Job): its
    recorded SHA-256 is Hugging Face's (LFS files) and its size is the listed one."""
    key = f"{cfg.prefix}/{entry['path']}"
    try:
        head = s3.head_object(Bucket=cfg.bucket, Key=key, ChecksumMode="ENABLED")
    except s3.exceptions.ClientError:
        return None
    sha = (head.get("Metadata") or {}).get(SHA256_METADATA)
    if sha is None or (entry["size"] is not None and head["ContentLength"] != entry["size"]):
        return None
    if entry["sha256"] is not None and sha != entry["sha256"]:
        return None
    if entry["sha256"] is None:
        return None  # a small git-blob file: cheaper to fetch again than to trust
    return {"path": entry["path"], "size": head["ContentLength"], "sha256": sha,
            "s3_checksum_sha256": head.get("ChecksumSHA256")}


def stage_file(download: Callable[..., str], s3: Any, cfg: Config, commit: str,
               entry: dict[str, Any], token: str | None) -> dict[str, Any]:
    """One file: skip it when staged, else download, check, upload, delete."""
    done = already_staged(s3, cfg, entry)
    if done is not None:
        print(f"already staged {entry['path']}", flush=True)
        return done
    local = Path(download(repo_id=cfg.repo, filename=entry["path"], revision=commit,
                          local_dir=str(cfg.scratch), token=token))
    sha = check_download(local, entry)
    key = f"{cfg.prefix}/{entry['path']}"
    s3.upload_file(str(local), cfg.bucket, key, ExtraArgs={
        "ChecksumAlgorithm": "SHA256", "Metadata": {SHA256_METADATA: sha}})
    head = s3.head_object(Bucket=cfg.bucket, Key=key, ChecksumMode="ENABLED")
    local.unlink()
    print(f"staged {entry['path']} ({head['ContentLength']} bytes)", flush=True)
    return {"path": entry["path"], "size": head["ContentLength"], "sha256": sha,
            "s3_checksum_sha256": head.get("ChecksumSHA256")}


def stage(api: Any, download: Callable[..., str], s3: Any, cfg: Config,
          token: str | None = None) -> dict[str, Any]:
    """Stage every wanted file (`cfg.workers` at a time) and write the manifest; returns it."""
    done = staged_manifest(s3, cfg)
    if done is not None and done.get("requested_revision") == cfg.revision:
        print(f"already staged: {cfg.repo}@{done['commit']} in s3://{cfg.bucket}/{cfg.prefix}")
        return done
    commit, files = expected_files(api, cfg)
    if len(cfg.revision) == 40 and commit != cfg.revision:
        raise StagingError(f"{cfg.repo}: revision {cfg.revision} resolved to {commit}")
    cfg.scratch.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        staged = list(pool.map(lambda e: stage_file(download, s3, cfg, commit, e, token), files))
    manifest = {
        "format": MANIFEST_FORMAT,
        "repo": cfg.repo,
        "requested_revision": cfg.revision,
        "commit": commit,
        "prefix": cfg.prefix,
        "files": staged,
    }
    s3.put_object(Bucket=cfg.bucket, Key=cfg.manifest_key, ChecksumAlgorithm="SHA256",
                  Body=json.dumps(manifest, indent=1, sort_keys=True).encode(),
                  ContentType="application/json")
    print(f"manifest s3://{cfg.bucket}/{cfg.manifest_key}: {len(staged)} files of "
          f"{cfg.repo}@{commit}")
    return manifest


def read_token(env: dict[str, str]) -> str | None:
    path = env.get("HF_TOKEN_PATH")
    if path and Path(path).is_file():
        return Path(path).read_text().strip() or None
    return None


def main() -> int:
    env = dict(os.environ)
    cfg = Config.from_env(env)
    token = read_token(env)
    try:
        stage(HfApi(token=token), hf_hub_download, boto3.client("s3"), cfg, token)
    except StagingError as e:
        print(f"staging failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
