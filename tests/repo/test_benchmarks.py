"""Every benchmark still runs: each one in benchmarks/, once at its smallest size (`--quick`).

The figures are the benchmarks' own business (`make bench`); here only that they run to the end and
print them, so a benchmark the program has outgrown is a red test, not a surprise at the next
`make bench`.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import ROOT

BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_there_are_benchmarks_to_run():
    assert BENCHMARKS, "benchmarks/ holds no benchmark"


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda path: path.name)
def test_each_benchmark_runs_at_its_smallest_size(benchmark):
    proc = subprocess.run(
        [sys.executable, str(benchmark), "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wall time" in proc.stdout and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
