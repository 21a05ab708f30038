"""Fuzzing the sizing CLI (`python -m components.sizing`) with hostile config.json files and flags.

Property: it ends by itself in bounded time and memory (a worker under RLIMIT_AS), never prints a
traceback, exits 0 (fits), 1 (does not fit) or 2 (unusable input) with the documented output, and a
flag value or config.json count no sane request holds (tests/support/fuzz/strategies.py SIZING_OPTIONS,
BAD_COUNT_VALUES) is refused with exit 2 instead of being sized.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from tests.support.fuzz import figures
from tests.support.fuzz.harness import Outcome, Worker
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.strategies import SizingCase, sizing_cases

CASE_SECONDS = 60


@pytest.fixture(scope="module")
def worker():
    w = Worker("sizing")
    yield w
    w.stop()


def problems_of(case: SizingCase, outcome: Outcome) -> list[str]:
    if not outcome.clean:
        return [outcome.describe()]
    found = []
    err_lines = [line for line in outcome.stderr.splitlines() if not line.startswith("warning: ")]
    if outcome.exit not in (0, 1, 2):
        found.append(f"exit {outcome.exit}")
    if case.must_refuse and outcome.exit != 2:
        found.append(f"sized a request it must refuse (exit {outcome.exit}): {outcome.stdout[:300]}")
    if outcome.exit == 0:
        if "--json" in case.argv:
            result = json.loads(outcome.stdout)
            if result["fits"] is not True or result["kv_cache_tokens"] < 1:
                found.append(f"exit 0 for a result that does not fit: {outcome.stdout[:300]}")
        elif not outcome.stdout.startswith("Will it fit? yes"):
            found.append(f"exit 0 without 'yes': {outcome.stdout[:200]}")
    if outcome.exit in (1, 2):
        if len(err_lines) != 1 or not err_lines[0].startswith("error: ") or len(err_lines[0]) > 1500:
            found.append(f"exit {outcome.exit} without exactly one short error line: {outcome.stderr[-800:]!r}")
        if outcome.exit == 1 and not err_lines[0].startswith("error: does not fit: "):
            found.append(f"exit 1 for something other than 'does not fit': {err_lines[0][:200]}")
    return found


@fuzz_settings(default_examples=40, long_share=1.0)
@given(case=sizing_cases())
def test_any_request_ends_cleanly_with_the_documented_exit(worker, case):
    job = {"argv": case.argv, "config_bytes": case.config_bytes}
    if case.log_bytes is not None:
        job["log_bytes"] = case.log_bytes
    outcome = worker.run(job, CASE_SECONDS)
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
    figures.record("sizing", kind, outcome.seconds, found)
    assert survey() or not found, "\n".join(found) + f"\nargv: {case.argv}\nconfig.json: {case.config_bytes[:1500]!r}"
