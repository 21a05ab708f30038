"""How much KV cache a vLLM (V1 engine) server gets on a GPU, and whether a model fits at all.

Pure Python, no Pulumi import: the program, the tests and the CLI (`python -m components.sizing`,
planner/sizing_cli.py) share it.

The budget follows vLLM V1's own arithmetic (vllm/v1/worker/gpu_worker.py,
`determine_available_memory`, and vllm/utils `memory_profiling`):

    requested = cuda_total × gpu_memory_utilization
    kv_memory = requested − weights_on_this_gpu − torch_activation_peak − non_torch_increase
                [− estimated CUDA-graph memory, from the release that profiles it by default]

and the token count follows vllm/v1/core/kv_cache_utils.py: layers are grouped by attention type
(full / sliding window), every group has the same number of layers (`group_size`), one block of a
group costs `page_bytes × group_size`, so `num_blocks = kv_memory // (page × group_size)` and the
log's "GPU KV cache size: N tokens" is `num_blocks // num_groups × block_size`.

The activation, non-torch and CUDA-graph terms are not derivable from the config alone; they are
calibrated on real vLLM startup logs (tests/fixtures/vllm_logs/cases.yaml, every case with its
source). What the numbers stand for:

* torch activation peak = max(forward pass of `max_num_batched_tokens` tokens, sampler warm-up on
  `min(max_num_seqs, max_num_batched_tokens)` rows of full-vocabulary logits). The sampler term is
  the big one on large-vocabulary models (Gemma's 256k vocabulary costs ~3.6 GiB at 1024 seqs);
  the forward term dominates on small-vocabulary models (CodeLlama, Mixtral).
* non-torch increase: CUDA/cuBLAS workspaces on one GPU; with TP > 1 releases from 0.17 on also
  count the all-reduce buffers allocated during the profiled forward (~2.1 GiB per GPU).
* CUDA graphs: 0.2 GiB + 0.02 GiB per layer for the default capture sizes; subtracted only from
  0.21 on (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS became the default, and the default
  gpu_memory_utilization rose from 0.9 to 0.92), captured from the unrequested remainder before.

The reported token count changed in 0.20: int(max_concurrency × max_model_len) instead of
num_blocks // num_groups × block_size (the same number for full attention and a max_model_len that
is a multiple of the block size; larger for sliding-window hybrids).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from common.engine import VLLM_VERSION
from planner.checkpoint import served_dtype
from planner.model_arch import MAX_CONTEXT, MAX_LAYERS, ModelArch, SizingError

GiB = 1024**3

# ---------------------------------------------------------------------------------------------
# Calibrated constants (see module docstring; fitted on tests/fixtures/vllm_logs/cases.yaml).
# ---------------------------------------------------------------------------------------------

# Bytes per logits element the sampler warm-up holds at its peak (bf16 logits, fp32 copy,
# softmax/log-softmax, top-k/top-p scratch). v0.19 H100 logs: Llama-3.1-8B 1.89 GiB and
# Qwen2.5-7B 2.21 GiB at 1024 rows, i.e. 15.2-15.5 bytes per (row × vocab).
SAMPLER_BYTES_PER_LOGIT = {"legacy": 10.0, "v0.11": 38.0, "current": 15.3}
# Forward-pass peak per token, in units of the activation dtype: the gate/up projection output and
# the activation output (3 × intermediate / TP) plus ~4.25 hidden-sized residual/norm buffers.
FORWARD_INTERMEDIATE_FACTOR = 3.0
FORWARD_HIDDEN_FACTOR = 4.25
# Non-torch memory that appears during the profiled forward (GiB).
NON_TORCH_SINGLE_GPU_GIB = 0.25
NON_TORCH_PP_ONLY_GIB = 0.07
NON_TORCH_TP_CURRENT_GIB = 2.1  # all-reduce buffers counted from 0.17 on
NON_TORCH_TP_LEGACY_GIB = 0.3
# Estimated CUDA graph memory for the default capture sizes. vLLM measures it by capturing the two
# largest sizes of each mode and extrapolating (gpu_model_runner.py `profile_cudagraph_memory`:
# first capture + (n-1) x per-graph), so it grows with the layers captured on a GPU. A fit on the
# v0.19 "Estimated CUDA graph memory:" lines of the calibration split (0.49-1.92 GiB): 0.2 GiB plus
# 0.02 GiB per decoder layer of the stage (mean error 0.16 GiB against 0.30 for a flat 0.95 GiB).
CUDA_GRAPH_BASE_GIB = 0.2
CUDA_GRAPH_PER_LAYER_GIB = 0.02
# Release that made CUDA-graph memory part of the KV budget by default: vLLM's own start-up line
# "CUDA graph memory profiling is enabled (default since v0.21.0)" (gpu_worker.py), and
# determine_available_memory subtracts `cudagraph_memory_estimate_applied` from requested − non-KV.
CUDA_GRAPH_IN_BUDGET_FROM = (0, 21)
# CacheConfig.gpu_memory_utilization defaults to 0.92 in the releases that profile CUDA graphs
# (vllm/config/cache.py `Field(default=0.92, ...)`, seen at v0.25.0, v0.27.1, v0.30.0, and in the
# v0.21+ advisory lines "--gpu-memory-utilization=0.9200"); 0.9 before.
DEFAULT_UTILIZATION_CURRENT = 0.92
DEFAULT_UTILIZATION_LEGACY = 0.9
# Release from which the log's "GPU KV cache size: N tokens" is int(max_concurrency × max_model_len)
# (kv_cache_utils.py `_report_kv_cache_config`, vllm-project/vllm#40691/#40694: the 0.19 formula
# num_blocks // num_groups × block_size under-reported hybrid models). v0.19.0 logs use the old
# formula; v0.21+ logs print counts that are not multiples of the block size. 0.20 is assumed new.
TOKENS_FROM_CONCURRENCY_FROM = (0, 20)

DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1,
               "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1}


# vLLM pads MXFP4 expert weights for its kernels: gpt-oss-20b loads as 2 × 7.01 GiB at TP2 against
# ~12.8 GiB of checkpoint (llm-d-planner v0.19 sweep).
MXFP4_LOADED_OVERHEAD = 1.1




def _parse_version(version: str | None) -> tuple[int, int]:
    if not version:
        version = VLLM_VERSION  # the deployed release
    parts = str(version).lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise SizingError(f"--vllm-version {version!r} is not a release number like 0.19.0") from None


def _regime(version: tuple[int, int]) -> str:
    if version >= (0, 17):
        return "current"
    if version >= (0, 11):
        return "v0.11"
    return "legacy"


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
    gpu_name: str | None = None  # vLLM picks larger defaults on ≥70 GiB GPUs that are not A100s
    vllm_version: str | None = None  # None → the release the project deploys


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


def layers_per_stage(layers: int, pp: int) -> list[int]:
    """vLLM's even split of decoder layers over pipeline stages (remainder to the last stages)."""
    base, rest = divmod(layers, pp)
    return [base + (1 if i >= pp - rest else 0) for i in range(pp)]


def kv_groups(arch: ModelArch) -> list[tuple[str, int]]:
    """(attention type, layers) per KV-cache group, as vLLM V1's hybrid manager forms them."""
    types = arch.layer_types or tuple("full" for _ in range(arch.layers))
    counts: dict[str, int] = {}
    for t in types:
        counts[t] = counts.get(t, 0) + 1
    if len(counts) == 1:
        kind, n = next(iter(counts.items()))
        return [(kind, n)]
    smallest, largest = min(counts.values()), max(counts.values())
    # vLLM pads groups up to the largest type when types are within 25%, otherwise splits each
    # type into groups of the smallest type's size.
    group_size = largest if largest < smallest * 1.25 else smallest
    groups: list[tuple[str, int]] = []
    for kind, n in counts.items():
        groups += [(kind, group_size)] * math.ceil(n / group_size)
    return groups


def kv_bytes_per_token_per_layer(arch: ModelArch, tp: int, kv_dtype_bytes: int) -> int:
    if arch.is_mla:
        # One compressed latent plus the rotary key per token, replicated on every TP rank.
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) * kv_dtype_bytes
    # K and V; vLLM replicates KV heads when TP exceeds their number.
    return 2 * max(1, arch.kv_heads // tp) * arch.head_dim * kv_dtype_bytes


def kv_cache_dtype_bytes(req: SizingRequest) -> int:
    if req.kv_cache_dtype and req.kv_cache_dtype != "auto":
        return _dtype_bytes(req.kv_cache_dtype)
    return _dtype_bytes(_model_dtype(req))


def kv_bytes_per_token_per_gpu(req: SizingRequest, layers_on_gpu: int | None = None) -> int:
    layers = req.arch.layers if layers_on_gpu is None else layers_on_gpu
    return layers * kv_bytes_per_token_per_layer(req.arch, req.tensor_parallel_size, kv_cache_dtype_bytes(req))


def default_batch_limits(req: SizingRequest) -> tuple[int, int]:
    """vLLM's OpenAI-server defaults (engine/arg_utils.py): larger on ≥70 GiB non-A100 GPUs."""
    big = req.gpu_memory_gib >= 70 and "a100" not in (req.gpu_name or "").lower()
    version = _parse_version(req.vllm_version)
    if version < (0, 9):
        big = False  # the per-device defaults arrived in 0.9
    tokens = req.max_num_batched_tokens or (8192 if big else 2048)
    seqs = req.max_num_seqs or (1024 if big else 256)
    return tokens, seqs


def default_gpu_memory_utilization(vllm_version: str | None) -> float:
    """vLLM's CacheConfig default for the release (0.92 from the one that profiles CUDA graphs)."""
    if _parse_version(vllm_version) >= CUDA_GRAPH_IN_BUDGET_FROM:
        return DEFAULT_UTILIZATION_CURRENT
    return DEFAULT_UTILIZATION_LEGACY


def cuda_graph_bytes(stage_layers: int) -> float:
    """Estimated CUDA-graph pool of one GPU that holds `stage_layers` decoder layers."""
    return (CUDA_GRAPH_BASE_GIB + CUDA_GRAPH_PER_LAYER_GIB * stage_layers) * GiB


def reported_kv_tokens(num_blocks: int, num_groups: int, blocks_per_request: int, max_len: int,
                       block_size: int, version: tuple[int, int]) -> int:
    """The number vLLM prints as "GPU KV cache size: N tokens" for this release."""
    if version >= TOKENS_FROM_CONCURRENCY_FROM and blocks_per_request:
        # int(max_concurrency × max_model_len), max_concurrency = num_blocks / blocks per request
        return int(num_blocks / blocks_per_request * max_len)
    return num_blocks // num_groups * block_size


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
    if method in ("mxfp4",):
        # gpt-oss: MoE experts in MXFP4 (4 bits + one 8-bit scale per 32), the rest in bf16.
        return (embed + dense_body) * act_bytes + experts * (4.25 / 8) * MXFP4_LOADED_OVERHEAD
    if method in ("fp8", "fbgemm_fp8", "compressed-tensors", "compressed_tensors", "modelopt") or (bits == 8):
        per = (bits or 8) / 8
        return embed * act_bytes + (dense_body + experts) * per * 1.01
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes") or bits == 4:
        # 4-bit weights plus fp16 scales/zeros per group of 128.
        return embed * act_bytes + (dense_body + experts) * ((bits or 4) / 8) * 1.06
    return (embed + dense_body + experts) * act_bytes


def activation_bytes(req: SizingRequest, stage: int, mnbt: int, seqs: int) -> float:
    arch = req.arch
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    act = _dtype_bytes(_model_dtype(req))
    inter = arch.intermediate if (not arch.is_moe or arch.dense_layers) else arch.shared_expert_intermediate
    forward = mnbt * act * (FORWARD_INTERMEDIATE_FACTOR * inter / tp + FORWARD_HIDDEN_FACTOR * arch.hidden)
    sampler = 0.0
    if stage == pp - 1:  # only the last pipeline stage computes logits and samples
        rows = min(seqs, mnbt)
        sampler = SAMPLER_BYTES_PER_LOGIT[_regime(_parse_version(req.vllm_version))] * rows * arch.vocab
    peak = max(forward, sampler)
    if arch.is_moe and (req.quantization or arch.quant_method or "") != "mxfp4":
        # The fused-MoE kernel's workspace (per routed token: the gate/up output and the expert
        # outputs before the weighted sum) stays allocated while the sampler runs, so it adds on
        # top. v0.19 logs: Qwen3-30B-A3B 2.68 GiB, Qwen1.5-MoE 2.47, DeepSeek-V2-Lite 1.93 against
        # sampler terms of 2.22, 2.22 and 1.49. gpt-oss (MXFP4 kernels) shows no such extra.
        peak += mnbt * arch.experts_per_token * act * (arch.hidden + 2 * arch.moe_intermediate / tp)
    return peak


def non_torch_bytes(req: SizingRequest) -> float:
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    if tp > 1:
        current = _regime(_parse_version(req.vllm_version)) == "current"
        return (NON_TORCH_TP_CURRENT_GIB if current else NON_TORCH_TP_LEGACY_GIB) * GiB
    if pp > 1:
        return NON_TORCH_PP_ONLY_GIB * GiB
    return NON_TORCH_SINGLE_GPU_GIB * GiB


def _blocks_per_request(arch: ModelArch, groups: list[tuple[str, int]], max_len: int, mnbt: int,
                        block: int) -> int:
    need = 0
    for kind, _ in groups:
        if kind == "sliding" and arch.sliding_window:
            need += math.ceil(min(arch.sliding_window - 1 + mnbt, max_len) / block) + 1
        else:
            need += math.ceil(max_len / block)
    return need


# ---------------------------------------------------------------------------------------------
# The answer
# ---------------------------------------------------------------------------------------------


# Ranges of a request, each far above any real deployment, so no request can make the arithmetic
# loop for long, overflow or divide by zero.
MAX_TENSOR_PARALLEL = 512
MAX_GPU_MEMORY_GIB = 4096.0
MAX_BLOCK_SIZE = 4096  # vLLM's CacheConfig.block_size: any int > 0 (vllm/config/cache.py)
MAX_BATCHED_TOKENS = 2**24
MAX_NUM_SEQS = 2**20
MAX_WEIGHT_BYTES = 2**50  # 1 PiB


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
        return (f"pipeline_parallel_size {req.pipeline_parallel_size} exceeds the model's {arch.layers} decoder "
                f"layers; every pipeline stage needs at least one layer, so use at most {arch.layers}")
    memory = req.gpu_memory_gib
    if not isinstance(memory, (int, float)) or not math.isfinite(memory) or not 0 < memory <= MAX_GPU_MEMORY_GIB:
        return f"GPU memory must be a finite number of GiB above 0 and at most {MAX_GPU_MEMORY_GIB:g}"
    utilization = req.gpu_memory_utilization
    if utilization is not None and not (isinstance(utilization, (int, float)) and math.isfinite(utilization)
                                        and 0 < utilization <= 1):
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
    return None


def size(req: SizingRequest) -> SizingResult:
    arch = req.arch
    problem = request_problem(req)
    if problem:
        raise SizingError(problem)
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    utilization = req.gpu_memory_utilization
    if utilization is None:
        utilization = default_gpu_memory_utilization(req.vllm_version)
    max_len = req.max_model_len or arch.max_position_embeddings or 4096
    mnbt, seqs = default_batch_limits(req)
    version = _parse_version(req.vllm_version)
    graphs_in_budget = version >= CUDA_GRAPH_IN_BUDGET_FROM and not req.enforce_eager

    total_weights = req.weights_bytes if req.weights_bytes else weight_bytes_estimate(req)
    weights_per_gpu = total_weights / (tp * pp)
    requested = req.gpu_memory_gib * GiB * utilization
    groups = kv_groups(arch)
    kv_dtype = kv_cache_dtype_bytes(req)
    per_layer_token = kv_bytes_per_token_per_layer(arch, tp, kv_dtype)
    page = req.block_size * per_layer_token

    # Every pipeline stage sizes its own cache; the engine keeps the smallest block count.
    stage_blocks, stage_kv, stage_act, stage_graphs = [], [], [], []
    for stage, stage_layers in enumerate(layers_per_stage(arch.layers, pp)):
        act = activation_bytes(req, stage, mnbt, seqs)
        graphs = 0.0 if req.enforce_eager else cuda_graph_bytes(stage_layers)
        kv_mem = requested - weights_per_gpu - act - non_torch_bytes(req) - (graphs if graphs_in_budget else 0)
        stage_groups = groups if pp == 1 else [(k, math.ceil(n * stage_layers / arch.layers)) for k, n in groups]
        group_size = max(n for _, n in stage_groups)
        blocks = int(kv_mem // (page * group_size)) if kv_mem > 0 else 0
        stage_blocks.append(blocks)
        stage_kv.append(kv_mem)
        stage_act.append(act)
        stage_graphs.append(graphs)
    worst = min(range(pp), key=lambda i: stage_blocks[i])
    num_blocks = stage_blocks[worst]
    kv_mem = stage_kv[worst]
    cuda_graph = stage_graphs[worst]
    need = _blocks_per_request(arch, groups, max_len, mnbt, req.block_size)
    tokens = reported_kv_tokens(num_blocks, len(groups), need, max_len, req.block_size, version)
    concurrency = num_blocks / need if need else 0.0
    stage_layers = layers_per_stage(arch.layers, pp)[worst]

    fits, reason = True, ""
    if kv_mem <= 0:
        fits = False
        reason = (f"no memory left for KV cache: weights {weights_per_gpu / GiB:.2f} GiB + runtime "
                  f"{(stage_act[worst] + non_torch_bytes(req) + (cuda_graph if graphs_in_budget else 0)) / GiB:.2f}"
                  f" GiB exceed the requested "
                  f"{requested / GiB:.2f} GiB per GPU")
    elif concurrency < 1:
        fits = False
        reason = (f"KV cache holds {tokens} tokens per GPU but one {max_len}-token request needs "
                  f"more; lower max_model_len or raise tensor_parallel_size")
    return SizingResult(
        weights_gib_per_gpu=weights_per_gpu / GiB,
        activation_gib=stage_act[worst] / GiB,
        non_torch_gib=non_torch_bytes(req) / GiB,
        cuda_graph_gib=cuda_graph / GiB,
        cuda_graph_in_budget=graphs_in_budget,
        requested_gib=requested / GiB,
        kv_cache_gib_per_gpu=max(kv_mem, 0) / GiB,
        kv_bytes_per_token_per_gpu=per_layer_token * stage_layers,
        kv_cache_tokens=tokens,
        num_gpu_blocks=num_blocks,
        max_model_len=max_len,
        max_concurrency=concurrency,
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        gpu_memory_gib=req.gpu_memory_gib,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        fits=fits,
        reason=reason,
        kv_groups=tuple(f"{kind}x{n}" for kind, n in groups),
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


def smallest_tensor_parallel_size(req_without_tp: SizingRequest, max_tp: int = 8) -> int | None:
    for tp in valid_tensor_parallel_sizes(req_without_tp.arch, max_tp):
        if size(replace(req_without_tp, tensor_parallel_size=tp)).fits:
            return tp
    return None


# Engine start-up after the weights are on the GPU: memory profiling with torch.compile, KV-cache
# allocation, CUDA-graph capture. Real logs: Qwen2-7B on A100 (vLLM 0.10.1.1, dennislee22/
# vLLM-benchmarking) "init engine (profile, create kv cache, warmup model) took 23.13 seconds" with
# a warm compile cache and 89.58 s cold ("torch.compile takes 67.30 s"); gpt-oss-120b TP4 141.56 s
# ("Graph capturing finished in 101 secs"). 90 s covers a cold compile cache for a mid-size model.
ENGINE_STARTUP_SECONDS = 90.0
# Process start, CUDA context, tokenizer and config load before weights start to stream.
PROCESS_STARTUP_SECONDS = 20.0


def estimate_load_seconds(weights_bytes: int, read_bytes_per_second: float, *,
                          engine_startup_seconds: float = ENGINE_STARTUP_SECONDS) -> float:
    """Seconds from container start until the server answers /health.

    Weight bytes / storage read speed ("Model loading took X GiB and Y seconds" in the logs is
    dominated by that read), plus process start-up and the engine start-up above.
    """
    if read_bytes_per_second <= 0:
        raise SizingError("storage read speed must be positive")
    return PROCESS_STARTUP_SECONDS + weights_bytes / read_bytes_per_second + engine_startup_seconds

