"""The mirror Job's script, run for real on local folders (no Hub: a stand-in `hf` and tree listing)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.hf_api import RepoFile

from components.mirror import SCRIPT
from components.mirror import mirror

REPO = "acme/tiny-model"
REV = "0e9e39f249a16976918f6564b8830bc894c89659"

FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n',
    "model-00001-of-00002.safetensors": os.urandom(300_000),
    "model-00002-of-00002.safetensors": os.urandom(200_001),
    "tokenizer/tokenizer.json": b'{"version": "1.0"}\n',
}
LFS = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)


# --- verify: a folder against its manifest, through the real CLI ----------------------------


@pytest.fixture
def mirrored(tmp_path: Path) -> Path:
    root = tmp_path / "weights"
    write_tree(root, FILES)
    # `hf download --local-dir` bookkeeping: neither a model file nor listed in the manifest.
    write_tree(root, {".cache/huggingface/download/config.json.metadata": b"etag\n"})
    manifest = {"repo": REPO, "revision": REV,
                "files": [{"path": p, "size": len(d), "sha256": sha256(d)} for p, d in FILES.items()]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_verify_passes_when_every_file_matches(mirrored: Path):
    result = run_cli("verify", "--local-dir", str(mirrored))
    assert result.returncode == 0, result.stderr
    assert f"verified {len(FILES)} files of {REPO}@{REV}" in result.stdout


def test_verify_fails_loudly_naming_the_one_mismatching_file(mirrored: Path):
    manifest = json.loads((mirrored / "manifest.json").read_text())
    bad = "model-00002-of-00002.safetensors"
    for entry in manifest["files"]:
        if entry["path"] == bad:
            entry["sha256"] = sha256(b"the bytes the Hub published")
    (mirrored / "manifest.json").write_text(json.dumps(manifest))

    result = run_cli("verify", "--local-dir", str(mirrored))
    assert result.returncode == 1
    assert "VERIFICATION FAILED" in result.stderr
    assert f"{bad}: sha256 mismatch" in result.stderr
    others = set(FILES) - {bad}
    assert not any(f"{name}:" in result.stderr for name in others), result.stderr


def test_verify_catches_a_corrupted_byte_missing_and_extra_files(mirrored: Path):
    shard = mirrored / "model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0xFF
    shard.write_bytes(bytes(data))
    (mirrored / "tokenizer" / "tokenizer.json").unlink()
    (mirrored / "stray.bin").write_bytes(b"left over")

    result = run_cli("verify", "--local-dir", str(mirrored))
    assert result.returncode == 1
    assert "model-00001-of-00002.safetensors: sha256 mismatch" in result.stderr
    assert "tokenizer/tokenizer.json: missing" in result.stderr
    assert "stray.bin: unexpected file" in result.stderr


def test_verify_with_a_separate_manifest_and_bad_usage(mirrored: Path, tmp_path: Path):
    elsewhere = tmp_path / "copy.json"
    shutil.move(mirrored / "manifest.json", elsewhere)
    assert run_cli("verify", "--local-dir", str(mirrored), "--manifest", str(elsewhere)).returncode == 0
    missing = run_cli("verify", "--local-dir", str(mirrored))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert run_cli("verify").returncode == 2


def test_compare_reports_size_before_hash():
    expected = {"a": mirror.Expected(size=3, sha256=sha256(b"abc"))}
    actual = {"a": mirror.Actual(size=4, sha256=sha256(b"abcd"))}
    assert mirror.compare(expected, actual) == ["a: size mismatch: expected 3 bytes, found 4"]


# --- fetch: download, check against what the Hub publishes, write the manifest --------------


def git_blob_id(data: bytes) -> str:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is needed to compute reference blob ids")
    return subprocess.run([git, "hash-object", "--stdin"], input=data, capture_output=True, check=True).stdout.decode().strip()


def hub_listing(files: dict[str, bytes], published_sha256: dict[str, str] | None = None) -> list[RepoFile]:
    """The tree the Hub returns for the commit, built with huggingface_hub's own RepoFile."""
    published_sha256 = published_sha256 or {}
    entries = []
    for path, data in files.items():
        raw = {"path": path, "size": len(data), "oid": git_blob_id(data)}
        if path in LFS:
            raw["oid"] = "f" * 40  # an LFS file's git oid is its pointer's, not its content's
            raw["lfs"] = {"size": len(data), "oid": published_sha256.get(path, sha256(data)), "pointerSize": 134}
        entries.append(RepoFile(**raw))
    return entries


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch):
    """An `hf` on PATH that 'downloads' a source folder, and a tree listing for the commit."""
    source = tmp_path / "hub-files"
    write_tree(source, FILES)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "hf-calls.txt"
    hf = bin_dir / "hf"
    hf.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{calls}"\n'
        'while [ $# -gt 0 ]; do [ "$1" = "--local-dir" ] && dest="$2"; shift; done\n'
        f'mkdir -p "$dest/.cache/huggingface" && cp -R "{source}/." "$dest/"\n'
    )
    hf.chmod(hf.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    state = {"listing": hub_listing(FILES), "calls": calls}

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, revision=None, **_):
        assert (repo_id, revision, recursive) == (REPO, REV, True)
        return iter(state["listing"])

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_tree", list_repo_tree)
    return state


def test_fetch_downloads_the_pinned_commit_and_writes_a_verified_manifest(fake_hub, tmp_path: Path, capsys):
    dest = tmp_path / "models" / REPO / REV
    assert mirror.main(["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(dest)]) == 0
    assert fake_hub["calls"].read_text().split() == ["download", REPO, "--revision", REV, "--local-dir", str(dest)]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert (manifest["repo"], manifest["revision"]) == (REPO, REV)
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        p: (len(d), sha256(d)) for p, d in FILES.items()}
    assert manifest["totalBytes"] == sum(len(d) for d in FILES.values())
    checks = {f["path"]: f["verifiedAgainst"] for f in manifest["files"]}
    assert checks["config.json"] == "hub-git-blob-sha1"
    assert checks["model-00001-of-00002.safetensors"] == "hub-lfs-sha256"
    # The manifest written by fetch is the one verify checks against later.
    assert run_cli("verify", "--local-dir", str(dest)).returncode == 0


def test_fetch_fails_when_a_shard_differs_from_the_hubs_sha256(fake_hub, tmp_path: Path, capsys):
    bad = "model-00001-of-00002.safetensors"
    fake_hub["listing"] = hub_listing(FILES, {bad: sha256(b"what the Hub actually published")})
    dest = tmp_path / "out"
    assert mirror.main(["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(dest)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: sha256 mismatch" in err
    assert "model-00002-of-00002.safetensors:" not in err
    assert not (dest / "manifest.json").exists(), "a failed verification must not leave a manifest"


def test_fetch_checks_small_files_by_git_blob_id(fake_hub, tmp_path: Path, capsys):
    listing = hub_listing(FILES)
    for entry in listing:
        if entry.path == "config.json":
            entry.blob_id = git_blob_id(b"another config\n")
    fake_hub["listing"] = listing
    assert mirror.main(["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(tmp_path / "o")]) == 1
    assert "config.json: git blob id mismatch" in capsys.readouterr().err


@pytest.mark.parametrize("revision", ["main", "v1.0", REV[:12]])
def test_fetch_refuses_anything_but_a_commit(fake_hub, tmp_path: Path, capsys, revision):
    assert mirror.main(["fetch", "--repo", REPO, "--revision", revision, "--local-dir", str(tmp_path / "o")]) == 2
    assert "40-character commit" in capsys.readouterr().err
    assert not fake_hub["calls"].exists()


def test_fetch_refuses_to_run_offline(fake_hub, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert mirror.main(["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(tmp_path / "o")]) == 2
    assert "HF_HUB_OFFLINE" in capsys.readouterr().err


def test_script_needs_only_stdlib_and_huggingface_hub():
    """It runs in the downloader image as shipped: nothing else may be imported."""
    import ast

    tree = ast.parse(SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"huggingface_hub", "__future__"} <= set(sys.stdlib_module_names)
