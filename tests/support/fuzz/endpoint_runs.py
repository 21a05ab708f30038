"""Running the smoke check and the load sweep against the fault server, as users run them: a
subprocess under RLIMIT_AS with a wall-clock bound of the tool's own deadline plus a margin.
Shared by tests/fuzz/test_fuzz_endpoints.py (the properties) and tests/hostile/test_hostile_endpoints.py (the
named regressions)."""

from __future__ import annotations

import subprocess
import sys
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


def run_tool(module: str, args: list[str]) -> tuple[subprocess.CompletedProcess | None, float]:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS + MARGIN_SECONDS,
            preexec_fn=limit_memory(MEMORY),
        )
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started
    return proc, time.monotonic() - started


def smoke(server: FaultServer, *extra: str):
    return run_tool(
        "components.smoke",
        [
            "--base-url",
            server.url,
            "--model",
            MODEL,
            "--timeout",
            str(REQUEST_SECONDS),
            "--total-timeout",
            str(RUN_SECONDS),
            "--expect-kv-tokens",
            str(KV_TOKENS),
            "--check-template",
            *extra,
        ],
    )


def loadtest(server: FaultServer, *extra: str):
    return run_tool(
        "components.loadtest",
        [
            "--base-url",
            server.url,
            "--model",
            MODEL,
            "--timeout",
            str(RUN_SECONDS),
            "--request-timeout",
            str(REQUEST_SECONDS),
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
    )


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
