"""Session-wide guard: with LLM_SERVING_REQUIRE_VLLM set, the real-vLLM checks may not skip.

`make test` (and CI) set the variable. The checks against a real vLLM (tests/vllm/ and the vLLM
parser check in tests/components/serving/test_vllm_args.py) skip on a developer machine without vLLM, which is fine
there; in CI a skip would turn "the flags and metric names were checked against vLLM" into a
silent no-op. So when the variable is set, any skip in those files makes the session fail, with
the skipped tests and their reasons listed at the end.

Self-contained (no project imports): tests/components/serving/test_vllm_args.py copies this file into a scratch tree
to prove the guard in a subprocess.
"""

from __future__ import annotations

import os
import pathlib

import pytest

REQUIRE_ENV = "LLM_SERVING_REQUIRE_VLLM"
_HERE = pathlib.Path(__file__).resolve().parent
# The files and folders whose tests must run, not skip, when vLLM is required.
GUARDED = (_HERE / "vllm", _HERE / "components" / "serving" / "test_vllm_args.py")

# (node id, reason) of every skip seen while vLLM is required, kept per pytest run.
_SKIPS = pytest.StashKey[list]()


def vllm_required() -> bool:
    """True when the environment demands the real-vLLM tests run (any value but empty or 0)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def _guarded(config: pytest.Config, nodeid: str) -> bool:
    path = (config.rootpath / nodeid.split("::", 1)[0]).resolve()
    return any(path == guard or guard in path.parents for guard in GUARDED)


def _reason(report: pytest.TestReport) -> str:
    # A skip's longrepr is (file, line, "Skipped: reason").
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2])
    return str(report.longrepr)


class _SkipRecorder:
    """Keeps the skips of one pytest run in its config's stash (the report hooks get no config)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def _record(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail") and vllm_required():
            self.config.stash[_SKIPS].append((report.nodeid, _reason(report)))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module-level pytest.skip / importorskip skips at collection, before any test report.
        self._record(report)


@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SKIPS] = []
    config.pluginmanager.register(_SkipRecorder(config))


def _guarded_skips(config: pytest.Config) -> list[tuple[str, str]]:
    return [(nodeid, reason) for nodeid, reason in config.stash.get(_SKIPS, []) if _guarded(config, nodeid)]


@pytest.hookimpl
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _guarded_skips(session.config) and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skips = _guarded_skips(config)
    if not skips:
        return
    terminalreporter.section(f"{REQUIRE_ENV} is set: real-vLLM tests skipped", red=True)
    for nodeid, reason in skips:
        terminalreporter.write_line(f"SKIPPED (counted as a failure) {nodeid}: {reason}")
    terminalreporter.write_line(
        f"{len(skips)} real-vLLM test(s) skipped while {REQUIRE_ENV} is set; the session fails. "
        f"Install vLLM with `make vllm-venv`, or unset {REQUIRE_ENV} for a local run without vLLM."
    )
