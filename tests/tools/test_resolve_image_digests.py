"""tools/resolve_image_digests.py against a local stand-in registry (tests/support/registry_standin.py).

An honest registry: the token challenge is answered, the digest is checked and printed, and
--write rewrites common/images.py (a copy) so the program deploys `repo:tag@sha256:...`. A hostile
or broken one: each misbehaviour ends within the deadline, under a 1 GiB address-space limit, with
one line naming the image and a documented exit status, never a traceback, and nothing written.
"""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
import time

import pytest

from common import images
from tests.support import paths
from tests.support.fuzz.harness import limit_memory
from tests.support.registry_standin import DIGEST, StandInRegistry
from tools import resolve_image_digests as tool

ROOT = paths.ROOT
TIMEOUT = 2
MARGIN = 15


@pytest.fixture(scope="module")
def registry():
    srv = StandInRegistry().start()
    yield srv
    srv.stop()


def run(registry, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.resolve_image_digests",
            "--timeout",
            str(TIMEOUT),
            "--endpoint",
            f"docker.io={registry.url}",
            "--endpoint",
            f"ghcr.io={registry.url}",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 8 + MARGIN,
        preexec_fn=limit_memory(1024**3),
    )
    return proc, time.monotonic() - started


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
