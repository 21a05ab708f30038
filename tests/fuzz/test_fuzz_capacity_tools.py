"""Fuzzing the capacity and sizing tools in-process: each `main(argv)` with generated flags and files.

Tools: `python -m planner.performance`, `python -m planner.capacity --explain`, `python -m components.sizing
--explain / --from-log` (startup logs cut, repeated, contradicting themselves, non-UTF-8, 1 MiB), `python -m
components.loadtest --expect-from-plan / --expect-*` (plan.json broken at any key) and `python -m
offline_plan.diff` (two plan.json folders). Inputs: tests/support/fuzz/tool_inputs.py; their sizes are
bounded there, so a case is quick (the tools' own limits are what `make fuzz` holds them to).

Property, for every case: no exception leaves `main` (argparse's SystemExit is the exit code it carries),
the exit code is one the tool documents (its module docstring and docs/hostile-input.md's table), and an
error exit prints one line saying what was wrong (for argparse's own errors, the `prog: error:` line after
its usage), naming the flag when the case planted a bad flag value.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import given

from endpoint_tools import loadtest
from offline_plan import diff
from planner import capacity_cli, performance, sizing_cli
from tests.support.fuzz import figures
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.tool_inputs import (
    ToolCase,
    loadtest_expect_cases,
    performance_cases,
    plan_diff_cases,
    sizing_explain_cases,
)

# A figure that left floating point ("inf ms", NaN in JSON); the sizing's "infinite" wording is no number.
NON_FINITE = re.compile(r"(?<![\w.])-?(?:nan|inf|infinity)(?![\w])", re.IGNORECASE)


SECONDS: list[float] = []


def run(main, case: ToolCase) -> tuple[int | None, str, str, str | None]:
    """(exit, stdout, stderr, traceback) of `main(argv)` with the case's files in a fresh folder; the seconds it
    took are kept for the figures `make fuzz` prints (nothing is asserted about them)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-tools-") as scratch:
        root = Path(scratch)
        names = {"nowhere": str(root / "nowhere")}
        for name, data in case.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            names[name] = str(path)
            names[path.parent.name] = str(path.parent)
        for side in ("base", "head"):
            names.setdefault(side, str(root / side))
        argv = []
        for arg in case.argv:
            for name, path in names.items():
                arg = arg.replace("{" + name + "}", path)
            argv.append(arg)
        out, err = io.StringIO(), io.StringIO()
        code: int | None = None
        trace = None
        started = time.monotonic()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            trace = traceback.format_exc()
        SECONDS.append(time.monotonic() - started)
        return code, out.getvalue(), err.getvalue(), trace


def problems(case: ToolCase, result, exits: set[int], errors: set[int], prefix: str) -> list[str]:
    code, out, err, trace = result
    if trace is not None:
        return [f"traceback:\n{trace[-3000:]}"]
    found = []
    if code not in exits:
        found.append(f"exit {code}, not one of {sorted(exits)}; stderr {err[-500:]!r}")
    if code in errors:
        lines = [
            line
            for line in err.splitlines()
            if not line.startswith(("warning: ", "usage: ", "  ", "python -m components.loadtest: warning"))
            and line.strip()
        ]
        if len(lines) != 1 or not lines[0].startswith(prefix) or len(lines[0]) > 1500:
            found.append(f"exit {code} without exactly one short error line starting {prefix!r}: {err[-800:]!r}")
        elif case.bad_flag is not None and code == 2 and "--" not in lines[0] and "config.json" not in lines[0]:
            # Another flag, or a broken config.json, may be refused first; then that one is named.
            found.append(f"the error does not name a flag (planted {case.bad_flag}): {lines[0]!r}")
    if case.bad_flag is not None and code == 0:
        found.append(f"exit 0 with a bad {case.bad_flag} in {case.argv}")
    if code == 0 and NON_FINITE.search(out):
        found.append(f"a non-finite figure printed: {NON_FINITE.search(out).group()!r} in {out[:600]!r}")
    if "Traceback (most recent call last)" in out + err:
        found.append("a traceback printed")
    return found


def check(tool: str, case: ToolCase, found: list[str]) -> None:
    seconds = SECONDS.pop() if SECONDS else 0.0
    figures.record(
        tool,
        "traceback" if found and found[0].startswith("traceback") else "wrong_exit" if found else None,
        seconds,
        found,
    )
    assert survey() or not found, (
        "\n".join(found) + f"\nargv: {case.argv}\nfiles: { {k: v[:600] for k, v in case.files.items()} }"
    )


@fuzz_settings(default_examples=12, long_share=0.2)
@given(case=performance_cases())
def test_performance_ends_with_a_prediction_or_one_line_naming_the_flag(case):
    found = problems(case, run(performance.main, case), {0, 2}, {2}, "error: ")
    check("performance", case, found)


@fuzz_settings(default_examples=10, long_share=0.2)
@given(case=performance_cases(explain=True))
def test_capacity_explain_ends_with_an_explanation_or_one_line_naming_the_flag(case):
    found = problems(case, run(capacity_cli.main, case), {0, 2}, {2}, "error: ")
    check("capacity_explain", case, found)


@fuzz_settings(default_examples=12, long_share=0.2)
@given(case=sizing_explain_cases())
def test_sizing_explain_and_from_log_end_with_the_documented_exit(case):
    found = problems(case, run(sizing_cli.main, case), {0, 1, 2}, {1, 2}, "error: ")
    check("sizing_from_log", case, found)


@fuzz_settings(default_examples=15, long_share=0.4)
@given(case=loadtest_expect_cases())
def test_loadtest_expectations_are_usable_or_a_usage_error(case):
    # Nobody listens on 127.0.0.1:9: a usable expectation gets as far as the connection (exit 1).
    found = problems(case, run(loadtest.main, case), {1, 2}, {2}, "python -m components.loadtest: error: ")
    check("loadtest_expect", case, found)


@fuzz_settings(default_examples=15, long_share=0.4)
@given(case=plan_diff_cases())
def test_plan_diff_prints_a_diff_or_one_line(case):
    result = run(diff.main, case)
    found = problems(case, result, {0, 2}, {2}, "offline plan diff: ")
    if "unexpected shape" in result[2]:
        # The catch-all names no key: each row the diff reads is checked in offline_plan/diff.py load().
        found.append(f"a plan.json row refused without naming its key: {result[2][-400:]!r}")
    check("plan_diff", case, found)
