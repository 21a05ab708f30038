"""Sizing feedback against the real vLLM: the KV-cache capacity on /metrics, the planner's prediction
for the same budget, and `python -m components.smoke --expect-kv-tokens` judging the two."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from endpoint_tools.kv_capacity import read_capacity
from endpoint_tools.openai_client import Client
from planner import kv_layout
from planner.model_arch import ModelArch
from planner.vllm_releases import Release

from .conftest import FIGURES, MAX_MODEL_LEN, ROOT

# The server's KV budget (conftest: --kv-cache-memory-bytes 64M) and the CPU platform's default
# block size (vllm 0.32.0 platforms/cpu.py:293, when no block size is given).
KV_BUDGET_BYTES = 64 * 1024**2
CPU_BLOCK_SIZE = 128
BF16_BYTES = 2


def _smoke(server, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "components.smoke", "--base-url", server.base_url, "--model", server.model, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )


def _kv_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line[6:8] == "kv")


def planned_tokens(model_dir) -> int:
    """What the planner predicts for this model and a KV budget given in bytes (no GPU arithmetic: the
    CPU build takes the budget as given), through the same layout code the GPU plan uses."""
    arch = ModelArch.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    release = Release.of("0.32.0")
    layout = kv_layout.kv_layout(arch, tp=1, kv_dtype_bytes=BF16_BYTES, model_dtype_bytes=BF16_BYTES,
                                 block_size=CPU_BLOCK_SIZE, release=release, counts=kv_layout.layer_counts(arch))
    blocks = KV_BUDGET_BYTES // (layout.page_bytes * layout.group_size)
    need = kv_layout.blocks_per_request(layout, arch, MAX_MODEL_LEN, MAX_MODEL_LEN, mamba_align=False)
    return kv_layout.reported_tokens(blocks, layout, need, MAX_MODEL_LEN, release)


def test_metrics_state_the_capacity_the_startup_log_prints(vllm_server):
    capacity = read_capacity(Client(vllm_server.base_url).get("/metrics").text())
    logged = re.search(r"CPU KV cache size: ([\d,]+) tokens", vllm_server.log_path.read_text(errors="replace"))
    assert logged, vllm_server.log_tail()
    assert capacity.tokens == int(logged.group(1).replace(",", ""))
    assert capacity.how == "kv_cache_size_tokens" and capacity.block_size == CPU_BLOCK_SIZE
    FIGURES.append(f"KV cache on /metrics: {capacity.tokens:,} tokens, {capacity.num_blocks:,} blocks of "
                   f"{capacity.block_size} (startup log: {logged.group(1)} tokens)")


def test_the_planners_prediction_passes_against_the_real_server(vllm_server, tiny_model):
    predicted = planned_tokens(tiny_model)
    proc = _smoke(vllm_server, "--expect-kv-tokens", str(predicted))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _kv_line(proc.stdout)
    assert line.startswith(f"PASS  kv       predicted {predicted:,} KV-cache tokens, actual "), line
    FIGURES.append(f"kv check, planner's prediction: {line[6:].strip()}")


def test_an_expectation_far_above_the_server_fails_with_exit_3(vllm_server):
    actual = read_capacity(Client(vllm_server.base_url).get("/metrics").text()).tokens
    proc = _smoke(vllm_server, "--expect-kv-tokens", str(actual * 4))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = _kv_line(proc.stdout)
    assert line.startswith(f"FAIL  kv       predicted {actual * 4:,} KV-cache tokens, actual {actual:,}"), line
    assert "error -75.0%: below the prediction by more than the 10% tolerance" in line
    # Every other check passed: the failure is the capacity alone.
    assert proc.stdout.splitlines()[-1] == "smoke: 6/7 checks passed; failed: kv"


def test_a_shortfall_within_the_tolerance_passes(vllm_server):
    actual = read_capacity(Client(vllm_server.base_url).get("/metrics").text()).tokens
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
