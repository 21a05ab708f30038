"""Each mechanism of the sizing engine against the vLLM behaviour it models (issue 19).

The numbers come from vLLM's source (cited in planner/sizing.py, planner/kv_layout.py and
planner/vllm_releases.py) or from log lines that state them exactly (the KV-cache layout of a hybrid
model follows from the logged KV memory alone, with no calibrated constant). Every check has a
broken variant next to it that shows the check can fail.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from common import gpus
from planner import kv_layout
from planner.model_arch import ModelArch, SizingError
from planner.sizing import (
    NCCL_NVLS_BUFFERS_GIB,
    EncoderProfile,
    GiB,
    SizingRequest,
    activation_bytes,
    activation_parts,
    cuda_graph_capture_sizes,
    default_batch_limits,
    encoder_profile,
    group_quantized_bytes_per_weight,
    layers_per_stage,
    non_torch_bytes,
    pipeline_buffer_bytes,
    request_problem,
    size,
    stage_weight_bytes,
    total_weights_from_first_stage,
    vision_encoder_bytes,
    vision_encoder_parts,
    weight_bytes_estimate,
)
from planner.vllm_releases import Release, parse_release
from tests.support.sizing_cases import CALIBRATION, HELD_OUT, LOGS, request_for

QWEN35 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3.5-35b-a3b.json").read_text()))
QWEN36 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3.6-35b-a3b-nvfp4.json").read_text()))
LLAMA8B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "llama-3.1-8b.json").read_text()))
QWEN30B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-30b-a3b.json").read_text()))


def _case(cases, prefix):
    return next(c for c in cases if c["id"].startswith(prefix))


# --- the hybrid KV-cache manager --------------------------------------------------------------


def test_deltanet_layers_are_state_layers_and_attention_layers_are_counted_apart():
    assert QWEN35.is_hybrid and QWEN35.layer_types.count("linear") == 30
    assert QWEN35.attention_layers == 10 and QWEN35.mtp_layers == 1
    # Qwen3.5 pins the recurrent state to float32 (config.json mamba_ssm_dtype).
    assert QWEN35.mamba_ssm_dtype == "float32"


def test_qwen3_next_without_layer_types_takes_every_fourth_layer_as_attention():
    cfg = {
        "num_hidden_layers": 8,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "linear_num_value_heads": 32,
    }
    assert ModelArch.from_hf_config(cfg).layer_types == ("linear",) * 3 + ("full",) + ("linear",) * 3 + ("full",)


def test_hybrid_block_size_and_page_padding_match_the_qwen35_log():
    # "Setting attention block size to 1056 tokens" / "Padding mamba page size by 0.76%" (vLLM 0.18.1).
    layout = kv_layout.kv_layout(
        QWEN35,
        tp=1,
        kv_dtype_bytes=2,
        model_dtype_bytes=2,
        block_size=16,
        release=Release.of("0.18.1"),
        counts=kv_layout.layer_counts(QWEN35),
    )
    assert layout.block_size == 1056
    assert round(100 * (layout.page_bytes - layout.state_bytes) / layout.state_bytes, 2) == 0.76
    # Broken variant: a state in bf16 instead of float32 needs only half the block.
    bf16 = replace(QWEN35, mamba_ssm_dtype=None)
    assert (
        kv_layout.kv_layout(
            bf16,
            tp=1,
            kv_dtype_bytes=2,
            model_dtype_bytes=2,
            block_size=16,
            release=Release.of("0.18.1"),
            counts=kv_layout.layer_counts(bf16),
        ).block_size
        == 544
    )


@pytest.mark.parametrize(
    "case_prefix", ["gb10-qwen3.5-35b-a3b-fp8-util0.80-0.18.1-run-a", "gb10-qwen3.5-35b-a3b-fp8-util0.80-0.18.1-run-b"]
)
def test_hybrid_token_count_follows_from_the_logged_kv_memory(case_prefix):
    """No budget term involved: logged KV memory -> blocks -> the logged token count."""
    case = _case(CALIBRATION, case_prefix)
    layout = kv_layout.kv_layout(
        QWEN35,
        tp=1,
        kv_dtype_bytes=2,
        model_dtype_bytes=2,
        block_size=16,
        release=Release.of("0.18.1"),
        counts=kv_layout.layer_counts(QWEN35),
    )
    blocks = int(case["observed"]["kv_cache_gib"] * GiB // (layout.page_bytes * layout.group_size))
    need = kv_layout.blocks_per_request(layout, QWEN35, 262144, 2048, mamba_align=True)
    tokens = kv_layout.reported_tokens(blocks, layout, need, 262144, Release.of("0.18.1"))
    assert tokens == case["observed"]["kv_cache_tokens"]
    # Broken variant: the hybrid counted as 40 full-attention layers of 16-token blocks.
    dense = replace(QWEN35, layer_types=())
    flat = kv_layout.kv_layout(
        dense,
        tp=1,
        kv_dtype_bytes=2,
        model_dtype_bytes=2,
        block_size=16,
        release=Release.of("0.18.1"),
        counts=kv_layout.layer_counts(dense),
    )
    flat_blocks = int(case["observed"]["kv_cache_gib"] * GiB // (flat.page_bytes * flat.group_size))
    assert kv_layout.reported_tokens(flat_blocks, flat, 0, 262144, Release.of("0.18.1")) != tokens


def test_mtp_layer_state_blocks_and_align_mode_match_the_qwen36_log():
    # vLLM 0.22.1, FP8 KV, MTP with 2 draft tokens, prefix caching: "Setting attention block size to
    # 2128 tokens", "Add 3 padding layers", "GPU KV cache size: 6,455,296 tokens" from 74.76 GiB.
    case = _case(HELD_OUT, "gb10-qwen3.6")
    release = Release.of("0.22.1")
    counts = kv_layout.layer_counts(QWEN36, with_mtp=True)
    layout = kv_layout.kv_layout(
        QWEN36,
        tp=1,
        kv_dtype_bytes=1,
        model_dtype_bytes=2,
        block_size=16,
        release=release,
        counts=counts,
        speculative_tokens=2,
    )
    assert layout.block_size == 2128 and layout.padding_layers == 3
    need = kv_layout.blocks_per_request(layout, QWEN36, 262144, 8192, mamba_align=True, speculative_tokens=2)
    assert need == 124 + 3 * (2 + 2)
    blocks = int(case["observed"]["kv_cache_gib"] * GiB // (layout.page_bytes * layout.group_size))
    tokens = kv_layout.reported_tokens(blocks, layout, need, 262144, release)
    # "74.76 GiB" is rounded to 10 MiB, one block's worth of the 23 MB block: within one block.
    assert abs(tokens - case["observed"]["kv_cache_tokens"]) <= 262144 / need + 1
    # Broken variant: without the MTP layer there is nothing to pad and the count moves.
    plain = kv_layout.kv_layout(
        QWEN36,
        tp=1,
        kv_dtype_bytes=1,
        model_dtype_bytes=2,
        block_size=16,
        release=release,
        counts=kv_layout.layer_counts(QWEN36),
        speculative_tokens=2,
    )
    assert plain.padding_layers == 0


def test_grouping_threshold_follows_the_release():
    counts = {"full": 13, "sliding": 12}  # gpt-oss-20b + an EAGLE layer (the vLLM comment's example)
    assert kv_layout.group_layers(counts, Release.of("0.10.2")) == (("full", 12), ("full", 12), ("sliding", 12))
    assert kv_layout.group_layers(counts, Release.of("0.19.0")) == (("full", 13), ("sliding", 13))
    # 30 linear : 11 attention is below neither threshold: groups of the smaller type.
    assert len(kv_layout.group_layers({"linear": 30, "full": 11}, Release.of("0.32.0"))) == 4


def test_mamba2_state_follows_vllms_shape_formula():
    # mamba2_state_shape: conv (heads*head_dim + 2*groups*state)/TP x (kernel-1), ssm heads/TP x head_dim x state.
    arch = ModelArch(
        layers=4,
        hidden=1024,
        heads=8,
        kv_heads=8,
        head_dim=128,
        vocab=1000,
        intermediate=4096,
        layer_types=("mamba", "mamba", "mamba", "full"),
        mamba_num_heads=64,
        mamba_head_dim=64,
        mamba_state_size=128,
        mamba_groups=1,
        mamba_conv_kernel=4,
    )
    conv = (64 * 64 + 2 * 2 * 128) // 2 * 3  # one group replicated to two for TP 2
    ssm = 64 // 2 * 64 * 128
    assert kv_layout.state_bytes(arch, tp=2, model_dtype_bytes=2) == (conv + ssm) * 2


# --- the memory budget ---------------------------------------------------------------------------


def test_nccl_nvls_buffers_only_on_hopper_nvswitch_systems():
    base = SizingRequest(
        arch=LLAMA8B, gpu_memory_gib=79.19, tensor_parallel_size=2, gpu_name="H100-80GB", max_model_len=8192
    )
    nvswitch = non_torch_bytes(replace(base, interconnect="nvswitch"))
    pcie = non_torch_bytes(replace(base, interconnect="pcie"))
    assert nvswitch - pcie == pytest.approx(NCCL_NVLS_BUFFERS_GIB * GiB)
    # A100 NVSwitch systems have no NVLink SHARP: ring buffers only.
    a100 = replace(base, gpu_name="A100-80GB", gpu_memory_gib=79.15, interconnect="nvswitch")
    assert non_torch_bytes(a100) == pcie
    # The catalog decides when the request does not: H100 machines are NVSwitch, L40S machines PCIe.
    assert size(base).interconnect == "nvswitch"
    assert size(replace(base, gpu_name="L40S", gpu_memory_gib=44.42)).interconnect == "pcie"
    assert size(replace(base, tensor_parallel_size=1)).interconnect == "single"


def test_every_catalog_machine_has_an_interconnect_and_multi_gpu_sxm_machines_are_nvswitch():
    for gpu in gpus.CATALOG.values():
        for machine in gpu.aws + gpu.gcp:
            kind = gpu.interconnect(machine.gpus)
            assert kind in ("single", "nvswitch", "pcie", "unified")
    assert gpus.CATALOG["H100-80GB"].interconnect(8) == "nvswitch"
    assert gpus.CATALOG["L4"].interconnect(4) == "pcie" and gpus.CATALOG["L4"].interconnect(1) == "single"
    assert gpus.CATALOG["GB10"].interconnect(1) == "unified"


def test_unified_memory_uses_small_batch_defaults_and_counts_host_growth_from_0_12():
    gb10 = SizingRequest(arch=QWEN30B, gpu_memory_gib=121.69, gpu_name="GB10", vllm_version="0.13.0")
    assert default_batch_limits(gb10) == (2048, 256)  # NVML has no memory figure on GB10
    # Broken variant: the same memory on a discrete GPU gets the large-GPU defaults.
    assert default_batch_limits(replace(gb10, gpu_name=None, interconnect="single")) == (8192, 1024)
    assert non_torch_bytes(gb10) > non_torch_bytes(replace(gb10, vllm_version="0.11.0"))


def test_b200_batch_defaults_from_0_28():
    b200 = SizingRequest(arch=LLAMA8B, gpu_memory_gib=178.35, gpu_name="B200")
    assert default_batch_limits(replace(b200, vllm_version="0.27.1")) == (8192, 1024)
    assert default_batch_limits(replace(b200, vllm_version="0.28.0")) == (16384, 1024)


def test_capture_sizes_follow_release_max_num_seqs_and_drafting():
    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=79.19, gpu_name="H100-80GB")
    assert len(cuda_graph_capture_sizes(replace(req, vllm_version="0.10.2"), 1024)) == 67  # 1, 2, 4, 8..512 by 8
    assert len(cuda_graph_capture_sizes(replace(req, vllm_version="0.19.0"), 1024)) == 51
    # "Profiling CUDA graph memory: PIECEWISE=6 (largest=24)": max_num_seqs 5, two MTP draft tokens.
    assert cuda_graph_capture_sizes(replace(req, vllm_version="0.22.1", speculative_tokens=2), 5) == [
        1,
        2,
        4,
        8,
        16,
        24,
    ]
    b200 = replace(req, gpu_name="B200", gpu_memory_gib=178.35)
    assert max(cuda_graph_capture_sizes(replace(b200, vllm_version="0.32.0"), 1024)) == 1024
    assert max(cuda_graph_capture_sizes(replace(b200, vllm_version="0.27.1"), 1024)) == 512
    assert cuda_graph_capture_sizes(replace(req, enforce_eager=True), 1024) == []


def test_model_runner_v2_releases_subtract_no_cuda_graph_estimate():
    release = Release.of("0.27.1")
    assert not release.estimates_cuda_graphs("Qwen3ForCausalLM", moe=False, hybrid=False)
    assert not release.estimates_cuda_graphs("LlamaForCausalLM", moe=False, hybrid=False)
    assert release.estimates_cuda_graphs("Qwen3MoeForCausalLM", moe=True, hybrid=False)
    assert Release.of("0.22.1").estimates_cuda_graphs("LlamaForCausalLM", moe=False, hybrid=False)
    assert not Release.of("0.22.1").estimates_cuda_graphs("Qwen3ForCausalLM", moe=False, hybrid=False)
    assert Release.of("0.29.0").estimates_cuda_graphs("LlamaForCausalLM", moe=False, hybrid=False)
    assert not Release.of("0.19.0").estimates_cuda_graphs("LlamaForCausalLM", moe=False, hybrid=False)


def test_pipeline_stages_carry_their_layers_and_the_ends_carry_embedding_and_head():
    # Llama-3.1-8B, vLLM 0.19 H100: 14.99 GiB on one GPU, 4.26 GiB on the first of four stages.
    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=79.19, pipeline_parallel_size=4)
    total = total_weights_from_first_stage(req, 4.26 * GiB)
    assert total / GiB == pytest.approx(14.99, rel=0.01)
    stages = stage_weight_bytes(req, total)
    assert stages[0] == pytest.approx(4.26 * GiB) and stages[0] == pytest.approx(stages[3])
    assert stages[1] < stages[0]  # middle stages hold neither the embedding nor the head
    # Broken variant: an even split would put 3.75 GiB on every stage.
    assert stages[0] != pytest.approx(total / 4)


def test_expert_parallelism_keeps_the_moe_intermediate_whole():
    req = SizingRequest(
        arch=QWEN30B, gpu_memory_gib=44.42, tensor_parallel_size=2, max_num_batched_tokens=2048, max_num_seqs=256
    )
    assert activation_bytes(replace(req, expert_parallel=True), 0, 2048, 256) > activation_bytes(req, 0, 2048, 256)


def test_release_strings_of_container_builds_and_release_candidates_parse():
    assert parse_release("0.13.0+faa43dbf.nv26.01") == (0, 13, 0)
    assert parse_release("v0.22.1rc1.dev26+g4721bb3aa") == (0, 22, 1)
    assert parse_release("0.8.5.post1") == (0, 8, 5)
    assert parse_release("0.26.1rc1.dev156+g0eec856cc.d20260731") == (0, 26, 1)
    # A switch at (0, 11, 1) leaves 0.11.0 out and takes 0.11.2 in.
    assert parse_release("0.11.0") < (0, 11, 1) <= parse_release("0.11.2")


# --- the sampler warm-up, the fused-MoE workspace and Model Runner V2 (second pass of issue 19) ----


def test_top_k_top_p_path_follows_the_release_and_what_the_log_says():
    # Up to 0.11.0 an installed FlashInfer runs; the log says which ("Using FlashInfer for top-p &
    # top-k sampling." / "FlashInfer is not available").
    assert Release.of("0.10.1.1").top_k_top_p_path(256, True) == "flashinfer"
    assert Release.of("0.10.2").top_k_top_p_path(1024, False) == "sort"
    assert Release.of("0.10.2").top_k_top_p_path(1024, None) == "sort"  # unknown: the larger footprint
    # From 0.11.1 the PyTorch sort, from 0.17.0 the Triton kernel for 8 rows or more.
    assert Release.of("0.13.0").top_k_top_p_path(256, None) == "sort"
    assert Release.of("0.17.0").top_k_top_p_path(1024, None) == "triton"
    assert Release.of("0.17.0").top_k_top_p_path(6, None) == "sort"
    assert Release.of("0.16.0").top_k_top_p_path(1024, None) == "sort"
    # Broken variant: a boundary one release early would send 0.16 to Triton.
    assert Release((0, 16, 0)).top_k_top_p_path(1024, None) != "triton"
    # From 0.21.0 FlashInfer is on by default where its backend supports the GPU (8.0 to 12.1): every
    # catalog GPU; a log that says it was disabled or unsupported, or an unknown GPU, keeps Triton.
    for gpu in gpus.CATALOG.values():
        assert Release.of("0.21.0").top_k_top_p_path(1024, None, gpu.compute_capability) == "flashinfer"
        assert Release.of("0.20.0").top_k_top_p_path(1024, None, gpu.compute_capability) == "triton"
    assert Release.of("0.28.0").top_k_top_p_path(1024, False, (8, 9)) == "triton"
    assert Release.of("0.28.0").top_k_top_p_path(1024, None, None) == "triton"
    assert Release.of("0.28.0").top_k_top_p_path(1024, None, (7, 5)) == "triton"


def test_a_log_that_says_flashinfer_sampling_was_off_is_read_as_such():
    from planner.startup_log import parse

    # The lines vLLM prints (v0.22.1 and v0.27.1 v1/sample/ops/topk_topp_sampler.py).
    for line in (
        (
            "INFO 08-14 14:07:20 [topk_topp_sampler.py:46] FlashInfer top-p/top-k sampling disabled via "
            "VLLM_USE_FLASHINFER_SAMPLER=0."
        ),
        (
            "WARNING 08-14 14:07:20 [topk_topp_sampler.py:70] FlashInfer top-p/top-k sampling unavailable: "
            "unsupported compute capability 7.5; falling back. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence."
        ),
    ):
        assert parse(line + "\n").flashinfer_sampler is False
    assert parse("FlashInfer top-p/top-k sampling is great\n").flashinfer_sampler is None


def test_the_sampler_path_explains_the_a100_40gb_pair_of_one_calibration_source():
    # dennislee22/vLLM-benchmarking, vLLM 0.10.1.1, Qwen2-7B: the 40 GB run's log says "FlashInfer is not
    # available", its 80 GB siblings say "Using FlashInfer for top-p & top-k sampling".
    no_fi = _case(CALIBRATION, "vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes")
    fi = _case(CALIBRATION, "vllm-7B-2gpuA10080GB-0.5GRAM-same-node")
    assert no_fi["flashinfer_sampler"] is False and fi["flashinfer_sampler"] is True
    from tests.support.sizing_cases import relative_error, request_for

    assert abs(relative_error(no_fi)) <= 0.035 and abs(relative_error(fi)) <= 0.035
    # Broken variant: sized as if FlashInfer had run, the 40 GB case misses by more than 5%.
    req = replace(request_for(no_fi), flashinfer_sampler=True)
    wrong = (size(req).kv_cache_tokens - no_fi["observed"]["kv_cache_tokens"]) / no_fi["observed"]["kv_cache_tokens"]
    assert wrong > 0.05


def test_fused_moe_workspace_adds_to_the_sampler_only_once_it_is_persistent():
    assert not Release.of("0.13.0").moe_workspace_persists("fp8")
    assert Release.of("0.14.0").moe_workspace_persists("fp8")
    assert not Release.of("0.16.0").moe_workspace_persists(None)
    assert Release.of("0.17.0").moe_workspace_persists(None)
    assert not Release.of("0.32.0").moe_workspace_persists("mxfp4")
    req = SizingRequest(arch=QWEN30B, gpu_memory_gib=79.19, max_num_batched_tokens=8192, max_num_seqs=1024)
    persistent = activation_bytes(replace(req, vllm_version="0.19.0"), 0, 8192, 1024)
    per_call = activation_bytes(replace(req, vllm_version="0.12.0"), 0, 8192, 1024)
    workspace = 8192 * 8 * 2 * (2048 + 2 * 768)
    sampler_019 = 15.3 * 1024 * 151936
    assert persistent == pytest.approx(sampler_019 + workspace)
    # Broken variant: 0.12's per-call buffers are not added on top of its (sort) sampler.
    assert per_call == pytest.approx(38.0 * 1024 * 151936)


def test_mxfp4_moe_buffers_raise_the_forward_peak_of_a_small_batch():
    arch = ModelArch.from_hf_config(
        json.loads((LOGS.parent / "model_configs" / "gpt-oss-120b" / "config.json").read_text())
    )
    req = SizingRequest(
        arch=arch,
        gpu_memory_gib=79.19,
        vllm_version="0.11.2",
        quantization="mxfp4",
        max_num_batched_tokens=8192,
        max_num_seqs=6,
    )
    workspace = 8192 * arch.experts_per_token * 2 * (arch.hidden + 2 * arch.moe_intermediate)
    forward = 8192 * 2 * 4.25 * arch.hidden
    assert activation_bytes(req, 0, 8192, 6) == pytest.approx(forward + workspace)
    # With 256 rows the PyTorch sampler is the larger peak and the MoE buffers are gone by then.
    assert activation_bytes(req, 0, 8192, 256) == pytest.approx(38.0 * 256 * arch.vocab)


def test_model_runner_v2_defaults_by_release(monkeypatch):
    def v2(version, arch, moe=False, hybrid=False):
        return Release.of(version).uses_model_runner_v2(arch, moe, hybrid)

    assert not v2("0.21.0", "Qwen3ForCausalLM")
    assert v2("0.22.1", "Qwen3ForCausalLM") and not v2("0.22.1", "LlamaForCausalLM")
    assert v2("0.23.0", "LlamaForCausalLM")
    assert v2("0.25.1", "Gemma2ForCausalLM") and not v2("0.25.1", "Qwen3MoeForCausalLM", moe=True)
    assert v2("0.25.1", "Qwen2MoeForCausalLM", moe=True) and not v2("0.28.0", "Qwen2MoeForCausalLM", moe=True)
    assert not v2("0.27.1", "Qwen3_5ForConditionalGeneration", hybrid=True)
    assert v2("0.29.0", "Qwen3MoeForCausalLM", moe=True) and v2(
        "0.32.0", "Qwen3_5ForConditionalGeneration", hybrid=True
    )
    # Broken variant: a dense-default switch at 0.27 (the first pass's reading) misses 0.25's dense models.
    from planner import vllm_releases

    monkeypatch.setattr(vllm_releases, "V2_RUNNER_DEFAULT_FOR_DENSE_FROM", (0, 27))
    assert not v2("0.25.1", "Gemma2ForCausalLM")


def test_model_runner_v2_sampler_keeps_its_penalty_counts_not_a_top_k_scratch():
    qwen32 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-32b.json").read_text()))
    req = SizingRequest(
        arch=qwen32,
        gpu_memory_gib=95.01,
        vllm_version="0.27.1",
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        tensor_parallel_size=2,
    )
    counts = 1024 * 151936 * 4 + 1024 * -(-151936 // 32) * 4  # output_bin_counts and prompt_bin_mask
    # With the per-request sampler tables (4,481 four-byte entries each) and the structured-outputs grammar
    # bitmask (one int32 word per 32 tokens per request), allocated with the Sampler (issue 29: V2 at 0.29-0.32;
    # the same tensors in v0.27.1 v1/worker/gpu/sample/ and structured_outputs.py).
    kept = counts + 1024 * 4481 * 4 + 1024 * -(-151936 // 32) * 4
    forward = 8192 * 2 * (3 * qwen32.intermediate / 2 + 4.25 * qwen32.hidden)
    assert activation_bytes(req, 0, 8192, 1024) == pytest.approx(forward + kept)
    # Broken variant: V1's Triton top-k/top-p scratch would be far larger than the logits V2 keeps.
    v1 = replace(req, vllm_version="0.21.0")
    assert activation_bytes(v1, 0, 8192, 1024) > activation_bytes(req, 0, 8192, 1024)


# --- the vision encoder's profiling batch (issue 29) --------------------------------------------

# A fixed-resolution tower on the Gemma 3 12B fixture: the image geometry below is a test input (the
# fixture config keeps only the tower's width), chosen so that the arithmetic is easy to follow.
_GEMMA3_CFG = json.loads((LOGS / "configs" / "gemma-3-12b.json").read_text())
_TOWER = {**_GEMMA3_CFG, "vision_config": {**_GEMMA3_CFG["vision_config"], "image_size": 896, "patch_size": 14}}
FIXED_TOWER = ModelArch.from_hf_config({**_TOWER, "mm_tokens_per_image": 256})


def test_a_fixed_resolution_tower_is_read_from_image_and_patch_size():
    assert (FIXED_TOWER.vision_patches_per_item, FIXED_TOWER.vision_tokens_per_item) == (64 * 64, 256)
    assert FIXED_TOWER.vision_patch_values == 3 * 14 * 14
    # Without mm_tokens_per_image the tokens are the patch grid merged by the top-level spatial_merge_size.
    merged = ModelArch.from_hf_config({**_TOWER, "spatial_merge_size": 2})
    assert merged.vision_tokens_per_item == 64 * 64 // 4
    # The fixture as committed states no image geometry: no encoder term rather than a guessed one.
    bare = ModelArch.from_hf_config(_GEMMA3_CFG)
    assert bare.vision_patches_per_item == 0
    assert vision_encoder_bytes(SizingRequest(arch=bare, gpu_memory_gib=79.19), 8192, 256) == 0.0


def test_the_dummy_batch_holds_as_many_images_as_the_encoder_budget_and_the_decoder_allow():
    req = SizingRequest(arch=FIXED_TOWER, gpu_memory_gib=79.19, max_model_len=8192)
    # budget max(8192, 256) // 256 = 32 images; the decoder allows 256 seqs x min(999, 8192 // 256).
    assert encoder_profile(req, 8192, 256, 8192) == EncoderProfile(256, 4096, 32)
    # Few sequences with short prompts cap the batch: 4 seqs x max(1, 512 // 256) = 8 images.
    assert encoder_profile(req, 8192, 4, 512).items == 8
    # A budget below one image still profiles one image.
    assert encoder_profile(req, 128, 256, 8192).items == 1
    # Every image of the batch goes through the tower at once: the peak scales with the images.
    one, many = vision_encoder_bytes(req, 256, 256), vision_encoder_bytes(req, 8192, 256)
    assert many == pytest.approx(32 * one)
    per_patch = (2 * 1152 + 2 * 4304 + 3 * 14 * 14) * 2  # bf16 bytes alive per patch at the MLP
    outputs = 256 * 3840 * 2  # the image's 256 embeddings of the decoder's width, cached for its dummy run
    assert one == pytest.approx(4096 * per_patch + outputs)


def test_the_encoder_sets_the_activation_peak_once_it_outgrows_the_decoder():
    req = SizingRequest(arch=FIXED_TOWER, gpu_memory_gib=79.19, max_model_len=131072)
    small, large = activation_bytes(req, 0, 8192, 256), activation_bytes(req, 0, 131072, 256)
    assert large >= vision_encoder_bytes(req, 131072, 256) > small
    # Only the first pipeline stage runs the encoder.
    staged = replace(req, pipeline_parallel_size=2)
    assert activation_bytes(staged, 1, 131072, 256) < vision_encoder_bytes(staged, 131072, 256)


def test_qwen_vl_towers_keep_one_largest_image_at_the_default_budget():
    req = SizingRequest(arch=QWEN35, gpu_memory_gib=121.69, max_model_len=262144)
    profile = encoder_profile(req, 2048, 256, 262144)
    assert profile == EncoderProfile(16384, 16384 * 4, 1)
    assert encoder_profile(req, 32768, 256, 262144).items == 2


def test_explain_names_the_dummy_image_batch_and_its_source():
    from planner import sizing_explain

    req = SizingRequest(arch=FIXED_TOWER, gpu_memory_gib=178.35, max_model_len=32768, max_num_batched_tokens=65536)
    term = next(t for t in sizing_explain.terms(req) if t.key == "activation.vision_encoder")
    assert "256 image(s) x 4096 patches (256 tokens each)" in term.behaviour
    assert "encoder_budget.py" in term.source and term.calibrated == ""
    assert term.value == pytest.approx(vision_encoder_bytes(req, 65536, 256) / GiB)


def test_gemma3_encoder_batch_stays_under_the_torch_peak_its_log_reports():
    # The Gemma 3 27B calibration log (vLLM 0.19.0, H100, max_num_batched_tokens 8192) reports a torch
    # peak of 3.99 GiB: 32 images of 4096 SigLIP patches must fit under it, or the term is wrong.
    case = _case(CALIBRATION, "google-gemma-3-27b-it--h100-80gb")
    req = request_for(case)
    profile = encoder_profile(req, 8192, 256, case["max_model_len"])
    assert profile == EncoderProfile(256, 4096, 32)
    vision = vision_encoder_bytes(req, 8192, 256) / GiB
    assert 2.0 < vision < case["observed"]["activation_gib"]


# --- issue 29: AWQ Marlin, pipeline parallelism on PCIe, TP 2 on H100 ------------------------------

AWQ70B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "llama-3-70b-instruct-awq.json").read_text()))
QWEN32B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-32b.json").read_text()))


def test_pipeline_remainder_layers_go_to_the_stages_before_the_last():
    # vllm v0.19.0 distributed/utils.py:get_pp_indices: `for i in range(2, remaining_layers + 2):
    # partitions[-i] += 1`, so the last stage (final norm, LM head, sampler) never takes a spare layer.
    assert layers_per_stage(61, 2) == [31, 30]
    assert layers_per_stage(94, 4) == [23, 24, 24, 23]
    assert layers_per_stage(32, 4) == [8, 8, 8, 8]
    assert sum(layers_per_stage(95, 7)) == 95 and layers_per_stage(95, 7)[-1] == 13
    # Broken variant: the remainder on the last stages, as this planner had it, gives [30, 31].
    base, rest = divmod(61, 2)
    assert layers_per_stage(61, 2) != [base + (1 if i >= 2 - rest else 0) for i in range(2)]


def test_non_first_pipeline_stages_keep_a_buffer_for_what_they_receive():
    # v1/worker/gpu_model_runner.py:_dummy_run (v0.10.2, v0.19.0, v0.27.1) allocates
    # make_empty_intermediate_tensors(batch_size=max_num_tokens): hidden states + residual, in the model dtype.
    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=79.19, pipeline_parallel_size=2, vllm_version="0.19.0")
    assert pipeline_buffer_bytes(req, 0, 8192) == 0
    assert pipeline_buffer_bytes(req, 1, 8192) == 2 * 8192 * 4096 * 2
    assert pipeline_buffer_bytes(replace(req, pipeline_parallel_size=1), 0, 8192) == 0
    # It is kept, so it adds to the last stage's sampler peak instead of hiding under it.
    parts = activation_parts(req, 1, 8192, 1024)
    assert parts.peak == pytest.approx(max(parts.forward, parts.sampler) + parts.pipeline_buffer)
    # Model Runner V2 (Qwen3 from 0.22) allocates it after "Model loading took", outside the budget of 0.25
    # (non-torch + torch peak + weights) and inside 0.27's, taken from the drop in free memory.
    qwen = SizingRequest(arch=QWEN32B, gpu_memory_gib=94.97, pipeline_parallel_size=2)
    assert pipeline_buffer_bytes(replace(qwen, vllm_version="0.25.1"), 1, 8192) == 0
    assert pipeline_buffer_bytes(replace(qwen, vllm_version="0.27.1"), 1, 8192) == 2 * 8192 * 5120 * 2


@pytest.mark.parametrize(
    "prefix", ["meta-llama-llama-3-1-8b---h100-80gb--tp1pp2", "meta-llama-llama-3-1-8b---h100-80gb--tp1pp4"]
)
def test_the_pipeline_buffer_explains_the_pp_calibration_runs(prefix):
    """The H100 PP 2/4 calibration runs (v0.19.0) bind on the last stage: with the buffer they are within 0.1%
    (+0.22% and +0.21% without it). No constant involved: the buffer is a tensor's size."""
    from tests.support.sizing_cases import relative_error

    case = _case(CALIBRATION, prefix)
    assert abs(relative_error(case)) < 0.001
    assert size(request_for(case)).binding_stage == case["pipeline_parallel_size"] - 1


def test_awq_weights_are_counted_at_the_tensor_sizes_vllm_loads():
    # Packed 4-bit weights, an fp16 scale and a packed zero point per group of 128 (vllm v0.13.0
    # awq_marlin.py:AWQMarlinLinearMethod.process_weights_after_loading repacks at the same sizes).
    awq = SizingRequest(arch=AWQ70B, gpu_memory_gib=44.42, tensor_parallel_size=2, quantization="awq_marlin")
    assert group_quantized_bytes_per_weight(awq) == pytest.approx(0.5 + 2.5 / 128)
    # GPTQ without zero points keeps none (MarlinLinearKernel: marlin_make_empty_g_idx).
    assert group_quantized_bytes_per_weight(replace(awq, quantization="gptq_marlin")) == pytest.approx(0.5 + 2 / 128)
    # The group size is the checkpoint's.
    assert group_quantized_bytes_per_weight(replace(awq, arch=replace(AWQ70B, quant_group_size=64))) == pytest.approx(
        0.5 + 2.5 / 64
    )
    # The kagaho L40S pair logs "Model loading took 18.55 GiB" per GPU; the estimate is within 0.3%.
    assert weight_bytes_estimate(awq) / 2 / GiB == pytest.approx(18.55, rel=0.003)
    # Broken variant: the former flat 6% on 4 bits gives 18.83 GiB, 1.5% off.
    embed = AWQ70B.vocab * AWQ70B.hidden * 2 * 2
    flat = (weight_bytes_estimate(awq) - embed) / group_quantized_bytes_per_weight(awq) * 0.5 * 1.06 + embed
    assert flat / 2 / GiB != pytest.approx(18.55, rel=0.01)


def test_the_model_arch_reads_the_quantization_group_size():
    cfg = json.loads((LOGS / "configs" / "llama-3-70b-instruct-awq.json").read_text())
    assert AWQ70B.quant_group_size is None  # not in the transcription: the 128 default applies
    cfg["quantization_config"]["group_size"] = 64
    assert ModelArch.from_hf_config(cfg).quant_group_size == 64
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": -1}
    assert ModelArch.from_hf_config(cfg).quant_group_size is None


def test_explain_names_the_pipeline_buffer_and_its_source():
    from planner.sizing_explain import terms

    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=79.19, pipeline_parallel_size=2, gpu_name="H100-80GB")
    listed = {t.key: t for t in terms(replace(req, vllm_version="0.19.0"))}
    assert "activation.pipeline_buffer" in listed
    assert "gpu_model_runner.py:_dummy_run" in listed["activation.pipeline_buffer"].source
    assert listed["activation.pipeline_buffer"].value == pytest.approx(2 * 8192 * 4096 * 2 / GiB)
    assert "activation.pipeline_buffer" not in {t.key for t in terms(replace(req, pipeline_parallel_size=1))}


def test_awq_and_gptq_moe_caches_are_per_call_until_the_modular_marlin_kernel_of_0_22():
    # v0.19.0 awq_marlin.py / gptq_marlin.py MoE apply: `return fused_marlin_moe(...)`, per-call torch.empty caches;
    # v0.22.1: make_wna16_moe_kernel (MarlinExperts, workspaces from current_workspace_manager()).
    for method in ("awq_marlin", "awq", "gptq_marlin"):
        assert not Release.of("0.19.0").moe_workspace_persists(method)
        assert Release.of("0.22.1").moe_workspace_persists(method)
    # The unquantized switch of 0.17 is untouched, and so is FP8's of 0.14.
    assert Release.of("0.19.0").moe_workspace_persists(None)
    assert Release.of("0.14.0").moe_workspace_persists("fp8")
    awq_moe = SizingRequest(arch=QWEN30B, gpu_memory_gib=44.42, gpu_name="L40S", quantization="awq_marlin")
    at_19 = activation_parts(replace(awq_moe, vllm_version="0.19.0"), 0, 2048, 256)
    assert at_19.peak == pytest.approx(max(at_19.forward + at_19.moe_workspace, at_19.sampler, at_19.vision))
    # Broken variant: taken as persistent, the caches would sit on top of the sampler warm-up.
    assert at_19.peak < max(at_19.forward, at_19.sampler) + at_19.moe_workspace


def test_a_pipeline_stage_counts_its_communicator_where_the_snapshot_precedes_it():
    # v0.10.2 v1/worker/gpu_worker.py:init_device takes MemorySnapshot() before init_worker_distributed_environment;
    # v0.11.0 and later after it. A PP-only stage then counts what a TP group counts (0.25 + 0.05 GiB).
    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=44.42, gpu_name="L40S", pipeline_parallel_size=2)
    assert non_torch_bytes(replace(req, vllm_version="0.10.2")) == pytest.approx(
        non_torch_bytes(replace(req, vllm_version="0.10.2", pipeline_parallel_size=1, tensor_parallel_size=2))
    )
    assert non_torch_bytes(replace(req, vllm_version="0.11.0")) == pytest.approx(0.07 * GiB)
    assert not Release.of("0.10.2").snapshot_after_distributed_init
    assert Release.of("0.11.0").snapshot_after_distributed_init


# --- late-0.2x releases on Ada GPUs (issue 29) ----------------------------------------------------

L40S = gpus.CATALOG["L40S"]


def test_from_0_21_the_sampler_warmup_runs_the_native_path_after_flashinfer():
    # vllm v0.21.0 ... v0.29.0 v1/worker/gpu_model_runner.py:_dummy_sampler_run: "Also warm forward_native
    # (taken when generators dict is non-empty)", a second call with `generators={0: ...}`, which
    # TopKTopPSampler.forward_cuda hands to forward_native (`if (k is None and p is None) or generators:`).
    # Absent in v0.20.0. Ada (8.9) takes FlashInfer first, then Triton (8 rows or more) or the sort.
    ada = L40S.compute_capability
    assert ada == (8, 9)
    assert Release.of("0.21.0").sampler_warmup_paths(256, None, ada) == ("flashinfer", "triton")
    assert Release.of("0.28.0").sampler_warmup_paths(4, True, ada) == ("flashinfer", "sort")
    assert Release.of("0.20.0").sampler_warmup_paths(256, True, ada) == ("flashinfer",)
    assert Release.of("0.28.0").sampler_warmup_paths(256, False, ada) == ("triton",)
    # The peak is the larger path: 15.3 bytes per logit (Triton), not FlashInfer's 10. Llama runs the V1
    # runner on 0.22 (Model Runner V2 takes it from 0.23); from 0.25 the dense models go to V2, so on
    # 0.25 ... 0.28 this term is the MoE and hybrid models'.
    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.22.1")
    assert not Release.of("0.22.1").uses_model_runner_v2("LlamaForCausalLM", False, False)
    mnbt, seqs = default_batch_limits(req)
    assert (mnbt, seqs) == (2048, 256)
    sampler = 15.3 * 256 * LLAMA8B.vocab
    forward = 2048 * 2 * (3 * LLAMA8B.intermediate + 4.25 * LLAMA8B.hidden)
    assert sampler > forward
    assert activation_bytes(req, 0, mnbt, seqs) == pytest.approx(sampler)


def test_the_native_warmup_switch_is_what_sets_the_post_0_21_sampler(monkeypatch):
    # Broken variant: without the second call (the reading before this change), a FlashInfer-default
    # release would size the warm-up at FlashInfer's 10 bytes per logit.
    from planner import vllm_releases

    req = SizingRequest(arch=LLAMA8B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.22.1")
    with_second_call = activation_bytes(req, 0, 2048, 256)
    monkeypatch.setattr(vllm_releases, "SAMPLER_WARMS_NATIVE_PATH_FROM", (0, 99))
    assert activation_bytes(req, 0, 2048, 256) == pytest.approx(10.0 * 256 * LLAMA8B.vocab)
    assert with_second_call - activation_bytes(req, 0, 2048, 256) == pytest.approx(5.3 * 256 * LLAMA8B.vocab)


def test_model_runner_v2_penalty_state_is_counted_from_0_27_only(monkeypatch):
    # Up to 0.26 the profile counts weights ("Model loading took") + torch peak above the profile's start +
    # non-torch growth (vllm v0.26.0 utils/mem_utils.py:memory_profiling); V2's Sampler, and with it the
    # penalties state, is built after the weights were measured (v0.25.1 v1/worker/gpu/model_runner.py
    # load_model), so vLLM counts it nowhere. From 0.27 the profile takes the drop in free memory
    # (v0.27.0 and v0.27.1 memory_profiling: `result.total_consumed = result.before_create.free_memory -
    # result.after_profile.free_memory`), which includes it.
    qwen3 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-8b.json").read_text()))
    req = SizingRequest(arch=qwen3, gpu_memory_gib=44.42, gpu_name="L40S")
    counts = 256 * qwen3.vocab * 4 + 256 * -(-qwen3.vocab // 32) * 4
    # Plus the sampler's per-request tables and the grammar bitmask, built with it (issue 29, V2 at 0.29-0.32).
    counts += 256 * 4481 * 4 + 256 * -(-qwen3.vocab // 32) * 4
    before = activation_bytes(replace(req, vllm_version="0.26.0"), 0, 2048, 256)
    after = activation_bytes(replace(req, vllm_version="0.27.1"), 0, 2048, 256)
    assert Release.of("0.26.0").uses_model_runner_v2("Qwen3ForCausalLM", False, False)
    assert after - before == pytest.approx(counts)
    # Broken variant: a switch back at 0.22 (counting the state in every V2 release) loses the difference.
    from planner import vllm_releases

    monkeypatch.setattr(vllm_releases, "PROFILE_COUNTS_FREE_MEMORY_DROP_FROM", (0, 22))
    assert activation_bytes(replace(req, vllm_version="0.26.0"), 0, 2048, 256) == pytest.approx(after)


def test_explain_cites_the_second_sampler_call_and_the_profile_accounting():
    from planner import sizing_explain

    v1 = SizingRequest(arch=QWEN30B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.28.0", max_model_len=8192)
    sampler = next(t for t in sizing_explain.terms(v1) if t.key == "activation.sampler")
    assert "flashinfer then triton" in sampler.behaviour
    assert "v0.21.0 v1/worker/gpu_model_runner.py:_dummy_sampler_run" in sampler.behaviour
    qwen3 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-8b.json").read_text()))
    v2 = SizingRequest(arch=qwen3, gpu_memory_gib=21.96, gpu_name="L4", vllm_version="0.26.0", max_model_len=8192)
    state = next(t for t in sizing_explain.terms(v2) if t.key == "activation.sampler_state")
    assert state.value == 0.0 and "not counted" in state.behaviour and "v0.26.0 utils/mem_utils.py" in state.behaviour
    later = next(
        t for t in sizing_explain.terms(replace(v2, vllm_version="0.27.1")) if t.key == "activation.sampler_state"
    )
    assert later.value > 0 and "v0.27.0 utils/mem_utils.py" in later.behaviour


# --- vision encoders with dynamic resolution (issue 29) ----------------------------------------------------------

MISTRAL3 = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "mistral-small-3.1-24b.json").read_text()))
SCOUT = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "llama-4-scout-17b-16e.json").read_text()))
_CLIP_336 = {"hidden_size": 1024, "intermediate_size": 4096, "image_size": 336, "patch_size": 14}
# A small language model for the wrapper configs below (the towers are what these tests read).
_TEXT = {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000}


def _b200(arch, **kw):
    return SizingRequest(arch=arch, gpu_memory_gib=178.35, gpu_name="B200", max_model_len=32768, **kw)


def test_pixtral_image_is_its_image_size_with_one_break_token_per_merged_row():
    # vllm@0004c540 models/pixtral.py PixtralHFEncoderInfo.get_num_image_tokens: (ncols + 1) * nrows, the
    # 1540 / 14 = 110 patch grid merged 2 x 2 by the top-level spatial_merge_size.
    assert MISTRAL3.vision_family == "pixtral"
    assert (MISTRAL3.vision_patches_per_item, MISTRAL3.vision_tokens_per_item) == (110 * 110, 56 * 55)
    assert MISTRAL3.vision_gated and MISTRAL3.vision_dense_mask


def test_pixtral_dense_mask_over_the_whole_batch_grows_with_the_square_of_max_num_batched_tokens():
    # B200 from 0.28: 16384 batched tokens // 3080 = 5 images = 60,500 patches in one sequence; transformers'
    # generate_block_attention_mask is seq_len^2 in bf16, and 60,500 is not a multiple of 8, so PyTorch's
    # memory-efficient SDPA pads it into a copy (attention.cpp preprocess_mask, mem_eff_alignment = 8).
    req = _b200(MISTRAL3, vllm_version="0.28.0")
    mnbt, seqs = default_batch_limits(req)
    assert (mnbt, encoder_profile(req, mnbt, seqs, 32768).items) == (16384, 5)
    parts = vision_encoder_parts(req, mnbt, seqs)
    assert parts.mask == 60500 * 60500 * 2
    assert parts.mask_padded_copy == 60500 * (60500 + 4) * 2
    # per patch: residual and normed copy (2 x 1024) and the gated MLP (3 x 4096), bf16
    assert parts.layers == 60500 * (2 * 1024 + 3 * 4096) * 2
    # The encoder now sets the torch peak, far above the decoder's forward of 16384 tokens.
    act = activation_parts(req, 0, mnbt, seqs)
    assert act.peak >= act.vision > 3 * act.forward
    # At 8192 batched tokens the batch is 2 images (24,200 patches, a multiple of 8): a quarter-size mask, no copy.
    small = vision_encoder_parts(replace(req, vllm_version="0.19.0"), 8192, 1024)
    assert small.mask == 24200 * 24200 * 2 and small.mask_padded_copy == 0
    # Broken variant: a tower without the cross-image mask (per-image attention) stays under 2 GiB here.
    per_image = replace(MISTRAL3, vision_dense_mask=False)
    assert vision_encoder_bytes(replace(req, arch=per_image), mnbt, seqs) < 2 * GiB < parts.total


def test_pixtral_encoder_stays_under_the_torch_peak_of_its_h100_logs():
    # llm-d-planner v0.19.0 Mistral-Small-3.1 H100 log: torch peak 2.03 GiB at 8192 batched tokens; the
    # encoder's 2 images (mask, layers, pixels, outputs) must fit under it.
    case = _case(CALIBRATION, "mistralai-mistral-small---h100-80gb")
    req = request_for(case)
    vision = vision_encoder_bytes(req, 8192, 1024) / GiB
    assert 1.0 < vision < case["observed"]["activation_gib"]


def test_llama4_largest_image_is_sixteen_tiles_tall_plus_the_global_tile():
    # vllm@00dd5493 models/mllama4.py get_image_size_with_most_features: (max_num_tiles x 336) by 336; 16 tiles
    # + 1 global, each (336 / 14)^2 + 1 class token patches; 144 tokens per tile after the 0.5 pixel shuffle.
    assert SCOUT.vision_family == "llama4"
    assert SCOUT.vision_patches_per_item == 17 * (24 * 24 + 1)
    assert SCOUT.vision_tokens_per_item == 16 * (144 + 1) + 144 + 3


def test_llama4_dummy_batch_matches_the_encoder_line_of_its_log():
    # "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 3 image items of the
    # maximum feature size." (llm-d-planner v0.19.0 Llama-4-Scout TP 4 log)
    case = _case(CALIBRATION, "meta-llama-llama-4-scout--h100-80gb")
    assert "profiled with 3 image items" in " ".join(case["log_lines"])
    req = request_for(case)
    assert encoder_profile(req, 8192, 1024, 8192).items == 3
    # Broken variant: one tile per image (the fixed-resolution reading) would pack 56 images into the budget.
    one_tile = replace(SCOUT, vision_tokens_per_item=144, vision_patches_per_item=577)
    assert encoder_profile(replace(req, arch=one_tile), 8192, 1024, 8192).items == 56


def test_internvl_tiles_come_from_max_dynamic_patch_and_the_thumbnail():
    cfg = {
        "architectures": ["InternVLChatModel"],
        "model_type": "internvl_chat",
        "max_dynamic_patch": 12,
        "use_thumbnail": True,
        "downsample_ratio": 0.5,
        "force_image_size": 448,
        "llm_config": {**_TEXT, "num_hidden_layers": 2},
        "vision_config": {**_CLIP_336, "image_size": 448, "patch_size": 14},
    }
    arch = ModelArch.from_hf_config(cfg)
    assert (arch.layers, arch.hidden) == (2, 1024)  # the language model is read from llm_config
    # 12 tiles + the thumbnail, each (448 / 14)^2 + 1 patches and 1024 x 0.5^2 = 256 tokens.
    assert arch.vision_family == "internvl"
    assert (arch.vision_patches_per_item, arch.vision_tokens_per_item) == (13 * 1025, 13 * 256)
    no_thumb = ModelArch.from_hf_config({**cfg, "use_thumbnail": False})
    assert no_thumb.vision_tokens_per_item == 12 * 256


def test_llava_next_takes_the_pinpoint_with_the_most_features():
    cfg = {
        "architectures": ["LlavaNextForConditionalGeneration"],
        "model_type": "llava_next",
        "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
        "text_config": {**_TEXT, "num_hidden_layers": 2},
        "vision_config": _CLIP_336,
    }
    arch = ModelArch.from_hf_config(cfg)
    # 672 x 672: base 24^2 + the 48 x 48 grid + 48 newlines (vllm@004202bc llava_next.py
    # get_llava_next_image_feature_size); 1008 x 336 gives 576 + 72 x 24 + 72 = 2376, fewer.
    assert arch.vision_family == "llava_next"
    assert arch.vision_tokens_per_item == 576 + 48 * 48 + 48
    assert arch.vision_patches_per_item == (4 + 1) * (576 + 1)
    with pytest.raises(SizingError, match="image_grid_pinpoints"):
        ModelArch.from_hf_config({**cfg, "image_grid_pinpoints": [[336]]})


def test_a_tower_sized_by_its_preprocessor_alone_is_named_not_guessed():
    from planner import sizing_explain

    cfg = {
        "architectures": ["KimiVLForConditionalGeneration"],
        "model_type": "kimi_vl",
        "text_config": {**_TEXT, "num_hidden_layers": 2},
        "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "patch_size": 14},
    }
    arch = ModelArch.from_hf_config(cfg)
    assert arch.vision_family == "" and "in_token_limit" in arch.vision_unmodelled
    req = SizingRequest(arch=arch, gpu_memory_gib=79.19)
    assert vision_encoder_bytes(req, 8192, 256) == 0.0
    term = next(t for t in sizing_explain.terms(req) if t.key == "activation.vision_encoder")
    assert term.value == 0.0 and "not modelled" in term.behaviour and "preprocessor_config.json" in term.behaviour


def test_flags_that_change_the_encoder_profile():
    req = _b200(MISTRAL3, vllm_version="0.28.0")
    # --limit-mm-per-prompt '{"image": 0}' and --skip-mm-profiling: no encoder run in the profile.
    assert encoder_profile(replace(req, mm_images_per_prompt=0), 16384, 1024, 32768) is None
    assert encoder_profile(replace(req, skip_mm_profiling=True), 16384, 1024, 32768) is None
    # One image per prompt with 2 sequences caps the batch at 2 images.
    assert encoder_profile(replace(req, mm_images_per_prompt=1), 16384, 2, 32768).items == 2
    # --mm-encoder-tp-mode data: every GPU runs the whole tower, its MLP unsharded.
    tp2 = replace(req, tensor_parallel_size=2)
    sharded = vision_encoder_parts(tp2, 16384, 1024).layers
    whole = vision_encoder_parts(replace(tp2, mm_encoder_tp_mode="data"), 16384, 1024).layers
    assert whole > sharded
    assert request_problem(replace(req, mm_encoder_tp_mode="sharded")) is not None
    with pytest.raises(SizingError, match="pixel_shuffle_ratio"):
        ModelArch.from_hf_config(
            {
                **json.loads((LOGS / "configs" / "llama-4-scout-17b-16e.json").read_text()),
                "vision_config": {"hidden_size": 1408, "image_size": 336, "patch_size": 14, "pixel_shuffle_ratio": 2},
            }
        )


def test_explain_prints_the_pixtral_mask_and_its_source():
    from planner import sizing_explain

    req = _b200(MISTRAL3, vllm_version="0.28.0")
    terms = {t.key: t for t in sizing_explain.terms(req)}
    assert "5 image(s) x 12100 patches (3080 tokens each)" in terms["activation.vision_encoder"].behaviour
    assert "pixtral.py" in terms["activation.vision_encoder.mask"].source
    assert terms["activation.vision_encoder.mask"].value == pytest.approx(60500 * 60500 * 2 / GiB)
    assert "activation.vision_encoder.mask_padded_copy" in terms


def test_from_log_sets_the_logged_encoder_batch_beside_the_predicted_one():
    from planner import sizing_cli, sizing_explain, startup_log

    case = _case(CALIBRATION, "meta-llama-llama-4-scout--h100-80gb")
    log = startup_log.parse("\n".join(case["log_lines"]))
    assert (log.encoder_budget_tokens, log.encoder_items) == (8192, 3)
    req = request_for(case)
    rows = {r["term"]: r for r in sizing_cli.compare(sizing_explain.terms(req), log, [], "0.19.0")["terms"]}
    assert rows["activation.vision_encoder.items"]["predicted"] == rows["activation.vision_encoder.items"]["logged"]
    assert rows["activation.vision_encoder.budget"]["logged"] == 8192


def test_cli_flags_and_logged_args_set_the_encoder_profile(capsys):
    from planner import sizing_cli, startup_log

    config = str(LOGS / "configs" / "mistral-small-3.1-24b.json")
    base = ["--model-config", config, "--gpu", "B200", "--vllm-version", "0.28.0", "--max-model-len", "32768", "--json"]

    def tokens(*extra):
        assert sizing_cli.main([*base, *extra]) == 0
        return json.loads(capsys.readouterr().out)["kv_cache_tokens"]

    with_images, without = tokens(), tokens("--limit-mm-per-prompt", '{"image": 0}')
    assert without > with_images  # the encoder's 5-image batch costs KV cache on a B200
    assert tokens("--skip-mm-profiling") == without
    assert tokens("--limit-mm-per-prompt", "image=1", "--max-num-seqs", "2") > with_images
    assert sizing_cli.main([*base, "--limit-mm-per-prompt", '{"image": -1}']) == 2
    assert "--limit-mm-per-prompt" in capsys.readouterr().err
    line = (
        "INFO 04-22 00:53:55 [entrypoints/utils.py:233] non-default args: {'model': 'm', 'limit_mm_per_prompt': "
        "{'image': 2, 'video': 0}, 'skip_mm_profiling': True, 'mm_encoder_tp_mode': 'data'}"
    )
    log = startup_log.parse(line)
    assert (log.mm_images_per_prompt, log.skip_mm_profiling, log.mm_encoder_tp_mode) == (2, True, "data")


def test_qwen25_vl_tower_has_a_gated_mlp_and_qwen3_vl_does_not():
    # vllm models/qwen2_5_vl.py Qwen2_5_VisionMLP: gate_up_proj (MergedColumnParallelLinear, 2 x intermediate).
    tower = {"hidden_size": 1280, "intermediate_size": 3420, "spatial_merge_size": 2, "patch_size": 14}
    text = {**_TEXT, "num_hidden_layers": 2}
    q25 = ModelArch.from_hf_config({"model_type": "qwen2_5_vl", "text_config": text, "vision_config": tower})
    q3 = ModelArch.from_hf_config({"model_type": "qwen3_vl", "text_config": text, "vision_config": tower})
    assert q25.vision_family == q3.vision_family == "qwen_vl"
    assert q25.vision_gated and not q3.vision_gated
    one = vision_encoder_parts(SizingRequest(arch=q25, gpu_memory_gib=79.19), 8192, 256)
    other = vision_encoder_parts(SizingRequest(arch=q3, gpu_memory_gib=79.19), 8192, 256)
    # one 16,384-token image = 65,536 patches; the gated MLP holds one more intermediate per patch
    assert one.layers - other.layers == 65536 * 3420 * 2


def test_cuda_graph_estimate_step_is_one_allocator_segment_per_extrapolated_graph():
    # vLLM V1 extrapolates each capture mode from its second capture: first capture + (sizes - 1) x the second's
    # drop in free memory, the modes' first captures overlaid (vllm v0.19.0, v0.20.0, v0.22.1, v0.25.1, v0.28.0
    # v1/worker/gpu_model_runner.py:profile_cudagraph_memory: `profile_descs = descs[:2]`,
    # `per_graph_estimate[mode] = per_graph * (len(descs) - 1)`, `max(shared_memory_estimate.values()) +
    # sum(per_graph_estimate.values())`). The v0.19.0 H100 Llama-3.1-8B calibration logs (llm-d-incubation/
    # llm-d-planner d3121e059da88662db39a926a3ead964be97359b accuracy/results/v0.19.0/logs/
    # meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log and ...--tp2pp1dp1--8192.log) print at DEBUG:
    #   TP 1: PIECEWISE 138 MiB first-capture + (51-1) x 6 MiB, FULL 260 MiB + (51-1) x 6 MiB; 0.84 GiB total
    #   TP 2: PIECEWISE 96 MiB first-capture + (51-1) x 26 MiB, FULL 132 MiB + (51-1) x 6 MiB; 1.69 GiB total
    from planner import sizing_explain
    from planner.sizing import ALLOCATOR_LARGE_SEGMENT_BYTES, cuda_graph_bytes, cuda_graph_estimate_step_bytes

    mib = 1024**2

    def total(first_pw: int, per_pw: int, first_full: int, per_full: int, sizes: int = 51) -> float:
        return (max(first_pw, first_full) + (sizes - 1) * (per_pw + per_full)) * mib / GiB

    assert round(total(138, 6, 260, 6), 2) == 0.84
    assert round(total(96, 26, 132, 6), 2) == 1.69
    # The TP 2 excess is one 20 MiB segment of PyTorch's caching allocator (kLargeBuffer) taken by the second
    # PIECEWISE capture, times 50; without it the TP 2 estimate would be 0.71 GiB, below TP 1's.
    step = cuda_graph_estimate_step_bytes(51)
    assert step == 50 * ALLOCATOR_LARGE_SEGMENT_BYTES == 50 * 20 * mib
    assert total(96, 26, 132, 6) - total(96, 26 - 20, 132, 6) == pytest.approx(step / GiB)
    assert round(total(96, 6, 132, 6), 2) == 0.71
    assert cuda_graph_estimate_step_bytes(83) == 82 * 20 * mib and cuda_graph_estimate_step_bytes(1) == 0.0
    # --explain names the step beside the graph term (from 0.20 the estimate is subtracted), and the budget does
    # not add it: the graph term stays the engine's mean.
    req = SizingRequest(
        arch=LLAMA8B,
        gpu_memory_gib=79.19,
        gpu_name="H100-80GB",
        tensor_parallel_size=2,
        vllm_version="0.22.1",
        max_model_len=8192,
    )
    result = size(req)
    rows = {t.key: t for t in sizing_explain.terms(req, result)}
    row = rows["cuda_graphs.estimate_step"]
    assert row.part_of == "cuda_graphs" and row.value == pytest.approx(step / GiB)
    assert "v1/worker/gpu_model_runner.py:profile_cudagraph_memory" in row.source and "kLargeBuffer" in row.behaviour
    assert result.cuda_graph_in_budget and result.cuda_graph_gib == pytest.approx(cuda_graph_bytes(32, 51) / GiB)
    assert rows["kv_memory"].value == pytest.approx(
        result.requested_gib
        - result.weights_gib_per_gpu
        - result.activation_gib
        - result.non_torch_gib
        - result.cuda_graph_gib
    )
    # Model Runner V2 of 0.25 (Llama is dense there) estimates 0, so it has no step to name.
    assert "cuda_graphs.estimate_step" not in {t.key for t in sizing_explain.terms(replace(req, vllm_version="0.25.1"))}
    # Broken variant: a step counted at TP 2 only would have lifted Qwen2.5-7B's TP 2 estimate too, which the same
    # source logs it at 0.61 GiB, its TP 1 figure (PIECEWISE 122 MiB + (51-1) x 4 MiB, FULL 116 MiB + (51-1) x 6 MiB).
    assert round(total(122, 4, 116, 6), 2) == 0.61
    assert round(total(122, 4 + 20, 116, 6), 2) != 0.61


# --- what 0.27's free-memory accounting counts (issue 29) ------------------------------------------


def test_v1_runner_input_buffers_are_counted_from_0_27_only(monkeypatch):
    # vllm v0.27.1 v1/worker/gpu_model_runner.py:GPUModelRunner.__init__: `self.inputs_embeds =
    # self._make_buffer(self.max_num_tokens, self.inputs_embeds_size, dtype=self.dtype, numpy=False)`, the
    # int32/int64/bool index buffers (input_ids, positions, req_indices, query_pos, is_token_ids) and the
    # InputBatch's block table (v1/worker/block_table.py:BlockTable.__init__, `(self.max_num_reqs,
    # self.max_num_blocks_per_req)` int32, and a slot mapping of max_num_batched_tokens int64). The runner is
    # built in init_device after `self.init_snapshot = ... MemorySnapshot(...)` (v1/worker/gpu_worker.py), outside
    # load_model's "Model loading took": v0.26.0 memory_profiling (weights + torch peak increase + non-torch)
    # counts none of it, v0.27.1 (`total_consumed`, the drop in free memory) counts all of it.
    from planner import vllm_releases
    from planner.sizing import v1_runner_buffer_bytes

    req = SizingRequest(arch=QWEN30B, gpu_memory_gib=44.42, gpu_name="L40S", max_model_len=32768)
    assert not Release.of("0.27.1").uses_model_runner_v2(QWEN30B.architecture, QWEN30B.is_moe, QWEN30B.is_hybrid)
    mnbt, seqs = default_batch_limits(replace(req, vllm_version="0.27.1"))
    assert (mnbt, seqs) == (2048, 256)
    expected = 2048 * (QWEN30B.hidden * 2 + 37) + 256 * (32768 // 16) * 4
    assert v1_runner_buffer_bytes(replace(req, vllm_version="0.27.1"), mnbt, seqs) == expected
    assert v1_runner_buffer_bytes(replace(req, vllm_version="0.26.0"), mnbt, seqs) == 0.0
    before = activation_bytes(replace(req, vllm_version="0.26.0"), 0, mnbt, seqs)
    after = activation_bytes(replace(req, vllm_version="0.27.1"), 0, mnbt, seqs)
    assert after - before == pytest.approx(expected)
    # Model Runner V2 builds its block tables in initialize_kv_cache, after the budget (v0.27.1
    # v1/worker/gpu/model_runner.py), and a dense model runs V2 on 0.27: nothing of this term.
    dense = replace(req, arch=LLAMA8B, vllm_version="0.27.1")
    assert v1_runner_buffer_bytes(dense, mnbt, seqs) == 0.0
    # Broken variant: the switch moved back to 0.22 counts the buffers on 0.26 too.
    monkeypatch.setattr(vllm_releases, "PROFILE_COUNTS_FREE_MEMORY_DROP_FROM", (0, 22))
    assert v1_runner_buffer_bytes(replace(req, vllm_version="0.26.0"), mnbt, seqs) == expected


def test_explain_shows_the_v1_runner_buffers_with_their_source():
    from planner import sizing_explain

    req = SizingRequest(arch=QWEN30B, gpu_memory_gib=44.42, gpu_name="L40S", max_model_len=32768)
    after = {t.key: t for t in sizing_explain.terms(replace(req, vllm_version="0.27.1"))}
    term = after["activation.runner_buffers"]
    assert term.value > 0 and term.part_of == "activation"
    assert "v0.27.1 v1/worker/gpu_model_runner.py:GPUModelRunner.__init__" in term.source
    assert "from 0.27" in term.behaviour and "total_consumed" in term.behaviour
    before = {t.key: t for t in sizing_explain.terms(replace(req, vllm_version="0.26.0"))}
    assert before["activation.runner_buffers"].value == 0.0
    assert "not counted (before 0.27)" in before["activation.runner_buffers"].behaviour


# --- Model Runner V2 at 0.29-0.32, the pinned release (issue 29) ---------------------------------------------------

QWEN3_8B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "qwen3-8b.json").read_text()))
GEMMA3_27B = ModelArch.from_hf_config(json.loads((LOGS / "configs" / "gemma-3-27b.json").read_text()))


def test_model_runner_v2_graph_estimate_counts_full_graphs_up_to_max_num_seqs_from_0_29(monkeypatch):
    # vllm v0.32.0 v1/worker/gpu/cudagraph_utils.py (the same in v0.29.0, v0.30.0, v0.31.0): profile_cudagraph_memory
    # (line 873) captures every PIECEWISE graph and measures it, and only `_FULL_GRAPH_PROFILING_SAMPLES = 2` (line
    # 867) FULL graphs, extrapolated as `first_capture + (total_graphs - 1) * per_graph` (lines 986-987); the FULL
    # graphs are the capture sizes up to `max_decode_tokens = self.max_num_reqs * self.decode_query_len` (line 258).
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" (v0.32.0 envs.py), so it is subtracted.
    from planner import sizing, vllm_releases

    l40s = SizingRequest(
        arch=QWEN3_8B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.32.0", max_model_len=8192
    )
    sizes = cuda_graph_capture_sizes(l40s, 256)
    assert len(sizes) == 51 and sizing.v2_full_graph_count(l40s, 256) == 35 == len([s for s in sizes if s <= 256])
    result = size(l40s)
    assert result.cuda_graph_in_budget
    layers = QWEN3_8B.layers
    expected = sizing.CUDA_GRAPH_BASE_GIB + sizing.CUDA_GRAPH_PER_LAYER_GIB * layers * (50 + 34) / 100
    assert result.cuda_graph_gib == pytest.approx(expected)
    # Where max_num_seqs reaches the largest size (H100: 1024), both modes have 51 graphs: V1's figure.
    h100 = replace(l40s, gpu_memory_gib=79.19, gpu_name="H100-80GB")
    assert size(h100).cuda_graph_gib == pytest.approx(sizing.cuda_graph_bytes(layers, 51) / GiB)
    # MTP doubles the decode query length: all 51 sizes are FULL graphs at 256 sequences.
    assert sizing.v2_full_graph_count(replace(l40s, speculative_tokens=1), 256) == 51
    # 0.22-0.28: V2 estimates 0, nothing subtracted.
    assert not size(replace(l40s, vllm_version="0.28.0")).cuda_graph_in_budget
    # Broken variant: the switch moved past 0.32 sizes the pinned release with V1's count of graphs.
    monkeypatch.setattr(vllm_releases, "V2_GRAPH_ESTIMATE_FROM", (0, 33))
    assert size(l40s).cuda_graph_gib == pytest.approx(sizing.cuda_graph_bytes(layers, 51) / GiB)
    assert size(l40s).cuda_graph_gib > expected


def test_model_runner_v2_estimate_step_is_the_full_graphs_only():
    # V2 extrapolates FULL graphs only ((FULL - 1) x the second capture's drop), PIECEWISE graphs are each measured
    # (vllm v0.32.0 v1/worker/gpu/cudagraph_utils.py:_extrapolate_full_graph_memory, lines 986-987), so one 20 MiB
    # segment in the second FULL capture moves the estimate by (35 - 1) x 20 MiB at 256 sequences.
    from planner import sizing, sizing_explain

    req = SizingRequest(arch=QWEN3_8B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.32.0", max_model_len=8192)
    terms = {t.key: t for t in sizing_explain.terms(req)}
    step = terms["cuda_graphs.estimate_step"]
    assert step.value == pytest.approx(34 * 20 * 1024**2 / GiB)
    assert "v0.32.0 v1/worker/gpu/cudagraph_utils.py:profile_cudagraph_memory" in step.source
    graphs = terms["cuda_graphs"]
    assert "35 FULL graphs" in graphs.behaviour and "51 PIECEWISE graphs measured" in graphs.behaviour
    assert "_init_candidates" in graphs.source
    # Broken variant: V1's step over both modes would be (51 - 1) x 20 MiB.
    assert sizing.cuda_graph_estimate_step_bytes(51) / GiB != pytest.approx(step.value)


def test_model_runner_v2_profiles_the_encoder_from_0_27_only(monkeypatch):
    # vllm v0.27.0 ... v0.32.0 v1/worker/gpu/model_runner.py:profile_run: `self.model_state.encoder_runner.
    # profile_encoder_cache(dummy_mm_inputs, mm_budget)` before the text dummy run (v0.32.0 lines 993-1002), the
    # outputs kept under "tmp_i" (mm/encoder_runner.py:profile_encoder_cache, lines 139-147) until
    # `self.reset_encoder_cache()` after the sampler (line 1020). v0.22.1, v0.25.1 and v0.26.0 profile_run run
    # the text dummy forward and the sampler only (vllm-project/vllm#48469's case).
    from planner import sizing_explain, vllm_releases

    req = SizingRequest(arch=GEMMA3_27B, gpu_memory_gib=79.19, gpu_name="H100-80GB", max_model_len=8192)
    dense = (GEMMA3_27B.architecture, GEMMA3_27B.is_moe, GEMMA3_27B.is_hybrid)
    assert Release.of("0.26.0").uses_model_runner_v2(*dense) and not Release.of("0.24.0").uses_model_runner_v2(*dense)
    assert vision_encoder_parts(replace(req, vllm_version="0.32.0"), 8192, 1024) is not None
    assert vision_encoder_parts(replace(req, vllm_version="0.27.1"), 8192, 1024) is not None
    assert vision_encoder_parts(replace(req, vllm_version="0.24.0"), 8192, 1024) is not None  # the V1 runner
    assert vision_encoder_parts(replace(req, vllm_version="0.26.0"), 8192, 1024) is None
    row = {t.key: t for t in sizing_explain.terms(replace(req, vllm_version="0.26.0"))}["activation.vision_encoder"]
    assert row.value == 0.0 and "v0.26.0 v1/worker/gpu/model_runner.py:profile_run" in row.source
    # Broken variants: the switch at 0.22 sizes an encoder 0.26 never ran; past 0.32 drops the pinned release's.
    monkeypatch.setattr(vllm_releases, "V2_PROFILES_ENCODER_FROM", (0, 22))
    assert vision_encoder_parts(replace(req, vllm_version="0.26.0"), 8192, 1024) is not None
    monkeypatch.setattr(vllm_releases, "V2_PROFILES_ENCODER_FROM", (0, 33))
    assert vision_encoder_parts(replace(req, vllm_version="0.32.0"), 8192, 1024) is None


def test_model_runner_v2_keeps_its_sampler_tables_and_grammar_bitmask():
    # Built with the Sampler in load_model after "Model loading took" (vllm v0.32.0 v1/worker/gpu/model_runner.py,
    # `Sampler(**sampler_kwargs)`, `StructuredOutputsWorker(max_num_logits=self.max_num_reqs * self.decode_query_len,
    # ...)`), each a GPU tensor (buffer_utils.py:StagedWriteTensor, `torch.zeros(size, ...)`): logit_bias.py 1024
    # allowed ids, 1024 bias ids, 1024 bias values, 128 stop ids; bad_words.py 1024 tokens and 128 + 1 offsets
    # (envs.py VLLM_MAX_BAD_WORDS_TOTAL_TOKENS "1024", VLLM_MAX_NUM_BAD_WORDS "128"); logprob.py 128 token ids
    # (sampling_params.py MAX_LOGPROB_TOKEN_IDS = 128); structured_outputs.py:87 `grammar_bitmask = torch.zeros(
    # (max_num_logits, cdiv(vocab_size, 32)), dtype=torch.int32)`. Counted by vLLM from 0.27 (total_consumed).
    from planner import sizing

    req = SizingRequest(arch=QWEN3_8B, gpu_memory_gib=44.42, gpu_name="L40S", vllm_version="0.32.0", max_model_len=8192)
    words = -(-QWEN3_8B.vocab // 32)
    parts = sizing.v2_sampler_state_parts(req, 256)
    assert parts["tables"] == 256 * 4481 * 4
    assert parts["bitmask"] == 256 * words * 4
    assert parts["penalties"] == 256 * QWEN3_8B.vocab * 4 + 256 * words * 4
    assert sizing.v2_sampler_state_parts(replace(req, speculative_tokens=1), 256)["bitmask"] == 2 * 256 * words * 4
    kept = activation_parts(req, 0, 2048, 256).sampler_persistent
    assert kept == pytest.approx(sum(parts.values()))
    # Broken variant: the penalties state alone (the reading before this change) misses the tables and bitmask.
    assert kept - parts["penalties"] == pytest.approx(256 * (4481 + words) * 4)
    assert activation_parts(replace(req, vllm_version="0.26.0"), 0, 2048, 256).sampler_persistent == 0.0


# -- issue 29: the offline LLM class and --performance-mode ------------------------------------------------------


def _modes_req(gpu: str, version: str, **kw) -> SizingRequest:
    return SizingRequest(
        arch=QWEN3_8B,
        gpu_memory_gib=gpus.CATALOG[gpu].cuda_total_gib,
        gpu_name=gpu,
        vllm_version=version,
        max_model_len=8192,
        **kw,
    )


def test_the_offline_llm_class_has_its_own_batch_defaults():
    # vllm v0.16.0 ... v0.32.0 engine/arg_utils.py:get_batch_defaults: UsageContext.LLM_CLASS 8192 / 256 where the
    # OpenAI server has 2048 / 256 (under 70 GiB, or an A100), 16384 / 1024 where it has 8192 / 1024; from 0.28 the
    # >= 160 GiB row is 16384 / 1024 for both.
    for gpu, version, server, offline in (
        ("L40S", "0.19.0", (2048, 256), (8192, 256)),
        ("A100-80GB", "0.19.0", (2048, 256), (8192, 256)),
        ("H100-80GB", "0.19.0", (8192, 1024), (16384, 1024)),
        ("H100-80GB", "0.32.0", (8192, 1024), (16384, 1024)),
        ("B200", "0.28.0", (16384, 1024), (16384, 1024)),
        ("B200", "0.27.1", (8192, 1024), (16384, 1024)),
    ):
        req = _modes_req(gpu, version)
        assert default_batch_limits(req) == server, (gpu, version)
        assert default_batch_limits(replace(req, usage_context="llm-class")) == offline, (gpu, version)
    # A limit the run sets is its own, whoever built the engine.
    req = _modes_req("L40S", "0.19.0", usage_context="llm-class", max_num_batched_tokens=2048)
    assert default_batch_limits(req) == (2048, 256)
    # The larger profiled forward is a larger activation peak, so fewer KV tokens than the server's defaults give.
    server, offline = size(_modes_req("L40S", "0.19.0")), size(_modes_req("L40S", "0.19.0", usage_context="llm-class"))
    assert offline.max_num_batched_tokens == 8192 and offline.activation_gib > server.activation_gib
    assert offline.kv_cache_tokens < server.kv_cache_tokens
    with pytest.raises(SizingError, match="usage context 'batch' is not one of openai-server, llm-class"):
        default_batch_limits(replace(server_req := _modes_req("L40S", "0.19.0"), usage_context="batch"))
    assert server_req.usage_context == "openai-server"


def test_throughput_mode_doubles_only_the_batch_limits_left_to_their_defaults():
    # vllm v0.17.0 ... v0.32.0 engine/arg_utils.py:_set_default_max_num_seqs_and_batched_tokens_args: `if
    # self.performance_mode == "throughput": if orig_max_num_batched_tokens is None: self.max_num_batched_tokens *= 2`
    # and the same for max_num_seqs, before max_num_seqs is capped by max_num_batched_tokens.
    req = _modes_req("L40S", "0.19.0", performance_mode="throughput")
    assert default_batch_limits(req) == (4096, 512)
    assert default_batch_limits(replace(req, max_num_batched_tokens=1024)) == (1024, 512)
    assert default_batch_limits(replace(req, max_num_seqs=64)) == (4096, 64)
    assert default_batch_limits(replace(req, usage_context="llm-class")) == (16384, 512)
    assert default_batch_limits(_modes_req("H100-80GB", "0.32.0", performance_mode="throughput")) == (16384, 2048)
    assert default_batch_limits(replace(req, performance_mode="interactivity")) == (2048, 256)
    assert size(req).kv_cache_tokens < size(replace(req, performance_mode="balanced")).kv_cache_tokens
    # Its larger CUDA graphs are the doubled max_num_seqs: capture sizes up to min(2 x max_num_seqs, 512).
    small = _modes_req("L40S", "0.19.0", max_num_batched_tokens=2048)
    assert max(cuda_graph_capture_sizes(small, default_batch_limits(replace(small, max_num_seqs=64))[1])) == 128
    assert max(cuda_graph_capture_sizes(small, 128)) == 256


def test_interactivity_mode_captures_every_batch_size_up_to_32():
    # vllm v0.17.0 ... v0.32.0 config/vllm.py:_set_cudagraph_sizes: `if self.performance_mode == "interactivity":
    # interactivity_max = min(max_cudagraph_capture_size, 32); cudagraph_capture_sizes = list(range(1,
    # interactivity_max + 1))`, then the multiples of 8 and 16 as in balanced mode.
    req = _modes_req("L40S", "0.20.0")
    balanced = cuda_graph_capture_sizes(req, 256)
    fine = cuda_graph_capture_sizes(replace(req, performance_mode="interactivity"), 256)
    assert fine[:32] == list(range(1, 33)) and fine[32:] == [s for s in balanced if s > 32]
    assert len(fine) == len(balanced) + 25
    assert cuda_graph_capture_sizes(replace(req, performance_mode="interactivity"), 4) == list(range(1, 9))
    assert cuda_graph_capture_sizes(replace(req, performance_mode="throughput"), 256) == balanced
    # More graphs in the estimate 0.20 subtracts from the KV budget.
    graphs = size(replace(req, performance_mode="interactivity"))
    assert graphs.cuda_graph_gib > size(req).cuda_graph_gib
    assert graphs.kv_cache_tokens < size(req).kv_cache_tokens


def test_performance_mode_is_refused_on_a_release_without_it():
    # Absent in vllm v0.16.0 (no `performance_mode` in config/vllm.py or engine/arg_utils.py); present from v0.17.0.
    assert not Release.of("0.16.0").has_performance_mode and Release.of("0.17.0").has_performance_mode
    for mode in ("throughput", "interactivity"):
        with pytest.raises(SizingError, match=f"--performance-mode {mode}: vLLM 0.16.0 has no --performance-mode"):
            size(_modes_req("L40S", "0.16.0", performance_mode=mode))
    assert size(_modes_req("L40S", "0.16.0", performance_mode="balanced")).max_num_batched_tokens == 2048
    with pytest.raises(SizingError, match="--performance-mode 'fast' is not one of balanced, interactivity"):
        size(_modes_req("L40S", "0.19.0", performance_mode="fast"))


def test_explain_names_the_usage_context_and_performance_mode_with_their_sources():
    from planner import sizing_explain

    rows = {t.key: t for t in sizing_explain.terms(_modes_req("L40S", "0.19.0"))}
    assert "usage context openai-server" in rows["max_num_batched_tokens"].behaviour
    assert "performance mode balanced" in rows["max_num_batched_tokens"].behaviour
    req = _modes_req("L40S", "0.20.0", usage_context="llm-class", performance_mode="throughput")
    rows = {t.key: t for t in sizing_explain.terms(req)}
    assert rows["max_num_batched_tokens"].value == 16384
    assert "UsageContext.LLM_CLASS" in rows["max_num_batched_tokens"].source
    assert 'performance_mode == "throughput"' in rows["max_num_seqs"].source
    rows = {t.key: t for t in sizing_explain.terms(replace(req, performance_mode="interactivity"))}
    assert "; also: vllm v0.32.0 config/vllm.py:_set_cudagraph_sizes" in rows["cuda_graphs"].source
    assert "every size from 1 to 32 (--performance-mode interactivity)" in rows["cuda_graphs"].behaviour


def test_a_stack_cannot_pass_performance_mode_so_the_plan_sizes_vllm_serve_balanced():
    # The deployed program runs `vllm serve` (UsageContext.OPENAI_API_SERVER) with the engine flags of
    # components/serving/engine_args.py:engine_args only, and models[] refuses keys it does not know, so the plan's
    # request keeps the server's usage context and vLLM's default mode; a stack key for either would need both.
    from pydantic import ValidationError

    from stack_config.models import ModelConfig

    fields = set(ModelConfig.model_fields) | {f.alias for f in ModelConfig.model_fields.values() if f.alias}
    assert not {"performanceMode", "performance_mode", "usageContext", "extraArgs", "engineArgs"} & fields
    with pytest.raises(ValidationError, match="performanceMode"):
        ModelConfig.model_validate({"repo": "a/b", "revision": "0" * 40, "pool": "p", "performanceMode": "throughput"})
    defaults = SizingRequest(arch=QWEN3_8B, gpu_memory_gib=79.19)
    assert (defaults.usage_context, defaults.performance_mode) == ("openai-server", "balanced")
