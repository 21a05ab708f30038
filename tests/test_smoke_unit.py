"""Pure parts of the smoke command: metric-name matching, prompt sizing, CLI errors."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from components import smoke
from components.vllm_metrics import (
    REQUIRED_METRICS,
    describe_missing,
    exposed_names,
    missing_names,
    referenced_names,
)

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
    assert {"vllm:num_requests_waiting", "vllm:num_preemptions_total",
            "vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_bucket"} <= names


def test_missing_names_allows_histogram_suffixes_only_for_histograms():
    wanted = {"vllm:num_requests_waiting", "vllm:e2e_request_latency_seconds_sum",
              "vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_waiting_sum",
              "vllm:gpu_cache_usage_perc"}
    assert missing_names(wanted, EXPOSITION) == ["vllm:gpu_cache_usage_perc", "vllm:num_requests_waiting_sum"]
    assert "vllm:kv_cache_usage_perc" in describe_missing("vllm:gpu_cache_usage_perc")


def test_referenced_names_are_found_in_promql_and_json():
    expr = ('histogram_quantile(0.95, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (le)) > 2 '
            'and "vllm:kv_cache_usage_perc"{x="y"}')
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
    return subprocess.run([sys.executable, "-m", "components.smoke", *args],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("args, message", [
    (["--base-url", "http://x"], "--model"),
    (["--base-url", "localhost:8000", "--model", "m"], "--base-url"),
    (["--base-url", "http://x", "--model", "m", "--max-model-len", "4"], "--max-model-len"),
    (["--base-url", "http://x", "--model", "m", "--api-key-env", "SMOKE_UNIT_UNSET_KEY"], "SMOKE_UNIT_UNSET_KEY"),
])
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
