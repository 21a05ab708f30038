"""What the sizing engine reads from a model's Hugging Face config.json, as one `ModelArch`.

Layers, heads and KV heads, head size, vocabulary, MLP shape, and the variants that change the
KV-cache layout or the weight count: mixture-of-experts, MLA's latent cache, sliding-window and
hybrid layer types, quantization configs. Pure Python; `planner.sizing` does the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SizingError(ValueError):
    """Bad sizing input (unreadable config, impossible request); the message names the fix."""


# Model types whose MLP is up-projection + down-projection without a gate.
NON_GATED_MLP_MODEL_TYPES = frozenset({"phi", "gpt2", "gpt_neox", "gptj", "falcon", "gpt_bigcode",
                                       "starcoder2", "opt", "bloom", "mpt"})

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


def _hybrid_override_kinds(pattern: str) -> tuple[str, ...]:
    """Nemotron-H's hybrid_override_pattern: M = Mamba2, * = attention, - = MLP only."""
    return tuple({"M": "mamba", "*": "full"}.get(ch, "none") for ch in pattern)


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
    # Qwen-VL-style vision tower (vision_config with spatial_merge_size): the encoder vLLM profiles
    vision_hidden: int = 0
    vision_intermediate: int = 0
    vision_spatial_merge: int = 0
    vision_patch_values: int = 0  # in_channels x temporal_patch_size x patch_size^2 per patch
    # Quantization of the checkpoint (quant_method, bits) when config.json declares one
    quant_method: str | None = None
    quant_bits: int | None = None
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
    def from_hf_config(cls, cfg: dict[str, Any]) -> "ModelArch":
        if not isinstance(cfg, dict):
            raise SizingError("config.json must be a JSON object")
        top = cfg
        # Multimodal wrappers (Gemma 3, Mistral 3, Llama 4, LLaVA) keep the language model in
        # text_config; sizing is about the language model's KV cache.
        if isinstance(cfg.get("text_config"), dict) and "num_hidden_layers" in cfg["text_config"]:
            cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k in ("quantization_config",)}}
        get = cfg.get
        try:
            layers = int(get("num_hidden_layers") or get("n_layer") or get("num_layers"))
            hidden = int(get("hidden_size") or get("n_embd") or get("d_model"))
            heads = int(get("num_attention_heads") or get("n_head"))
        except (TypeError, ValueError):
            raise SizingError(
                "config.json lacks num_hidden_layers / hidden_size / num_attention_heads; "
                "pass the language model's config.json"
            ) from None
        kv_heads = int(get("num_key_value_heads") or get("num_kv_heads") or heads)
        head_dim = int(get("head_dim") or hidden // heads)
        vocab = int(get("vocab_size") or top.get("vocab_size") or 32000)
        intermediate = int(get("intermediate_size") or get("n_inner") or 4 * hidden)
        experts = int(get("num_local_experts") or get("num_experts") or get("n_routed_experts") or 0)
        topk = int(get("num_experts_per_tok") or get("experts_per_token") or get("moe_topk") or 0)
        moe_i = int(get("moe_intermediate_size") or (intermediate if experts else 0))
        shared = int(get("shared_expert_intermediate_size") or 0)
        if get("n_shared_experts"):
            shared = int(get("n_shared_experts")) * moe_i
        dense_layers = int(get("first_k_dense_replace") or 0)
        if experts and get("mlp_only_layers"):
            dense_layers = len(get("mlp_only_layers"))

        window = get("sliding_window")
        layer_types: tuple[str, ...] = ()
        if isinstance(get("layer_types"), list):
            layer_types = tuple(_layer_kind(t) for t in get("layer_types"))
        elif isinstance(get("hybrid_override_pattern"), str):
            layer_types = _hybrid_override_kinds(get("hybrid_override_pattern"))
        elif get("full_attention_interval") and get("linear_num_value_heads"):
            # Qwen3-Next without layer_types: every full_attention_interval-th layer is attention.
            interval = int(get("full_attention_interval"))
            layer_types = tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(layers))
        elif window and get("model_type") == "gemma2":
            # Gemma 2 alternates local (sliding) and global layers, starting with a local one.
            layer_types = tuple("sliding" if i % 2 == 0 else "full" for i in range(layers))
        elif window and (get("sliding_window_pattern") or get("model_type", "").startswith("gemma3")):
            pattern = int(get("sliding_window_pattern") or 6)
            layer_types = tuple(
                "full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)
            )
        elif window and get("use_sliding_window", True) and get("model_type") in ("mistral", "mixtral"):
            layer_types = tuple("sliding" for _ in range(layers))
        if layer_types and len(layer_types) != layers:
            raise SizingError(f"config.json layer_types has {len(layer_types)} entries for {layers} layers")

        extra = 0
        vision = top.get("vision_config")
        vision_fields: dict[str, int] = {}
        if isinstance(vision, dict) and vision.get("spatial_merge_size") and vision.get("hidden_size"):
            patch = int(vision.get("patch_size") or 14)
            vision_fields = dict(
                vision_hidden=int(vision["hidden_size"]),
                vision_intermediate=int(vision.get("intermediate_size") or 4 * int(vision["hidden_size"])),
                vision_spatial_merge=int(vision["spatial_merge_size"]),
                vision_patch_values=int(vision.get("in_channels") or 3) * int(vision.get("temporal_patch_size") or 1) * patch * patch,
            )
        if isinstance(vision, dict) and vision.get("hidden_size"):
            vh = int(vision["hidden_size"])
            vi = int(vision.get("intermediate_size") or 4 * vh)
            # Qwen-VL vision towers name their layer count `depth`.
            extra = int(vision.get("num_hidden_layers") or vision.get("depth") or 24) * (4 * vh * vh + 2 * vh * vi)

        qcfg = get("quantization_config") or top.get("quantization_config") or {}
        quant_method, quant_bits = None, None
        if isinstance(qcfg, dict) and qcfg:
            quant_method = str(qcfg.get("quant_method") or qcfg.get("format") or "unknown").lower()
            bits = qcfg.get("bits") or qcfg.get("w_bit")
            if not bits and isinstance(qcfg.get("config_groups"), dict):
                for group in qcfg["config_groups"].values():
                    weights = (group or {}).get("weights") or {}
                    bits = weights.get("num_bits") or bits
            if not bits and quant_method in ("fp8", "fbgemm_fp8"):
                bits = 8
            if not bits and quant_method == "mxfp4":
                bits = 4
            quant_bits = int(bits) if bits else None

        model_type = str(get("model_type") or top.get("model_type") or "")
        # Gemma configs leave tie_word_embeddings at its default, which is True for Gemma.
        tie_default = model_type.startswith("gemma")
        dtype = str(get("torch_dtype") or get("dtype") or top.get("torch_dtype") or "bfloat16")
        archs = top.get("architectures") or cfg.get("architectures") or [""]
        return cls(
            layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
            vocab=vocab, intermediate=intermediate,
            max_position_embeddings=get("max_position_embeddings"),
            torch_dtype=dtype.replace("torch.", ""),
            tie_word_embeddings=bool(get("tie_word_embeddings", top.get("tie_word_embeddings", tie_default))),
            experts=experts, experts_per_token=topk, moe_intermediate=moe_i,
            shared_expert_intermediate=shared, dense_layers=dense_layers,
            kv_lora_rank=int(get("kv_lora_rank") or 0),
            qk_rope_head_dim=int(get("qk_rope_head_dim") or 0),
            qk_nope_head_dim=int(get("qk_nope_head_dim") or 0),
            v_head_dim=int(get("v_head_dim") or 0),
            q_lora_rank=int(get("q_lora_rank") or 0),
            layer_types=layer_types, sliding_window=int(window) if window else None,
            linear_num_key_heads=int(get("linear_num_key_heads") or 0),
            linear_num_value_heads=int(get("linear_num_value_heads") or 0),
            linear_key_head_dim=int(get("linear_key_head_dim") or 0),
            linear_value_head_dim=int(get("linear_value_head_dim") or 0),
            linear_conv_kernel_dim=int(get("linear_conv_kernel_dim") or 0),
            mamba_num_heads=int(get("mamba_num_heads") or 0),
            mamba_head_dim=int(get("mamba_head_dim") or 0),
            mamba_state_size=int(get("ssm_state_size") or 0),
            mamba_groups=int(get("n_groups") or 0),
            mamba_conv_kernel=int(get("conv_kernel") or 0),
            mamba_ssm_dtype=str(get("mamba_ssm_dtype")) if get("mamba_ssm_dtype") else None,
            mtp_layers=int(get("mtp_num_hidden_layers") or get("num_nextn_predict_layers") or 0),
            **vision_fields,
            quant_method=quant_method, quant_bits=quant_bits, architecture=str(archs[0]),
            gated_mlp=model_type not in NON_GATED_MLP_MODEL_TYPES, extra_params=extra,
        )

    # -- parameter count (used when the checkpoint size is unknown) ---------------------------

    def attention_params(self) -> int:
        h = self.hidden
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * self.heads * qk_head) if self.q_lora_rank \
                else h * self.heads * qk_head
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * self.heads * (
                self.qk_nope_head_dim + self.v_head_dim)
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
