"""The performance model's error on public vLLM benchmarks, per split, GPU type and model kind.

A pytest plugin (loaded by pytest.ini's `-p tests.support.perf_report`): when a run includes
tests/planner/test_performance.py, the terminal summary gets the report `python -m
planner.perf_calibration` prints (every point, MAPE per split, GPU type and model kind, the
SLO-concurrency hit rate), after one line saying what the held-out figures are. No `-s` needed.

    venv/bin/python -m tests.support.perf_report     # the same report without pytest
"""

from __future__ import annotations

PERF_TEST_FILES = ("test_performance.py",)


def report_lines() -> list[str]:
    from planner import perf_calibration as pc
    from planner.perf_model import UNCALIBRATED

    points = pc.load(str(_fixture()))
    effs = pc.fit_families(points)
    held = {p.source for p in points if p.split == "held_out"}
    gpus = {p.gpu for p in points if p.split == "held_out"}
    lines = [
        (
            f"The held-out split is the project's own collection: {len(held)} sources on {len(gpus)} GPU types "
            "(tests/fixtures/perf_benchmarks/README.md), chosen by this project, not an independent set."
        )
    ]
    lines += pc.render(
        pc.errors(points, effs, UNCALIBRATED), effs, pc.slo_hits(points, effs, UNCALIBRATED)
    ).splitlines()
    return lines


def _fixture():
    from tests.support import paths

    return paths.ROOT / "tests" / "fixtures" / "perf_benchmarks" / "benchmarks.json"


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # pragma: no cover - output only
    ran = {
        report.nodeid.split("::")[0].rsplit("/", 1)[-1]
        for key in ("passed", "failed", "xfailed", "xpassed")
        for report in terminalreporter.stats.get(key, [])
    }
    if not ran & set(PERF_TEST_FILES):
        return
    terminalreporter.write_sep("-", "performance model error on public vLLM benchmarks")
    for line in report_lines():
        terminalreporter.write_line(line)


if __name__ == "__main__":  # pragma: no cover
    print("\n".join(report_lines()))
