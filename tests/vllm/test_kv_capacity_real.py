"""Sizing feedback against the real vLLM: the KV-cache capacity on /metrics, the planner's prediction
for the same budget, and `python -m components.smoke --expect-kv-tokens` judging the two."""

from __future__ import annotations

import re
import subprocess

from endpoint_tools.kv_capacity import read_capacity
from tests.support.vllm_server import CPU_BLOCK_SIZE, FIGURES, planned_tokens, smoke


def _smoke(server, *extra: str) -> subprocess.CompletedProcess:
    return smoke(server, "--model", server.model, *extra)


def _kv_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line[6:8] == "kv")


def test_metrics_state_the_capacity_the_startup_log_prints(vllm_server):
    capacity = read_capacity(vllm_server.client().get("/metrics").text())
    logged = re.search(r"CPU KV cache size: ([\d,]+) tokens", vllm_server.log_path.read_text(errors="replace"))
    assert logged, vllm_server.log_tail()
    assert capacity.tokens == int(logged.group(1).replace(",", ""))
    assert capacity.how == "kv_cache_size_tokens" and capacity.block_size == CPU_BLOCK_SIZE
    FIGURES.append(
        f"KV cache on /metrics: {capacity.tokens:,} tokens, {capacity.num_blocks:,} blocks of "
        f"{capacity.block_size} (startup log: {logged.group(1)} tokens)"
    )


def test_the_planners_prediction_passes_against_the_real_server(vllm_server, tiny_model):
    predicted = planned_tokens(tiny_model)
    proc = _smoke(vllm_server, "--expect-kv-tokens", str(predicted))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _kv_line(proc.stdout)
    assert line.startswith(f"PASS  kv       predicted {predicted:,} KV-cache tokens, actual "), line
    FIGURES.append(f"kv check, planner's prediction: {line[6:].strip()}")


def test_an_expectation_far_above_the_server_fails_with_exit_3(vllm_server):
    actual = read_capacity(vllm_server.client().get("/metrics").text()).tokens
    proc = _smoke(vllm_server, "--expect-kv-tokens", str(actual * 4))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = _kv_line(proc.stdout)
    assert line.startswith(f"FAIL  kv       predicted {actual * 4:,} KV-cache tokens, actual {actual:,}"), line
    assert "error -75.0%: below the prediction by more than the 10% tolerance" in line
    # Every other check passed: the failure is the capacity alone.
    assert proc.stdout.splitlines()[-1] == "smoke: 6/7 checks passed; failed: kv"


def test_a_shortfall_within_the_tolerance_passes(vllm_server):
    actual = read_capacity(vllm_server.client().get("/metrics").text()).tokens
    proc = _smoke(vllm_server, "--expect-kv-tokens", str(int(actual * 1.15)), "--kv-tolerance", "20%")
    assert proc.returncode == 0, proc.stdout
    assert "error -13.0%" in _kv_line(proc.stdout)


# The tiny model's chat template (tools/vllm-cpu/build_tiny_model.py): <|role|>\n content <|end|>,
# then <|assistant|> as the generation prompt.
TINY_TEMPLATE_TOKENS = "<|user|>,<|end|>,<|assistant|>"


def test_the_chat_template_renders_with_its_special_tokens(vllm_server):
    proc = _smoke(vllm_server, "--expect-template-tokens", TINY_TEMPLATE_TOKENS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line[6:14] == "template")
    assert line.startswith("PASS") and "; has <|user|>, <|end|>, <|assistant|>" in line, line
    FIGURES.append(f"template check: {line[6:].strip()}")


def test_a_special_token_the_template_does_not_use_fails(vllm_server):
    proc = _smoke(vllm_server, "--expect-template-tokens", "<|im_start|>")
    assert proc.returncode == 1 and "lacks '<|im_start|>'" in proc.stdout, proc.stdout
