#!/usr/bin/env python3
"""Mirror one pinned Hub revision into a folder and prove which bytes it holds.

The model store's mirror Job runs this file (shipped to it in a ConfigMap) inside the pinned
downloader image, so it uses only the standard library and huggingface_hub, which that image
already carries: nothing is pip-installed at run time.

    mirror.py fetch  --repo ORG/NAME --revision <40-hex> --local-dir DIR --include GLOB... [--exclude GLOB...]
        `hf download` the files of the revision the globs select into DIR, check every one against
        what the Hub publishes for that commit (the SHA-256 of LFS files, the git blob id of the
        others), then write DIR/manifest.json: every file with its size and SHA-256. The same globs
        decide what is downloaded and what is expected, matched the way huggingface_hub matches
        them (fnmatchcase, `*` crossing `/`), so a file the Hub has but the globs leave out (Meta's
        original/*.pth) is neither fetched nor missed.
    mirror.py verify --local-dir DIR [--manifest FILE] [--sizes-only]
        Re-hash DIR against a manifest, offline (default: DIR/manifest.json); with --sizes-only,
        compare the file set and sizes only (seconds instead of a full read: the servers' start check).

With a publisher's signature to check (models[].signature), `fetch --defer-manifest` writes the
manifest under DIR/.cache/llm-serving/ instead; the Job's signature container (OpenSSF
model-signing) verifies the folder, and only then `mirror.py seal --local-dir DIR --signature-note
TEXT` records what was verified in the manifest and puts it in place. A folder whose signature did
not verify therefore never gets a manifest, and no server starts on it.

Exit status: 0 when every byte matches, 1 on any mismatch (each one named on stderr), 2 on bad
usage. A mismatch must fail the Job loudly: a silently corrupt shard is served as garbage text,
not as an error.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# `hf download --local-dir` keeps its bookkeeping under DIR/.cache/huggingface; it is not a model
# file, is not on the Hub, and must be neither hashed nor synced to the bucket.
IGNORED_DIRS = (".cache",)
# The manifest is written here first and renamed into place: a temp file left by a killed attempt
# sits inside the ignored bookkeeping folder, where it is neither an "unexpected file" on the next
# attempt nor synced to the bucket.
TEMP_DIR = Path(".cache") / "llm-serving"
INDEX_NAME = "model.safetensors.index.json"
WEIGHTS_SUFFIX = ".safetensors"
CHUNK = 8 * 1024 * 1024
# Hashing is bound by the volume's read speed (EFS/Filestore serve parallel readers faster than
# one); hashlib releases the GIL on large buffers, so threads are enough.
HASH_WORKERS = 4


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Expected:
    """What a file must be: its size and at least one digest to compare with."""

    size: int
    sha256: str | None = None
    git_blob_sha1: str | None = None


@dataclass(frozen=True)
class Actual:
    size: int
    sha256: str
    git_blob_sha1: str | None = None


def hash_file(path: Path, with_git_blob: bool = False) -> Actual:
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    # The Hub names a non-LFS file by its git blob id: sha1 over "blob <size>\0" + content.
    git = hashlib.sha1(b"blob %d\0" % size) if with_git_blob else None
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            sha256.update(chunk)
            if git is not None:
                git.update(chunk)
    return Actual(size=size, sha256=sha256.hexdigest(), git_blob_sha1=git.hexdigest() if git else None)


def local_files(root: Path) -> list[str]:
    """Relative POSIX paths of the files under root, minus the download bookkeeping and manifest."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in IGNORED_DIRS]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if rel != MANIFEST_NAME:
                found.append(rel)
    return sorted(found)


def size_tree(root: Path, paths: list[str]) -> dict[str, Actual]:
    """Sizes only (sha256 left empty): what the servers' quick start check compares."""
    return {p: Actual(size=(root / p).stat().st_size, sha256="") for p in paths}


def _presence_or_size_problem(path: str, want: Expected | None, got: Actual | None) -> str | None:
    """A missing, stray or resized file, in the words both comparisons use."""
    if got is None:
        assert want is not None  # every path compared comes from one of the two tables
        return f"{path}: missing (expected {want.size} bytes)"
    if want is None:
        return f"{path}: unexpected file, not part of the revision"
    if got.size != want.size:
        return f"{path}: size mismatch: expected {want.size} bytes, found {got.size}"
    return None


def compare_sizes(expected: dict[str, Expected], actual: dict[str, Actual]) -> list[str]:
    """The file set and each size; catches a truncated, missing or stray file, not a flipped byte."""
    found = (_presence_or_size_problem(p, expected.get(p), actual.get(p)) for p in sorted(set(expected) | set(actual)))
    return [problem for problem in found if problem]


def hash_tree(root: Path, paths: list[str], git_blob_for: Set[str] = frozenset()) -> dict[str, Actual]:
    with ThreadPoolExecutor(max_workers=HASH_WORKERS) as pool:
        results = pool.map(lambda p: (p, hash_file(root / p, p in git_blob_for)), paths)
        return dict(results)


def compare(expected: dict[str, Expected], actual: dict[str, Actual]) -> list[str]:
    """One line per problem, each naming the file; an empty list means every byte matches."""
    problems = []
    for path in sorted(set(expected) | set(actual)):
        want, got = expected.get(path), actual.get(path)
        presence_or_size = _presence_or_size_problem(path, want, got)
        if presence_or_size:
            problems.append(presence_or_size)
            continue
        assert want is not None and got is not None  # no presence problem: both tables have the file
        if want.sha256 is not None and got.sha256 != want.sha256:
            problems.append(f"{path}: sha256 mismatch: expected {want.sha256}, found {got.sha256}")
        elif want.sha256 is None and want.git_blob_sha1 is not None and got.git_blob_sha1 != want.git_blob_sha1:
            problems.append(f"{path}: git blob id mismatch: expected {want.git_blob_sha1}, found {got.git_blob_sha1}")
        elif want.sha256 is None and want.git_blob_sha1 is None:
            problems.append(f"{path}: nothing to verify it against")
    return problems


# --- manifests --------------------------------------------------------------------------------


def build_manifest(repo: str, revision: str, actual: dict[str, Actual], checks: dict[str, str]) -> dict:
    return {
        "manifestVersion": MANIFEST_VERSION,
        "repo": repo,
        "revision": revision,
        "totalBytes": sum(a.size for a in actual.values()),
        "files": [
            {"path": p, "size": a.size, "sha256": a.sha256, "verifiedAgainst": checks.get(p, "")}
            for p, a in sorted(actual.items())
        ],
    }


def read_manifest(path: Path) -> tuple[dict, dict[str, Expected]]:
    try:
        doc = json.loads(path.read_text())
        files = {f["path"]: Expected(size=int(f["size"]), sha256=str(f["sha256"])) for f in doc["files"]}
    except FileNotFoundError:
        raise UsageError(f"manifest {path} does not exist") from None
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"manifest {path} is not a valid manifest: {err}") from None
    return doc, files


def write_manifest(path: Path, manifest: dict) -> None:
    # Written last and atomically: a manifest on the volume means the folder was verified whole.
    # The temp file lives under the folder's .cache/ (same file system, so the rename is atomic).
    tmp = path.parent / TEMP_DIR / (path.name + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


# --- the Hub side -----------------------------------------------------------------------------


def _glob(pattern: str) -> str:
    # huggingface_hub turns a folder pattern "dir/" into "dir/*"; do the same so both sides agree.
    return pattern + "*" if pattern.endswith("/") else pattern


def selected(path: str, include: list[str], exclude: list[str]) -> bool:
    """Does `hf download --include ... --exclude ...` fetch this repo path? (its filter_repo_objects rule)"""
    return any(fnmatch.fnmatchcase(path, _glob(p)) for p in include) and not any(
        fnmatch.fnmatchcase(path, _glob(p)) for p in exclude
    )


def hub_expectations(repo: str, revision: str, include: list[str], exclude: list[str]) -> dict[str, Expected]:
    """What the Hub publishes for each selected file at this commit (token from HF_TOKEN, if any)."""
    from huggingface_hub import HfApi  # only `fetch` needs the Hub; `verify` runs anywhere

    expected = {}
    for entry in HfApi().list_repo_tree(repo, revision=revision, recursive=True):
        if not hasattr(entry, "size") or not hasattr(entry, "blob_id"):
            continue  # a folder
        if not selected(entry.path, include, exclude):
            continue  # not part of the served model (README, original/*.pth, ...): not downloaded either
        lfs = getattr(entry, "lfs", None)
        sha256 = None
        if lfs is not None:
            sha256 = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, dict) else None)
        expected[entry.path] = Expected(size=int(entry.size), sha256=sha256, git_blob_sha1=entry.blob_id)
    return expected


def fileset_problems(expected: dict[str, Expected]) -> list[str]:
    """Checked before anything is downloaded: the globs must leave weights to serve."""
    if not any(p.endswith(WEIGHTS_SUFFIX) for p in expected):
        return [
            (
                f"no *{WEIGHTS_SUFFIX} weights among the files selected at this commit; the servers load "
                f"safetensors only (a .bin-only or consolidated-only checkpoint cannot be served as is)"
            )
        ]
    return []


def index_problems(local_dir: Path, actual: Mapping[str, object]) -> list[str]:
    """Every shard the safetensors index names must have been mirrored (not filtered out by a glob)."""
    if INDEX_NAME not in actual:
        return []
    try:
        weight_map = json.loads((local_dir / INDEX_NAME).read_text())["weight_map"]
        shards = set(weight_map.values())
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        return [f"{INDEX_NAME}: unreadable weight_map ({err})"]
    return [
        f"{INDEX_NAME}: names shard {s}, which the include/exclude globs left out" for s in sorted(shards - set(actual))
    ]


def download(repo: str, revision: str, local_dir: Path, include: list[str], exclude: list[str]) -> None:
    cmd = ["hf", "download", repo, "--revision", revision, "--local-dir", str(local_dir)]
    for pattern in include:
        cmd += ["--include", pattern]
    for pattern in exclude:
        cmd += ["--exclude", pattern]
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


# --- commands ---------------------------------------------------------------------------------


DEFERRED_MANIFEST = TEMP_DIR / "manifest.unsealed.json"


def cmd_fetch(
    repo: str, revision: str, local_dir: Path, include: list[str], exclude: list[str], defer_manifest: bool = False
) -> int:
    if not COMMIT_RE.match(revision):
        raise UsageError(f"--revision {revision!r} is not a 40-character commit SHA; a branch or tag moves")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise UsageError("HF_HUB_OFFLINE is set; the mirror Job is the one place that must reach the Hub")
    if not include:
        raise UsageError("give at least one --include glob; without one `hf download` fetches every file of the commit")
    # The listing first: a wrong glob, a gated repo or a missing commit fails in seconds, not after
    # hours of downloading.
    expected = hub_expectations(repo, revision, include, exclude)
    problems = fileset_problems(expected)
    if problems:
        return report_mismatch(local_dir, problems)
    local_dir.mkdir(parents=True, exist_ok=True)
    download(repo, revision, local_dir, include, exclude)
    paths = local_files(local_dir)
    non_lfs = {p for p, e in expected.items() if e.sha256 is None}
    actual = hash_tree(local_dir, paths, git_blob_for=non_lfs)
    problems = compare(expected, actual) or index_problems(local_dir, actual)
    if problems:
        return report_mismatch(local_dir, problems)
    checks = {p: ("hub-lfs-sha256" if expected[p].sha256 else "hub-git-blob-sha1") for p in actual}
    manifest = build_manifest(repo, revision, actual, checks)
    manifest["include"], manifest["exclude"] = list(include), list(exclude)
    target = local_dir / (DEFERRED_MANIFEST if defer_manifest else MANIFEST_NAME)
    if defer_manifest:
        # A manifest left by an earlier, unsigned run must not outlive this one's verdict.
        (local_dir / MANIFEST_NAME).unlink(missing_ok=True)
    write_manifest(target, manifest)
    print(
        f"verified {len(actual)} files, {manifest['totalBytes']} bytes of {repo}@{revision}; wrote {target}", flush=True
    )
    return 0


def cmd_seal(local_dir: Path, note: str) -> int:
    """Put the deferred manifest in place once the signature container has succeeded."""
    deferred = local_dir / DEFERRED_MANIFEST
    doc, _ = read_manifest(deferred)
    doc["signature"] = note
    write_manifest(local_dir / MANIFEST_NAME, doc)
    deferred.unlink()
    print(f"sealed {local_dir / MANIFEST_NAME}: {note}", flush=True)
    return 0


def cmd_verify(local_dir: Path, manifest_path: Path, sizes_only: bool = False) -> int:
    if not local_dir.is_dir():
        raise UsageError(f"--local-dir {local_dir} is not a directory")
    doc, expected = read_manifest(manifest_path)
    if sizes_only:
        problems = compare_sizes(expected, size_tree(local_dir, local_files(local_dir)))
        if problems:
            return report_mismatch(local_dir, problems)
        print(
            f"sizes of {len(expected)} files of {doc.get('repo', '?')}@{doc.get('revision', '?')} match "
            f"{manifest_path}",
            flush=True,
        )
        return 0
    actual = hash_tree(local_dir, local_files(local_dir))
    problems = compare(expected, actual)
    if problems:
        return report_mismatch(local_dir, problems)
    print(
        f"verified {len(actual)} files of {doc.get('repo', '?')}@{doc.get('revision', '?')} against {manifest_path}",
        flush=True,
    )
    return 0


def report_mismatch(local_dir: Path, problems: list[str]) -> int:
    print(f"VERIFICATION FAILED in {local_dir}: {len(problems)} problem(s)", file=sys.stderr)
    for line in problems:
        print(f"  {line}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mirror.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download a pinned revision, verify it against the Hub, write manifest.json")
    fetch.add_argument("--repo", required=True)
    fetch.add_argument("--revision", required=True)
    fetch.add_argument("--local-dir", required=True, type=Path)
    fetch.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="files to mirror (repeatable; passed to `hf download --include` and applied to the Hub listing)",
    )
    fetch.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="files to leave out even if included (repeatable)",
    )
    fetch.add_argument(
        "--defer-manifest",
        action="store_true",
        help="write the manifest under .cache/llm-serving/ for `seal` (a signature is checked first)",
    )
    verify = sub.add_parser("verify", help="re-hash a folder against its manifest, offline")
    verify.add_argument("--local-dir", required=True, type=Path)
    verify.add_argument("--manifest", type=Path, default=None)
    verify.add_argument("--sizes-only", action="store_true", help="compare the file set and sizes, not the bytes")
    seal = sub.add_parser("seal", help="put a deferred manifest in place after the signature was verified")
    seal.add_argument("--local-dir", required=True, type=Path)
    seal.add_argument("--signature-note", required=True, help="what was verified, recorded in the manifest")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            return cmd_fetch(args.repo, args.revision, args.local_dir, args.include, args.exclude, args.defer_manifest)
        if args.command == "seal":
            return cmd_seal(args.local_dir, args.signature_note)
        return cmd_verify(args.local_dir, args.manifest or args.local_dir / MANIFEST_NAME, args.sizes_only)
    except UsageError as err:
        print(f"mirror.py {args.command}: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"mirror.py fetch: `hf download` failed with exit status {err.returncode}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
