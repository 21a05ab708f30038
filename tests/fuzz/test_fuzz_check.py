"""Fuzzing the policy checker (`python -m policies.check`) with hostile manifests and pack configs.

Property: it ends by itself in bounded time and memory (a worker under RLIMIT_AS; a FIFO in the
scanned folder must not block it), never prints a traceback, exits 0 (no mandatory violation), 1
(violations) or 2 (unusable input, with one `check: error:` line), and input no API server would
take (NaN, a 400-digit failureThreshold is fine but a 5,000-digit one is not, an alias bomb, nesting
past the limit, non-UTF-8, a NaN threshold in --config) is refused with exit 2 instead of checked.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from tests.support.fuzz import figures
from tests.support.fuzz.harness import Outcome, Worker
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.strategies import CheckCase, check_cases

CASE_SECONDS = 120


@pytest.fixture(scope="module")
def worker():
    w = Worker("check")
    yield w
    w.stop()


def problems_of(case: CheckCase, outcome: Outcome) -> list[str]:
    if not outcome.clean:
        return [outcome.describe()]
    found = []
    if outcome.exit not in (0, 1, 2):
        found.append(f"exit {outcome.exit}")
    if case.must_refuse and outcome.exit != 2:
        found.append(f"checked input it must refuse (exit {outcome.exit})")
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("check: error:")]
    if outcome.exit == 2 and (len(errors) != 1 or len(errors[0]) > 1500 or outcome.stdout):
        found.append(f"exit 2 without exactly one short error line: {outcome.stderr[-800:]!r}")
    if outcome.exit in (0, 1) and "--json" in case.argv:
        json.loads(outcome.stdout)
    return found


@fuzz_settings(default_examples=25, long_share=0.5)
@given(case=check_cases())
def test_any_manifest_folder_ends_cleanly_with_the_documented_exit(worker, case):
    outcome = worker.run(
        {"files": case.files, "fifos": case.fifos, "argv": case.argv, "config_bytes": case.config_bytes}
        if case.config_bytes is not None
        else {"files": case.files, "fifos": case.fifos, "argv": case.argv},
        CASE_SECONDS,
    )
    found = problems_of(case, outcome)
    kind = None
    if found:
        kind = (
            "hang"
            if outcome.hang
            else "crash"
            if outcome.crashed
            else "traceback"
            if not outcome.clean
            else "wrong_exit"
        )
    figures.record("check", kind, outcome.seconds, found)
    assert survey() or not found, (
        "\n".join(found) + f"\nargv: {case.argv}\nfiles: {sorted(case.files)} fifos: {case.fifos}"
        f"\nconfig: {(case.config_bytes or '')[:300]!r}"
    )
