"""Fuzzing the offline plan (`make plan`) with hostile stack files (issue 15).

Property: whatever the stack file holds, the plan ends by itself within a bounded time and memory
(a worker under RLIMIT_AS, tests/support/fuzz/harness.py), prints no traceback and no "internal error"
(the plan's own report of a defect, counted as a traceback), exits 0, 1 or 2, and an exit
2 prints only lines that name the stack file (and, past the file, a key or a line:column) of bounded
length. A value no field accepts (tests/support/fuzz/strategies.py ALWAYS_INVALID: control characters,
pasted tokens, NaN, integers beyond int64, binary, ...) must be refused, and a pasted token never
appears in what the plan prints or writes.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given

from tests.support.fuzz import figures
from tests.support.fuzz.harness import Outcome, Worker
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.strategies import FAKE_TOKENS, StackCase, stack_cases

# The plan of a committed stack takes 1-3 s; a case may take longer (100 models), never minutes.
CASE_SECONDS = 120
# A problem line quotes at most a short excerpt of a bad value (common.untrusted.excerpt).
MAX_LINE = 700
LINE = re.compile(r"^  Pulumi\.fuzz\.yaml(:\d+:\d+)?: \S")


@pytest.fixture(scope="module")
def worker():
    w = Worker("plan")
    yield w
    w.stop()


def problems_of(case: StackCase, outcome: Outcome) -> list[str]:
    """What is wrong with one outcome (empty when it behaved)."""
    if not outcome.clean:
        return [outcome.describe()]
    found = []
    if outcome.exit not in (0, 1, 2):
        found.append(f"exit {outcome.exit}, not 0, 1 or 2")
    # The plan reports a defect of its own as "internal error" (exit 1) rather than as a traceback or a
    # config problem: for the fuzzer that is a traceback, the class the harness counts.
    if "internal error:" in outcome.stderr:
        found.append(f"internal error: {outcome.stderr.splitlines()[1:3]}")
    if case.must_refuse and outcome.exit != 2:
        found.append(f"accepted a value no field takes (exit {outcome.exit}); planted at {case.planted}")
    if outcome.exit == 2:
        lines = outcome.stderr.splitlines()
        if not lines or lines[0] != "plan failed for stack fuzz:":
            found.append(f"first line is not the failure header: {lines[:1]}")
        for line in lines[1:]:
            if not LINE.match(line):
                found.append(f"a problem line that names no stack file and key: {line[:300]!r}")
            if len(line) > MAX_LINE:
                found.append(f"a problem line of {len(line)} characters (quotes too much): {line[:200]!r}...")
    for token in FAKE_TOKENS:
        if token in outcome.stdout + outcome.stderr:
            found.append(f"a pasted token reached the output: {token[:6]}...")
    return found


def kind_of(case: StackCase, outcome: Outcome, found: list[str]) -> str | None:
    if not found:
        return None
    if outcome.hang:
        return "hang"
    if outcome.crashed:
        return "crash"
    if not outcome.clean or "internal error:" in outcome.stderr:
        return "traceback"
    if outcome.exit not in (0, 1, 2) or (case.must_refuse and outcome.exit != 2):
        return "wrong_exit"
    return "unclear_message"


# The heaviest property of `make test`: a case that passes validation is a whole plan (3-15 s on a
# loaded 2-core machine). `make test` tries 6 cases (with the fixed seed, the same 6 every run: two
# full plans, a GCP and an AWS one, and refusals); `make fuzz` tries FUZZ_EXAMPLES x 0.2 (500 by
# default) with a fresh seed.
@fuzz_settings(default_examples=6, long_share=0.2)
@given(case=stack_cases())
def test_any_stack_file_ends_cleanly_with_the_file_and_key_named(worker, case):
    outcome = worker.run({"stack": "fuzz", "stack_text": case.text}, CASE_SECONDS)
    found = problems_of(case, outcome)
    figures.record("plan", kind_of(case, outcome, found), outcome.seconds, found)
    assert survey() or not found, "\n".join(found) + f"\n--- stack file ---\n{case.text[:3000]}"
