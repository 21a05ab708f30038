"""Running the smoke check, the load sweep and the verification runner against the fault server, as users run them: a
subprocess under RLIMIT_AS with a wall-clock bound of the tool's own deadline plus a margin.
Shared by tests/fuzz/test_fuzz_endpoints.py (the properties) and tests/hostile/test_hostile_endpoints.py (the
named regressions)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time

import pytest

from endpoint_tools.smoke import UNFORESEEN
from tests.support import paths
from tests.support.fuzz.fault_server import KV_TOKENS, MODEL, FaultServer
from tests.support.fuzz.harness import limit_memory

ROOT = paths.ROOT
MEMORY = 1024**3
# Deadlines the tools get, and the margin for interpreter start-up and the last request's cut-off.
REQUEST_SECONDS, RUN_SECONDS, MARGIN_SECONDS = 2, 8, 20


@pytest.fixture(scope="module")
def server():
    srv = FaultServer().start()
    yield srv
    srv.stop()


def run_tool(
    module: str, args: list[str], run_seconds: float = RUN_SECONDS
) -> tuple[subprocess.CompletedProcess | None, float]:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=run_seconds + MARGIN_SECONDS,
            preexec_fn=limit_memory(MEMORY),
        )
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started
    return proc, time.monotonic() - started


def smoke(server: FaultServer, *extra: str, request: float = REQUEST_SECONDS, run: float = RUN_SECONDS):
    return run_tool(
        "components.smoke",
        [
            "--base-url",
            server.url,
            "--model",
            MODEL,
            "--timeout",
            str(request),
            "--total-timeout",
            str(run),
            "--expect-kv-tokens",
            str(KV_TOKENS),
            "--check-template",
            *extra,
        ],
        run,
    )


def loadtest(server: FaultServer, *extra: str, request: float = REQUEST_SECONDS, run: float = RUN_SECONDS):
    return run_tool(
        "components.loadtest",
        [
            "--base-url",
            server.url,
            "--model",
            MODEL,
            "--timeout",
            str(run),
            "--request-timeout",
            str(request),
            "--requests",
            "3",
            "--concurrency",
            "1,2",
            "--prompt-tokens",
            "fixed:16",
            "--output-tokens",
            "fixed:4",
            *extra,
        ],
        run,
    )


def verify(server: FaultServer, request: float = REQUEST_SECONDS, run: float = RUN_SECONDS):
    """The verification Job's runner (endpoint_tools/verify.py) with one target: the fault server,
    with the request and total deadlines the targets file gives it."""
    target = {
        "model": MODEL,
        "baseUrl": server.url,
        "names": [],
        "expectKvTokens": KV_TOKENS,
        "requestTimeoutSeconds": request,
        "totalTimeoutSeconds": run,
    }
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/targets.json"
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"targets": [target]}, handle)
        return run_tool("endpoint_tools.verify", ["--targets", path], run)


def clean_problems(proc, seconds: float) -> list[str]:
    if proc is None:
        return [f"still running after {seconds:.0f} s (deadline {RUN_SECONDS} s + {MARGIN_SECONDS} s)"]
    found = []
    if "Traceback (most recent call last)" in proc.stdout + proc.stderr:
        found.append(f"traceback:\n{proc.stderr[-3000:]}")
    if proc.returncode < 0:
        found.append(f"killed by signal {-proc.returncode} (memory limit?)")
    if UNFORESEEN in proc.stdout:
        found.append("a check met an answer it did not foresee")
    return found
