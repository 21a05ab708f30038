"""Fuzzing the smoke check, the load sweep and the verification runner against a misbehaving server
on 127.0.0.1.

tests/support/fuzz/fault_server.py serves an honest tiny "vLLM" whose endpoints can each be given a fault
(drip, stall, endless stream, 3 GB body, lies, malformed or nested JSON, wrong content type, error
events, closed connections); every drip and stall also comes behind `Connection: close`, an HTTP/1.0
status line and chunked bodies, kept alive or closed. Property, for every scenario: the tool, run as users run it in a
subprocess under RLIMIT_AS, ends within its own deadline plus a margin, prints no traceback and no
"unexpected answer" (an answer shape no check foresaw), and exits as documented: the smoke check 0
only when every endpoint it reads is honest, 3 when the only lie is a KV-cache capacity below the
expected one, else 1 (the verification runner, which runs smoke's checks with the plan's numbers,
the same); the load sweep 0 when its requests could succeed, 1 when the endpoints it needs are
broken.
"""

from __future__ import annotations

from hypothesis import example, given

from tests.support.fuzz import figures
from tests.support.fuzz.endpoint_runs import clean_problems, loadtest, smoke, verify
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.strategies import scenarios

SMOKE_ENDPOINTS = ("health", "models", "chat", "chat_stream", "tokenize", "metrics")
LOAD_ENDPOINTS = ("models", "tokenize", "completions_stream")
# Faults a tool cannot see or need not mind: /health is judged by its status alone; the load sweep
# tolerates what a server that merely lacks a feature does.
SMOKE_HARMLESS = {
    "health": {
        "empty_200",
        "not_json",
        "deep_json",
        "wrong_content_type",
        "json_null",
        "json_list",
        "nan_json",
        "long_line",
    }
}
LOAD_HARMLESS = {
    # A max_model_len the sweep cannot use is ignored (the sweep does not need it).
    "models": {"max_model_len_absurd", "max_model_len_string", "max_model_len_bool"},
    # No usable /tokenize at all: prompts of approximate length, said so on stderr.
    "tokenize": {
        "status_500",
        "status_404_html",
        "close",
        "stall_before_headers",
        "stall_after_headers",
        "drip_body",
        "drip_headers",
        "huge_body",
        "huge_declared",
        # The same drips and stalls behind every framing (issue 28): cut at the request deadline,
        # then the sweep goes on without /tokenize.
        "drip_close",
        "drip_http10",
        "drip_chunked",
        "drip_chunked_close",
        "stall_after_headers_close",
        # The sweep never asks for return_token_strs (endpoint_tools/loadtest.py counts token
        # ids only), so a server that garbles token_strs answers the sweep honestly.
        "token_strs_missing",
        "token_strs_huge",
    },
    "completions_stream": {"usage_string"},
}


def expected_smoke_exit(scenario: dict[str, str]) -> int:
    broken = [
        (e, b)
        for e, b in scenario.items()
        if e in SMOKE_ENDPOINTS and b != "ok" and b not in SMOKE_HARMLESS.get(e, set())
    ]
    if broken == [("metrics", "kv_low")]:
        return 3  # an honest server with less KV cache than expected, and nothing else wrong
    return 1 if broken else 0


def expected_load_exits(scenario: dict[str, str]) -> set[int]:
    if scenario.get("models") == "max_model_len_tiny":
        return {2}  # the server's context is shorter than the requested lengths: a usage error
    broken = [
        e for e, b in scenario.items() if e in LOAD_ENDPOINTS and b != "ok" and b not in LOAD_HARMLESS.get(e, set())
    ]
    return {1} if broken else {0}


def smoke_problems(scenario: dict[str, str], proc, seconds: float) -> list[str]:
    found = clean_problems(proc, seconds)
    if proc is None:
        return found
    if proc.returncode != expected_smoke_exit(scenario):
        found.append(f"exit {proc.returncode}, expected {expected_smoke_exit(scenario)}")
    for line in proc.stdout.splitlines():
        if not line.startswith(("PASS  ", "FAIL  ", "smoke: ")):
            found.append(f"an output line that is not a check result: {line[:200]!r}")
    return found


def load_problems(scenario: dict[str, str], proc, seconds: float) -> list[str]:
    found = clean_problems(proc, seconds)
    if proc is not None and proc.returncode not in expected_load_exits(scenario):
        found.append(f"exit {proc.returncode}, expected {sorted(expected_load_exits(scenario))}")
    return found


def _record(tool: str, proc, seconds: float, found: list[str]) -> None:
    kind = None
    if found:
        kind = (
            "hang"
            if proc is None
            else "traceback"
            if "traceback" in found[0]
            else "crash"
            if proc.returncode < 0
            else "wrong_exit"
        )
    figures.record(tool, kind, seconds, found)


# Each case runs a tool in a subprocess against drips and stalls that last up to its deadlines, so
# `make test` draws few cases per property (3, the verification runner 2; the @example regressions
# always run besides) and `make fuzz` draws FUZZ_EXAMPLES x long_share (375 and 250 by default).
@fuzz_settings(default_examples=3, long_share=0.15)
@given(scenario=scenarios(SMOKE_ENDPOINTS))
# Issue 28: behind `Connection: close`, HTTP/1.0 or a closing chunked body a drip outlived every
# deadline (the watchdog shut a socket http.client had handed to the response).
@example(scenario={"chat_stream": "drip_close"})
@example(scenario={"models": "drip_chunked_close", "metrics": "drip_http10"})
@example(scenario={"chat_stream": "drip_events"})
def test_smoke_against_any_server_ends_in_time_with_the_right_exit(server, scenario):
    server.set(scenario)
    proc, seconds = smoke(server)
    found = smoke_problems(scenario, proc, seconds)
    _record("smoke", proc, seconds, found)
    assert survey() or not found, "\n".join(found) + f"\nscenario: {scenario}\nstdout: {proc and proc.stdout[-2000:]}"


@fuzz_settings(default_examples=3, long_share=0.15)
@given(scenario=scenarios(SMOKE_ENDPOINTS))
def test_smoke_recording_golden_answers_against_any_server_ends_in_time_with_the_right_exit(server, scenario):
    # The golden check adds four chat completions (endpoint_tools/golden.py); the same bounds and exits
    # hold. The record goes to a private temporary folder (hypothesis reuses no function fixtures).
    import tempfile

    server.set(scenario)
    with tempfile.TemporaryDirectory() as folder:
        proc, seconds = smoke(server, "--record-golden", f"{folder}/golden.json")
    found = smoke_problems(scenario, proc, seconds)
    _record("smoke", proc, seconds, found)
    assert survey() or not found, "\n".join(found) + f"\nscenario: {scenario}\nstdout: {proc and proc.stdout[-2000:]}"


@fuzz_settings(default_examples=3, long_share=0.15)
@given(scenario=scenarios(LOAD_ENDPOINTS))
# Found by a random draw: a /tokenize whose token_strs are wrong serves the sweep, which reads ids.
@example(scenario={"tokenize": "token_strs_missing"})
@example(scenario={"tokenize": "token_strs_huge"})
@example(scenario={"completions_stream": "drip_http10"})
@example(scenario={"tokenize": "drip_chunked_close"})
def test_load_sweep_against_any_server_ends_in_time_with_the_right_exit(server, scenario):
    server.set(scenario)
    proc, seconds = loadtest(server)
    found = load_problems(scenario, proc, seconds)
    _record("loadtest", proc, seconds, found)
    assert survey() or not found, (
        "\n".join(found) + f"\nscenario: {scenario}\nstdout: {proc and proc.stdout[-1500:]}"
        f"\nstderr: {proc and proc.stderr[-1500:]}"
    )


def verify_problems(scenario: dict[str, str], proc, seconds: float) -> list[str]:
    found = clean_problems(proc, seconds)
    if proc is not None and proc.returncode != expected_smoke_exit(scenario):
        found.append(f"exit {proc.returncode}, expected {expected_smoke_exit(scenario)}")
    return found


@fuzz_settings(default_examples=2, long_share=0.1)
@given(scenario=scenarios(SMOKE_ENDPOINTS))
@example(scenario={"chat": "drip_close", "tokenize": "drip_chunked"})
def test_the_verification_runner_against_any_server_ends_in_time_with_the_right_exit(server, scenario):
    # The Job's runner (endpoint_tools/verify.py) runs smoke's checks with the template and kv
    # checks on, as the smoke runs here do, so smoke's exits are its exits.
    server.set(scenario)
    proc, seconds = verify(server)
    found = verify_problems(scenario, proc, seconds)
    _record("verify", proc, seconds, found)
    assert survey() or not found, "\n".join(found) + f"\nscenario: {scenario}\nstdout: {proc and proc.stdout[-2000:]}"
