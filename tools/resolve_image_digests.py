"""Resolve each image of common/images.py from its tag to the digest the registry serves.

    python -m tools.resolve_image_digests                 # print each image's digest
    python -m tools.resolve_image_digests --write         # and rewrite the table in common/images.py
    python -m tools.resolve_image_digests --only vllm     # one entry (repeatable)
    python -m tools.resolve_image_digests --check         # CI: does the table match the registries?

Run it on a machine that can reach the registries (Docker Hub, ghcr.io, ...): this project's
development machines cannot. It speaks the OCI Distribution API with anonymous pulls only:

1. GET https://<registry>/v2/<name>/manifests/<tag>, accepting an OCI image index or a Docker
   manifest list (the multi-architecture entry, what a node resolves its platform from) or a
   single-platform manifest;
2. on 401, read the `WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge, ask the
   realm for an anonymous token for `repository:<name>:pull`, and repeat the GET with it;
3. take `Docker-Content-Digest` and check it against the sha256 of the body received: a registry
   (or anything between) that names a digest the body does not hash to is refused;
4. check that the body is the manifest its content type names before its digest is used: all the
   bytes its Content-Length declared, JSON, schemaVersion 2, a `mediaType` field (when present,
   always for Docker's types) equal to the content type, `manifests` descriptors for an index or
   manifest list, `config` and `layers` descriptors for a single-platform manifest. An empty
   answer, a login page or half a manifest is never hashed into the table.

Everything the registry sends is untrusted and bounded: each request has a deadline (--timeout, for
a server that stalls or drips bytes), a manifest is read up to 4 MiB and a token answer up to 64 KiB,
the content type must be a manifest type, tokens are parsed with common.untrusted's bounded JSON
and must be RFC 6750 b64tokens before they become a header, every http.client or socket failure (a
status line that is not HTTP, too many headers, a bad chunk) is one line, and only https is spoken
except to a loopback address (the tests' stand-in registry).

Exit status: 0 every requested image resolved (and, with --write, the table rewritten);
1 at least one image could not be resolved (one line each on stderr: unreachable, refused, a
deadline, a body too large or truncated, a wrong content type, a body that is not the manifest its
type names, an unusable token, an answer that is not HTTP); 2 bad arguments; 3 a digest check failed (the
header names a digest the body does not hash to, or a malformed digest): treat as an attack or a
broken proxy, and nothing is written; 4 common/images.py could not be rewritten; 5 (--check) the
table lacks a digest the registry serves or names another one (a tag pushed again, or a cited digest
that was wrong): the lines to commit are printed.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import ipaddress
import os
import re
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from common import images
from common.facts import Fact
from common.untrusted import InputLimitError, NotJsonError, excerpt, loads_json

# Manifest media types (OCI image-spec media-types.md; Docker's manifest v2 schema 2), most specific
# multi-arch first. A registry answers with one of them as Content-Type.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
# The OCI distribution spec asks registries to accept manifests of at least 4 MiB; nothing larger
# is a manifest this program would deploy.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
INDEX_TYPES = MANIFEST_TYPES[:2]
# The manifest fields each kind must carry (OCI image-spec v1.1.0 image-index.md and manifest.md:
# schemaVersion 2, `manifests` an array for an index, `config` a descriptor and `layers` an array
# for a manifest, a `mediaType` field that, when present, is the type the registry named; Docker's
# distribution v2.8.3 docs/spec/manifest-v2-2.md: the same fields, `mediaType` required).
DOCKER_TYPES = MANIFEST_TYPES[1::2]
MAX_TOKEN_BYTES = 64 * 1024
# What an `Authorization: Bearer` credential may hold: RFC 6750 section 2.1's b64token
# (https://www.rfc-editor.org/rfc/rfc6750#section-2.1). Anything else (a control character, a
# space, a character outside Latin-1) would be sent as a header or fail to encode; it is refused.
B64TOKEN_RE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_CHALLENGE_CHARS = 2048
DEFAULT_TIMEOUT = 30.0
READ_CHUNK = 64 * 1024
# Docker Hub's API host: `docker.io` names are served from registry-1.docker.io.
API_HOSTS = {images.DOCKER_HUB: images.DOCKER_HUB_API_HOST}

EXIT_OK, EXIT_UNRESOLVED, EXIT_USAGE, EXIT_DIGEST_MISMATCH, EXIT_WRITE, EXIT_TABLE_DIFFERS = 0, 1, 2, 3, 4, 5


class ResolveError(Exception):
    """One image could not be resolved; the message is one line."""


class DigestMismatch(ResolveError):
    """The registry named a digest the body does not hash to (or a malformed one)."""


@dataclass(frozen=True)
class Resolved:
    key: str
    tagged: str
    digest: str
    url: str
    media_type: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect could take the request (and a bearer token) to another scheme or host; a manifest
    # or token endpoint that redirects is reported instead of followed.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise ResolveError(f"{req.full_url}: redirected ({code}) to {excerpt(newurl)}; not followed")


_OPENER = urllib.request.build_opener(_NoRedirect())


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str, what: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and _is_loopback(parts.hostname):
        return
    raise ResolveError(f"{what} {excerpt(url)} is not an https address (plain http only to a loopback address)")


_T = TypeVar("_T")


def _with_deadline(fn: Callable[[], _T], seconds: float, what: str) -> _T:
    """Run `fn` in a daemon thread and give up after `seconds`: a socket timeout bounds each read,
    not a server that sends one byte just before every timeout, so the whole exchange has a clock."""
    value: list[_T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            value.append(fn())
        except BaseException as err:
            error.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ResolveError(f"{what}: no complete answer within {seconds:g} s (the server stalls or drips)")
    if error:
        raise error[0]
    return value[0]


def _read_bounded(response, limit: int, what: str) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared is not None and not declared.strip().isdigit():
        raise ResolveError(f"{what}: Content-Length {excerpt(declared)} is not a number of bytes; refused")
    if declared and int(declared) > limit:
        raise ResolveError(f"{what}: the answer declares {int(declared):,} bytes, more than the {limit:,} read")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(READ_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise ResolveError(f"{what}: the answer exceeds {limit:,} bytes; refused")
        chunks.append(chunk)
    # http.client's read(n) returns what arrived when the connection closes early, without a word:
    # a body shorter than it declared is a truncated one.
    if declared and total != int(declared):
        raise ResolveError(f"{what}: the answer declares {int(declared):,} bytes but {total:,} arrived; refused")
    return b"".join(chunks)


def _get(url: str, headers: dict[str, str], limit: int, timeout: float) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            body = _read_bounded(response, limit, url)
            return response.status, {k.lower(): v for k, v in response.headers.items()}, body
    except urllib.error.HTTPError as err:
        # Error bodies are not needed; only the status and the challenge header.
        return err.code, {k.lower(): v for k, v in (err.headers or {}).items()}, b""
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ResolveError(f"{url}: {excerpt(str(reason))}") from None
    except (http.client.HTTPException, ValueError) as err:
        # A status line that is not HTTP, more than 100 headers, a chunk size that is not hex, a
        # body cut inside a chunk: http.client raises these past urllib, which wraps only OSError.
        raise ResolveError(f"{url}: not a usable HTTP answer ({type(err).__name__}: {excerpt(str(err), 80)})") from None


_PARAM_RE = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer realm="...",service="...",scope="..."` challenge."""
    if len(header) > MAX_CHALLENGE_CHARS:
        raise ResolveError(f"WWW-Authenticate challenge of {len(header):,} characters; refused")
    scheme, _, params = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise ResolveError(
            f"the registry asks for {excerpt(scheme)} authentication; only anonymous Bearer tokens are used"
        )
    found = dict(_PARAM_RE.findall(params))
    if "realm" not in found:
        raise ResolveError(f"WWW-Authenticate challenge without a realm: {excerpt(header)}")
    return found


def _token(challenge: dict[str, str], repository: str, timeout: float) -> str:
    realm = challenge["realm"]
    _check_url(realm, "token realm")
    query = {"scope": challenge.get("scope") or f"repository:{repository}:pull"}
    if challenge.get("service"):
        query["service"] = challenge["service"]
    url = f"{realm}{'&' if '?' in realm else '?'}{urllib.parse.urlencode(query)}"
    status, _, body = _get(url, {"Accept": "application/json"}, MAX_TOKEN_BYTES, timeout)
    if status != 200:
        raise ResolveError(f"token endpoint {excerpt(realm)} answered HTTP {status}")
    try:
        answer = loads_json(body, f"token from {excerpt(realm)}", max_bytes=MAX_TOKEN_BYTES)
    except (InputLimitError, NotJsonError) as err:
        raise ResolveError(str(err)) from None
    token = answer.get("token") or answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ResolveError(f"token endpoint {excerpt(realm)} gave no usable token")
    if not B64TOKEN_RE.fullmatch(token):
        # Never quoted: it is a credential, and it may hold what breaks a terminal line.
        raise ResolveError(
            f"token endpoint {excerpt(realm)} gave a token with characters a Bearer token cannot hold "
            "(control characters, spaces or non-ASCII; RFC 6750 b64token); not sent"
        )
    return token


def manifest_url(ref: str, endpoints: dict[str, str]) -> tuple[str, str, str]:
    """(URL of the tag's manifest, repository path, tag) for a `repo:tag` reference."""
    host, path, rest = images.split_reference(ref)
    tag = rest.lstrip(":").partition("@")[0]
    if not tag:
        raise ResolveError(f"{ref}: no tag to resolve")
    base = endpoints.get(host) or f"https://{API_HOSTS.get(host, host)}"
    return f"{base.rstrip('/')}/v2/{path}/manifests/{urllib.parse.quote(tag, safe='')}", path, tag


def resolve(ref: str, endpoints: dict[str, str], timeout: float) -> tuple[str, str, str]:
    """(digest, manifest URL, media type) of `ref`'s tag, the digest checked against the body."""
    url, repository, _ = manifest_url(ref, endpoints)
    _check_url(url, "registry")
    accept = {"Accept": ", ".join(MANIFEST_TYPES)}

    def exchange() -> tuple[int, dict[str, str], bytes]:
        status, headers, body = _get(url, accept, MAX_MANIFEST_BYTES, timeout)
        if status == 401:
            challenge = parse_challenge(headers.get("www-authenticate", ""))
            token = _token(challenge, repository, timeout)
            status, headers, body = _get(
                url, {**accept, "Authorization": f"Bearer {token}"}, MAX_MANIFEST_BYTES, timeout
            )
        return status, headers, body

    status, headers, body = _with_deadline(exchange, timeout, ref)
    if status != 200:
        raise ResolveError(f"{url} answered HTTP {status}")
    media_type = headers.get("content-type", "").split(";")[0].strip()
    if media_type not in MANIFEST_TYPES:
        raise ResolveError(f"{url} answered with content type {excerpt(media_type) or 'none'}, not a manifest")
    computed = "sha256:" + hashlib.sha256(body).hexdigest()
    claimed = headers.get("docker-content-digest", "").strip()
    if claimed and not images.DIGEST_RE.fullmatch(claimed):
        raise DigestMismatch(f"{url}: Docker-Content-Digest {excerpt(claimed)} is not sha256:<64 hex>")
    if claimed and claimed != computed:
        raise DigestMismatch(f"{url}: Docker-Content-Digest {claimed} but the body hashes to {computed}; refused")
    problem = manifest_problem(body, media_type)
    if problem:
        raise ResolveError(f"{url}: the {media_type} answer is not one: {problem}; refused")
    return computed, url, media_type


def _is_descriptor(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("mediaType"), str)
        and isinstance(value.get("digest"), str)
        and isinstance(value.get("size"), int)
        and not isinstance(value.get("size"), bool)
        and value["size"] >= 0
    )


def manifest_problem(body: bytes, media_type: str) -> str | None:
    """Why `body` is not the manifest kind `media_type` names (None when it is): the digest of an
    empty answer, a login page or half a manifest must never be written into common/images.py."""
    if not body:
        return "the body is empty"
    try:
        doc = loads_json(body, "the manifest", max_bytes=MAX_MANIFEST_BYTES)
    except (InputLimitError, NotJsonError) as err:
        return excerpt(str(err), 120)
    if not isinstance(doc, dict):
        return "the body is not a JSON object"
    if doc.get("schemaVersion") != 2 or isinstance(doc.get("schemaVersion"), bool):
        return f"schemaVersion is {excerpt(doc.get('schemaVersion'))}, not 2"
    declared = doc.get("mediaType")
    if declared is None and media_type in DOCKER_TYPES:
        return "no mediaType field (Docker manifests must name their type)"
    if declared is not None and declared != media_type:
        return f"its mediaType field says {excerpt(declared, 100)}"
    if media_type in INDEX_TYPES:
        manifests = doc.get("manifests")
        if not isinstance(manifests, list) or not all(_is_descriptor(m) for m in manifests):
            return "no `manifests` list of descriptors (mediaType, digest, size)"
        if "layers" in doc or "config" in doc:
            return "it carries an image manifest's config or layers"
        return None
    if not _is_descriptor(doc.get("config")):
        return "no `config` descriptor (mediaType, digest, size)"
    layers = doc.get("layers")
    if not isinstance(layers, list) or not all(_is_descriptor(layer) for layer in layers):
        return "no `layers` list of descriptors"
    if "manifests" in doc:
        return "it carries an index's manifests"
    return None


def _entry_source(r: Resolved, when: str) -> str:
    return f"{r.url} ({r.media_type}), Docker-Content-Digest checked against the body's sha256, {when}"


def render_table(current: dict[str, tuple[str, str, Fact]], resolved: dict[str, Resolved], when: str) -> str:
    """The DIGESTS block of common/images.py with the resolved entries replaced."""
    lines = ["DIGESTS: dict[str, tuple[str, str, Fact]] = {"]
    for key, (repo, tag, fact) in current.items():
        if key in resolved:
            r = resolved[key]
            call = f"_resolved({repo!r}, {tag!r}, {r.digest!r}, {_entry_source(r, when)!r})"
        elif getattr(fact, "value", None) is None:
            call = f"_unresolved({repo!r}, {tag!r}, {fact.source!r})"
        elif getattr(fact, "established", False):
            call = f"_resolved({repo!r}, {tag!r}, {fact.value!r}, {fact.source!r})"
        else:
            call = f"_cited({repo!r}, {tag!r}, {fact.value!r}, {fact.source!r})"
        lines.append(f"    {key!r}: ({repo!r}, {tag!r}, {call}),")
    lines.append("}")
    return "\n".join(lines)


BEGIN = "# BEGIN DIGESTS"
END = "# END DIGESTS"


def rewrite_module(path: Path, table: str) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise OSError(f"{path}: the {BEGIN} / {END} markers are missing")
    head_end = text.index("\n", start) + 1
    new = text[:head_end] + table + "\n" + text[end:]
    compile(new, str(path), "exec")  # never leave a module that does not parse
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=".images-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _endpoint(text: str) -> tuple[str, str]:
    host, sep, url = text.partition("=")
    if not sep or not host or not url:
        raise argparse.ArgumentTypeError(f"{excerpt(text)} is not HOST=URL (e.g. docker.io=http://127.0.0.1:5000)")
    return host, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.resolve_image_digests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", action="append", metavar="KEY", help="resolve only this entry of common/images.py")
    parser.add_argument("--write", action="store_true", help="rewrite the DIGESTS table of common/images.py")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 5 when the table lacks a digest or names another one than the registry serves",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds per image for the whole exchange (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--endpoint",
        action="append",
        type=_endpoint,
        default=[],
        metavar="HOST=URL",
        help="serve HOST's images from URL instead (a mirror, or the tests' stand-in registry)",
    )
    parser.add_argument("--module", type=Path, default=Path(images.__file__), help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    if not (0 < args.timeout <= 600):
        print("--timeout must be more than 0 and at most 600 seconds", file=sys.stderr)
        return EXIT_USAGE
    keys = args.only or list(images.IMAGES)
    unknown = [k for k in keys if k not in images.IMAGES]
    if unknown:
        print(f"unknown image {', '.join(map(excerpt, unknown))}; known: {', '.join(images.IMAGES)}", file=sys.stderr)
        return EXIT_USAGE
    if args.check and args.write:
        print("--check and --write exclude each other", file=sys.stderr)
        return EXIT_USAGE
    endpoints = dict(args.endpoint)
    resolved: dict[str, Resolved] = {}
    differs: list[str] = []
    status = EXIT_OK
    for key in keys:
        image = images.IMAGES[key]
        try:
            digest, url, media_type = resolve(image.tagged, endpoints, args.timeout)
        except DigestMismatch as err:
            print(f"{key}: DIGEST CHECK FAILED: {err}", file=sys.stderr)
            status = EXIT_DIGEST_MISMATCH
            continue
        except ResolveError as err:
            print(f"{key}: not resolved: {err}", file=sys.stderr)
            status = max(status, EXIT_UNRESOLVED)  # a digest mismatch (3) stays the exit status
            continue
        resolved[key] = Resolved(key, image.tagged, digest, url, media_type)
        change = "" if image.digest.value == digest else f" (was {image.digest.value or 'unresolved'})"
        print(f"{key}: {image.tagged}@{digest}{change}")
        if change:
            differs.append(key)
    if args.write and status != EXIT_DIGEST_MISMATCH and resolved:
        when = datetime.now(UTC).strftime("%Y-%m-%d")
        try:
            rewrite_module(args.module, render_table(images.DIGESTS, resolved, when))
        except (OSError, SyntaxError) as err:
            print(f"could not rewrite {args.module}: {excerpt(str(err))}", file=sys.stderr)
            return EXIT_WRITE
        print(f"rewrote {args.module}: {len(resolved)} digest(s); review the diff and commit it")
    if args.check and differs and status == EXIT_OK:
        print(
            f"the table differs from the registries for {', '.join(differs)}: run "
            f"`{images.RESOLVE_COMMAND}` and commit common/images.py",
            file=sys.stderr,
        )
        return EXIT_TABLE_DIFFERS
    return status


if __name__ == "__main__":
    sys.exit(main())
