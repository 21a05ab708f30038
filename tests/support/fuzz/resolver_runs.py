"""Running the digest resolver (tools/resolve_image_digests.py) against the stand-in registry
(tests/support/registry_standin.py), as users run it: a subprocess under a 1 GiB address-space
limit, with a wall-clock bound of its deadline plus a margin. Shared by tests/tools (the named
cases) and tests/fuzz/test_fuzz_resolver.py (the lying registry the fuzzer draws)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support import paths
from tests.support.fuzz.harness import limit_memory
from tests.support.registry_standin import StandInRegistry

ROOT = paths.ROOT
# The resolver's --timeout, and the margin for interpreter start-up and a loaded machine.
TIMEOUT = 2
MARGIN = 15


@pytest.fixture(scope="module")
def registry():
    srv = StandInRegistry().start()
    yield srv
    srv.stop()


def run(registry: StandInRegistry, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """The resolver with Docker Hub and ghcr.io served by the stand-in; (process, seconds)."""
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
