"""Issue 28, the fifth class: sizing and verify inputs that used to end in a traceback or in "fits: yes"
for something vLLM would not run, and KV metrics that contradict themselves. Each is a named case."""

from __future__ import annotations

import json

import pytest

from endpoint_tools import verify
from endpoint_tools.kv_capacity import CapacityUnreadable, read_capacity
from planner.checkpoint import served_dtype
from planner.model_arch import ModelArch
from tests.hostile.test_hostile_sizing import LLAMA_8B, refused, run

NEMOTRON_H = {**LLAMA_8B, "model_type": "nemotron_h", "num_hidden_layers": 8}


@pytest.mark.parametrize(
    "pattern,says",
    [
        ("MMQM*MMM", "layer type 'Q' at layer 2"),  # used to be `min() arg is an empty sequence`
        ("--EE--EE", "no layer keeps an attention KV cache or a recurrent state"),
        ("MMMMMMMM", "no layer uses attention"),  # used to print 1.8 billion tokens at 0 bytes each
    ],
)
def test_a_hybrid_layer_pattern_vllm_would_not_size_is_refused(capsys, tmp_path, pattern, says):
    refused(capsys, tmp_path, {**NEMOTRON_H, "hybrid_override_pattern": pattern}, says=says)


def test_a_hybrid_pattern_with_attention_still_sizes(capsys, tmp_path):
    code, out, err, _ = run(capsys, {**NEMOTRON_H, "hybrid_override_pattern": "M*M-M*ME"}, tmp_path=tmp_path)
    assert code == 0 and "Will it fit? yes" in out, err


def test_more_experts_per_token_than_experts_is_refused(capsys, tmp_path):
    config = {**LLAMA_8B, "num_local_experts": 8, "num_experts_per_tok": 16, "moe_intermediate_size": 1024}
    refused(capsys, tmp_path, config, "--tensor-parallel-size", "2", says="num_experts_per_tok is 16")


@pytest.mark.parametrize("declared", ["int8", "float64", "float8_e4m3fn"])
def test_a_checkpoint_dtype_the_gpu_does_not_serve_is_served_as_vllm_falls_back(declared):
    # vLLM's `auto` keeps a checkpoint dtype only if the platform supports it, else bfloat16 with a
    # warning (vllm/config/model.py _resolve_auto_dtype): its KV cache is 2 bytes per value, not 1 or 8.
    arch = ModelArch.from_hf_config({**LLAMA_8B, "torch_dtype": declared})
    assert served_dtype(arch, "auto") == "bfloat16"
    assert served_dtype(ModelArch.from_hf_config({**LLAMA_8B, "torch_dtype": "float16"}), "auto") == "float16"


@pytest.mark.parametrize("field", ["maxModelLen", "expectKvTokens"])
def test_1e400_in_an_integer_field_of_the_targets_file_is_one_line(field):
    text = json.dumps({"targets": [{"model": "m", "baseUrl": "http://m:8000", field: 1}]}).replace(
        f'"{field}": 1', f'"{field}": 1e400'
    )
    with pytest.raises(verify.TargetsError) as info:
        verify.parse_targets(text)
    assert "1e400" in str(info.value) and "64-bit float" in str(info.value)


@pytest.mark.parametrize(
    "labels,says",
    [
        ('block_size="16",num_gpu_blocks="10",num_gpu_blocks="99999"', "sets the label num_gpu_blocks twice"),
        ('block_size="16",num_gpu_blocks="10",kv_cache_size_tokens="999999"', "contradicts itself"),
    ],
)
def test_kv_metrics_that_contradict_themselves_are_unreadable_not_a_pass(labels, says):
    with pytest.raises(CapacityUnreadable) as info:
        read_capacity(f"vllm:cache_config_info{{{labels}}} 1.0\n")
    assert says in str(info.value)


def test_a_hybrid_reporting_fewer_tokens_than_its_pages_is_consistent():
    capacity = read_capacity(
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="10",kv_cache_size_tokens="80"} 1\n'
    )
    assert capacity.tokens == 80


@pytest.mark.parametrize("block_size", ["7", "24", "1"])
def test_a_block_size_the_attention_kernels_refuse_is_refused(capsys, tmp_path, block_size):
    refused(capsys, tmp_path, LLAMA_8B, "--block-size", block_size, says="not a multiple of 16")


def test_batched_tokens_below_an_explicit_max_num_seqs_is_refused_with_vllms_rule(capsys, tmp_path):
    refused(capsys, tmp_path, LLAMA_8B, "--max-num-batched-tokens", "8", "--max-num-seqs", "16", says="must be greater")


def test_one_batched_token_caps_the_default_max_num_seqs_as_vllm_does(capsys, tmp_path):
    code, out, err, _ = run(capsys, LLAMA_8B, "--max-num-batched-tokens", "1", "--json", tmp_path=tmp_path)
    assert code in (0, 1), err
    assert json.loads(out)["max_num_seqs"] == 1
