"""The load sweep against a prediction (endpoint_tools/expectation.py, loadtest --expect-*): predicted against
measured per level with the error, the SLO concurrency within one sweep step or not, text and JSON saying the same,
and every unusable prediction a one-line usage error naming the flag (exit 2), also under random input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from endpoint_tools import expectation, loadtest
from endpoint_tools.load_report import RequestSample, summarize
from tests.support import paths
from tests.support.fuzz.fault_server import MODEL
from tests.support.fuzz.settings import fuzz_settings
from tests.support.fuzz.tool_inputs import plan_prediction


def _level(concurrency, ttft_s, tokens=10, duration=1.0, errors=0, gap=0.01):
    samples = [
        RequestSample(ok=True, ttft=t, itl=[gap] * (tokens - 1), output_tokens=tokens, latency=t + gap * (tokens - 1))
        for t in ttft_s
    ] + [RequestSample(ok=False, error="boom")] * errors
    return summarize(concurrency, samples, len(samples), duration)


def _plan(tmp_path, models):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"format": "llm-serving offline plan summary v1", "models": models}))
    return str(path)


def test_each_level_gets_predicted_measured_and_the_signed_error():
    level = _level(1, [0.08, 0.12], tokens=11, duration=0.5, gap=0.008)
    exp = expectation.parse_prediction(plan_prediction(), "p", "plan")
    report = expectation.compare(exp, [level])
    (row,) = report["levels"]
    assert row["measured"]["ttft_mean_ms"] == 100.0 and row["error_percent"]["ttft_mean_ms"] == 0.0
    # TPOT measured 8 ms against 10 predicted: the model is 25% pessimistic.
    assert row["measured"]["tpot_ms"] == 8.0 and row["error_percent"]["tpot_ms"] == 25.0
    assert row["measured"]["output_tokens_per_s"] == 44.0
    assert row["error_percent"]["output_tokens_per_s"] == round((50 - 44) / 44 * 100, 1)
    text = "\n".join(expectation.lines(report))
    assert "concurrency 1: TTFT mean 100.0/100.0 ms (+0.0%)" in text and "TPOT p50 10.00/8.00 ms (+25.0%)" in text


@pytest.mark.parametrize(
    "predicted, ttfts_by_level, measured, within",
    [
        # Level 4 breaks the TTFT p95 of 500 ms: measured 2; predicted 2 or 3 is on that step.
        (2, {1: [0.1], 2: [0.2], 4: [0.9]}, 2, True),
        (3, {1: [0.1], 2: [0.2], 4: [0.9]}, 2, True),
        # Predicted 8 sits on level 8, two steps above the measured 2.
        (8, {1: [0.1], 2: [0.2], 4: [0.9], 8: [0.1]}, 2, False),
        # Even level 1 misses: measured none; a prediction of 1 is one step away, 4 is not.
        (1, {1: [0.9], 2: [0.9], 4: [0.9]}, None, True),
        (4, {1: [0.9], 2: [0.9], 4: [0.9]}, None, False),
        # A prediction above the last level while level 4 breaks it: one past the last, two steps from 2.
        (183, {1: [0.1], 2: [0.2], 4: [0.9]}, 2, False),
        # Every level met: the measured 4 is a lower bound; a prediction at or above it is undecided,
        # one two steps below it is a miss whatever lies above.
        (183, {1: [0.1], 2: [0.2], 4: [0.3]}, 4, None),
        (4, {1: [0.1], 2: [0.2], 4: [0.3]}, 4, None),
        (1, {1: [0.1], 2: [0.2], 4: [0.3]}, 4, False),
    ],
)
def test_the_slo_concurrency_is_within_one_sweep_step_or_not(predicted, ttfts_by_level, measured, within):
    levels = [_level(c, t) for c, t in ttfts_by_level.items()]
    exp = expectation.parse_prediction(
        plan_prediction(levels=tuple(ttfts_by_level), highestConcurrencyAtSlo=predicted), "p", "plan"
    )
    slo = expectation.compare(exp, levels)["slo"]
    assert slo["measured_highest_concurrency"] == measured and slo["within_one_step"] is within
    line = expectation.lines(expectation.compare(exp, levels))[-1]
    verdict = {True: ": within one sweep step", False: "NOT within one sweep step", None: "undecided"}[within]
    assert line.endswith(verdict) or verdict in line


def test_a_level_with_a_failed_request_does_not_meet_the_slo():
    levels = [_level(1, [0.1]), _level(2, [0.1], errors=1), _level(4, [0.1])]
    assert expectation.measured_highest(levels, 500, 50) == 1


def test_explicit_values_take_one_value_or_one_per_level():
    exp = expectation.from_values([1, 2], {"--expect-tpot-ms": [10.0], "--expect-output-tps": [5.0, 9.0]})
    assert exp.levels[2].tpot_ms == 10.0 and exp.levels[2].output_tokens_per_s == 9.0
    with pytest.raises(expectation.ExpectationError, match="--expect-tpot-ms: 3 values for 2"):
        expectation.from_values([1, 2], {"--expect-tpot-ms": [1.0, 2.0, 3.0]})


@pytest.mark.parametrize(
    "models, model, message",
    [
        (
            [{"model": "a", "prediction": plan_prediction()}, {"model": "b", "prediction": None}],
            "b",
            "made no prediction",
        ),
        ([{"model": "a", "prediction": plan_prediction()}], "c", "'c' is not in the plan (it has 'a')"),
        (
            [{"model": "a", "prediction": {"predicted": False, "notPredicted": "no calibrated efficiency"}}],
            "a",
            "no calibrated efficiency",
        ),
        ([{"model": "a", "prediction": plan_prediction(levels=())}], "a", "levels must be a list"),
        (
            [{"model": "a", "prediction": {**plan_prediction(), "levels": [{"concurrency": 1, "tpotMs": -1}]}}],
            "a",
            "tpotMs must be from",
        ),
        (
            [{"model": "a", "prediction": {**plan_prediction(), "levels": [{"concurrency": True}]}}],
            "a",
            "concurrency must be a finite",
        ),
    ],
)
def test_unusable_plan_entries_name_the_flag_and_the_fix(models, model, message):
    with pytest.raises(expectation.ExpectationError, match="--expect-from-plan") as err:
        expectation.from_plan_json(json.dumps({"models": models}), model)
    assert message in str(err.value)


def _parse(argv):
    args = loadtest.build_parser().parse_args(["--base-url", "http://127.0.0.1:9", "--model", MODEL, *argv])
    return args, loadtest.resolve_expectation(args)


def test_the_plans_lengths_and_slo_become_the_sweeps(tmp_path):
    plan = _plan(tmp_path, [{"model": MODEL, "prediction": plan_prediction()}])
    args, exp = _parse(["--expect-from-plan", plan, "--concurrency", "1,2"])
    assert str(args.prompt_tokens) == "fixed:16" and str(args.output_tokens) == "fixed:4"
    assert (args.slo_ttft_ms, args.slo_tpot_ms) == (500.0, 50.0) and exp.highest == 2
    # Without a prediction the defaults stay what they were.
    args, exp = _parse([])
    assert exp is None and str(args.prompt_tokens) == "normal:256,64" and args.slo_tpot_ms is None


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "components.loadtest", *args], capture_output=True, text=True, timeout=60, cwd=paths.ROOT
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--expect-from-plan", "{missing}"], "--expect-from-plan"),
        (["--expect-from-plan", "{garbled}"], "--expect-from-plan"),
        (["--expect-from-plan", "{plan}", "--concurrency", "3"], "--concurrency 3: the plan predicted levels 1,2,4,8"),
        (["--expect-from-plan", "{plan}", "--prompt-tokens", "fixed:64"], "--prompt-tokens fixed:64 centres on 64"),
        (["--expect-from-plan", "{plan}", "--slo-ttft-ms", "100"], "--slo-ttft-ms 100 differs from the plan's SLO"),
        (["--expect-from-plan", "{plan}", "--expect-tpot-ms", "3"], "not both"),
        (["--expect-tpot-ms", "fast"], "--expect-tpot-ms 'fast'"),
        (["--expect-ttft-ms", "inf"], "--expect-ttft-ms 'inf'"),
        (["--expect-highest-concurrency", "4"], "--expect-highest-concurrency takes one number and needs the SLO"),
    ],
)
def test_bad_predictions_exit_2_with_one_line_before_any_request(tmp_path, extra, message):
    files = {
        "missing": str(tmp_path / "absent.json"),
        "garbled": str(tmp_path / "garbled.json"),
        "plan": _plan(tmp_path, [{"model": MODEL, "prediction": plan_prediction()}]),
    }
    (tmp_path / "garbled.json").write_text('{"models": [')
    # Port 9 is closed: reaching it would be exit 1, so exit 2 proves the flag was refused first.
    proc = _run("--base-url", "http://127.0.0.1:9", "--model", MODEL, *(a.format(**files) for a in extra))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_sweep_against_the_fake_server_reports_the_same_in_text_and_json(server, tmp_path):
    plan = _plan(tmp_path, [{"model": MODEL, "prediction": plan_prediction()}, {"model": "other", "prediction": None}])
    out = tmp_path / "sweep.json"
    proc = _run(
        *("--base-url", server.url, "--model", MODEL, "--concurrency", "1,2", "--requests", "3"),
        *("--expect-from-plan", plan, "--json", str(out), "--timeout", "20"),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    compared = report["expectation"]
    assert [row["concurrency"] for row in compared["levels"]] == [1, 2]
    assert report["prompt_tokens"] == "fixed:16" and report["slo"]["tpot_ms"] == 50.0
    for row, level in zip(compared["levels"], report["levels"], strict=True):
        assert row["measured"]["ttft_p95_ms"] == level["ttft_ms"]["p95"]
        assert row["measured"]["output_tokens_per_s"] == level["output_tokens_per_s"]
        # The text line carries the JSON's numbers.
        assert (
            f"concurrency {row['concurrency']}: TTFT mean 100.0/{row['measured']['ttft_mean_ms']:.1f} ms" in proc.stdout
        )
    # The fake server answers in milliseconds: every level meets the plan's SLO, so the measured 2 is a lower
    # bound and the predicted 2 cannot be judged: undecided.
    assert compared["slo"] == {
        "ttft_p95_ms": 500.0,
        "tpot_p50_ms": 50.0,
        "predicted_highest_concurrency": 2,
        "measured_highest_concurrency": 2,
        "every_level_met": True,
        "within_one_step": None,
    }
    assert (
        "highest concurrency meeting TTFT p95 <= 500 ms and TPOT p50 <= 50 ms: predicted 2, "
        "measured 2 (every level met: at least): undecided" in proc.stdout
    )


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**12) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=8,
)
_prediction_keys = st.sampled_from(
    ["predicted", "levels", "concurrency", "ttftMeanMs", "tpotMs", "highestConcurrencyAtSlo", "promptTokens", "model"]
)


@fuzz_settings(default_examples=25)
@given(
    doc=st.one_of(
        _json_values,
        st.fixed_dictionaries(
            {"models": st.lists(st.fixed_dictionaries({"model": st.just("m"), "prediction": _json_values}), max_size=2)}
        ),
        st.builds(
            lambda edits: {"models": [{"model": "m", "prediction": {**plan_prediction(), **edits}}]},
            st.dictionaries(_prediction_keys, _json_values, max_size=3),
        ),
    ),
    cut=st.integers(0, 400),
)
def test_any_plan_json_is_a_prediction_or_an_expectation_error(doc, cut):
    text = json.dumps(doc)
    for candidate in (text, text[:cut]):
        try:
            exp = expectation.from_plan_json(candidate, "m")
        except expectation.ExpectationError as exc:
            message = str(exc)
        else:
            assert exp.levels and all(n >= 1 for n in exp.levels)
            continue
        assert message.startswith("--expect-from-plan") and "\n" not in message


_flag_text = st.one_of(
    st.text(alphabet="0123456789.,-einfa ", max_size=12),
    st.lists(st.floats(), min_size=1, max_size=5).map(lambda xs: ",".join(map(str, xs))),
)


@fuzz_settings(default_examples=60)
@given(
    flags=st.dictionaries(
        st.sampled_from([*loadtest.EXPECT_FLAGS, "--expect-highest-concurrency"]), _flag_text, max_size=3
    )
)
def test_any_explicit_values_are_an_expectation_or_one_line_naming_a_flag(flags):
    # `--flag=value`: a value such as "-1" is then the flag's, as a user's shell would pass it.
    argv = [f"{flag}={text}" for flag, text in flags.items()]
    try:
        args, exp = _parse(argv)
    except expectation.ExpectationError as exc:
        message = str(exc)
    else:
        assert exp is None or all(n in args.concurrency for n in exp.levels)
        return
    assert message.startswith("--expect-") and "\n" not in message
