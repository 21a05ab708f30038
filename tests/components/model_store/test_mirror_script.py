"""The mirror Job's script, run for real on local folders (no Hub: a stand-in `hf` and tree listing)."""

from __future__ import annotations

import hashlib
import itertools
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

from common import contract
from components.model_store.mirror import SCRIPT, mirror
from components.model_store.store import file_selection_args

REPO = "acme/tiny-model"
REV = "0e9e39f249a16976918f6564b8830bc894c89659"

FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n',
    "model-00001-of-00002.safetensors": os.urandom(300_000),
    "model-00002-of-00002.safetensors": os.urandom(200_001),
    "tokenizer/tokenizer.json": b'{"version": "1.0"}\n',
}
# On the Hub at the commit but not part of the served model: Meta's reference checkpoint (as large
# as the safetensors on a real repo), a README and git's attributes file.
HUB_ONLY = {
    "original/consolidated.00.pth": os.urandom(250_000),
    "original/params.json": b'{"dim": 64}\n',
    "original/tokenizer.model": b"sentencepiece\n",
    "README.md": b"# tiny\n",
    ".gitattributes": b"*.safetensors filter=lfs\n",
}
LFS = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "original/consolidated.00.pth"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


# --- verify: a folder against its manifest, through the real CLI ----------------------------


@pytest.fixture
def mirrored(tmp_path: Path) -> Path:
    root = tmp_path / "weights"
    write_tree(root, FILES)
    # `hf download --local-dir` bookkeeping: neither a model file nor listed in the manifest.
    write_tree(root, {".cache/huggingface/download/config.json.metadata": b"etag\n"})
    manifest = {
        "repo": REPO,
        "revision": REV,
        "files": [{"path": p, "size": len(d), "sha256": sha256(d)} for p, d in FILES.items()],
    }
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
    return (
        subprocess.run([git, "hash-object", "--stdin"], input=data, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )


def fetch_argv(dest: Path, revision: str = REV) -> list[str]:
    """The arguments the Job passes (components.model_store.store builds the same file selection)."""
    return ["fetch", "--repo", REPO, "--revision", revision, "--local-dir", str(dest), *file_selection_args()]


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


# A stand-in for `hf download --local-dir`: it copies the "Hub" folder, choosing files with
# huggingface_hub's own filter_repo_objects, the function the real CLI applies to --include/--exclude.
FAKE_HF = """#!{python}
import json, shutil, sys
from pathlib import Path
from huggingface_hub.utils import filter_repo_objects

argv = sys.argv[1:]
with open({calls!r}, "a") as log:
    log.write(json.dumps(argv) + "\\n")
opts = {{"--include": [], "--exclude": []}}
dest = None
for flag, value in zip(argv, argv[1:]):
    if flag in opts:
        opts[flag].append(value)
    elif flag == "--local-dir":
        dest = Path(value)
source = Path({source!r})
files = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
if {honour_filters}:
    files = list(filter_repo_objects(files, allow_patterns=opts["--include"] or None,
                                     ignore_patterns=opts["--exclude"] or None))
(dest / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
for rel in files:
    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / rel, dest / rel)
"""


def install_fake_hf(bin_dir: Path, calls: Path, source: Path, honour_filters: bool = True) -> None:
    hf = bin_dir / "hf"
    hf.write_text(
        FAKE_HF.format(python=sys.executable, calls=str(calls), source=str(source), honour_filters=honour_filters)
    )
    hf.chmod(hf.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch):
    """An `hf` on PATH that 'downloads' a source folder, and a tree listing for the commit."""
    source = tmp_path / "hub-files"
    write_tree(source, {**FILES, **HUB_ONLY})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "hf-calls.txt"
    install_fake_hf(bin_dir, calls, source)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    state = {"listing": hub_listing({**FILES, **HUB_ONLY}), "calls": calls, "bin": bin_dir, "source": source}

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, revision=None, **_):
        assert (repo_id, revision, recursive) == (REPO, REV, True)
        return iter(state["listing"])

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_tree", list_repo_tree)
    return state


def hf_calls(fake_hub) -> list[list[str]]:
    path = fake_hub["calls"]
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_fetch_downloads_the_pinned_commit_and_writes_a_verified_manifest(fake_hub, tmp_path: Path, capsys):
    dest = tmp_path / "models" / REPO / REV
    assert mirror.main(fetch_argv(dest)) == 0
    [call] = hf_calls(fake_hub)
    assert call[:6] == ["download", REPO, "--revision", REV, "--local-dir", str(dest)]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert (manifest["repo"], manifest["revision"]) == (REPO, REV)
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        p: (len(d), sha256(d)) for p, d in FILES.items()
    }
    assert manifest["totalBytes"] == sum(len(d) for d in FILES.values())
    checks = {f["path"]: f["verifiedAgainst"] for f in manifest["files"]}
    assert checks["config.json"] == "hub-git-blob-sha1"
    assert checks["model-00001-of-00002.safetensors"] == "hub-lfs-sha256"
    assert (manifest["include"], manifest["exclude"]) == (
        list(contract.MODEL_FILE_INCLUDE),
        list(contract.MODEL_FILE_EXCLUDE),
    )
    # The manifest written by fetch is the one verify checks against later.
    assert run_cli("verify", "--local-dir", str(dest)).returncode == 0


def test_a_second_checkpoint_format_is_neither_downloaded_nor_expected(fake_hub, tmp_path: Path, capsys):
    dest = tmp_path / "out"
    assert mirror.main(fetch_argv(dest)) == 0, capsys.readouterr().err
    [call] = hf_calls(fake_hub)
    # The globs reach `hf download` as repeated flags ...
    assert [v for k, v in itertools.pairwise(call) if k == "--include"] == list(contract.MODEL_FILE_INCLUDE)
    assert [v for k, v in itertools.pairwise(call) if k == "--exclude"] == list(contract.MODEL_FILE_EXCLUDE)
    # ... so the reference checkpoint and the repo's paperwork never land on the volume ...
    assert not (dest / "original").exists()
    assert not (dest / "README.md").exists() and not (dest / ".gitattributes").exists()
    # ... and the same globs filter what the Hub listing says to expect, so they are not "missing".
    expected = mirror.hub_expectations(REPO, REV, list(contract.MODEL_FILE_INCLUDE), list(contract.MODEL_FILE_EXCLUDE))
    assert set(expected) == set(FILES)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert {f["path"] for f in manifest["files"]} == set(FILES)


def test_files_outside_the_selection_on_the_volume_fail_verification(fake_hub, tmp_path: Path, capsys):
    """An `hf` that ignored the globs (or a claim filled by a full download) is caught, not served or synced."""
    install_fake_hf(fake_hub["bin"], fake_hub["calls"], fake_hub["source"], honour_filters=False)
    dest = tmp_path / "out"
    assert mirror.main(fetch_argv(dest)) == 1
    err = capsys.readouterr().err
    assert "original/consolidated.00.pth: unexpected file" in err
    assert not (dest / "manifest.json").exists()


def test_selection_matches_huggingface_hub_filtering():
    """The script's matcher and huggingface_hub's agree on every path of a realistic listing."""
    from huggingface_hub.utils import filter_repo_objects

    paths = [
        *FILES,
        *HUB_ONLY,
        "consolidated.safetensors",
        "tokenizer.model.v3",
        "merges.txt",
        "vocab.txt",
        "chat_template.jinja",
        "qwen.tiktoken",
        "pytorch_model.bin",
        "sub/dir/config.json",
        "Model.SAFETENSORS",
    ]
    include, exclude = list(contract.MODEL_FILE_INCLUDE), list(contract.MODEL_FILE_EXCLUDE)
    theirs = set(filter_repo_objects(paths, allow_patterns=include, ignore_patterns=exclude))
    ours = {p for p in paths if mirror.selected(p, include, exclude)}
    assert ours == theirs
    assert "consolidated.safetensors" not in ours and "pytorch_model.bin" not in ours
    assert {"tokenizer.model.v3", "merges.txt", "chat_template.jinja", "qwen.tiktoken"} <= ours


def test_fetch_without_include_globs_is_refused(fake_hub, tmp_path: Path, capsys):
    assert mirror.main(["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(tmp_path / "o")]) == 2
    assert "--include" in capsys.readouterr().err
    assert hf_calls(fake_hub) == []


def test_a_selection_without_weights_fails_before_downloading(fake_hub, tmp_path: Path, capsys):
    argv = ["fetch", "--repo", REPO, "--revision", REV, "--local-dir", str(tmp_path / "o"), "--include", "*.json"]
    assert mirror.main(argv) == 1
    assert "no *.safetensors weights" in capsys.readouterr().err
    assert hf_calls(fake_hub) == []


def test_a_shard_named_by_the_index_but_filtered_out_fails(fake_hub, tmp_path: Path, capsys):
    index = json.dumps(
        {
            "metadata": {"total_size": 500_001},
            "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "consolidated-00002.safetensors"},
        }
    ).encode()
    write_tree(fake_hub["source"], {"model.safetensors.index.json": index})
    fake_hub["listing"] = hub_listing({**FILES, **HUB_ONLY, "model.safetensors.index.json": index})
    assert mirror.main(fetch_argv(tmp_path / "o")) == 1
    assert "names shard consolidated-00002.safetensors" in capsys.readouterr().err


def test_a_manifest_temp_file_left_by_a_killed_attempt_does_not_fail_the_retry(
    fake_hub, tmp_path: Path, monkeypatch, capsys
):
    dest = tmp_path / "out"

    def killed(src, dst):
        raise KeyboardInterrupt("pod killed while renaming the manifest")

    monkeypatch.setattr(mirror.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        mirror.main(fetch_argv(dest))
    monkeypatch.undo()
    leftovers = [p.relative_to(dest).as_posix() for p in dest.rglob("*.tmp")]
    assert leftovers and all(p.startswith(".cache/") for p in leftovers), leftovers
    assert not (dest / "manifest.json").exists()
    # The retry (same folder, the temp file still there) verifies and writes the manifest.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_tree", lambda self, *a, **k: iter(fake_hub["listing"]))
    monkeypatch.setenv("PATH", f"{fake_hub['bin']}{os.pathsep}{os.environ['PATH']}")
    assert mirror.main(fetch_argv(dest)) == 0, capsys.readouterr().err
    assert "unexpected file" not in capsys.readouterr().err
    assert mirror.local_files(dest) == sorted(FILES)


def test_fetch_fails_when_a_shard_differs_from_the_hubs_sha256(fake_hub, tmp_path: Path, capsys):
    bad = "model-00001-of-00002.safetensors"
    fake_hub["listing"] = hub_listing(FILES, {bad: sha256(b"what the Hub actually published")})
    dest = tmp_path / "out"
    assert mirror.main(fetch_argv(dest)) == 1
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
    assert mirror.main(fetch_argv(tmp_path / "o")) == 1
    assert "config.json: git blob id mismatch" in capsys.readouterr().err


@pytest.mark.parametrize("revision", ["main", "v1.0", REV[:12]])
def test_fetch_refuses_anything_but_a_commit(fake_hub, tmp_path: Path, capsys, revision):
    assert mirror.main(fetch_argv(tmp_path / "o", revision)) == 2
    assert "40-character commit" in capsys.readouterr().err
    assert not fake_hub["calls"].exists()


def test_fetch_refuses_to_run_offline(fake_hub, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert mirror.main(fetch_argv(tmp_path / "o")) == 2
    assert "HF_HUB_OFFLINE" in capsys.readouterr().err


def test_script_needs_only_stdlib_and_huggingface_hub():
    """It runs in the downloader image as shipped: nothing else may be imported."""
    import ast

    tree = ast.parse(SCRIPT.read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported - {"huggingface_hub", "__future__"} <= set(sys.stdlib_module_names)


# --- provenance: the servers' start check and the signature's seal -----------------------------


def test_sizes_only_check_catches_truncated_missing_and_stray_files_but_not_a_flipped_byte(mirrored: Path):
    assert run_cli("verify", "--sizes-only", "--local-dir", str(mirrored)).returncode == 0
    shard = mirrored / "model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0xFF
    shard.write_bytes(bytes(data))
    # Same size: only the full check (the sha256 option) sees it.
    assert run_cli("verify", "--sizes-only", "--local-dir", str(mirrored)).returncode == 0
    assert run_cli("verify", "--local-dir", str(mirrored)).returncode == 1
    shard.write_bytes(bytes(data[:-10]))
    (mirrored / "stray.bin").write_bytes(b"x")
    result = run_cli("verify", "--sizes-only", "--local-dir", str(mirrored))
    assert result.returncode == 1
    assert f"model-00001-of-00002.safetensors: size mismatch: expected {len(data)} bytes" in result.stderr
    assert "stray.bin: unexpected file" in result.stderr


def test_a_deferred_manifest_appears_only_when_sealed(fake_hub, tmp_path: Path, capsys):
    dest = tmp_path / "models" / REPO / REV
    (dest).mkdir(parents=True)
    (dest / "manifest.json").write_text("{}")  # left by an earlier run without a signature
    assert mirror.main([*fetch_argv(dest), "--defer-manifest"]) == 0
    assert not (dest / "manifest.json").exists()
    # Without a manifest the servers' start check refuses the folder.
    assert run_cli("verify", "--sizes-only", "--local-dir", str(dest)).returncode == 2
    note = "sigstore: identity publisher@example.com, issuer https://accounts.example.com"
    assert run_cli("seal", "--local-dir", str(dest), "--signature-note", note).returncode == 0
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["signature"] == note and manifest["revision"] == REV
    assert run_cli("verify", "--local-dir", str(dest)).returncode == 0
    # Sealing twice (a retried container) finds nothing to seal and says so.
    again = run_cli("seal", "--local-dir", str(dest), "--signature-note", note)
    assert again.returncode == 2 and "does not exist" in again.stderr
