"""How much KV cache a vLLM (V1 engine) server gets on a GPU, and whether a model fits at all.

Pure Python, no Pulumi import: the program, the tests and the CLI (`python -m components.sizing`,
planner/sizing_cli.py) share it.

The budget follows vLLM V1's own arithmetic (vllm v0.32.0 v1/worker/gpu_worker.py:
determine_available_memory and utils/mem_utils.py:memory_profiling):

    requested = cuda_total × gpu_memory_utilization
    kv_memory = requested − weights_on_this_gpu − torch_activation_peak − non_torch_increase
                [− estimated CUDA-graph memory, from the release that subtracts it]

Each term is a mechanism with the source line of the release that does it:

* weights: "Model loading took X GiB" when known, else the parameter count (quantization-aware).
* torch activation peak: max(forward pass of `max_num_batched_tokens` tokens, sampler warm-up on
  `min(max_num_seqs, max_num_batched_tokens)` rows of full-vocabulary logits), plus the fused-MoE
  workspace where it outlives the forward. The warm-up's cost depends on the top-k/top-p
  implementation the release and install run (FlashInfer, the PyTorch sort, or the Triton kernel),
  and under Model Runner V2 (the default for every model from 0.29) on its penalty counts instead
  (planner/vllm_releases.py says which; `_model_runner_v2_sampler_bytes`). The batch defaults are
  vLLM's per device (planner/vllm_releases.py).
* from 0.27, tensors allocated between vLLM's memory snapshot and the profile, which its free-memory
  accounting counts: Model Runner V2's sampler state (penalties, per-request tables, grammar bitmask:
  `v2_sampler_state_parts`), the V1 runner's input buffers and block table (`v1_runner_buffer_bytes`), a
  later pipeline stage's received-tensor buffer under V2. Model Runner V2 profiles the vision encoder
  from 0.27 only (planner/vllm_releases.py:V2_PROFILES_ENCODER_FROM).
* non-torch increase: CUDA/cuBLAS workspaces of one GPU, plus what the communication library
  allocates during the profiled forward, which depends on what joins the GPUs (`interconnect`):
  - NVSwitch systems of Hopper/Blackwell GPUs (HGX H100/H200/B200) run NCCL's NVLink SHARP (NVLS)
    all-reduce, whose multicast buffers are large: vllm-project/vllm#9699 quotes NCCL's
    "NVLS comm ... nvlsPerRankSize 301989888 nvlsTotalSize 2415919104" on 8 H200s;
  - PCIe boxes (L4, L40S, A10G, RTX PRO 6000 machines) and A100 NVSwitch systems (no NVLS before
    Hopper) only get NCCL's ring/tree buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer). vLLM's
    custom all-reduce is switched off on more than two PCIe-only GPUs and without P2P access
    (vllm v0.32.0 distributed/device_communicators/custom_all_reduce.py:CustomAllreduce.__init__),
    and where it runs its 8 MiB IPC buffers are allocated with the communicator, before vLLM's
    memory snapshot (gpu_worker.py:init_device), so they never reach the KV budget;
  - on unified memory (GB10) vLLM reads free memory from the host (planner/vllm_releases.py), so
    the host memory the process grows while profiling (torch.compile, Inductor) counts here too.
* CUDA graphs: vLLM estimates the pool by capturing the two largest sizes of each mode and
  extrapolating (vllm v0.32.0 v1/worker/gpu_model_runner.py:profile_cudagraph_memory), so the
  estimate grows with the layers on a GPU and the number of capture sizes, which follows
  max_num_seqs, speculative decoding and the release (planner/vllm_releases.py). Model Runner V2 from
  0.29 measures every PIECEWISE graph and extrapolates its FULL graphs, those up to max_num_seqs x the
  decode query length, from the two largest (vllm v0.32.0 v1/worker/gpu/cudagraph_utils.py;
  `v2_full_graph_count`).

planner/sizing_explain.py lists these terms one by one, with their sizes and their sources as data
(planner/vllm_releases.py:SOURCES), for `--explain` and `--from-log`.

The token count then follows the KV-cache manager's layout (planner/kv_layout.py: pages, hybrid
block sizes and page padding, groups, the reported number of each release).

The activation, workspace and communication terms are not derivable from config.json alone; their
constants are calibrated on the calibration sources of tests/fixtures/vllm_logs (README.md there
names them and the held-out sources nothing is tuned on).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from common import gpus
from planner import kv_layout, vision_encoders
from planner.checkpoint import served_dtype
from planner.lora import lora_buffer_bytes
from planner.model_arch import MAX_CONTEXT, MAX_LAYERS, ModelArch, SizingError
from planner.vision_encoders import (  # noqa: F401 - re-exported for the explain output and the tests
    DEFAULT_MM_LIMIT_PER_PROMPT,
    VISION_ENCODER_TOKENS_PER_IMAGE,
    EncoderProfile,
)
from planner.vllm_releases import (
    INTERACTIVITY_FINE_CAPTURE_MAX,
    PERFORMANCE_MODE_FROM,
    PERFORMANCE_MODES,
    USAGE_CONTEXTS,
    V1_RUNNER_BLOCK_TABLE_ENTRY_BYTES,
    V1_RUNNER_BYTES_PER_TOKEN_INDEXES,
    Release,
    ReleaseError,
)

GiB = 1024**3

# ---------------------------------------------------------------------------------------------
# Calibrated constants (see module docstring; fitted on the calibration sources only).
# ---------------------------------------------------------------------------------------------

# Bytes per logits element the sampler warm-up holds at its peak, by the top-k/top-p implementation
# it runs (planner/vllm_releases.py:Release.top_k_top_p_path says which):
# * "sort", the PyTorch path: fp32 logits (4) + the sorted values and their int64 indices (4 + 8) +
#   the softmax of the sorted values (4) + masks (1 + 1) + the final softmax (4) and the exponential
#   draw (4 + 4), and the penalties' scratch: ~38. Calibration: the guardkit GB10 run of vLLM 0.13
#   (sort by default since 0.11.1), and dennislee22's A100-40GB pair, whose log says "FlashInfer is not
#   available" and which leaves ~1 GiB more than its FlashInfer siblings (256 rows x 152k vocabulary).
# * "flashinfer": FlashInfer's fused top-k/top-p sampling, no sort: dennislee22's vLLM 0.10.1.1 A100 logs
#   that say "Using FlashInfer for top-p & top-k sampling" (10 bytes).
# * "triton" (0.17 on, 8 rows or more): v0.19 H100 logs, Llama-3.1-8B 1.89 GiB and Qwen2.5-7B 2.21 GiB
#   at 1024 rows, i.e. 15.2-15.5 bytes per (row x vocab).
SAMPLER_BYTES_PER_LOGIT = {"flashinfer": 10.0, "sort": 38.0, "triton": 15.3}
# Forward-pass peak per token, in units of the activation dtype: the gate/up projection output and
# the activation output (3 × intermediate / TP) plus ~4.25 hidden-sized residual/norm buffers.
FORWARD_INTERMEDIATE_FACTOR = 3.0
FORWARD_HIDDEN_FACTOR = 4.25
# Non-torch memory of one GPU that appears during the profiled forward (CUDA/cuBLAS workspaces):
# 0.24-0.27 GiB in the v0.19 H100 logs ("non-torch forward increase memory").
NON_TORCH_SINGLE_GPU_GIB = 0.25
# A pipeline stage without tensor parallelism: 0.07 GiB in the v0.19 H100 PP 2/4 logs.
NON_TORCH_PP_ONLY_GIB = 0.07
# NCCL's ring/tree buffers on top of the single-GPU workspaces: the A100 pairs of
# dennislee22/vLLM-benchmarking (vLLM 0.10.1.1, no P2P, custom all-reduce disabled) need 0.3 GiB in all.
NCCL_RING_BUFFERS_GIB = 0.05
# NCCL's NVLS buffers on an NVSwitch system of Hopper/Blackwell GPUs, on top of the above: the v0.19
# H100 logs at TP 2 and 4 show 2.06-2.21 GiB of non-torch memory against 0.25 on one GPU.
NCCL_NVLS_BUFFERS_GIB = 1.8
# Host memory that a unified-memory GPU's process grows while vLLM profiles (counted as the GPU's
# non-torch memory, see the docstring). Calibration: the text-only guardkit GB10 run (Qwen3-30B-A3B-
# FP8, vLLM 0.13, whose Triton FP8 MoE path frees its buffers before the sampler runs) leaves 1.8 GiB
# unexplained. The multimodal hybrid Qwen3.5 runs of the same box leave
# 4.5-5.6 GiB (not modelled: a larger constant would wreck the text-only case, whose KV cache is only
# 4 GiB); two failed start-ups of one command differ by 1.3 GiB, so this term is noisy by nature.
UNIFIED_MEMORY_HOST_GROWTH_GIB = 1.8
# Estimated CUDA graph memory for the default capture sizes of the v0.19 H100 runs (51 sizes in
# each of two modes). A fit on their "Estimated CUDA graph memory:" lines (0.49-1.92 GiB): 0.2 GiB
# plus 0.02 GiB per decoder layer of the stage (mean error 0.16 GiB against 0.30 for a flat
# 0.95 GiB). The per-layer part scales with the number of graphs beyond the first
# (profile_cudagraph_memory: first capture + (n - 1) × per-graph).
CUDA_GRAPH_BASE_GIB = 0.2
CUDA_GRAPH_PER_LAYER_GIB = 0.02
CUDA_GRAPH_REFERENCE_SIZES = 51

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
    "int8": 1,
}

# vLLM pads MXFP4 expert weights for its kernels: gpt-oss-20b loads as 2 × 7.01 GiB at TP2 against
# ~12.8 GiB of checkpoint (llm-d-planner v0.19 sweep).
MXFP4_LOADED_OVERHEAD = 1.1

# What joins the GPUs of one replica (see the module docstring).
INTERCONNECTS = ("single", "nvswitch", "nvlink", "pcie", "unified", "network")


def _release(version: str | None) -> Release:
    try:
        return Release.of(version)
    except ReleaseError as exc:
        raise SizingError(f"--vllm-version: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Request and result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizingRequest:
    arch: ModelArch
    gpu_memory_gib: float  # what CUDA reports as the device total
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float | None = None  # None → the release's default (0.9 or 0.92)
    max_model_len: int | None = None  # None → the model's max_position_embeddings
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    weights_bytes: int | None = None  # TOTAL checkpoint bytes across all GPUs, if known
    max_num_batched_tokens: int | None = None  # None → vLLM's default for the GPU
    max_num_seqs: int | None = None
    block_size: int = 16
    enforce_eager: bool = False
    gpu_name: str | None = None  # catalog name: batch defaults, NVLS, unified memory
    vllm_version: str | None = None  # None → the release the project deploys
    # What joins the GPUs: one of INTERCONNECTS; None → the catalog GPU's machines (see gpus.Gpu).
    interconnect: str | None = None
    expert_parallel: bool = False  # --enable-expert-parallel: whole experts per GPU
    speculative_tokens: int = 0  # MTP draft tokens (--speculative-config num_speculative_tokens)
    enable_prefix_caching: bool | None = None  # None → the release's default
    # Whether the sampler runs FlashInfer's top-k/top-p kernel (the log's "Using FlashInfer for top-p &
    # top-k sampling"); None → unknown, sized as not (the larger PyTorch footprint). See SAMPLER_BYTES_PER_LOGIT.
    flashinfer_sampler: bool | None = None
    # LoRA slots (--max-loras, --max-lora-rank); 0 → LoRA off. Their buffers count with the weights
    # (planner/lora.py).
    lora_max_loras: int = 0
    lora_max_rank: int = 0
    # The vision encoder's profiling (planner/vision_encoders.py): --limit-mm-per-prompt's image count
    # (None: vLLM's 999; 0: images off, no encoder run), --skip-mm-profiling, --mm-encoder-tp-mode.
    mm_images_per_prompt: int | None = None
    skip_mm_profiling: bool = False
    mm_encoder_tp_mode: str = "weights"
    # Who built the engine: "openai-server" (`vllm serve`, what the program deploys) or "llm-class" (an offline
    # `LLM(...)` script), whose batch defaults differ (planner/vllm_releases.py:USAGE_CONTEXTS).
    usage_context: str = "openai-server"
    # --performance-mode: "balanced" (vLLM's default), "interactivity" or "throughput"
    # (planner/vllm_releases.py:PERFORMANCE_MODES).
    performance_mode: str = "balanced"


@dataclass(frozen=True)
class SizingResult:
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    cuda_graph_in_budget: bool
    requested_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token_per_gpu: int
    kv_cache_tokens: int
    num_gpu_blocks: int
    max_model_len: int
    max_concurrency: float
    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_gib: float
    tensor_parallel_size: int
    pipeline_parallel_size: int
    fits: bool
    reason: str = ""
    kv_groups: tuple[str, ...] = field(default=())
    interconnect: str = "single"
    block_size: int = 16
    padding_layers: int = 0
    lora_gib_per_gpu: float = 0.0
    # The pipeline stage with the fewest KV blocks, whose budget the figures above are (0 without PP).
    binding_stage: int = 0

    @property
    def overhead_gib(self) -> float:
        return self.activation_gib + self.non_torch_gib + (self.cuda_graph_gib if self.cuda_graph_in_budget else 0)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kv_groups"] = list(self.kv_groups)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 4)
        return out


# ---------------------------------------------------------------------------------------------
# The pieces
# ---------------------------------------------------------------------------------------------


def _dtype_bytes(name: str, fallback: str = "bfloat16") -> int:
    name = (name or "auto").replace("torch.", "").lower()
    if name == "auto":
        name = fallback.replace("torch.", "").lower()
    if name not in DTYPE_BYTES:
        raise SizingError(f"unknown dtype {name!r}; use one of auto, bfloat16, float16, float32, fp8")
    return DTYPE_BYTES[name]


def _model_dtype(req: SizingRequest) -> str:
    # vLLM serves float32 checkpoints in bfloat16 unless told otherwise (planner.checkpoint).
    return served_dtype(req.arch, req.dtype)


def _catalog_gpu(req: SizingRequest) -> gpus.Gpu | None:
    return gpus.CATALOG.get(req.gpu_name or "")


def interconnect(req: SizingRequest) -> str:
    """What joins the GPUs of one replica: the request's, else the catalog GPU's machines'."""
    if req.interconnect is not None:
        if req.interconnect not in INTERCONNECTS:
            raise SizingError(f"interconnect {req.interconnect!r} is not one of {', '.join(INTERCONNECTS)}")
        return req.interconnect
    gpu = _catalog_gpu(req)
    if gpu is not None and gpu.unified_memory:
        return "unified"
    if req.tensor_parallel_size * req.pipeline_parallel_size == 1:
        return "single"
    if gpu is None:
        # Never another machine's traits: NVSwitch would add NCCL's NVLS buffers to a PCIe pair and
        # "single" would miss a GB10's unified memory, so the caller has to say what joins the GPUs.
        raise SizingError(
            f"gpu {req.gpu_name or 'not named'}: not a catalog GPU, so what joins its "
            f"{req.tensor_parallel_size * req.pipeline_parallel_size} GPUs is unknown; "
            f"set the interconnect ({', '.join(INTERCONNECTS)})"
        )
    return gpu.multi_gpu_interconnect


def layers_per_stage(layers: int, pp: int) -> list[int]:
    """vLLM's split of decoder layers over pipeline stages: an even share each, and the remainder one
    layer apiece to the stages before the last, from the second-to-last backwards (the last stage keeps
    the final norm and the LM head): vllm v0.10.2, v0.19.0 and v0.27.1 distributed/utils.py:get_pp_indices,
    `for i in range(2, remaining_layers + 2): partitions[-i] += 1` (VLLM_PP_LAYER_PARTITION unset).
    So 61 layers over 2 stages are [31, 30] and 94 over 4 are [23, 24, 24, 23]."""
    base, rest = divmod(layers, pp)
    partitions = [base] * pp
    for i in range(2, rest + 2):
        partitions[-i] += 1
    return partitions


def _with_mtp(req: SizingRequest) -> bool:
    return req.speculative_tokens > 0 and req.arch.mtp_layers > 0


def kv_groups(arch: ModelArch, vllm_version: str | None = None) -> list[tuple[str, int]]:
    """(layer kind, layers) per KV-cache group, as vLLM V1's hybrid manager forms them."""
    return list(kv_layout.group_layers(kv_layout.layer_counts(arch), _release(vllm_version)))


def kv_bytes_per_token_per_layer(arch: ModelArch, tp: int, kv_dtype_bytes: int) -> int:
    return kv_layout.attention_bytes_per_token(arch, tp, kv_dtype_bytes)


def kv_cache_dtype_bytes(req: SizingRequest) -> int:
    if req.kv_cache_dtype and req.kv_cache_dtype != "auto":
        return _dtype_bytes(req.kv_cache_dtype)
    return _dtype_bytes(_model_dtype(req))


def kv_bytes_per_token_per_gpu(req: SizingRequest, layers_on_gpu: int | None = None) -> int:
    """Per-token KV bytes of the attention layers on one GPU (state layers cost per request)."""
    layers = req.arch.attention_layers if layers_on_gpu is None else layers_on_gpu
    return layers * kv_bytes_per_token_per_layer(req.arch, req.tensor_parallel_size, kv_cache_dtype_bytes(req))


def default_batch_limits(req: SizingRequest) -> tuple[int, int]:
    """vLLM's defaults of max_num_batched_tokens and max_num_seqs for the device, the usage context (the OpenAI
    server's, or the offline LLM class's) and --performance-mode (planner/vllm_releases.py:USAGE_CONTEXTS,
    PERFORMANCE_MODES).

    vLLM asks NVML for the device's memory (vllm v0.32.0 platforms/cuda.py:get_device_total_memory);
    a unified-memory GB10 has no NVML memory figure ("nvidia-smi cannot report memory usage on GB10
    (Not Supported)", kubesimplify/website@75e40365 content/blog/qwen3-8-27b-on-dgx-spark.md), the
    query raises and vLLM falls back to the small-GPU defaults (engine/arg_utils.py:get_batch_defaults).
    """
    release = _release(req.vllm_version)
    offline = _usage_context(req) == "llm-class"
    throughput = _performance_mode(req, release) == "throughput"
    memory = 0.0 if interconnect(req) == "unified" else req.gpu_memory_gib
    tokens, seqs = 2048, 256
    if release.per_device_batch_defaults:
        if release.largest_batch_defaults and memory >= 160:
            tokens, seqs = 16384, 1024
        elif memory >= 70 and "a100" not in (req.gpu_name or "").lower():
            tokens, seqs = (16384 if offline else 8192), 1024
        elif offline:
            # UsageContext.LLM_CLASS's column (planner/vllm_releases.py:USAGE_CONTEXTS).
            tokens = 8192
    if throughput:
        # --performance-mode throughput doubles the limits left to their defaults (PERFORMANCE_MODES).
        tokens, seqs = tokens * 2, seqs * 2
    tokens = req.max_num_batched_tokens or tokens
    # A max_num_seqs left to its default is capped by max_num_batched_tokens, so --max-num-batched-tokens 1
    # runs one sequence at a time (vllm@v0.32.0 vllm/engine/arg_utils.py lines 3178-3180: "if
    # orig_max_num_seqs is None: self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)").
    return tokens, req.max_num_seqs or min(seqs, tokens)


def _usage_context(req: SizingRequest) -> str:
    if req.usage_context not in USAGE_CONTEXTS:
        raise SizingError(f"usage context {req.usage_context!r} is not one of {', '.join(USAGE_CONTEXTS)}")
    return req.usage_context


def _performance_mode(req: SizingRequest, release: Release) -> str:
    """The request's --performance-mode, refused on a release that has none (vLLM would reject the flag)."""
    if req.performance_mode not in PERFORMANCE_MODES:
        raise SizingError(f"--performance-mode {req.performance_mode!r} is not one of {', '.join(PERFORMANCE_MODES)}")
    if req.performance_mode != "balanced" and not release.has_performance_mode:
        first = ".".join(map(str, PERFORMANCE_MODE_FROM))
        raise SizingError(
            f"--performance-mode {req.performance_mode}: vLLM {'.'.join(map(str, release.version))} has no "
            f"--performance-mode (from {first}); drop it or pass --vllm-version {first}.0 or later"
        )
    return req.performance_mode


def default_gpu_memory_utilization(vllm_version: str | None) -> float:
    """vLLM's CacheConfig default for the release (0.92 from 0.20, 0.9 before)."""
    return _release(vllm_version).default_gpu_memory_utilization


def cuda_graph_capture_sizes(req: SizingRequest, max_num_seqs: int) -> list[int]:
    """vLLM's default CUDA-graph capture sizes for the release (planner/vllm_releases.py)."""
    if req.enforce_eager:
        return []
    release = _release(req.vllm_version)
    decode_query_len = 1 + req.speculative_tokens
    gpu = _catalog_gpu(req)
    blackwell = gpu is not None and gpu.compute_capability[0] == 10
    cap = 1024 if (release.blackwell_capture_cap and blackwell) else 512
    largest = min(max_num_seqs * decode_query_len * 2, cap)
    if not release.capture_sizes_stride_16:
        return [s for s in [1, 2, 4, *range(8, largest + 1, 8)] if s <= largest]
    sizes = [1, 2, 4, *range(8, min(largest + 1, 256), 8), *range(256, largest + 1, 16)]
    if _performance_mode(req, release) == "interactivity":
        # Every size from 1 to 32 (planner/vllm_releases.py:PERFORMANCE_MODES).
        sizes = sorted({*sizes, *range(1, min(largest, INTERACTIVITY_FINE_CAPTURE_MAX) + 1)})
    return [s for s in sizes if s <= largest]


def cuda_graph_bytes(
    stage_layers: int, capture_sizes: int = CUDA_GRAPH_REFERENCE_SIZES, full_graphs: int | None = None
) -> float:
    """Estimated CUDA-graph pool of one GPU that holds `stage_layers` decoder layers.

    `full_graphs` is given for Model Runner V2's estimate from 0.29 (planner/vllm_releases.py:V2_GRAPH_ESTIMATE_FROM):
    one PIECEWISE graph per capture size, measured, and the FULL graphs of `v2_full_graph_count`, extrapolated from
    the two largest. The per-layer constant was fitted on the v0.19 logs, where both modes had 51 graphs and the
    DEBUG lines give the same per-graph cost to each (Llama-3.1-8B TP 1: 50 x 6 MiB PIECEWISE, 50 x 6 MiB FULL), so
    it stands for two modes' graphs beyond the first and is shared by graph count: half per mode. With 51 of each
    (every GPU whose max_num_seqs reaches the largest size) it is the V1 figure; at max_num_seqs 256 (L4, L40S,
    A100: 35 FULL graphs of 51 sizes) the per-layer part is 84% of it."""
    if capture_sizes == 0:
        return 0.0
    reference = CUDA_GRAPH_REFERENCE_SIZES - 1
    if full_graphs is None:
        per_graph_share = (capture_sizes - 1) / reference
    else:
        per_graph_share = ((capture_sizes - 1) + max(full_graphs - 1, 0)) / (2 * reference)
    return (CUDA_GRAPH_BASE_GIB + CUDA_GRAPH_PER_LAYER_GIB * stage_layers * per_graph_share) * GiB


def v2_full_graph_count(req: SizingRequest, max_num_seqs: int) -> int:
    """How many FULL (uniform-decode) graphs Model Runner V2 captures: the capture sizes up to max_num_seqs x the
    decode query length (vllm v0.32.0 v1/worker/gpu/cudagraph_utils.py:CudaGraphManager._init_candidates,
    `max_decode_tokens = self.max_num_reqs * self.decode_query_len`, `rounded_num_tokens > max_decode_tokens`:
    skipped). With MTP drafting the sizes are rounded up to a multiple of the query length; that is left out (a
    few sizes at most)."""
    decode_tokens = max_num_seqs * (1 + req.speculative_tokens)
    return sum(1 for size in cuda_graph_capture_sizes(req, max_num_seqs) if size <= decode_tokens)


# PyTorch's caching allocator serves requests between 1 and 10 MiB from 20 MiB segments, cudaMalloc'd when no free
# block fits, and a CUDA graph's private pool keeps its segments until the graph is destroyed (pytorch/pytorch
# c10/cuda/CUDACachingAllocator.cpp at 001074d25084fdb87a799823e395a50f5ec044d3: `kLargeBuffer = 20971520`,
# "requests between 1MB and 10MB will allocate and split a 20MB block, if no free block of sufficient size is
# available", Note [Interaction with CUDA graph capture]).
ALLOCATOR_LARGE_SEGMENT_BYTES = 20 * 1024**2


def cuda_graph_estimate_step_bytes(capture_sizes: int) -> float:
    """How far vLLM's CUDA-graph estimate moves when the second capture of one mode takes one more 20 MiB
    allocator segment. Not a term of the budget: the resolution of vLLM's estimator, shown by `--explain`.

    vLLM V1 captures the two largest sizes of each mode, reads the drop in free device memory
    (`torch.cuda.mem_get_info`) around each, and takes first capture + (sizes - 1) x the second capture's drop
    (vllm v0.19.0, v0.20.0, v0.22.1, v0.25.1, v0.28.0 v1/worker/gpu_model_runner.py:profile_cudagraph_memory:
    `profile_descs = descs[:2]`, `per_graph_estimate[mode] = per_graph * (len(descs) - 1)`); from 0.20 the total is
    subtracted from the KV budget (v0.20.0 v1/worker/gpu_worker.py:determine_available_memory). The drop is
    counted in whole allocator segments (ALLOCATOR_LARGE_SEGMENT_BYTES above), so a second capture that finds no
    free block of its size adds one segment, and the estimate (sizes - 1) segments: 50 x 20 MiB = 0.98 GiB at the
    51 default sizes. Which runs take it depends on the allocation order, not on a field of config.json: in the
    v0.19.0 H100 calibration logs (llm-d-planner d3121e0), Llama-3.1-8B's PIECEWISE second capture takes 26 MiB at
    TP 2 against 6 at TP 1 (1.69 GiB against 0.84 in all), granite-3.1-2b's 26 MiB at TP 1, and Qwen2.5-7B's
    (4), Mixtral-8x7B's (6), Kimi-VL-A3B's (8) and gpt-oss-20b's (6) at TP 2 none, with FlashInfer's all-reduce
    fusion on in every one of those TP 2 runs. So the engine keeps its mean (CUDA_GRAPH_BASE_GIB,
    CUDA_GRAPH_PER_LAYER_GIB) and names the step instead of adding it."""
    if capture_sizes <= 1:
        return 0.0
    return float((capture_sizes - 1) * ALLOCATOR_LARGE_SEGMENT_BYTES)


def v2_cuda_graph_estimate_step_bytes(full_graphs: int) -> float:
    """The same step under Model Runner V2 from 0.29: only FULL graphs are extrapolated from a second capture
    ((FULL graphs - 1) x its drop), the PIECEWISE ones are each measured, so one segment more in the second FULL
    capture moves the estimate by (FULL graphs - 1) x 20 MiB (vllm v0.32.0 v1/worker/gpu/cudagraph_utils.py:
    _extrapolate_full_graph_memory, `first_capture + (total_graphs - 1) * per_graph`, lines 986-987)."""
    return cuda_graph_estimate_step_bytes(full_graphs)


def weight_bytes_estimate(req: SizingRequest) -> float:
    """Total checkpoint bytes from the parameter count, quantization-aware."""
    arch = req.arch
    act_bytes = _dtype_bytes(_model_dtype(req))
    method = (req.quantization or arch.quant_method or "").lower()
    bits = arch.quant_bits
    embed = arch.vocab * arch.hidden * (1 if arch.tie_word_embeddings else 2) + arch.extra_params
    dense_body = sum(arch.attention_params() + arch.mlp_params(i)[0] for i in range(arch.layers))
    experts = sum(arch.mlp_params(i)[1] for i in range(arch.layers))
    if not method:
        return (embed + dense_body + experts) * act_bytes
    if method == "mxfp4":
        # gpt-oss: MoE experts in MXFP4 (4 bits + one 8-bit scale per 32), the rest in bf16.
        return (embed + dense_body) * act_bytes + experts * (4.25 / 8) * MXFP4_LOADED_OVERHEAD
    if method in ("fp8", "fbgemm_fp8", "compressed-tensors", "compressed_tensors", "modelopt") or (bits == 8):
        per = (bits or 8) / 8
        return embed * act_bytes + (dense_body + experts) * per * 1.01
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        return embed * act_bytes + (dense_body + experts) * group_quantized_bytes_per_weight(req)
    if method == "bitsandbytes" or bits == 4:
        # 4-bit weights plus fp16 scales/zeros per group of 128.
        return embed * act_bytes + (dense_body + experts) * ((bits or 4) / 8) * 1.06
    return (embed + dense_body + experts) * act_bytes


# AutoAWQ's and AutoGPTQ's default group size, for a quantization_config that names none.
DEFAULT_QUANT_GROUP_SIZE = 128


def group_quantized_bytes_per_weight(req: SizingRequest) -> float:
    """Bytes per quantized weight of an AWQ or GPTQ checkpoint once vLLM has loaded it (issue 29).

    The packed weights (`bits` per weight in int32 words), one fp16 scale per group of `group_size`
    input rows and output column, and for AWQ one packed zero point per group as well. vLLM's Marlin
    path repacks these in place of the checkpoint's tensors, at the same sizes (vllm v0.13.0
    model_executor/layers/quantization/awq_marlin.py:AWQMarlinLinearMethod.process_weights_after_loading:
    `awq_marlin_repack`, `marlin_permute_scales`, `awq_to_marlin_zero_points`, each through
    `replace_parameter`); a GPTQ checkpoint without zero points keeps none (kernels/mixed_precision/
    marlin.py:MarlinLinearKernel.process_weights_after_loading, `marlin_make_empty_g_idx` for the zero
    points and, without act-order, for g_idx). Embedding and LM head stay unquantized (awq_marlin.py:
    get_quant_method quantizes `LinearBase` layers, and a `ParallelLMHead` only when `lm_head_quantized`);
    Marlin's workspace is one int32 per SM (utils/marlin_utils.py:marlin_make_workspace_new), nothing to
    count. GPTQ is taken as symmetric (AutoGPTQ's default `sym`), which config.json's `sym` settles.
    """
    arch = req.arch
    method = (req.quantization or arch.quant_method or "").lower()
    bits = arch.quant_bits or 4
    group = arch.quant_group_size or DEFAULT_QUANT_GROUP_SIZE
    packed = bits / 8
    zero_points = packed if method.startswith("awq") else 0.0
    return packed + (2 + zero_points) / group


def _embedding_bytes_per_gpu(req: SizingRequest) -> float:
    """The input embedding (or the LM head) on one GPU: vocabulary x hidden in the model dtype,
    sharded over TP (VocabParallelEmbedding / ParallelLMHead)."""
    arch = req.arch
    return arch.vocab * arch.hidden * _dtype_bytes(_model_dtype(req)) / req.tensor_parallel_size


def stage_weight_bytes(req: SizingRequest, total_weights: float) -> list[float]:
    """Weights on one GPU of each pipeline stage: the decoder layers by share, the embedding on the
    first stage and the LM head on the last (vllm v0.32.0 distributed/utils.py:get_pp_indices splits
    the layers; the models build embed_tokens on the first rank and lm_head on the last). A tied head
    becomes a second copy when the two ends sit on different stages."""
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    per_tp = total_weights / tp
    if pp == 1:
        return [per_tp]
    embed = _embedding_bytes_per_gpu(req)
    head_in_checkpoint = 0.0 if req.arch.tie_word_embeddings else embed
    body = max(per_tp - embed - head_in_checkpoint, 0.0)
    stages = layers_per_stage(req.arch.layers, pp)
    return [
        body * n / req.arch.layers + (embed if i == 0 else 0.0) + (embed if i == pp - 1 else 0.0)
        for i, n in enumerate(stages)
    ]


def total_weights_from_first_stage(req: SizingRequest, first_stage_bytes: float) -> float:
    """The checkpoint total behind one first-stage GPU's "Model loading took" (what a PP log prints)."""
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    if pp == 1:
        return first_stage_bytes * tp
    embed = _embedding_bytes_per_gpu(req)
    head_in_checkpoint = 0.0 if req.arch.tie_word_embeddings else embed
    first_layers = layers_per_stage(req.arch.layers, pp)[0]
    body = (first_stage_bytes - embed) * req.arch.layers / first_layers
    return (body + embed + head_in_checkpoint) * tp


@dataclass(frozen=True)
class ActivationParts:
    """The torch peak of one GPU's profile run, by mechanism (bytes). `peak` is what the budget takes."""

    forward: float
    sampler: float
    sampler_path: str  # "flashinfer", "sort", "triton", "v2" or "" (not the last pipeline stage)
    sampler_persistent: float  # Model Runner V2's penalties state, allocated for good
    moe_workspace: float
    moe_workspace_persists: bool
    vision: float
    peak: float
    pipeline_buffer: float = 0.0  # a non-first pipeline stage's received-tensor buffer, kept (in `peak`)
    vision_outputs: float = 0.0  # the encoder's outputs, cached through the decoder's dummy run (in `peak`)
    runner_buffers: float = 0.0  # the V1 runner's input buffers and block table, from 0.27 (in `peak`)


def activation_parts(req: SizingRequest, stage: int, mnbt: int, seqs: int) -> ActivationParts:
    arch = req.arch
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    act = _dtype_bytes(_model_dtype(req))
    inter = arch.intermediate if (not arch.is_moe or arch.dense_layers) else arch.shared_expert_intermediate
    forward = mnbt * act * (FORWARD_INTERMEDIATE_FACTOR * inter / tp + FORWARD_HIDDEN_FACTOR * arch.hidden)
    release = _release(req.vllm_version)
    sampler = persistent = 0.0
    path = ""
    if stage == pp - 1:  # only the last pipeline stage computes logits and samples
        rows = min(seqs, mnbt)
        if release.uses_model_runner_v2(arch.architecture, arch.is_moe, arch.is_hybrid):
            sampler, persistent = _model_runner_v2_sampler_bytes(req, rows, seqs)
            path = "v2"
        else:
            sampler, path = _v1_sampler_warmup(req, rows)
    quant = req.quantization or arch.quant_method or ""
    moe_workspace = 0.0
    if arch.is_moe:
        # The fused-MoE kernel's workspace, per routed token: the gate/up output and the expert
        # outputs before the weighted sum. v0.19 logs: Qwen3-30B-A3B 2.68 GiB, Qwen1.5-MoE 2.47,
        # DeepSeek-V2-Lite 1.93 against sampler terms of 2.22, 2.22 and 1.49. gpt-oss (MXFP4
        # kernels) shows no such extra. With expert parallelism each GPU holds whole experts, so the
        # intermediate is not split by TP; the kernel still sizes its caches for every routed token
        # (vllm v0.32.0 model_executor/layers/fused_moe/fused_moe.py: intermediate caches of M x top_k rows).
        moe_shard = 1 if req.expert_parallel else tp
        moe_workspace = mnbt * arch.experts_per_token * act * (arch.hidden + 2 * arch.moe_intermediate / moe_shard)
    # The encoder's own peak, and its outputs, which stay cached through the decoder's dummy forward and
    # the sampler warm-up (vllm v0.32.0 v1/worker/gpu_model_runner.py:profile_run, `encoder_cache["tmp"]`
    # cleared after `_dummy_sampler_run`): they add to whichever peak comes last.
    encoder = vision_encoder_parts(req, mnbt, seqs) if stage == 0 else None
    cached = encoder.embeddings if encoder is not None else 0.0
    vision = encoder.total - cached if encoder is not None else 0.0
    persists = release.moe_workspace_persists(quant)
    # A persistent workspace is still allocated when the sampler runs: it adds on top. Per-call
    # buffers are freed after each MoE layer: they only raise the forward's own peak.
    peak = max(forward, sampler, vision) + moe_workspace if persists else max(forward + moe_workspace, sampler, vision)
    buffer = pipeline_buffer_bytes(req, stage, mnbt)
    runner = v1_runner_buffer_bytes(req, mnbt, seqs)
    return ActivationParts(
        forward,
        sampler,
        path,
        persistent,
        moe_workspace,
        persists,
        vision,
        peak + cached + persistent + buffer + runner,
        pipeline_buffer=buffer,
        vision_outputs=cached,
        runner_buffers=runner,
    )


def v1_runner_buffer_bytes(req: SizingRequest, mnbt: int, seqs: int) -> float:
    """The V1 model runner's persistent input buffers on one GPU, where the budget counts them (issue 29):
    inputs_embeds (max_num_batched_tokens x hidden_size in the model dtype), the per-token index buffers and the
    slot mapping, and the block table of max_num_seqs x cdiv(max_model_len, block_size) int32 entries. Allocated
    with the runner, after vLLM's memory snapshot and outside the weights' measurement, so counted only from 0.27,
    whose profile takes the drop in free memory, and only under the V1 runner (planner/vllm_releases.py,
    V1_RUNNER_BYTES_PER_TOKEN_INDEXES). Tensor sizes, no constant. The block table is sized with the request's
    block size; a hybrid model's larger attention block makes the real one smaller (at most a few MiB)."""
    arch = req.arch
    release = _release(req.vllm_version)
    if not release.v1_runner_buffers_in_budget(arch.architecture, arch.is_moe, arch.is_hybrid):
        return 0.0
    max_len = req.max_model_len or arch.max_position_embeddings or 4096
    per_token = arch.hidden * _dtype_bytes(_model_dtype(req)) + V1_RUNNER_BYTES_PER_TOKEN_INDEXES
    block_table = seqs * math.ceil(max_len / req.block_size) * V1_RUNNER_BLOCK_TABLE_ENTRY_BYTES
    return float(mnbt * per_token + block_table)


# Tensors of hidden_size a non-first pipeline stage receives per token: the hidden states and the residual
# (vllm v0.19.0 model_executor/models/llama.py and qwen2.py: make_empty_intermediate_tensors_factory(
# ["hidden_states", "residual"], config.hidden_size)).
PIPELINE_RECEIVED_TENSORS = 2


def pipeline_buffer_bytes(req: SizingRequest, stage: int, mnbt: int) -> float:
    """The buffer a non-first pipeline stage keeps for what it receives: max_num_batched_tokens rows of
    hidden_size for each received tensor, in the model dtype, allocated for good (issue 29; where and when
    it reaches the budget: planner/vllm_releases.py, PROFILE_COUNTS_FREE_MEMORY_DROP_FROM). 0 on the first stage
    and without pipeline parallelism."""
    arch = req.arch
    if stage == 0 or req.pipeline_parallel_size == 1:
        return 0.0
    if not _release(req.vllm_version).pipeline_buffer_in_budget(arch.architecture, arch.is_moe, arch.is_hybrid):
        return 0.0
    return PIPELINE_RECEIVED_TENSORS * mnbt * arch.hidden * _dtype_bytes(_model_dtype(req))


def activation_bytes(req: SizingRequest, stage: int, mnbt: int, seqs: int) -> float:
    return activation_parts(req, stage, mnbt, seqs).peak


def _v1_sampler_warmup(req: SizingRequest, rows: int) -> tuple[float, str]:
    """(peak bytes, top-k/top-p path) of the V1 sampler warm-up on `rows` rows of logits.

    The warm-up runs every path of Release.sampler_warmup_paths one after the other on the same logits,
    so its peak is the largest: from 0.21 a FlashInfer first call is followed by a second call with a
    generator through the PyTorch sort or Triton path (vllm v0.21.0 v1/worker/gpu_model_runner.py:
    _dummy_sampler_run, "Also warm forward_native"; planner/vllm_releases.py:SAMPLER_WARMS_NATIVE_PATH_FROM).
    """
    gpu = _catalog_gpu(req)
    capability = gpu.compute_capability if gpu is not None else None
    paths = _release(req.vllm_version).sampler_warmup_paths(rows, req.flashinfer_sampler, capability)
    path = max(paths, key=lambda p: SAMPLER_BYTES_PER_LOGIT[p])
    return SAMPLER_BYTES_PER_LOGIT[path] * rows * req.arch.vocab, path


def _model_runner_v2_sampler_bytes(req: SizingRequest, rows: int, seqs: int) -> tuple[float, float]:
    """(transient, persistent) bytes of Model Runner V2's sampler during the profile run.

    V2's dummy batch keeps every request's default sampling state, so the sampler skips top-k, top-p
    and penalties (vllm v0.22.1 ... v0.32.0 v1/worker/gpu/model_runner.py:_dummy_sampler_run, "the
    sampler may skip top_k, top_p, and logprobs"; Sampler._requires_logits_processing is False): the
    warm-up holds only the logits, in the model dtype. What V2 keeps for good is the penalties state:
    an int32 count per request and vocabulary entry, and a bit mask per request and vocabulary entry
    (v1/worker/gpu/sample/penalties.py: `output_bin_counts = torch.zeros(max_num_reqs, vocab_size,
    dtype=torch.int32)` and `prompt_bin_mask`, allocated when the runner loads the model, on the last
    pipeline rank). No calibrated constant: these are the tensors' sizes. vLLM's profile counts that
    state only from 0.27: before, it is allocated outside the weights' measurement and before the
    profile's baseline, so it is in no term of the budget (planner/vllm_releases.py:
    PROFILE_COUNTS_FREE_MEMORY_DROP_FROM; `_v2_state_counted`).
    """
    vocab = req.arch.vocab
    transient = rows * vocab * _dtype_bytes(_model_dtype(req))
    persistent = sum(v2_sampler_state_parts(req, seqs).values())
    return transient, persistent if _v2_state_counted(req) else 0.0


# Model Runner V2's fixed per-request sampler tables, int32 or float32 entries on the GPU (StagedWriteTensor
# allocates `torch.zeros(size, device=device)` unless asked for UVA, vllm v0.32.0 v1/worker/gpu/buffer_utils.py
# StagedWriteTensor.__init__): allowed token ids, logit-bias token ids and values (1024 each) and stop token ids
# (128) (v1/worker/gpu/sample/logit_bias.py: MAX_NUM_ALLOWED_TOKEN_IDS, MAX_NUM_LOGIT_BIAS_TOKENS,
# MAX_NUM_STOP_TOKEN_IDS), bad-word tokens (1024) and offsets (128 + 1) (sample/bad_words.py;
# envs.py VLLM_MAX_BAD_WORDS_TOTAL_TOKENS "1024", VLLM_MAX_NUM_BAD_WORDS "128"), and logprob token ids (128)
# (sample/logprob.py:LogprobTokenIdsState; sampling_params.py MAX_LOGPROB_TOKEN_IDS = 128). The same sizes in
# v0.27.1, v0.28.0, v0.29.0, v0.30.0 and v0.31.0.
V2_SAMPLER_TABLE_ENTRIES_PER_REQUEST = 1024 + 1024 + 1024 + 128 + 1024 + (128 + 1) + 128


def v2_sampler_state_parts(req: SizingRequest, seqs: int) -> dict[str, float]:
    """What Model Runner V2 allocates for good for sampling, on the last pipeline rank, in load_model after
    "Model loading took" is measured (vllm v0.32.0 v1/worker/gpu/model_runner.py:load_model, `Sampler(...)` and
    `StructuredOutputsWorker(...)` after `self.model_memory_usage = m.consumed_memory`), by tensor:
    - penalties: an int32 count and a bit per request and vocabulary entry (sample/penalties.py:40-47,
      `prompt_bin_mask`, `output_bin_counts`);
    - tables: V2_SAMPLER_TABLE_ENTRIES_PER_REQUEST 4-byte entries per request;
    - bitmask: the structured-outputs grammar bitmask, max_num_seqs x decode query length rows of
      cdiv(vocab, 32) int32 (structured_outputs.py:87-89, `max_num_logits=self.max_num_reqs * self.decode_query_len`).
    Tensor sizes, no constant; counted by vLLM from 0.27 (`_v2_state_counted`)."""
    vocab = req.arch.vocab
    words = math.ceil(vocab / 32)
    return {
        "penalties": float(seqs * vocab * 4 + seqs * words * 4),
        "tables": float(seqs * V2_SAMPLER_TABLE_ENTRIES_PER_REQUEST * 4),
        "bitmask": float(seqs * (1 + req.speculative_tokens) * words * 4),
    }


def _v2_state_counted(req: SizingRequest) -> bool:
    """Whether vLLM's profile counts Model Runner V2's penalties state: from 0.27, whose accounting
    takes the drop in free memory (vllm v0.27.0 utils/mem_utils.py:memory_profiling, total_consumed);
    up to 0.26 the state sits outside every term (v0.26.0 memory_profiling)."""
    return _release(req.vllm_version).profile_counts_buffers_allocated_after_load


def encoder_profile(req: SizingRequest, mnbt: int, seqs: int, max_len: int) -> EncoderProfile | None:
    """The dummy batch of the encoder's profiling forward, or None without a tower this planner sizes
    (planner/vision_encoders.py:profile; vllm v0.32.0 multimodal/encoder_budget.py:
    MultiModalBudget._get_max_items, v1/worker/gpu_model_runner.py:profile_run). None too when the run
    skips encoder profiling (--skip-mm-profiling) or allows no image per prompt. (The non-chunked-prefill
    cap on max_num_reqs is left out: V1 schedules with chunked prefill on.) Unresolved: the release that
    added the decoder-side cap, settled by `git log -S max_decoder_items_per_batch -- vllm/` in a vLLM clone.
    """
    arch = req.arch
    if req.skip_mm_profiling:
        return None
    return vision_encoders.profile(
        family=arch.vision_family,
        tokens_per_item=arch.vision_tokens_per_item,
        patches_per_item=arch.vision_patches_per_item,
        spatial_merge=arch.vision_spatial_merge,
        mnbt=mnbt,
        seqs=seqs,
        max_len=max_len,
        images_per_prompt=req.mm_images_per_prompt,
    )


def vision_encoder_parts(req: SizingRequest, mnbt: int, seqs: int) -> vision_encoders.EncoderParts | None:
    """The vision tower's torch peak on the profiling batch, term by term (planner/vision_encoders.py:
    peak_parts). vllm v0.32.0 v1/worker/gpu_model_runner.py:profile_run runs the encoder before the
    decoder, so the activation peak is the larger of the two."""
    arch = req.arch
    if not _release(req.vllm_version).profiles_encoder(arch.architecture, arch.is_moe, arch.is_hybrid):
        # Model Runner V2 before 0.27 runs no encoder in its profile (planner/vllm_releases.py:
        # V2_PROFILES_ENCODER_FROM).
        return None
    max_len = req.max_model_len or arch.max_position_embeddings or 4096
    profile = encoder_profile(req, mnbt, seqs, max_len)
    if profile is None:
        return None
    return vision_encoders.peak_parts(
        prof=profile,
        hidden=arch.vision_hidden,
        intermediate=arch.vision_intermediate,
        gated=arch.vision_gated,
        patch_values=arch.vision_patch_values,
        dense_mask=arch.vision_dense_mask,
        text_hidden=arch.hidden,
        # --mm-encoder-tp-mode data replicates the tower on every GPU (each encodes its share of the
        # batch with whole weights); "weights", the default, shards its MLP over TP.
        mlp_shards=1 if req.mm_encoder_tp_mode == "data" else req.tensor_parallel_size,
        dtype_bytes=_dtype_bytes(_model_dtype(req)),
    )


def vision_encoder_bytes(req: SizingRequest, mnbt: int, seqs: int) -> float:
    parts = vision_encoder_parts(req, mnbt, seqs)
    return parts.total if parts is not None else 0.0


@dataclass(frozen=True)
class NonTorchParts:
    """Memory outside PyTorch's allocator that grows while vLLM profiles, by mechanism (GiB)."""

    workspaces: float  # CUDA/cuBLAS workspaces of the GPU (a PP-only stage: its own figure)
    nccl_ring: float
    nccl_nvls: float
    unified_host_growth: float

    @property
    def total(self) -> float:
        return self.workspaces + self.nccl_ring + self.nccl_nvls + self.unified_host_growth


def non_torch_parts(req: SizingRequest) -> NonTorchParts:
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    kind = interconnect(req)
    ring = nvls = host = 0.0
    if tp > 1:
        workspaces, ring = NON_TORCH_SINGLE_GPU_GIB, NCCL_RING_BUFFERS_GIB
        if kind == "nvswitch" and _has_nvls(req):
            nvls = NCCL_NVLS_BUFFERS_GIB
    elif pp > 1:
        workspaces, ring = pipeline_only_non_torch_gib(req)
    else:
        workspaces = NON_TORCH_SINGLE_GPU_GIB
    if kind == "unified" and _release(req.vllm_version).unified_memory_counts_host_growth:
        host = UNIFIED_MEMORY_HOST_GROWTH_GIB
    return NonTorchParts(workspaces, ring, nvls, host)


def pipeline_only_non_torch_gib(req: SizingRequest) -> tuple[float, float]:
    """(workspaces, NCCL buffers) of a pipeline stage without TP (issue 29): from 0.11 the stage's communicator
    is created before vLLM's memory snapshot and only NON_TORCH_PP_ONLY_GIB grows after it; up to 0.10 the
    snapshot comes first, so the stage counts a TP group's figures (planner/vllm_releases.py,
    SNAPSHOT_AFTER_DISTRIBUTED_INIT_FROM)."""
    if _release(req.vllm_version).snapshot_after_distributed_init:
        return NON_TORCH_PP_ONLY_GIB, 0.0
    return NON_TORCH_SINGLE_GPU_GIB, NCCL_RING_BUFFERS_GIB


def non_torch_bytes(req: SizingRequest) -> float:
    """Memory outside PyTorch's allocator that grows from vLLM's snapshot to the end of profiling."""
    return non_torch_parts(req).total * GiB


def _has_nvls(req: SizingRequest) -> bool:
    """NVLink SHARP needs NVSwitch and a Hopper or newer GPU (A100 NVSwitch systems have none)."""
    gpu = _catalog_gpu(req)
    return gpu is None or gpu.compute_capability >= (9, 0)


def _prefix_caching(req: SizingRequest) -> bool:
    if req.enable_prefix_caching is not None:
        return req.enable_prefix_caching
    return _release(req.vllm_version).hybrid_prefix_caching_by_default


# ---------------------------------------------------------------------------------------------
# The answer
# ---------------------------------------------------------------------------------------------


# Ranges of a request, each far above any real deployment, so no request can make the arithmetic
# loop for long, overflow or divide by zero.
MAX_TENSOR_PARALLEL = 512
MAX_GPU_MEMORY_GIB = 4096.0
MAX_BLOCK_SIZE = 4096  # vLLM's CacheConfig.block_size: any int > 0 (vllm/config/cache.py)
# The KV-cache block sizes the attention kernels of the catalog's GPUs take (FlashAttention's
# MultipleOf(16)); FlashInfer and FlashMLA take multiples of 16 as well (16, 32, 64).
ATTENTION_BLOCK_MULTIPLE = 16
MAX_BATCHED_TOKENS = 2**24
MAX_NUM_SEQS = 2**20
MAX_WEIGHT_BYTES = 2**50  # 1 PiB
MAX_SPECULATIVE_TOKENS = 64


def _whole_in(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def request_problem(req: SizingRequest) -> str | None:
    """Why a request cannot be sized (a value out of range), or None. The CLI and the planner check
    their inputs with their own words first; this is the engine's own guard."""
    arch = req.arch
    if not _whole_in(req.tensor_parallel_size, 1, MAX_TENSOR_PARALLEL):
        return f"tensor_parallel_size must be a whole number from 1 to {MAX_TENSOR_PARALLEL}"
    if not _whole_in(req.pipeline_parallel_size, 1, MAX_LAYERS):
        return f"pipeline_parallel_size must be a whole number from 1 to {MAX_LAYERS}"
    if req.pipeline_parallel_size > arch.layers:
        # vLLM splits the decoder layers evenly over the stages (vllm/distributed/utils.py
        # get_pp_indices); a stage without a layer holds nothing to size or to serve.
        return (
            f"pipeline_parallel_size {req.pipeline_parallel_size} exceeds the model's {arch.layers} decoder "
            f"layers; every pipeline stage needs at least one layer, so use at most {arch.layers}"
        )
    memory = req.gpu_memory_gib
    if not isinstance(memory, (int, float)) or not math.isfinite(memory) or not 0 < memory <= MAX_GPU_MEMORY_GIB:
        return f"GPU memory must be a finite number of GiB above 0 and at most {MAX_GPU_MEMORY_GIB:g}"
    utilization = req.gpu_memory_utilization
    if utilization is not None and not (
        isinstance(utilization, (int, float)) and math.isfinite(utilization) and 0 < utilization <= 1
    ):
        return f"gpu_memory_utilization {utilization} must be in (0, 1]"
    if req.weights_bytes is not None and not _whole_in(req.weights_bytes, 0, MAX_WEIGHT_BYTES):
        return "weight bytes must be a whole number from 0 to 1 PiB"
    if req.max_model_len is not None and not _whole_in(req.max_model_len, 1, MAX_CONTEXT):
        return f"max_model_len must be a whole number of tokens from 1 to {MAX_CONTEXT:,}"
    if req.max_num_batched_tokens is not None and not _whole_in(req.max_num_batched_tokens, 1, MAX_BATCHED_TOKENS):
        return f"max_num_batched_tokens must be a whole number from 1 to {MAX_BATCHED_TOKENS:,}"
    if req.max_num_seqs is not None and not _whole_in(req.max_num_seqs, 1, MAX_NUM_SEQS):
        return f"max_num_seqs must be a whole number from 1 to {MAX_NUM_SEQS:,}"
    if not _whole_in(req.block_size, 1, MAX_BLOCK_SIZE):
        return f"block_size must be a whole number from 1 to {MAX_BLOCK_SIZE}"
    if req.block_size % ATTENTION_BLOCK_MULTIPLE:
        return (
            f"block_size {req.block_size} is not a multiple of {ATTENTION_BLOCK_MULTIPLE}: vLLM's FlashAttention "
            f"backend takes only multiples of {ATTENTION_BLOCK_MULTIPLE} (vllm@v0.32.0 "
            "vllm/v1/attention/backends/flash_attn.py get_supported_kernel_block_sizes) and stops with "
            '"No common block size" (vllm/v1/worker/utils.py select_common_block_size)'
        )
    if (
        req.max_num_batched_tokens is not None
        and req.max_num_seqs is not None
        and req.max_num_batched_tokens < req.max_num_seqs
    ):
        return (
            f"max_num_batched_tokens ({req.max_num_batched_tokens}) must be greater than or equal to max_num_seqs "
            f"({req.max_num_seqs}), vLLM's own rule (vllm@v0.32.0 vllm/config/scheduler.py line 328)"
        )
    if not _whole_in(req.speculative_tokens, 0, MAX_SPECULATIVE_TOKENS):
        return f"speculative tokens must be a whole number from 0 to {MAX_SPECULATIVE_TOKENS}"
    if req.mm_images_per_prompt is not None and not _whole_in(req.mm_images_per_prompt, 0, MAX_NUM_SEQS):
        return f"images per prompt (--limit-mm-per-prompt) must be a whole number from 0 to {MAX_NUM_SEQS:,}"
    if req.mm_encoder_tp_mode not in ("weights", "data"):
        return f"mm_encoder_tp_mode {req.mm_encoder_tp_mode!r} is not one of weights, data (--mm-encoder-tp-mode)"
    return None


def size(req: SizingRequest) -> SizingResult:
    arch = req.arch
    problem = request_problem(req)
    if problem:
        raise SizingError(problem)
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    release = _release(req.vllm_version)
    utilization = req.gpu_memory_utilization
    if utilization is None:
        utilization = release.default_gpu_memory_utilization
    max_len = req.max_model_len or arch.max_position_embeddings or 4096
    mnbt, seqs = default_batch_limits(req)
    graphs_in_budget = not req.enforce_eager and release.estimates_cuda_graphs(
        arch.architecture, arch.is_moe, arch.is_hybrid
    )
    capture_sizes = len(cuda_graph_capture_sizes(req, seqs))
    # Model Runner V2 from 0.29 counts its FULL graphs apart (planner/vllm_releases.py:V2_GRAPH_ESTIMATE_FROM).
    full_graphs = (
        v2_full_graph_count(req, seqs)
        if release.v2_graph_estimate(arch.architecture, arch.is_moe, arch.is_hybrid)
        else None
    )

    total_weights = req.weights_bytes or weight_bytes_estimate(req)
    stage_weights = stage_weight_bytes(req, total_weights)
    requested = req.gpu_memory_gib * GiB * utilization
    non_torch = non_torch_bytes(req)
    model_bytes = _dtype_bytes(_model_dtype(req))
    counts = kv_layout.layer_counts(arch, with_mtp=_with_mtp(req))

    # Every pipeline stage sizes its own cache; the engine keeps the smallest block count.
    stages = []
    stage_layer_counts = layers_per_stage(arch.layers, pp)
    for stage, stage_layers in enumerate(stage_layer_counts):
        act = activation_bytes(req, stage, mnbt, seqs)
        graphs = cuda_graph_bytes(stage_layers, capture_sizes, full_graphs)
        # LoRA slots are allocated while the model loads, so they count with the weights.
        lora = lora_buffer_bytes(
            arch,
            tp=tp,
            max_loras=req.lora_max_loras,
            max_lora_rank=req.lora_max_rank,
            dtype_bytes=model_bytes,
            layers=stage_layers,
            first_stage=stage == 0,
            last_stage=stage == pp - 1,
        )
        kv_mem = requested - stage_weights[stage] - lora - act - non_torch - (graphs if graphs_in_budget else 0)
        stage_counts = counts if pp == 1 else {k: math.ceil(n * stage_layers / arch.layers) for k, n in counts.items()}
        layout = kv_layout.kv_layout(
            arch,
            tp=tp,
            kv_dtype_bytes=kv_cache_dtype_bytes(req),
            model_dtype_bytes=model_bytes,
            block_size=req.block_size,
            release=release,
            counts=stage_counts,
            speculative_tokens=req.speculative_tokens if _with_mtp(req) else 0,
        )
        blocks = int(kv_mem // (layout.page_bytes * layout.group_size)) if kv_mem > 0 else 0
        stages.append((blocks, kv_mem, act, graphs, layout, stage_layers, stage_weights[stage], lora, stage))
    blocks, kv_mem, act, graphs, layout, stage_layers, weights_per_gpu, lora_per_gpu, binding = min(
        stages, key=lambda s: s[0]
    )
    full_layout = kv_layout.kv_layout(
        arch,
        tp=tp,
        kv_dtype_bytes=kv_cache_dtype_bytes(req),
        model_dtype_bytes=model_bytes,
        block_size=req.block_size,
        release=release,
        counts=counts,
        speculative_tokens=req.speculative_tokens if _with_mtp(req) else 0,
    )
    spec = req.speculative_tokens if _with_mtp(req) else 0
    need = kv_layout.blocks_per_request(
        full_layout, arch, max_len, mnbt, mamba_align=_prefix_caching(req), speculative_tokens=spec
    )
    tokens = kv_layout.reported_tokens(blocks, full_layout, need, max_len, release)
    concurrency = blocks / need if need else 0.0
    attention_on_stage = round(arch.attention_layers * stage_layers / arch.layers) if pp > 1 else arch.attention_layers

    fits, reason = True, ""
    if kv_mem <= 0:
        fits = False
        lora_part = f" + LoRA slots {lora_per_gpu / GiB:.2f} GiB" if lora_per_gpu else ""
        reason = (
            f"no memory left for KV cache: weights {weights_per_gpu / GiB:.2f} GiB{lora_part} + runtime "
            f"{(act + non_torch + (graphs if graphs_in_budget else 0)) / GiB:.2f}"
            f" GiB exceed the requested "
            f"{requested / GiB:.2f} GiB per GPU"
        )
    elif concurrency < 1:
        fits = False
        reason = (
            f"KV cache holds {tokens} tokens per GPU but one {max_len}-token request needs "
            f"more; lower max_model_len or raise tensor_parallel_size"
        )
    return SizingResult(
        weights_gib_per_gpu=weights_per_gpu / GiB,
        activation_gib=act / GiB,
        non_torch_gib=non_torch / GiB,
        cuda_graph_gib=graphs / GiB,
        cuda_graph_in_budget=graphs_in_budget,
        requested_gib=requested / GiB,
        kv_cache_gib_per_gpu=max(kv_mem, 0) / GiB,
        kv_bytes_per_token_per_gpu=layout.attention_bytes_per_token * attention_on_stage,
        kv_cache_tokens=tokens,
        num_gpu_blocks=blocks,
        max_model_len=max_len,
        max_concurrency=concurrency,
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        gpu_memory_gib=req.gpu_memory_gib,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        fits=fits,
        reason=reason,
        kv_groups=tuple(f"{kind}x{n}" for kind, n in full_layout.groups),
        interconnect=interconnect(req),
        block_size=full_layout.block_size,
        padding_layers=full_layout.padding_layers,
        lora_gib_per_gpu=lora_per_gpu / GiB,
        binding_stage=binding,
    )


# vLLM pads the vocabulary to a multiple of this before sharding it (DEFAULT_VOCAB_PADDING_SIZE in
# vllm/model_executor/layers/vocab_parallel_embedding.py).
VOCAB_PADDING = 64


def valid_tensor_parallel_sizes(arch: ModelArch, max_tp: int = 8) -> list[int]:
    """TP sizes vLLM accepts: they divide the attention heads (ModelConfig's parallel check) and the
    vocabulary padded to a multiple of 64 (VocabParallelEmbedding shards the padded embedding), and
    either divide the KV heads or are a multiple of them (KV heads are replicated)."""
    padded_vocab = -(-arch.vocab // VOCAB_PADDING) * VOCAB_PADDING
    sizes = []
    for tp in range(1, max_tp + 1):
        if arch.heads % tp or padded_vocab % tp:
            continue
        if not arch.is_mla and arch.kv_heads % tp and tp % arch.kv_heads:
            continue
        sizes.append(tp)
    return sizes


def heads_problem(arch: ModelArch, tp: int) -> str | None:
    """vLLM's own refusal of a TP that does not divide the attention heads, or None. vllm@v0.32.0
    vllm/config/model.py ModelConfig.verify_with_parallel_config (lines 1544-1551):
    `total_num_attention_heads % tensor_parallel_size != 0` raises "Total number of attention heads (H)
    must be divisible by tensor parallel size (T)." at engine start."""
    if arch.heads % tp == 0:
        return None
    divisors = [t for t in range(1, min(arch.heads, MAX_TENSOR_PARALLEL) + 1) if arch.heads % t == 0]
    return (
        f"vLLM refuses to start: total number of attention heads ({arch.heads}) must be divisible by tensor "
        f"parallel size ({tp}) (vllm/config/model.py verify_with_parallel_config); sizes dividing {arch.heads}: "
        f"{', '.join(map(str, divisors))}"
    )


def context_problem(arch: ModelArch, max_model_len: int) -> str | None:
    """vLLM's refusal of a context beyond the model's maximum, or None. vllm@v0.32.0
    vllm/config/model.py _get_and_verify_max_len (lines 2639-2665): a max_model_len above the length
    derived from config.json raises unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which vLLM itself warns
    yields NaNs or out-of-bounds errors past the trained positions. The derived length here is
    max_position_embeddings; vLLM also multiplies it by the RoPE scaling factor of the types other than
    su, longrope, llama3, yarn and DeepSeek's (lines 2595-2605: linear, dynamic) and caps it at the
    tokenizer's model_max_length, which this check does not read (unresolved for such configs: the
    startup log's "max_model_len" line settles it)."""
    model_max = arch.max_position_embeddings
    if model_max is None or max_model_len <= model_max:
        return None
    return (
        f"vLLM refuses to start: max_model_len {max_model_len:,} is greater than the model's derived maximum "
        f"(max_position_embeddings={model_max:,} in config.json) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, past "
        f"which positions give NaN (vllm/config/model.py _get_and_verify_max_len); use at most {model_max:,}"
    )


def smallest_tensor_parallel_size(
    req_without_tp: SizingRequest, max_tp: int = 8, min_concurrency: float = 0.0
) -> int | None:
    """The smallest valid TP at which the model fits and holds `min_concurrency` full-length requests."""
    for tp in valid_tensor_parallel_sizes(req_without_tp.arch, max_tp):
        result = size(replace(req_without_tp, tensor_parallel_size=tp))
        if result.fits and result.max_concurrency >= min_concurrency:
            return tp
    return None


def auto_tensor_parallel_size(req_without_tp: SizingRequest, max_tp: int, target_concurrency: float) -> int | None:
    """The TP `tensorParallelSize: auto` deploys, the one rule the plan and the sizing CLI share: the
    smallest valid size up to `max_tp` (the GPUs of one node) whose KV cache holds `target_concurrency`
    full-length requests; when none reaches it, the fitting size that holds the most; None when none fits."""
    tp = smallest_tensor_parallel_size(req_without_tp, max_tp=max_tp, min_concurrency=target_concurrency)
    if tp is not None:
        return tp
    fitting = [
        t
        for t in valid_tensor_parallel_sizes(req_without_tp.arch, max_tp)
        if size(replace(req_without_tp, tensor_parallel_size=t)).fits
    ]
    return fitting[-1] if fitting else None


# Engine start-up after the weights are on the GPU: memory profiling with torch.compile, KV-cache
# allocation, CUDA-graph capture. Real logs: Qwen2-7B on A100 (vLLM 0.10.1.1, dennislee22/
# vLLM-benchmarking) "init engine (profile, create kv cache, warmup model) took 23.13 seconds" with
# a warm compile cache and 89.58 s cold ("torch.compile takes 67.30 s"); gpt-oss-120b TP4 141.56 s
# ("Graph capturing finished in 101 secs"). 90 s covers a cold compile cache for a mid-size model.
ENGINE_STARTUP_SECONDS = 90.0
# Process start, CUDA context, tokenizer and config load before weights start to stream.
PROCESS_STARTUP_SECONDS = 20.0


def estimate_load_seconds(
    weights_bytes: int, read_bytes_per_second: float, *, engine_startup_seconds: float = ENGINE_STARTUP_SECONDS
) -> float:
    """Seconds from container start until the server answers /health.

    Weight bytes / storage read speed ("Model loading took X GiB and Y seconds" in the logs is
    dominated by that read), plus process start-up and the engine start-up above.
    """
    if read_bytes_per_second <= 0:
        raise SizingError("storage read speed must be positive")
    return PROCESS_STARTUP_SECONDS + weights_bytes / read_bytes_per_second + engine_startup_seconds
