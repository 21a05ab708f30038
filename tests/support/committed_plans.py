"""The committed stacks' offline plans as `python -m offline_plan` writes them, made once per test
process, for the tests that only read what a plain plan of a committed stack writes.

A plan of prod takes 10-40 s on a 2-core machine; five tests read one (plan.md, plan.json, the
manifests), and the determinism test needs one more run under another hash seed. Each plan runs in
its own process with a fixed PYTHONHASHSEED and registration jitter (SEED), the first of the two
runs tests/offline_plan/test_plan_determinism.py compares. Readers must not write into the folder:
every reader in the process gets the same one. Under xdist the reading modules run in one worker
(support/parallel.py PLAN_READERS), so each stack is planned once per `make test`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from offline_plan import mock_runtime
from tests.support import paths

SEED = "1"


@dataclass(frozen=True)
class PlanRun:
    stack: str
    returncode: int
    stdout: str
    stderr: str
    out: Path  # the --out folder; the plan is in out/<stack>

    @property
    def folder(self) -> Path:
        return self.out / self.stack

    def files(self) -> dict[str, bytes]:
        """Every file written, by its path under the --out folder."""
        return {str(p.relative_to(self.out)): p.read_bytes() for p in sorted(self.out.rglob("*")) if p.is_file()}


def plan_in_subprocess(stack: str, seed: str, out: Path) -> PlanRun:
    """`python -m offline_plan --stack <stack> --out <out>` with PYTHONHASHSEED and the jitter set to `seed`."""
    # The hash seed reorders sets; the jitter reorders resources that register concurrently.
    env = {**os.environ, "PYTHONHASHSEED": seed, mock_runtime.REGISTRATION_JITTER_ENV: seed}
    result = subprocess.run(
        [sys.executable, "-m", "offline_plan", "--stack", stack, "--out", str(out)],
        cwd=paths.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return PlanRun(stack, result.returncode, result.stdout, result.stderr, out)


_PLANS: dict[str, PlanRun] = {}


def committed_plan(stack: str) -> PlanRun:
    """The plan of the committed stack `stack` (Pulumi.<stack>.yaml as it is), run with SEED."""
    if stack not in _PLANS:
        out = Path(tempfile.mkdtemp(prefix=f"llm-serving-plan-{stack}-"))
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        _PLANS[stack] = plan_in_subprocess(stack, SEED, out)
    return _PLANS[stack]
