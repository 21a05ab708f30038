"""How vLLM V1 lays out the KV cache of one GPU: pages, blocks, groups, and the tokens it reports.

The KV-cache manager gives every layer the same page (bytes per block), so layers of different
kinds can share one pool (vllm v0.32.0 v1/core/kv_cache_utils.py:_get_kv_cache_groups_uniform_page_size):

* plain and sliding-window attention: a page is `block_size` tokens of K and V;
* hybrid models (Qwen3-Next/3.5 gated DeltaNet, Nemotron-H Mamba2): a state layer keeps one
  fixed-size recurrent state per request. vLLM raises the attention block size until one attention
  page holds a state (rounded to the attention kernel's block alignment) and pads the state page to
  the attention page (vllm v0.32.0 platforms/interface.py:_align_hybrid_block_size, logged as
  "Setting attention block size to N tokens" and "Padding mamba page size by X%");
* layers are grouped by kind into groups of equal size, padding the last group of a kind
  ("Add N padding layers"); one block of the pool costs `page x group_size`.

`reported_tokens` reproduces the "GPU KV cache size: N tokens" line of each release.

Pure Python; planner/sizing.py does the memory budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.model_arch import ATTENTION_KINDS, ModelArch
from planner.vllm_releases import Release

# Smallest kernel block of the CUDA attention backends (FlashAttention `MultipleOf(16)`, FlashInfer
# [16, 32, 64]; vllm v0.32.0 v1/attention/backends/flash_attn.py and flashinfer.py
# get_supported_kernel_block_sizes): the hybrid attention block is a multiple of it.
ATTENTION_KERNEL_BLOCK_ALIGNMENT = 16
# MLA hybrids align to 128 (TRTLLM/FlashInfer MLA decode kernels; same function).
MLA_KERNEL_BLOCK_ALIGNMENT = 128


@dataclass(frozen=True)
class KvLayout:
    block_size: int  # tokens per attention block
    page_bytes: int  # bytes of one block of one layer (state pages padded to it)
    groups: tuple[tuple[str, int], ...]  # (layer kind, layers in the group), one entry per group
    attention_bytes_per_token: int  # one attention layer, one token, this GPU
    state_bytes: int  # one state layer's recurrent state, this GPU (unpadded)
    layers_per_kind: tuple[tuple[str, int], ...] = ()  # the real layer counts the groups hold

    @property
    def group_size(self) -> int:
        return max(n for _, n in self.groups)

    @property
    def padding_layers(self) -> int:
        """Layers vLLM adds so every group has `group_size` layers ("Add N padding layers")."""
        return sum(math.ceil(n / self.group_size) * self.group_size - n for _, n in self.layers_per_kind)


def attention_bytes_per_token(arch: ModelArch, tp: int, kv_dtype_bytes: int) -> int:
    """One attention layer's K and V for one token on one GPU."""
    if arch.is_mla:
        # One compressed latent plus the rotary key per token, replicated on every TP rank.
        return (arch.kv_lora_rank + arch.qk_rope_head_dim) * kv_dtype_bytes
    # K and V; vLLM replicates KV heads when TP exceeds their number.
    return 2 * max(1, arch.kv_heads // tp) * arch.head_dim * kv_dtype_bytes


def state_bytes(arch: ModelArch, tp: int, model_dtype_bytes: int, speculative_tokens: int = 0) -> int:
    """One state layer's recurrent state on one GPU: the convolution window plus the SSM state.

    Gated DeltaNet: conv (2 x key heads x key dim + value heads x value dim) / TP x (kernel - 1 + spec)
    and state value heads / TP x value dim x key dim (vllm v0.32.0
    model_executor/layers/mamba/mamba_utils.py:gated_delta_net_state_shape). Mamba2: conv
    (heads x head dim + 2 x groups x state) / TP x (kernel - 1 + spec) and state heads / TP x head dim
    x state size (mamba2_state_shape). The conv state is in the model dtype; the SSM state too unless
    config.json pins `mamba_ssm_dtype` (mamba_utils.py:_mamba_state_dtype; Qwen3.5 pins float32).
    """
    ssm_bytes = 4 if (arch.mamba_ssm_dtype or "").replace("torch.", "") in ("float32", "float") else model_dtype_bytes
    kinds = set(arch.layer_types)
    if "linear" in kinds:
        conv_dim = (
            arch.linear_key_head_dim * arch.linear_num_key_heads * 2
            + arch.linear_value_head_dim * arch.linear_num_value_heads
        )
        conv = conv_dim // tp * (arch.linear_conv_kernel_dim - 1 + speculative_tokens)
        ssm = arch.linear_num_value_heads // tp * arch.linear_value_head_dim * arch.linear_key_head_dim
        return conv * model_dtype_bytes + ssm * ssm_bytes
    if "mamba" in kinds:
        # Groups are replicated so every head shard has its group (mamba_utils.py:extra_groups_for_head_shards).
        groups = arch.mamba_groups + (0 if arch.mamba_groups % tp == 0 else tp - arch.mamba_groups)
        conv_dim = arch.mamba_num_heads * arch.mamba_head_dim + 2 * groups * arch.mamba_state_size
        conv = conv_dim // tp * (arch.mamba_conv_kernel - 1 + speculative_tokens)
        ssm = arch.mamba_num_heads // tp * arch.mamba_head_dim * arch.mamba_state_size
        return conv * model_dtype_bytes + ssm * ssm_bytes
    return 0


def group_layers(counts: dict[str, int], release: Release) -> tuple[tuple[str, int], ...]:
    """vLLM's grouping of layers by kind into equal-size groups (see planner/vllm_releases.py)."""
    counts = {kind: n for kind, n in counts.items() if n > 0}
    if len(counts) == 1:
        kind, n = next(iter(counts.items()))
        return ((kind, n),)
    smallest, largest = min(counts.values()), max(counts.values())
    threshold = release.grouping_pad_to_largest_below
    group_size = largest if threshold is not None and largest < smallest * threshold else smallest
    groups: list[tuple[str, int]] = []
    for kind, n in counts.items():
        groups += [(kind, group_size)] * math.ceil(n / group_size)
    return tuple(groups)


def layer_counts(arch: ModelArch, with_mtp: bool = False) -> dict[str, int]:
    """Layers per cache kind; an MTP drafter adds its attention layers to the full-attention kind."""
    counts: dict[str, int] = {}
    for kind in arch.layer_types or ("full",) * arch.layers:
        if kind != "none":
            counts[kind] = counts.get(kind, 0) + 1
    if with_mtp and arch.mtp_layers:
        counts["full"] = counts.get("full", 0) + arch.mtp_layers
    return counts


def kv_layout(
    arch: ModelArch,
    *,
    tp: int,
    kv_dtype_bytes: int,
    model_dtype_bytes: int,
    block_size: int,
    release: Release,
    counts: dict[str, int],
    speculative_tokens: int = 0,
) -> KvLayout:
    per_token = attention_bytes_per_token(arch, tp, kv_dtype_bytes)
    state = state_bytes(arch, tp, model_dtype_bytes, speculative_tokens) if arch.is_hybrid else 0
    if state:
        align = MLA_KERNEL_BLOCK_ALIGNMENT if arch.is_mla else max(ATTENTION_KERNEL_BLOCK_ALIGNMENT, block_size)
        block_size = max(block_size, align * math.ceil(state / (align * per_token)))
    return KvLayout(
        block_size=block_size,
        page_bytes=block_size * per_token,
        groups=group_layers(counts, release),
        attention_bytes_per_token=per_token,
        state_bytes=state,
        layers_per_kind=tuple((kind, n) for kind, n in counts.items() if n > 0),
    )


def blocks_per_request(
    layout: KvLayout, arch: ModelArch, max_len: int, mnbt: int, *, mamba_align: bool, speculative_tokens: int = 0
) -> int:
    """Blocks one max_model_len request takes from the shared pool, summed over groups
    (vllm v0.32.0 v1/core/kv_cache_utils.py:get_max_concurrency_for_kv_cache_config and
    v1/kv_cache_interface.py max_memory_usage_bytes of each spec)."""
    need = 0
    for kind, _ in layout.groups:
        if kind == "sliding" and arch.sliding_window:
            need += math.ceil(min(arch.sliding_window - 1 + mnbt, max_len) / layout.block_size) + 1
        elif kind in ATTENTION_KINDS:
            need += math.ceil(max_len / layout.block_size)
        else:
            # A state: one block, one more in prefix-caching "align" mode, plus one per draft token
            # (MambaSpec.max_memory_usage_bytes: 2 + speculative blocks in align mode, else 1 + them).
            need += (2 if mamba_align else 1) + speculative_tokens
    return need


def reported_tokens(num_blocks: int, layout: KvLayout, need: int, max_len: int, release: Release) -> int:
    """The number vLLM prints as "GPU KV cache size: N tokens" in this release."""
    if release.tokens_from_concurrency and need:
        # int(max_concurrency x max_model_len), max_concurrency = num_blocks / blocks per request
        return int(num_blocks / need * max_len)
    return num_blocks // len(layout.groups) * layout.block_size
