"""What the sizing engine reads from a model's Hugging Face config.json, as one `ModelArch`.

Layers, heads and KV heads, head size, vocabulary, MLP shape, and the variants that change the
KV-cache layout or the weight count: mixture-of-experts, MLA's latent cache, sliding-window and
hybrid layer types, quantization configs. Pure Python; `planner.sizing` does the arithmetic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal, overload

from common.untrusted import excerpt


class SizingError(ValueError):
    """Bad sizing input (unreadable config, impossible request); the message names the fix."""


# Ranges a config.json number must lie in. Far above every published model (Llama 3.1 405B: 126
# layers, hidden 16384, 128 heads; DeepSeek-V3: 256 routed experts; Gemma 3: 262,144 vocabulary
# entries; Llama 4 Scout: 10,485,760 positions), and low enough that sizing's loops over layers and
# tensor-parallel sizes stay instant and its arithmetic exact.
MAX_LAYERS = 1024
MAX_WIDTH = 2**20
MAX_HEADS = 2**16
MAX_VOCAB = 2**24
MAX_EXPERTS = 2**16
MAX_CONTEXT = 2**31 - 1
MAX_QUANT_BITS = 32


class _Reader:
    """Typed reads of one config.json mapping; `prefix` names nested ones in messages."""

    def __init__(self, cfg: dict[str, Any], prefix: str = ""):
        self.cfg = cfg
        self.prefix = prefix

    @overload
    def count(self, keys: tuple[str, ...], upper: int, required: Literal[True]) -> int: ...

    @overload
    def count(self, keys: tuple[str, ...], upper: int, required: bool = False) -> int | None: ...

    def count(self, keys: tuple[str, ...], upper: int, required: bool = False) -> int | None:
        """The first of `keys` that is set (not 0, null or false, as before), as a whole number in
        1..upper; None when none is set."""
        for key in keys:
            value = self.cfg.get(key)
            if value in (None, 0, False) or (isinstance(value, float) and value == 0):
                continue
            whole = _whole(value)
            if whole is None or not 1 <= whole <= upper:
                raise SizingError(
                    f"config.json: {self.prefix}{key} must be a whole number from 1 to {upper:,}, got {excerpt(value)}"
                )
            return whole
        if required:
            raise SizingError(
                f"config.json lacks {self.prefix}{' / '.join(keys)}; pass the language model's config.json"
            )
        return None

    def text(self, key: str) -> str:
        value = self.cfg.get(key)
        return value[:200] if isinstance(value, str) else ""


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _quantization(qcfg: Any) -> tuple[str | None, int | None]:
    """(method, bits) a checkpoint's quantization_config declares, or (None, None)."""
    if not isinstance(qcfg, dict) or not qcfg:
        return None, None
    method = qcfg.get("quant_method") or qcfg.get("format") or "unknown"
    method = (method if isinstance(method, str) else "unknown")[:64].lower()
    bits = qcfg.get("bits") or qcfg.get("w_bit")
    if not bits and isinstance(qcfg.get("config_groups"), dict):
        for group in qcfg["config_groups"].values():
            weights = group.get("weights") if isinstance(group, dict) else None
            bits = (weights.get("num_bits") if isinstance(weights, dict) else None) or bits
    if not bits and method in ("fp8", "fbgemm_fp8"):
        bits = 8
    if not bits and method == "mxfp4":
        bits = 4
    if not bits:
        return method, None
    whole = _whole(bits)
    if whole is None or not 1 <= whole <= MAX_QUANT_BITS:
        raise SizingError(
            f"config.json: quantization_config bits must be a whole number from 1 to {MAX_QUANT_BITS}, "
            f"got {excerpt(bits)}"
        )
    return method, whole


def _quant_group_size(qcfg: Any) -> int | None:
    """The weight group size a quantization_config declares (AWQ's `group_size` / `q_group_size`, GPTQ's
    `group_size`), or None when it declares none or a whole-channel group (-1)."""
    if not isinstance(qcfg, dict):
        return None
    size = _whole(qcfg.get("group_size") or qcfg.get("q_group_size"))
    return size if size is not None and 1 <= size <= MAX_WIDTH else None


# Model types whose MLP is up-projection + down-projection without a gate.
NON_GATED_MLP_MODEL_TYPES = frozenset(
    {"phi", "gpt2", "gpt_neox", "gptj", "falcon", "gpt_bigcode", "starcoder2", "opt", "bloom", "mpt"}
)

# Layer kinds with a per-token KV cache, and kinds with a fixed-size recurrent state.
ATTENTION_KINDS = frozenset({"full", "sliding"})
STATE_KINDS = frozenset({"linear", "mamba"})


def _layer_kind(declared: object) -> str:
    """Map a config.json layer type ("full_attention", "linear_attention", "mamba", ...) to a kind."""
    text = str(declared).lower()
    if "sliding" in text:
        return "sliding"
    if "linear" in text:
        return "linear"
    if "mamba" in text:
        return "mamba"
    return "full"


# Nemotron-H's hybrid_override_pattern letters, one per layer: M Mamba2, * attention, - MLP only,
# E mixture of experts; vLLM stops with "Unsupported layer type" on any other letter
# (vllm@v0.32.0 vllm/model_executor/models/nemotron_h.py ALL_DECODER_LAYER_TYPES and get_layer).
HYBRID_PATTERN_KINDS = {"M": "mamba", "*": "full", "-": "none", "E": "none"}


def _hybrid_override_kinds(pattern: str) -> tuple[str, ...]:
    unknown = sorted(set(pattern) - set(HYBRID_PATTERN_KINDS))
    if unknown:
        first = next(i for i, ch in enumerate(pattern) if ch in unknown)
        raise SizingError(
            f"config.json: hybrid_override_pattern has layer type {excerpt(pattern[first])} at layer {first}; vLLM "
            f"knows only {', '.join(HYBRID_PATTERN_KINDS)} (Mamba2, attention, MLP, MoE) and stops with "
            '"Unsupported layer type" (vllm/model_executor/models/nemotron_h.py)'
        )
    return tuple(HYBRID_PATTERN_KINDS[ch] for ch in pattern)


@dataclass(frozen=True)
class ModelArch:
    """What sizing needs from a Hugging Face config.json."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    max_position_embeddings: int | None = None
    torch_dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    # MoE
    experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    dense_layers: int = 0  # leading dense layers of a MoE (DeepSeek first_k_dense_replace)
    # MLA (DeepSeek-V2/V3)
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int = 0
    # Cache kind of every layer (empty → all full attention): "full" or "sliding" attention, or a
    # state layer of a hybrid model: "linear" (gated DeltaNet, Qwen3-Next/3.5), "mamba" (Mamba2,
    # Nemotron-H), "none" (an MLP-only layer that caches nothing).
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    # Gated DeltaNet ("linear_attention") layers: config.json's linear_* fields
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    # Mamba2 layers: mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, conv_kernel
    mamba_num_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state_size: int = 0
    mamba_groups: int = 0
    mamba_conv_kernel: int = 0
    # dtype of the recurrent (SSM) state when config.json pins it (Qwen3.5's mamba_ssm_dtype float32)
    mamba_ssm_dtype: str | None = None
    # Multi-token-prediction layers shipped with the checkpoint (the MTP drafter's attention layers)
    mtp_layers: int = 0
    # The vision tower vLLM profiles (vision_config): its width, and per image item the patches it
    # encodes and the placeholder tokens the decoder sees (the encoder budget's unit). 0 = no tower
    # this planner can size (the encoder term is then left out).
    vision_hidden: int = 0
    vision_intermediate: int = 0
    vision_spatial_merge: int = 0  # Qwen-VL towers: merged token = merge^2 patches
    vision_patch_values: int = 0  # in_channels x temporal_patch_size x patch_size^2 per patch
    vision_patches_per_item: int = 0  # patches per image, every tile's (class tokens included)
    vision_tokens_per_item: int = 0  # decoder tokens per image of those towers
    # planner/vision_encoders.py: the tower's family ("qwen_vl", "pixtral", "llama4", "internvl",
    # "llava_next", "fixed"; "" = none sized), a gated MLP, Pixtral's dense cross-image mask, and why a
    # tower config.json describes is not sized (its geometry lives in preprocessor_config.json).
    vision_family: str = ""
    vision_gated: bool = False
    vision_dense_mask: bool = False
    vision_unmodelled: str = ""
    # Quantization of the checkpoint (quant_method, bits) when config.json declares one
    quant_method: str | None = None
    quant_bits: int | None = None
    quant_group_size: int | None = None  # weights per scale (AWQ/GPTQ group_size)
    architecture: str = ""
    # GPT-2/Phi-2 style MLP (up + down) instead of the gated SwiGLU (gate + up + down)
    gated_mlp: bool = True
    # Parameters outside the language model (vision tower of a multimodal checkpoint)
    extra_params: int = 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def attention_layers(self) -> int:
        """Layers with a per-token KV cache (state and MLP-only layers of hybrids excluded)."""
        if not self.layer_types:
            return self.layers
        return sum(1 for kind in self.layer_types if kind in ATTENTION_KINDS)

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a fixed-size recurrent state instead of a per-token KV cache."""
        return any(kind in STATE_KINDS for kind in self.layer_types)

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> ModelArch:
        """Read what sizing needs; every number checked (type and range), so a broken or hostile
        config.json is a SizingError naming the key, never a traceback, a hang or a wrong answer."""
        if not isinstance(cfg, dict):
            raise SizingError("config.json must be a JSON object")
        top = cfg
        # Multimodal wrappers (Gemma 3, Mistral 3, Llama 4, LLaVA) keep the language model in
        # text_config; sizing is about the language model's KV cache.
        if isinstance(cfg.get("text_config"), dict) and "num_hidden_layers" in cfg["text_config"]:
            cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k == "quantization_config"}}
        elif isinstance(cfg.get("llm_config"), dict) and "num_hidden_layers" in cfg["llm_config"]:
            # InternVL chat checkpoints name it llm_config (vllm model_executor/models/internvl.py reads
            # hf_config.llm_config for the language model).
            cfg = {**cfg["llm_config"], **{k: v for k, v in cfg.items() if k == "quantization_config"}}
        read = _Reader(cfg)
        layers = read.count(("num_hidden_layers", "n_layer", "num_layers"), MAX_LAYERS, required=True)
        hidden = read.count(("hidden_size", "n_embd", "d_model"), MAX_WIDTH, required=True)
        heads = read.count(("num_attention_heads", "n_head"), MAX_HEADS, required=True)
        kv_heads = read.count(("num_key_value_heads", "num_kv_heads"), MAX_HEADS) or heads
        head_dim = read.count(("head_dim",), MAX_WIDTH) or hidden // heads
        if head_dim < 1:
            raise SizingError(
                f"config.json: hidden_size {hidden} over {heads} attention heads leaves no head "
                "dimension; set head_dim or check num_attention_heads"
            )
        vocab = read.count(("vocab_size",), MAX_VOCAB) or _Reader(top).count(("vocab_size",), MAX_VOCAB) or 32000
        intermediate = read.count(("intermediate_size", "n_inner"), MAX_WIDTH) or 4 * hidden
        experts = read.count(("num_local_experts", "num_experts", "n_routed_experts"), MAX_EXPERTS) or 0
        topk = read.count(("num_experts_per_tok", "experts_per_token", "moe_topk"), MAX_EXPERTS) or 0
        if experts and topk > experts:
            # The router picks the top k of the experts (torch.topk over the expert dimension in
            # vllm/model_executor/layers/fused_moe), which fails for k beyond their number.
            raise SizingError(
                f"config.json: num_experts_per_tok is {topk}, more than the {experts} experts the router chooses "
                "from; a checkpoint routes each token to at most all of its experts"
            )
        moe_i = read.count(("moe_intermediate_size",), MAX_WIDTH) or (intermediate if experts else 0)
        shared = read.count(("shared_expert_intermediate_size",), MAX_WIDTH) or 0
        n_shared = read.count(("n_shared_experts",), MAX_EXPERTS)
        if n_shared:
            shared = n_shared * moe_i
        dense_layers = read.count(("first_k_dense_replace",), MAX_LAYERS) or 0
        mlp_only = cfg.get("mlp_only_layers")
        if experts and mlp_only:
            if not isinstance(mlp_only, list) or len(mlp_only) > layers:
                raise SizingError(
                    f"config.json: mlp_only_layers must list at most {layers} layer numbers, got {excerpt(mlp_only)}"
                )
            dense_layers = len(mlp_only)

        window = read.count(("sliding_window",), MAX_CONTEXT)
        model_type = read.text("model_type") or _Reader(top).text("model_type")
        layer_types: tuple[str, ...] = ()
        declared = cfg.get("layer_types")
        pattern_text = cfg.get("hybrid_override_pattern")
        if isinstance(declared, list):
            if len(declared) > MAX_LAYERS:
                raise SizingError(f"config.json: layer_types lists {len(declared):,} layers; at most {MAX_LAYERS:,}")
            layer_types = tuple(_layer_kind(str(t)[:64]) for t in declared)
        elif isinstance(pattern_text, str):
            if len(pattern_text) > MAX_LAYERS:
                raise SizingError(
                    f"config.json: hybrid_override_pattern has {len(pattern_text):,} layers; at most {MAX_LAYERS:,}"
                )
            layer_types = _hybrid_override_kinds(pattern_text)
        elif (interval := read.count(("full_attention_interval",), MAX_LAYERS)) and read.count(
            ("linear_num_value_heads",), MAX_HEADS
        ):
            # Qwen3-Next without layer_types: every full_attention_interval-th layer is attention.
            layer_types = tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(layers))
        elif window and model_type == "gemma2":
            # Gemma 2 alternates local (sliding) and global layers, starting with a local one.
            layer_types = tuple("sliding" if i % 2 == 0 else "full" for i in range(layers))
        elif window and (cfg.get("sliding_window_pattern") or model_type.startswith("gemma3")):
            pattern = read.count(("sliding_window_pattern",), MAX_LAYERS) or 6
            layer_types = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers))
        elif window and cfg.get("use_sliding_window", True) and model_type in ("mistral", "mixtral"):
            layer_types = tuple("sliding" for _ in range(layers))
        if layer_types and len(layer_types) != layers:
            raise SizingError(f"config.json layer_types has {len(layer_types)} entries for {layers} layers")
        if layer_types and not any(kind in ATTENTION_KINDS | STATE_KINDS for kind in layer_types):
            # vLLM sizes its cache per layer that keeps one (attention KV or a recurrent state); a
            # model with neither has no cache to size and is not a generative model vLLM serves.
            raise SizingError(
                "config.json: no layer keeps an attention KV cache or a recurrent state (every layer of its "
                "layer pattern is MLP or MoE only); check layer_types / hybrid_override_pattern"
            )
        if layer_types and not any(kind in ATTENTION_KINDS for kind in layer_types):
            # A state-only model (every layer Mamba or linear attention) keeps one fixed-size state per
            # sequence and no per-token KV cache, so "KV-cache tokens" does not measure it; the sizing
            # engine models hybrids, whose attention layers set the token capacity.
            raise SizingError(
                "config.json: no layer uses attention (every layer is Mamba or linear attention), so the model "
                "has no per-token KV cache for this planner to size: it sizes attention models and hybrids"
            )

        extra = 0
        vision = top.get("vision_config")
        vision_fields: dict[str, Any] = {}
        if isinstance(vision, dict) and vision.get("hidden_size"):
            seen = _Reader(vision, "vision_config.")
            vh = seen.count(("hidden_size",), MAX_WIDTH, required=True)
            vi = seen.count(("intermediate_size",), MAX_WIDTH) or 4 * vh
            # Qwen-VL vision towers name their layer count `depth`.
            extra = (seen.count(("num_hidden_layers", "depth"), MAX_LAYERS) or 24) * (4 * vh * vh + 2 * vh * vi)
            # The tower's family, geometry and dummy image (planner/vision_encoders.py).
            from planner.vision_encoders import TowerError, read_tower

            try:
                vision_fields = read_tower(top, vision, vh, vi)
            except TowerError as exc:
                raise SizingError(str(exc)) from None
        elif isinstance(top.get("vision_config"), dict) or "embd_layer" in top:
            from planner.vision_encoders import UNMODELLED_TOWERS

            reason = UNMODELLED_TOWERS.get(str(top.get("model_type") or "")[:64])
            vision_fields = {"vision_unmodelled": reason} if reason else {}

        qcfg = cfg.get("quantization_config") or top.get("quantization_config") or {}
        quant_method, quant_bits = _quantization(qcfg)

        # Gemma configs leave tie_word_embeddings at its default, which is True for Gemma.
        tie_default = model_type.startswith("gemma")
        dtype = read.text("torch_dtype") or read.text("dtype") or _Reader(top).text("torch_dtype") or "bfloat16"
        if not re.fullmatch(r"[A-Za-z0-9_.]{1,40}", dtype):
            raise SizingError(f"config.json: torch_dtype {excerpt(dtype)} is not a dtype name such as bfloat16")
        ssm_dtype = read.text("mamba_ssm_dtype") or None
        if ssm_dtype is not None and not re.fullmatch(r"[A-Za-z0-9_.]{1,40}", ssm_dtype):
            raise SizingError(f"config.json: mamba_ssm_dtype {excerpt(ssm_dtype)} is not a dtype name such as float32")
        archs = top.get("architectures") or cfg.get("architectures") or [""]
        architecture = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
        max_positions = read.count(("max_position_embeddings",), MAX_CONTEXT)
        return cls(
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            vocab=vocab,
            intermediate=intermediate,
            max_position_embeddings=max_positions,
            torch_dtype=dtype.replace("torch.", ""),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", top.get("tie_word_embeddings", tie_default))),
            experts=experts,
            experts_per_token=topk,
            moe_intermediate=moe_i,
            shared_expert_intermediate=shared,
            dense_layers=dense_layers,
            kv_lora_rank=read.count(("kv_lora_rank",), MAX_WIDTH) or 0,
            qk_rope_head_dim=read.count(("qk_rope_head_dim",), MAX_WIDTH) or 0,
            qk_nope_head_dim=read.count(("qk_nope_head_dim",), MAX_WIDTH) or 0,
            v_head_dim=read.count(("v_head_dim",), MAX_WIDTH) or 0,
            q_lora_rank=read.count(("q_lora_rank",), MAX_WIDTH) or 0,
            layer_types=layer_types,
            sliding_window=window or None,
            linear_num_key_heads=read.count(("linear_num_key_heads",), MAX_HEADS) or 0,
            linear_num_value_heads=read.count(("linear_num_value_heads",), MAX_HEADS) or 0,
            linear_key_head_dim=read.count(("linear_key_head_dim",), MAX_WIDTH) or 0,
            linear_value_head_dim=read.count(("linear_value_head_dim",), MAX_WIDTH) or 0,
            linear_conv_kernel_dim=read.count(("linear_conv_kernel_dim",), MAX_WIDTH) or 0,
            mamba_num_heads=read.count(("mamba_num_heads",), MAX_HEADS) or 0,
            mamba_head_dim=read.count(("mamba_head_dim",), MAX_WIDTH) or 0,
            mamba_state_size=read.count(("ssm_state_size",), MAX_WIDTH) or 0,
            mamba_groups=read.count(("n_groups",), MAX_HEADS) or 0,
            mamba_conv_kernel=read.count(("conv_kernel",), MAX_WIDTH) or 0,
            mamba_ssm_dtype=ssm_dtype,
            mtp_layers=read.count(("mtp_num_hidden_layers", "num_nextn_predict_layers"), MAX_LAYERS) or 0,
            **vision_fields,
            quant_method=quant_method,
            quant_bits=quant_bits,
            quant_group_size=_quant_group_size(qcfg),
            architecture=architecture[:200],
            gated_mlp=model_type not in NON_GATED_MLP_MODEL_TYPES,
            extra_params=extra,
        )

    # -- parameter count (used when the checkpoint size is unknown) ---------------------------

    def attention_params(self) -> int:
        h = self.hidden
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                (h * self.q_lora_rank + self.q_lora_rank * self.heads * qk_head)
                if self.q_lora_rank
                else h * self.heads * qk_head
            )
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * self.heads * (
                self.qk_nope_head_dim + self.v_head_dim
            )
            return q + kv + self.heads * self.v_head_dim * h
        return h * self.heads * self.head_dim * 2 + h * self.kv_heads * self.head_dim * 2

    def mlp_params(self, layer: int) -> tuple[int, int]:
        """(dense-or-shared params, routed-expert params) of one layer's MLP."""
        h = self.hidden
        if not self.is_moe or layer < self.dense_layers:
            return (3 if self.gated_mlp else 2) * h * self.intermediate, 0
        experts = self.experts * 3 * h * self.moe_intermediate
        return 3 * h * self.shared_expert_intermediate + h * self.experts, experts

    def param_count(self) -> int:
        embed = self.vocab * self.hidden * (1 if self.tie_word_embeddings else 2)
        body = sum(self.attention_params() + sum(self.mlp_params(i)) for i in range(self.layers))
        return embed + body + self.extra_params
