"""The mirror Job's sync step, run for real against local stand-ins of GCS and S3.

The script is the one the program puts into the Job (taken from the evaluated ModelStore), with
only its source folder pointed at a temporary copy of "verified" weights. The stand-ins
(tests/support/bucket_standins.py) enforce what the writer may do: on GCS it cannot replace an object
(no storage.objects.delete), which is what made every replaced mirror Job fail with 403.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from components.model_store import store as ms
from tests.support import bucket_standins
from tests.support.model_store_runs import REPO, REV, aws_bucket, evaluate, gcs_bucket, only

SCHEMES = {"gs": gcs_bucket, "s3": aws_bucket}
WEIGHTS = {
    "model-00001-of-00002.safetensors": b"a" * 64,
    "model-00002-of-00002.safetensors": b"b" * 64,
    "config.json": b"{}",
    ".cache/huggingface/download/x.lock": b"bookkeeping",
}


def job_script(scheme: str) -> str:
    evaluation, _ = evaluate(bucket=SCHEMES[scheme]())
    (sync,) = only(evaluation, "Job")["spec"]["template"]["spec"]["containers"]
    return sync["command"][-1]


@pytest.fixture(scope="module", params=sorted(SCHEMES))
def scheme_and_script(request):
    return request.param, job_script(request.param)


class Bucket:
    def __init__(self, tmp: Path, scheme: str, script: str):
        self.scheme = scheme
        self.root, self.log = tmp / "buckets", tmp / "log.jsonl"
        self.bin = tmp / "bin"
        bucket_standins.install(self.bin)
        self.root.mkdir()
        self.log.touch()
        self.src = tmp / "volume"
        self.destination = re.search(r"^DST=(.*)$", script, re.MULTILINE).group(1)
        # The Job mounts the weights at the model path; here they sit in a temporary folder.
        self.script = re.sub(r"^SRC=.*$", f"SRC={self.src}", script, count=1, flags=re.MULTILINE)
        self.download()

    def download(self, weights: dict[str, bytes] = WEIGHTS) -> None:
        """What a fetch leaves: the files (new mtimes, as a re-download gives) and the manifest."""
        for rel, data in weights.items():
            path = self.src / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            stat = path.stat()
            os.utime(path, (stat.st_atime + 10, stat.st_mtime + 10))
        manifest = {rel: len(data) for rel, data in weights.items() if not rel.startswith(".cache")}
        (self.src / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))

    def run(self, **env: str) -> subprocess.CompletedProcess:
        self.log.write_text("")
        environment = {**bucket_standins.environment(self.bin, self.root, self.log), **env}
        return subprocess.run(["sh", "-c", self.script], env=environment, capture_output=True, text=True, timeout=60)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def objects(self) -> set[str]:
        prefix = self.destination.split("://", 1)[1]
        base = self.root / prefix
        return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()} if base.exists() else set()

    def plant(self, rel: str, data: bytes) -> None:
        path = self.root / self.destination.split("://", 1)[1] / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture
def bucket(tmp_path, scheme_and_script):
    scheme, script = scheme_and_script
    return Bucket(tmp_path, scheme, script)


def test_first_run_uploads_the_weights_then_the_manifest_and_no_bookkeeping(bucket):
    result = bucket.run()
    assert result.returncode == 0, result.stderr
    writes = [e["uri"].rsplit("/", 1)[1] for e in bucket.events() if e["op"] == "write"]
    assert writes[-1] == "manifest.json" and len(writes) == 4
    assert bucket.objects() == {
        "manifest.json",
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    }


def test_a_replaced_job_rerun_passes_without_writing_anything(bucket):
    """The GKE defect: a re-run's `cp manifest.json` was an overwrite, which the writer may not do."""
    assert bucket.run().returncode == 0
    bucket.download()  # the replacement Job re-downloads: same bytes, newer files
    result = bucket.run()
    assert result.returncode == 0, result.stderr
    assert bucket.events() == []
    assert "already holds this verified copy" in result.stdout


def test_a_rerun_after_an_interrupted_sync_uploads_only_what_is_missing(bucket):
    bucket.plant("model-00001-of-00002.safetensors", WEIGHTS["model-00001-of-00002.safetensors"])
    result = bucket.run()
    assert result.returncode == 0, result.stderr
    ops = [(e["op"], e["uri"].rsplit("/", 1)[1]) for e in bucket.events()]
    assert ("denied", "model-00001-of-00002.safetensors") not in ops
    assert ("write", "manifest.json") in ops and ("write", "model-00002-of-00002.safetensors") in ops


def test_a_different_manifest_in_the_bucket_fails_loudly_and_writes_nothing(bucket):
    bucket.plant("manifest.json", b'{"model.safetensors": 1}')
    result = bucket.run()
    assert result.returncode == 1
    assert "differs from the verified download" in result.stderr and "remove the prefix" in result.stderr
    assert bucket.events() == []


def test_a_manifest_written_by_another_run_meanwhile_is_accepted_only_when_identical(bucket, tmp_path):
    same = tmp_path / "same.json"
    same.write_bytes((bucket.src / "manifest.json").read_bytes())
    result = bucket.run(STANDIN_RACE_MANIFEST=str(same))
    assert result.returncode == 0, result.stderr
    assert "another run completed" in result.stdout
    assert ("precondition-failed", "manifest.json") in [(e["op"], e["uri"].rsplit("/", 1)[1]) for e in bucket.events()]


def test_a_different_manifest_written_meanwhile_fails(bucket, tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"other": 1}')
    result = bucket.run(STANDIN_RACE_MANIFEST=str(other))
    assert result.returncode == 1
    assert "no identical one" in result.stderr


def test_gcs_weights_that_differ_from_the_verified_file_fail_with_the_reason(tmp_path):
    bucket = Bucket(tmp_path, "gs", job_script("gs"))
    bucket.plant("model-00001-of-00002.safetensors", b"corrupt")
    result = bucket.run()
    assert result.returncode == 1
    assert "cannot be replaced by the writer" in result.stderr
    assert "manifest.json" not in bucket.objects()


# --- the stand-ins enforce the writer's limits (broken variants of the script) ---------------


def test_the_old_gcs_script_fails_on_a_rerun_with_403(tmp_path):
    """What every replaced mirror Job hit before: plain `cp` of the manifest onto an existing object."""
    bucket = Bucket(tmp_path, "gs", job_script("gs"))
    assert bucket.run().returncode == 0
    old = (
        f"set -eu\nSRC={bucket.src}\nDST={bucket.destination}\n"
        'gcloud storage rsync "$SRC" "$DST" --recursive --exclude=\'^\\.cache/|^manifest\\.json$\'\n'
        'gcloud storage cp "$SRC/manifest.json" "$DST/manifest.json"\n'
    )
    bucket.script = old
    bucket.download()
    result = bucket.run()
    assert result.returncode != 0 and "403" in result.stderr


def test_gcs_rsync_without_checksums_tries_to_overwrite_re_downloaded_files(tmp_path):
    bucket = Bucket(tmp_path, "gs", job_script("gs"))
    bucket.plant("config.json", WEIGHTS["config.json"])
    bucket.script = bucket.script.replace(" --checksums-only", "")
    result = bucket.run()
    assert result.returncode == 1 and "403" in result.stderr


def test_s3_create_only_manifest_refuses_an_existing_key(tmp_path):
    bucket = Bucket(tmp_path, "s3", job_script("s3"))
    assert bucket.run().returncode == 0
    env = {**bucket_standins.environment(bucket.bin, bucket.root, bucket.log)}
    key = bucket.destination.removeprefix("s3://").split("/", 1)
    result = subprocess.run(
        [
            "aws",
            "s3api",
            "put-object",
            "--bucket",
            key[0],
            "--key",
            f"{key[1]}/manifest.json",
            "--body",
            str(bucket.src / "manifest.json"),
            "--if-none-match",
            "*",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "412" in result.stderr


def test_the_destination_is_the_pinned_commits_folder():
    for scheme in SCHEMES:
        assert f"DST={scheme}://llm-serving-dev-models/models/{REPO}/{REV}\n" in job_script(scheme)
    assert ms.SYNC_IMAGES.keys() == SCHEMES.keys()
