"""The weight-staging Job's script and the pods' check, run against moto's S3 with a fake
Hugging Face (the scripts run in the vLLM image; here boto3 is real, the Hub is not).

A checkpoint of three files: a config (a git blob on the Hub), a safetensors shard (LFS,
with its SHA-256) and `original/consolidated.pth` (ignored: vLLM never reads it)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from llmfleet.outputs.render import SCRIPTS_DIR

FILES = {
    "config.json": b'{"model_type": "llama"}',
    "model-00001-of-00001.safetensors": b"\x00" * 4096,
    "original/consolidated.pth": b"not staged",
}
COMMIT = "0123456789abcdef0123456789abcdef01234567"
BUCKET = "t-weights-us-east-1-111122223333"
PREFIX = f"org/model/{COMMIT}"


def _load(name: str) -> Any:
    """A script as a module; huggingface_hub is faked (only the staging script imports it)."""
    sys.modules.setdefault("huggingface_hub", types.SimpleNamespace(  # type: ignore[arg-type]
        HfApi=object, hf_hub_download=None))
    spec = importlib.util.spec_from_file_location(f"llmfleet_{name}", SCRIPTS_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stage_weights = _load("stage_weights")
verify_weights = _load("verify_weights")


class FakeHub:
    """HfApi.model_info for one commit: each file's size and published hash."""

    def __init__(self, files: dict[str, bytes], commit: str = COMMIT) -> None:
        self.files, self.commit = files, commit

    def model_info(self, repo: str, revision: str, files_metadata: bool) -> Any:
        def sibling(name: str, data: bytes) -> Any:
            lfs = (types.SimpleNamespace(sha256=hashlib.sha256(data).hexdigest())
                   if name.endswith(".safetensors") else None)
            blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324
            return types.SimpleNamespace(rfilename=name, size=len(data), lfs=lfs, blob_id=blob)

        return types.SimpleNamespace(
            sha=self.commit, siblings=[sibling(n, d) for n, d in self.files.items()]
        )


def download_from(served: dict[str, bytes]) -> Any:
    def download(repo_id: str, filename: str, revision: str, local_dir: str, token: Any) -> str:
        path = Path(local_dir) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(served[filename])
        return str(path)

    return download


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def _config(tmp_path: Path) -> Any:
    return stage_weights.Config(
        repo="org/model", revision=COMMIT, bucket=BUCKET, prefix=PREFIX,
        manifest_key=f"{PREFIX}/llmfleet-manifest.json", ignore=["original/*"],
        scratch=tmp_path / "scratch",
    )


def test_staging_copies_the_wanted_files_and_writes_the_manifest_last(s3, tmp_path) -> None:
    cfg = _config(tmp_path)
    manifest = stage_weights.stage(FakeHub(FILES), download_from(FILES), s3, cfg)
    assert [f["path"] for f in manifest["files"]] == [
        "config.json", "model-00001-of-00001.safetensors"]
    assert manifest["commit"] == COMMIT and manifest["requested_revision"] == COMMIT
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {f"{PREFIX}/config.json", f"{PREFIX}/model-00001-of-00001.safetensors",
                    f"{PREFIX}/llmfleet-manifest.json"}
    shard = manifest["files"][1]
    assert shard["sha256"] == hashlib.sha256(FILES[shard["path"]]).hexdigest()
    assert shard["s3_checksum_sha256"], "S3 stored a SHA-256 checksum with the object"
    assert not list((tmp_path / "scratch").rglob("*.safetensors")), "one file at a time"


def test_a_staged_revision_is_not_staged_again(s3, tmp_path) -> None:
    cfg = _config(tmp_path)
    stage_weights.stage(FakeHub(FILES), download_from(FILES), s3, cfg)

    def no_download(**_: Any) -> str:
        raise AssertionError("downloaded again")

    assert stage_weights.stage(FakeHub(FILES), no_download, s3, cfg)["commit"] == COMMIT


def test_a_download_that_differs_from_the_hubs_hash_stops_the_job(s3, tmp_path) -> None:
    corrupted = {**FILES, "model-00001-of-00001.safetensors": b"\x01" * 4096}
    with pytest.raises(stage_weights.StagingError, match="SHA-256 .* Hugging Face lists"):
        stage_weights.stage(FakeHub(FILES), download_from(corrupted), s3, _config(tmp_path))
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/llmfleet-")


def test_a_pinned_commit_the_hub_resolves_elsewhere_stops_the_job(s3, tmp_path) -> None:
    with pytest.raises(stage_weights.StagingError, match="resolved to"):
        stage_weights.stage(FakeHub(FILES, commit="f" * 40), download_from(FILES), s3,
                            _config(tmp_path))


def _problems(s3: Any, revision: str = COMMIT) -> list[str]:
    found: list[str] = verify_weights.problems(
        s3, BUCKET, PREFIX, f"{PREFIX}/llmfleet-manifest.json", revision)
    return found


def test_the_pods_check_passes_a_complete_copy_and_names_what_is_wrong(s3, tmp_path) -> None:
    assert _problems(s3) == [f"no manifest at s3://{BUCKET}/{PREFIX}/llmfleet-manifest.json: "
                             "the staging Job has not finished"]
    stage_weights.stage(FakeHub(FILES), download_from(FILES), s3, _config(tmp_path))
    assert _problems(s3) == []
    assert "the plan serves " + "a" * 40 in _problems(s3, "a" * 40)[0]
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/config.json", Body=b'{"model_type": "mistral"}')
    [replaced] = _problems(s3)
    assert replaced.startswith(f"{PREFIX}/config.json: ")
    s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/model-00001-of-00001.safetensors")
    assert any("safetensors: 404" in p for p in _problems(s3))


def test_a_retried_job_resumes_with_the_files_already_staged(s3, tmp_path) -> None:
    """The Job stops after the shard (a deadline, a node drained): its retry fetches only what
    is missing, the config, not the shard whose recorded SHA-256 is the published one."""
    cfg = _config(tmp_path)
    shard = "model-00001-of-00001.safetensors"
    stage_weights.stage_file(download_from(FILES), s3, cfg, COMMIT,
                             stage_weights.expected_files(FakeHub(FILES), cfg)[1][1], None)
    fetched: list[str] = []

    def counting(**kwargs: Any) -> str:
        fetched.append(kwargs["filename"])
        return str(download_from(FILES)(**kwargs))

    manifest = stage_weights.stage(FakeHub(FILES), counting, s3, cfg)
    assert fetched == ["config.json"]
    assert [f["path"] for f in manifest["files"]] == ["config.json", shard]
    assert manifest["files"][1]["sha256"] == hashlib.sha256(FILES[shard]).hexdigest()


def test_two_workers_stage_the_same_files_as_one(s3, tmp_path) -> None:
    cfg = _config(tmp_path)
    two = stage_weights.Config(**{**cfg.__dict__, "workers": 2})
    manifest = stage_weights.stage(FakeHub(FILES), download_from(FILES), s3, two)
    assert [f["path"] for f in manifest["files"]] == [
        "config.json", "model-00001-of-00001.safetensors"]
