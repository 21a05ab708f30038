"""tools/resolve_image_digests.py against a local (and lying) stand-in registry (tests/support/registry_standin.py).

An honest registry: the token challenge is answered, the digest is checked and printed, and
--write rewrites common/images.py (a copy) so the program deploys `repo:tag@sha256:...`. A hostile
or broken one: each misbehaviour ends within the deadline, under a 1 GiB address-space limit, with
one line naming the image and a documented exit status, never a traceback, and nothing written.
"""

from __future__ import annotations

import hashlib
import json
import runpy
import shutil
import subprocess
import sys

import pytest

from common import images
from tests.support import paths
from tests.support.fuzz.resolver_runs import MARGIN, TIMEOUT, run
from tests.support.registry_standin import (
    DIGEST,
    DOCKER_MANIFEST_TYPE,
    INDEX_TYPE,
    LIST_TYPE,
    OCI_MANIFEST_TYPE,
    Answer,
    manifest_of,
)
from tools import resolve_image_digests as tool

ROOT = paths.ROOT


def test_an_honest_registry_resolves_through_the_token_challenge(registry):
    registry.fault = None
    registry.requests.clear()
    proc, _ = run(registry, "--only", "vllm", "--only", "endpoint-picker")
    assert proc.returncode == tool.EXIT_OK, proc.stderr
    assert f"vllm: vllm/vllm-openai:v0.32.0@{DIGEST}" in proc.stdout
    assert f"endpoint-picker: ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@{DIGEST}" in proc.stdout
    paths = [p for p, _ in registry.requests]
    # Docker Hub's one-component names live under the repository path as written; the challenge came
    # first, then the token, then the same GET with the token.
    assert "/v2/vllm/vllm-openai/manifests/v0.32.0" in paths
    assert any(p.startswith("/token?") and "scope=repository%3Avllm%2Fvllm-openai%3Apull" in p for p in paths)
    assert ("/v2/vllm/vllm-openai/manifests/v0.32.0", "Bearer stand-in-token") in registry.requests


def test_check_fails_while_the_table_lacks_a_digest_the_registry_serves(registry):
    registry.fault = None
    unresolved = images.unresolved()[0].key
    proc, _ = run(registry, "--only", unresolved, "--check")
    assert proc.returncode == tool.EXIT_TABLE_DIFFERS and images.RESOLVE_COMMAND in proc.stderr
    # A cited digest the registry does not serve (the stand-in serves its own) is caught the same way.
    proc, _ = run(registry, "--only", "endpoint-picker", "--check")
    assert proc.returncode == tool.EXIT_TABLE_DIFFERS and "endpoint-picker" in proc.stderr


def test_a_registry_without_a_digest_header_gets_the_body_hash(registry):
    registry.fault = "no_digest_header"
    proc, _ = run(registry, "--only", "gcloud")
    assert proc.returncode == tool.EXIT_OK and DIGEST in proc.stdout


def test_write_rewrites_the_table_so_the_program_deploys_by_digest(registry, tmp_path):
    registry.fault = None
    module = tmp_path / "images.py"
    shutil.copy(ROOT / "common" / "images.py", module)
    proc, _ = run(registry, "--only", "vllm", "--only", "storage-initializer", "--write", "--module", str(module))
    assert proc.returncode == tool.EXIT_OK, proc.stderr
    rewritten = runpy.run_path(str(module))
    table = rewritten["IMAGES"]
    assert table["vllm"].reference == f"vllm/vllm-openai:v0.32.0@{DIGEST}"
    assert table["vllm"].digest.established and "Docker-Content-Digest checked" in table["vllm"].digest.source
    assert table["storage-initializer"].resolved
    # Entries not asked for keep what they had: the cited picker digest, an unresolved image.
    assert table["endpoint-picker"].digest == images.IMAGES["endpoint-picker"].digest
    assert not table["verify-python"].resolved
    assert set(table) == set(images.IMAGES)


@pytest.mark.parametrize(
    "fault, status, says",
    [
        ("lie", tool.EXIT_DIGEST_MISMATCH, "but the body hashes to"),
        ("malformed_digest", tool.EXIT_DIGEST_MISMATCH, "is not sha256:<64 hex>"),
        ("wrong_type", tool.EXIT_UNRESOLVED, "content type 'text/html', not a manifest"),
        ("huge", tool.EXIT_UNRESOLVED, "exceeds 4,194,304 bytes"),
        ("huge_declared", tool.EXIT_UNRESOLVED, "declares 10,737,418,240 bytes"),
        ("stall", tool.EXIT_UNRESOLVED, "no complete answer within 2 s"),
        ("drip", tool.EXIT_UNRESOLVED, "no complete answer within 2 s"),
        ("bad_token_json", tool.EXIT_UNRESOLVED, "not valid JSON"),
        ("huge_token", tool.EXIT_UNRESOLVED, "more than the 65,536 read"),
        ("redirect", tool.EXIT_UNRESOLVED, "redirected (307)"),
        ("https_realm_elsewhere", tool.EXIT_UNRESOLVED, "is not an https address"),
    ],
)
def test_a_hostile_registry_is_refused_in_bounded_time_with_one_line(registry, tmp_path, fault, status, says):
    registry.fault = fault
    module = tmp_path / "images.py"
    shutil.copy(ROOT / "common" / "images.py", module)
    before = module.read_text()
    proc, seconds = run(registry, "--only", "vllm", "--write", "--module", str(module))
    registry.fault = None
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm: ") and says in lines[0], proc.stderr
    assert seconds < TIMEOUT + MARGIN
    assert module.read_text() == before, "nothing is written when the image was not resolved"


def test_a_missing_tag_and_an_unreachable_registry_are_one_line_each(registry):
    registry.fault = None
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.resolve_image_digests",
            "--timeout",
            "2",
            "--only",
            "vllm",
            "--only",
            "aws-cli",
            "--endpoint",
            "docker.io=http://127.0.0.1:9",
        ],  # discard port: connection refused
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == tool.EXIT_UNRESOLVED and "Traceback" not in proc.stderr
    assert [line.split(":")[0] for line in proc.stderr.strip().splitlines()] == ["vllm", "aws-cli"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["--only", "nope"], "unknown image 'nope'"),
        (["--timeout", "0"], "--timeout must be"),
        (["--endpoint", "docker.io"], "is not HOST=URL"),
    ],
)
def test_bad_arguments_exit_2(args, says, capsys):
    assert tool.main(args) == tool.EXIT_USAGE
    assert says in capsys.readouterr().err


def test_only_https_except_loopback():
    with pytest.raises(tool.ResolveError, match="not an https address"):
        tool.resolve("vllm/vllm-openai:v1", {"docker.io": "http://registry.example.com"}, 1)


def test_the_manifest_url_follows_the_reference_grammar():
    assert (
        tool.manifest_url("vllm/vllm-openai:v0.32.0", {})[0]
        == "https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/v0.32.0"
    )
    assert tool.manifest_url("alpine:3.20", {})[0] == "https://registry-1.docker.io/v2/library/alpine/manifests/3.20"
    assert tool.manifest_url("ghcr.io/llm-d/x:v1", {})[0] == "https://ghcr.io/v2/llm-d/x/manifests/v1"
    assert tool.manifest_url("localhost:5000/x:v1", {})[0] == "https://localhost:5000/v2/x/manifests/v1"


def test_the_challenge_parser_takes_realm_service_and_scope():
    got = tool.parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:vllm/vllm-openai:pull"'
    )
    assert got == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:vllm/vllm-openai:pull",
    }
    with pytest.raises(tool.ResolveError, match="only anonymous Bearer"):
        tool.parse_challenge('Basic realm="x"')
    with pytest.raises(tool.ResolveError, match="refused"):
        tool.parse_challenge("Bearer " + "a" * 5000)


# -- Issue 28, item 4: what is not a manifest is refused, and nothing is written --------------------
#
# Before: an empty, HTML or truncated body under a manifest content type was accepted and its sha256
# written into common/images.py; a status line that is not HTTP, a bad chunk and more than 100
# headers were tracebacks; a token with a character outside Latin-1 was a traceback and one with a
# control character was sent as a header.

INDEX = manifest_of(INDEX_TYPE)
IMAGE = manifest_of(OCI_MANIFEST_TYPE)


def _resolve_with(registry, tmp_path, answer: Answer | None = None, token: str | None = None):
    registry.fault, registry.answer, registry.token = None, answer, token
    registry.requests.clear()
    module = tmp_path / "images.py"
    shutil.copy(ROOT / "common" / "images.py", module)
    before = module.read_text()
    try:
        proc, seconds = run(registry, "--only", "vllm", "--write", "--module", str(module))
    finally:
        registry.answer, registry.token = None, None
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert seconds < TIMEOUT + MARGIN
    return proc, module.read_text() != before


@pytest.mark.parametrize(
    "answer, says",
    [
        (Answer(body=b""), "the body is empty"),
        (Answer(body=b"<html><body>Sign in</body></html>"), "not valid JSON"),
        (Answer(body=INDEX, framing="truncated"), f"declares {2 * len(INDEX) + 1:,} bytes but {len(INDEX):,} arrived"),
        (Answer(body=INDEX[: len(INDEX) // 2]), "not valid JSON"),
        (Answer(status_line=b"HTCPCP/1.0 418 I'm a teapot"), "not a usable HTTP answer (BadStatusLine"),
        (Answer(status_line=b"HTTP/1.1 2OO OK"), "not a usable HTTP answer (BadStatusLine"),
        (Answer(framing="bad_chunk"), "not a usable HTTP answer (IncompleteRead"),
        (Answer(extra_headers=tuple((b"X-H%d" % i, b"v") for i in range(150))), "got more than 100 headers"),
        (Answer(extra_headers=((b"Content-Length", b"12abc"),), framing="close"), "Content-Length"),
        (Answer(body=b"[1, 2, 3]"), "not a JSON object"),
        (Answer(body=b'{"schemaVersion": 1, "manifests": []}'), "schemaVersion is 1, not 2"),
        (Answer(body=b'{"schemaVersion": true, "manifests": []}'), "not 2"),
        (Answer(body=IMAGE), f"its mediaType field says '{OCI_MANIFEST_TYPE}'"),
        (Answer(body=INDEX, content_type=OCI_MANIFEST_TYPE), f"its mediaType field says '{INDEX_TYPE}'"),
        (Answer(body=b'{"schemaVersion": 2}'), "no `manifests` list"),
        (Answer(body=b'{"schemaVersion": 2, "manifests": [{"digest": 5}]}'), "no `manifests` list of descriptors"),
        (Answer(body=manifest_of(LIST_TYPE, with_media_type=False), content_type=LIST_TYPE), "no mediaType field"),
        (Answer(body=b'{"schemaVersion": 2, "config": {}}', content_type=OCI_MANIFEST_TYPE), "no `config`"),
        (
            Answer(
                body=json.dumps({**json.loads(manifest_of(DOCKER_MANIFEST_TYPE)), "layers": 5}).encode(),
                content_type=DOCKER_MANIFEST_TYPE,
            ),
            "no `layers` list",
        ),
        (Answer(body=b'{"schemaVersion": 2, "manifests": [' * 200 + b"]}" * 200), "nested deeper"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_body_that_is_not_the_manifest_its_type_names_is_refused_and_not_written(registry, tmp_path, answer, says):
    proc, written = _resolve_with(registry, tmp_path, answer)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == tool.EXIT_UNRESOLVED, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("vllm: not resolved: ") and says in lines[0], proc.stderr
    assert not written, "no digest of a refused body is written"


def test_a_digest_lie_on_a_body_that_is_not_a_manifest_is_still_the_digest_check(registry, tmp_path):
    proc, written = _resolve_with(registry, tmp_path, Answer(body=b"", digest=DIGEST))
    assert proc.returncode == tool.EXIT_DIGEST_MISMATCH and "but the body hashes to" in proc.stderr
    assert not written


@pytest.mark.parametrize(
    "token",
    ["tok\x01en", "tok\x7fen", "tok\u0085en", "tok\ten", "tok en", "tok\u2603en", "tok\u00e9en", "tok\x00"],
    ids=["SOH", "DEL", "NEL", "tab", "space", "snowman", "e-acute", "NUL"],
)
def test_a_token_a_bearer_header_cannot_hold_is_refused_before_it_is_sent(registry, tmp_path, token):
    proc, written = _resolve_with(registry, tmp_path, token=token)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == tool.EXIT_UNRESOLVED and len(lines) == 1 and "not sent" in lines[0], proc.stderr
    assert token not in proc.stderr, "a credential is never quoted"
    assert [auth for _, auth in registry.requests if auth] == [], "no request carried the token"
    assert not written


@pytest.mark.parametrize(
    "answer",
    [
        Answer(body=INDEX),
        Answer(body=manifest_of(INDEX_TYPE, with_media_type=False)),
        Answer(body=manifest_of(LIST_TYPE), content_type=LIST_TYPE),
        Answer(body=IMAGE, content_type=OCI_MANIFEST_TYPE),
        Answer(body=manifest_of(DOCKER_MANIFEST_TYPE), content_type=DOCKER_MANIFEST_TYPE),
        Answer(body=INDEX, framing="chunked"),
        Answer(body=INDEX, framing="close", digest=None),
        Answer(body=INDEX, content_type=INDEX_TYPE + "; charset=utf-8"),
    ],
    ids=[
        "oci-index",
        "oci-index-untyped",
        "docker-list",
        "oci-manifest",
        "docker-manifest",
        "chunked",
        "close",
        "param",
    ],
)
def test_every_manifest_kind_resolves_to_its_own_digest(registry, tmp_path, answer):
    proc, written = _resolve_with(registry, tmp_path, answer)
    digest = "sha256:" + hashlib.sha256(answer.body).hexdigest()
    assert proc.returncode == tool.EXIT_OK and f"@{digest}" in proc.stdout, proc.stderr
    assert written
