"""Local stand-ins for `gcloud storage` and `aws s3`, for running the mirror Job's sync script for real.

Each is a small Python program installed as `gcloud` / `aws` on PATH. Buckets are folders under
$STANDIN_BUCKETS (gs://b/k -> $STANDIN_BUCKETS/b/k); every upload attempt is logged to
$STANDIN_LOG as one JSON line. They model only what the sync script relies on, as documented:

GCS, for a writer with roles/storage.objectCreator + objectViewer (the mirror's writer):
- replacing an existing object needs storage.objects.delete, so it fails with 403
  (https://cloud.google.com/storage/docs/access-control/iam-permissions);
- `cp --if-generation-match=0` onto an existing object fails with 412 Precondition Failed
  (https://cloud.google.com/storage/docs/request-preconditions); which of 403 and 412 GCS reports
  first for this writer was not established, and the script treats both alike;
- `rsync` compares modification times unless `--checksums-only`, which compares hashes
  (`gcloud storage rsync --help`, Cloud SDK 528.0.0); a changed mtime means an upload attempt.
S3, for a writer with s3:PutObject and s3:GetObject: overwrites are allowed; `s3 sync` uploads a
file that is missing, of another size, or newer than its object (`aws s3 sync help`);
`s3api put-object --if-none-match '*'` onto an existing key fails with 412 (botocore's s3 model).

$STANDIN_RACE_MANIFEST: when set, the first create-only manifest upload finds that file already
written by "another run" (it is copied in first), to exercise the script's race branch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_COMMON = r"""
import fnmatch, hashlib, json, os, re, shutil, sys
from pathlib import Path

ROOT = Path(os.environ["STANDIN_BUCKETS"])
META = ROOT / ".mtimes.json"

def log(**event):
    with open(os.environ["STANDIN_LOG"], "a") as f:
        f.write(json.dumps(event) + "\n")

def obj(uri):
    scheme, rest = uri.split("://", 1)
    return ROOT / rest

def mtimes():
    return json.loads(META.read_text()) if META.exists() else {}

def put(src: Path, uri: str):
    dst = obj(uri)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    m = mtimes(); m[uri] = src.stat().st_mtime; META.write_text(json.dumps(m))
    log(op="write", uri=uri)

def same(a: Path, b: Path):
    return hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()

def race(uri):
    race_file = os.environ.get("STANDIN_RACE_MANIFEST", "")
    if race_file and uri.endswith("/manifest.json") and not obj(uri).exists():
        put(Path(race_file), uri)
"""

GCLOUD = (
    _COMMON
    + r"""
def overwrite_denied(uri):
    log(op="denied", uri=uri)
    sys.exit(f"ERROR: HTTPError 403: writer does not have storage.objects.delete access to {uri}")

args = sys.argv[1:]
assert args[:1] == ["storage"], args
verb, rest = args[1], [a for a in args[2:] if a != "--no-user-output-enabled"]
flags = [a for a in rest if a.startswith("--")]
paths = [a for a in rest if not a.startswith("--")]
if verb == "cp":
    src, dst = paths
    if src.startswith("gs://"):
        if not obj(src).exists():
            sys.exit(f"ERROR: {src}: 404 No such object")
        shutil.copyfile(obj(src), dst)
        sys.exit(0)
    race(dst)
    if obj(dst).exists():
        if "--if-generation-match=0" in flags:
            log(op="precondition-failed", uri=dst)
            sys.exit(f"ERROR: HTTPError 412: At least one of the pre-conditions you specified did not hold. {dst}")
        overwrite_denied(dst)
    put(Path(src), dst)
elif verb == "rsync":
    src, dst = paths
    assert "--recursive" in flags, flags
    exclude = next((f.split("=", 1)[1].strip("'") for f in flags if f.startswith("--exclude=")), None)
    by_hash = "--checksums-only" in flags
    for path in sorted(Path(src).rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_dir() or (exclude and re.search(exclude, rel)):
            continue
        uri = f"{dst}/{rel}"
        if obj(uri).exists():
            unchanged = same(path, obj(uri)) if by_hash else mtimes().get(uri) == path.stat().st_mtime
            if unchanged:
                continue
            overwrite_denied(uri)
        put(path, uri)
else:
    sys.exit(f"stand-in gcloud: unsupported {args}")
"""
)

AWS = (
    _COMMON
    + r"""
args = sys.argv[1:]
def opt(name):
    return args[args.index(name) + 1] if name in args else None
if args[:2] == ["s3", "cp"]:
    src, dst = [a for a in args[2:] if not a.startswith("--")]
    if src.startswith("s3://"):
        if not obj(src).exists():
            sys.exit("fatal error: An error occurred (404) when calling the HeadObject operation: Not Found")
        shutil.copyfile(obj(src), dst)
    else:
        put(Path(src), dst)
elif args[:2] == ["s3", "sync"]:
    src, dst = [a for a in args[2:] if not a.startswith("--") and args[args.index(a) - 1] != "--exclude"]
    excludes = [args[i + 1] for i, a in enumerate(args) if a == "--exclude"]
    for path in sorted(Path(src).rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_dir() or any(fnmatch.fnmatch(rel, g) for g in excludes):
            continue
        uri = f"{dst}/{rel}"
        o = obj(uri)
        if o.exists() and o.stat().st_size == path.stat().st_size and path.stat().st_mtime <= mtimes().get(uri, 0):
            continue
        put(path, uri)
elif args[:2] == ["s3api", "put-object"]:
    uri = f"s3://{opt('--bucket')}/{opt('--key')}"
    race(uri)
    if obj(uri).exists() and opt("--if-none-match") == "*":
        log(op="precondition-failed", uri=uri)
        sys.exit("An error occurred (PreconditionFailed) when calling the PutObject operation: 412")
    put(Path(opt("--body")), uri)
else:
    sys.exit(f"stand-in aws: unsupported {args}")
"""
)


def install(bin_dir: Path) -> None:
    """Write `gcloud` and `aws` into `bin_dir`, run by this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in (("gcloud", GCLOUD), ("aws", AWS)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)


def environment(bin_dir: Path, buckets: Path, log: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_BUCKETS": str(buckets),
        "STANDIN_LOG": str(log),
    }
