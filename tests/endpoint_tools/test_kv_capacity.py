"""The kv check's pure parts: reading vllm:cache_config_info, judging it, the options and exit statuses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from endpoint_tools import kv_capacity, smoke
from endpoint_tools.kv_capacity import CapacityUnreadable, judge, read_capacity

# As vLLM 0.32.0 (CPU build) wrote it for --kv-cache-memory-bytes 64M --max-model-len 512
# (../shared/VLLM-CPU.md; tests/vllm/test_kv_capacity_real.py reads the live one).
REAL_032 = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",\
gpu_memory_utilization="0.9",kv_cache_max_concurrency="256.0",kv_cache_memory_bytes="67108864",\
kv_cache_size_tokens="131072",num_gpu_blocks="1024",prefix_caching_hash_algo="sha256"} 1.0
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
"""


def test_the_032_exposition_gives_its_tokens_and_pages():
    cap = read_capacity(REAL_032)
    assert (cap.tokens, cap.how, cap.num_blocks, cap.block_size, cap.engines) == (
        131072,
        "kv_cache_size_tokens",
        1024,
        128,
        1,
    )


def test_without_kv_cache_size_tokens_pages_times_block_size_are_used():
    text = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="2000"} 1.0\n'
    cap = read_capacity(text)
    assert (cap.tokens, cap.how) == (32000, "num_gpu_blocks x block_size")


def test_several_engines_count_the_smallest():
    text = (
        'vllm:cache_config_info{engine="0",kv_cache_size_tokens="5000"} 1.0\n'
        'vllm:cache_config_info{engine="1",kv_cache_size_tokens="4000"} 1.0\n'
    )
    cap = read_capacity(text)
    assert (cap.tokens, cap.engines) == (4000, 2)


def test_escaped_quotes_and_commas_inside_a_label_value_parse():
    text = r'vllm:cache_config_info{note="a \"b\", c\\",kv_cache_size_tokens="77"} 1.0' + "\n"
    assert read_capacity(text).tokens == 77


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "has no vllm:cache_config_info"),
        ('vllm:cache_config_info{block_size="16"} 1.0', "neither kv_cache_size_tokens nor both"),
        ('vllm:cache_config_info{kv_cache_size_tokens="-5"} 1.0', "is not a whole number"),
        ('vllm:cache_config_info{kv_cache_size_tokens="1e9"} 1.0', "is not a whole number"),
        ('vllm:cache_config_info{kv_cache_size_tokens="0"} 1.0', "reports 0"),
        ("vllm:cache_config_info{kv_cache_size_tokens=12} 1.0", "do not parse"),
        ('vllm:cache_config_info{kv_cache_size_tokens="12" 1.0', "no closing brace"),
        ("vllm:cache_config_info{" + 'a="b",' * 20000 + "} 1", "characters long"),
    ],
)
def test_unusable_expositions_are_one_line_reasons(text, says):
    with pytest.raises(CapacityUnreadable) as err:
        read_capacity(text)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_judgement_fails_only_below_the_tolerance():
    assert judge(100_000, 90_000, 0.10).passed  # exactly at -10%
    assert not judge(100_000, 89_999, 0.10).passed
    assert judge(100_000, 500_000, 0.10).passed  # more than promised is not a failure
    assert not judge(100_000, 99_999, 0.0).passed
    assert judge(100_000, 90_000).error == pytest.approx(-0.1)


def test_the_evidence_says_predicted_actual_and_error():
    cap = read_capacity(REAL_032)
    line = kv_capacity.describe(judge(150_000, cap.tokens), cap)
    assert line.startswith(
        "predicted 150,000 KV-cache tokens, actual 131,072 (kv_cache_size_tokens; 1,024 blocks of 128)"
    )
    assert "error -12.6%" in line and "more than the 10% tolerance" in line


def _result(name, passed, shortfall=False):
    return smoke.CheckResult(name, passed, "", shortfall=shortfall)


@pytest.mark.parametrize(
    "results, status",
    [
        ([_result("chat", True), _result("kv", True)], 0),
        ([_result("chat", True), _result("kv", False, shortfall=True)], 3),
        ([_result("chat", False), _result("kv", False, shortfall=True)], 1),
        ([_result("chat", True), _result("kv", False)], 1),  # unreadable capacity is not a shortfall
    ],
)
def test_exit_status_3_is_a_kv_shortfall_alone(results, status, capsys):
    assert smoke.summarize(results) == status


@pytest.mark.parametrize(
    "args, message",
    [
        (["--expect-kv-tokens", "0"], "--expect-kv-tokens must be a whole number from 1"),
        (["--expect-kv-tokens", "lots"], "is not a whole number"),
        (["--expect-kv-tokens", str(2**41)], "--expect-kv-tokens must be a whole number from 1"),
        (["--expect-kv-tokens", "10", "--kv-tolerance", "100"], "percentage from 0 to below 100"),
        (["--expect-kv-tokens", "10", "--kv-tolerance", "nan"], "percentage from 0 to below 100"),
        (["--expect-kv-tokens", "10", "--kv-tolerance", "ten"], "is not a percentage"),
        (["--expect-kv-tokens", "10", "--entrance", "--names", "a"], "the entrance does not route"),
        (["--check-template", "--entrance", "--names", "a"], "the entrance does not route"),
        (["--expect-template-tokens", "a,,b"], "is not a comma-separated list of tokens"),
    ],
)
def test_kv_usage_errors_exit_2(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "components.smoke", "--base-url", "http://127.0.0.1:9", "--model", "m", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_tolerance_takes_a_percent_sign():
    assert smoke.build_parser().parse_args(["--base-url", "x", "--kv-tolerance", "5%"]).kv_tolerance == 0.05
