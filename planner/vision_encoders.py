"""The vision encoder's share of vLLM's profile run: which tower family config.json describes, the dummy
image batch the profiler sends through it, and the torch memory that forward pass peaks at.

vLLM V1 profiles a multimodal model by running its encoder on a batch of the largest dummy images before
the decoder's dummy forward (vllm v0.32.0 v1/worker/gpu_model_runner.py:profile_run, `_get_mm_dummy_batch`,
then `embed_multimodal` on the whole batch); the torch peak the KV budget subtracts is the larger of the
two, and the encoder's outputs stay cached while the decoder runs. The batch holds
max(1, min(budget // tokens_per_item, max_num_seqs x per-prompt images)) images, the budget being
max(max_num_batched_tokens, tokens_per_item) (multimodal/encoder_budget.py:MultiModalBudget._get_max_items),
so the encoder's share grows with max_num_batched_tokens: 16384 by default on a GPU of 160 GiB or more
(B200, from 0.28) packs twice the images of 8192.

Per family, what the largest dummy image is (the processor's get_image_size_with_most_features) and
how it is encoded, each from the vLLM source named in `FAMILY_SOURCES`:

* "qwen_vl" (Qwen2-VL, Qwen2.5-VL, Qwen3-VL and towers with vision_config.spatial_merge_size):
  dynamic resolution up to VISION_ENCODER_TOKENS_PER_IMAGE merged tokens of merge^2 patches; attention
  per image (cu_seqlens), no cross-image matrix.
* "pixtral" (Mistral-Small-3.1/3.2, Pixtral in the HF format: vision_config.model_type "pixtral"):
  the image is image_size^2, (image_size / patch_size)^2 patches; the decoder sees (cols + 1) x rows
  tokens of the grid merged by the top-level spatial_merge_size (one [IMG_BREAK] per row: Mistral's own
  format, which vLLM 0.19 loads for the official checkpoints; a later pixtral.py's HF-format
  PixtralHFEncoderInfo counts cols x rows, 2% fewer, the same batch at 8192 and 16384 batched tokens). The patches
  of every image of the batch are one sequence: without xFormers, PixtralHFVisionModel builds
  transformers' dense block-diagonal mask over that whole sequence (models/pixtral/modeling_pixtral.py:
  generate_block_attention_mask, `torch.full((seq_len, seq_len), ..., dtype=tensor.dtype)`) and passes it
  to torch SDPA; vLLM never takes xFormers on
  compute capability 10.x ("Xformers FA is not compatible with B200") and does not install it by
  default, so the mask is sized on every GPU (the larger, safe side). PyTorch's memory-efficient
  kernel, the fused SDPA path that takes an additive mask, pads a mask whose row stride is not a multiple
  of 8 into a copy (aten/src/ATen/native/transformers/attention.cpp:preprocess_mask,
  `mem_eff_alignment = 8`, pad_bias). The MLP is gated (gate_up_proj, 2 x intermediate, then act_and_mul).
* "llama4" (Llama 4 Scout/Maverick: vision_config.pixel_shuffle_ratio): the largest image is
  max_patches tiles tall and one wide (16:1), so 1 + max_patches tiles of (image/patch)^2 + 1 patches
  (a class token per tile); tokens per tile (image/patch)^2 / round(1 / ratio^2), plus one
  tile-row separator per row and the image start, image and end tokens. max_patches is the image
  processor's (preprocessor_config.json, not read): transformers' default (models/llama4/
  image_processing_llama4_fast.py: Llama4ImageProcessorFast.max_patches = 16).
* "internvl" (InternVL chat configs: top-level max_dynamic_patch): max_dynamic_patch tiles plus a
  thumbnail tile when use_thumbnail, each (image/patch)^2 + 1 patches, (image/patch)^2 x
  downsample_ratio^2 tokens. Attention per tile.
* "llava_next" (LLaVA-NeXT: top-level image_grid_pinpoints): the pinpoint with the most features;
  its grid of tiles plus the base tile, each (image/patch)^2 + 1 patches (CLIP's class token); tokens
  the base tile's (image/patch)^2 plus the unpadded grid's features and one newline per feature row.
* "fixed" (Gemma 3's SigLIP, LLaVA-1.5's CLIP: vision_config.image_size, no tiling): one
  image_size^2 tile.

Towers whose largest image is set by preprocessor_config.json alone (Kimi-VL's MoonViT in_token_limit,
LLaVA-OneVision's anyres_max pooling, Gemma 3n's MobileNet tower, Phi-4-multimodal's dynamic HD crops)
are not sized: the encoder term is 0 and `unmodelled` says why, so `--explain` names the gap rather
than printing a guess. Pure Python; planner/sizing.py adds the term to the activation peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The largest Qwen-VL image in merged tokens: "Encoder cache will be initialized with a budget of 16384
# tokens, and profiled with 1 image items of the maximum feature size" (guardkit GB10 logs, vLLM
# 0.18.1, max_num_batched_tokens 2048; 99sono/DockerBuildFiles, 0.22.1, 8192).
VISION_ENCODER_TOKENS_PER_IMAGE = 16384

# Images a prompt may carry when --limit-mm-per-prompt does not say: "Unspecified modality is set to
# 999 by default" (vllm v0.32.0 config/multimodal.py:MultiModalConfig.get_limit_per_prompt).
DEFAULT_MM_LIMIT_PER_PROMPT = 999

# transformers' PixtralVisionConfig defaults, which a config.json without the keys gets (vLLM reads the
# config through transformers): image_size 1024, patch_size 16.
PIXTRAL_DEFAULT_IMAGE_SIZE = 1024
PIXTRAL_DEFAULT_PATCH_SIZE = 16
# Llama 4's tiles per image come from the image processor (vllm mllama4.py:Mllama4ProcessingInfo.
# get_max_num_tiles returns `image_processor.max_patches`), which config.json does not carry:
# transformers' Llama4ImageProcessorFast default. Unresolved for a checkpoint whose
# preprocessor_config.json says otherwise: `hf download <repo> preprocessor_config.json` and read max_patches.
LLAMA4_DEFAULT_MAX_PATCHES = 16
# InternVL's tiling defaults when config.json leaves them out (vllm internvl.py reads max_dynamic_patch,
# use_thumbnail, downsample_ratio and force_image_size from the HF config).
INTERNVL_DEFAULT_MAX_DYNAMIC_PATCH = 12
INTERNVL_DEFAULT_DOWNSAMPLE_RATIO = 0.5
# PyTorch's memory-efficient SDPA pads an additive mask to a row stride that is a multiple of this
# (aten/src/ATen/native/transformers/attention.cpp:preprocess_mask, `constexpr int mem_eff_alignment = 8`).
# Another PyTorch copy read pads the last dimension to a multiple of 16 instead; that one would copy the
# 24,200-patch mask of the 0.19 H100 Mistral-Small runs too and put their encoder (2.9 GiB) above the
# 2.03 GiB torch peak those logs report, so 8 is the one taken. Unresolved per torch release: settle with
# `grep -n mem_eff_alignment aten/src/ATen/native/transformers/*.cpp` at the torch tag vLLM pins.
SDPA_MASK_ALIGNMENT = 8

# Where each family's geometry and forward pass are read (vLLM repository at the commit of the stored
# copy read; `git show <commit>:<path>` in a vLLM clone shows the same text).
FAMILY_SOURCES = {
    "qwen_vl": "vllm v0.32.0 multimodal/encoder_budget.py:MultiModalBudget._get_max_items; the 16384-token "
    "image from vLLM's own 'Encoder cache will be initialized with a budget of 16384 tokens' log line; "
    "models/qwen2_5_vl.py:Qwen2_5_VisionMLP (gate_up_proj, MergedColumnParallelLinear, disable_tp=use_data_parallel)",
    "pixtral": "vllm@0004c540 model_executor/models/pixtral.py:PixtralHFEncoderInfo.get_num_image_tokens "
    "((ncols + 1) * nrows), PixtralHFVisionModel.forward (generate_block_attention_mask over all patches without "
    "xFormers); a later pixtral.py's import fallback: 'vLLM does not install xformers by default', USE_XFORMERS_OPS "
    "false on device capability 100, and Attention.forward's `scaled_dot_product_attention(q, k, v, attn_mask=mask)` "
    "without it (commit not identified: `git log -S 'not compatible with B200' -- "
    "vllm/model_executor/models/pixtral.py`); pytorch aten/src/ATen/native/transformers/attention.cpp:preprocess_mask",
    "llama4": "vllm@00dd5493 model_executor/models/mllama4.py:Mllama4ProcessingInfo.get_image_size_with_most_features "
    "(max_num_tiles x image_size by image_size), get_patch_per_chunk, Llama4VisionModel.forward (class token)",
    "internvl": "vllm@004202bc model_executor/models/internvl.py:dummy_data_for_internvl (max_dynamic_patch x "
    "image_size wide), get_max_internvl_image_tokens (+ thumbnail), InternVLChatModel.__init__ (num_image_token = "
    "(image // patch)^2 x downsample_ratio^2); unresolved for the releases after it: the placeholder count, settled "
    "by `grep -n get_num_image_tokens vllm/model_executor/models/internvl.py` at the tag",
    "llava_next": "vllm@004202bc model_executor/models/llava_next.py:get_llava_next_image_feature_size (unpadded + "
    "newline + base features); the pinpoint with the most features: get_image_size_with_most_features in later "
    "releases (unresolved: settle with "
    "`git show <tag>:vllm/model_executor/models/llava_next.py | grep -n most_features`)",
    "fixed": "vllm v0.32.0 models/gemma3_mm.py:get_num_image_tokens; models/llava.py (one image_size^2 tile)",
}


class TowerError(ValueError):
    """A vision_config value out of range (model_arch turns it into a SizingError)."""


@dataclass(frozen=True)
class EncoderProfile:
    """The dummy image batch vLLM's profile run sends through the vision tower."""

    tokens_per_item: int  # decoder tokens per image (max_tokens_per_mm_item)
    patches_per_item: int  # patches the tower encodes per image (every tile's)
    items: int  # images in the dummy batch (max_mm_items_per_batch)


@dataclass(frozen=True)
class EncoderParts:
    """The encoder's torch peak on the dummy batch, by term (bytes)."""

    layers: float  # residual stream, its normed copy and the MLP intermediates of every patch
    pixels: float  # the pixel values of the batch, in the model dtype
    mask: float  # Pixtral: the dense block-diagonal attention mask over all patches of the batch
    mask_padded_copy: float  # Pixtral: PyTorch's aligned copy of that mask
    embeddings: float  # the encoder outputs, cached while the decoder's dummy forward runs

    @property
    def total(self) -> float:
        return self.layers + self.pixels + self.mask + self.mask_padded_copy + self.embeddings


def _whole(value: Any, key: str, upper: int) -> int | None:
    if value is None or value is False or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise TowerError(f"config.json: {key} must be a whole number from 1 to {upper:,}, got {str(value)[:40]}")
    whole = int(value)
    if not 1 <= whole <= upper:
        raise TowerError(f"config.json: {key} must be a whole number from 1 to {upper:,}, got {whole}")
    return whole


def _ratio(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise TowerError(f"config.json: {key} must be a number in (0, 1], got {str(value)[:40]}")
    return float(value)


# Model types with a vision tower this planner cannot size from config.json, and why.
UNMODELLED_TOWERS = {
    "kimi_vl": "Kimi-VL's MoonViT takes its largest image from preprocessor_config.json (in_token_limit)",
    "llava_onevision": "LLaVA-OneVision pools its anyres tiles by a limit the processor holds (anyres_max)",
    "gemma3n": "Gemma 3n's MobileNet tower (timm) has no transformer geometry in config.json",
    "phi4mm": "Phi-4-multimodal's dynamic HD crops are set by the processor (dynamic_hd)",
    "phi4_multimodal": "Phi-4-multimodal's dynamic HD crops are set by the processor (dynamic_hd)",
}
MAX_WIDTH = 2**20
MAX_TILES = 4096


def read_tower(top: dict[str, Any], vision: dict[str, Any], hidden: int, intermediate: int) -> dict[str, Any]:
    """The ModelArch vision fields for the tower `vision` (config.json's vision_config) of `top`."""
    vt = str(vision.get("model_type") or "")[:64]
    mt = str(top.get("model_type") or "")[:64]
    base = {"vision_hidden": hidden, "vision_intermediate": intermediate}
    channels = _whole(vision.get("num_channels") or vision.get("in_channels"), "vision_config.num_channels", 64) or 3
    merge = _whole(vision.get("spatial_merge_size"), "vision_config.spatial_merge_size", MAX_WIDTH)
    if merge and vt != "pixtral":
        qwen_patch = _whole(vision.get("patch_size"), "vision_config.patch_size", MAX_WIDTH) or 14
        temporal = _whole(vision.get("temporal_patch_size"), "vision_config.temporal_patch_size", 64) or 1
        return {
            **base,
            "vision_family": "qwen_vl",
            # Qwen2.5-VL's vision MLP is gated (gate_proj and up_proj); Qwen2-VL's and Qwen3-VL's are fc1/fc2.
            "vision_gated": mt == "qwen2_5_vl" or vt == "qwen2_5_vl",
            "vision_spatial_merge": merge,
            "vision_patch_values": channels * temporal * qwen_patch * qwen_patch,
        }
    unmodelled = UNMODELLED_TOWERS.get(mt) or UNMODELLED_TOWERS.get(vt)
    if unmodelled:
        return {"vision_unmodelled": unmodelled}
    image = _whole(vision.get("image_size"), "vision_config.image_size", MAX_WIDTH)
    patch = _whole(vision.get("patch_size"), "vision_config.patch_size", MAX_WIDTH)
    if vt == "pixtral":
        image = image or PIXTRAL_DEFAULT_IMAGE_SIZE
        patch = patch or PIXTRAL_DEFAULT_PATCH_SIZE
        top_merge = _whole(top.get("spatial_merge_size"), "spatial_merge_size", MAX_WIDTH) or 1
        grid = image // patch
        cols = max(1, grid // top_merge)
        return {
            **base,
            "vision_family": "pixtral",
            "vision_gated": True,
            "vision_dense_mask": True,
            "vision_patch_values": channels * patch * patch,
            "vision_patches_per_item": grid * grid,
            "vision_tokens_per_item": (cols + 1) * cols,
        }
    if image is None or patch is None:
        return {"vision_unmodelled": f"vision_config ({vt or mt or 'no model_type'}) states no image_size/patch_size"}
    grid = image // patch
    if grid < 1:
        raise TowerError(f"config.json: vision_config.image_size {image} is smaller than its patch_size {patch}")
    per_tile = grid * grid
    if "pixel_shuffle_ratio" in vision:
        ratio = _ratio(vision.get("pixel_shuffle_ratio"), "vision_config.pixel_shuffle_ratio", 0.5)
        tiles = LLAMA4_DEFAULT_MAX_PATCHES
        per_chunk = per_tile // round(1.0 / ratio**2)
        # 16 tiles in one column: each row's tokens and a tile_y_separator, then <|image|> and the global
        # tile's tokens, between <|image_start|> and <|image_end|> (transformers Llama4Processor._prompt_split_image).
        return {
            **base,
            "vision_family": "llama4",
            "vision_patch_values": channels * patch * patch,
            "vision_patches_per_item": (tiles + 1) * (per_tile + 1),
            "vision_tokens_per_item": tiles * (per_chunk + 1) + per_chunk + 3,
        }
    if "max_dynamic_patch" in top or mt == "internvl":
        dynamic = _whole(top.get("max_dynamic_patch"), "max_dynamic_patch", MAX_TILES)
        dynamic = dynamic or INTERNVL_DEFAULT_MAX_DYNAMIC_PATCH
        tiles_per_image = dynamic + (1 if top.get("use_thumbnail", True) and dynamic > 1 else 0)
        forced = _whole(top.get("force_image_size"), "force_image_size", MAX_WIDTH)
        if forced:
            grid = forced // patch
            per_tile = grid * grid
        ratio = _ratio(top.get("downsample_ratio"), "downsample_ratio", INTERNVL_DEFAULT_DOWNSAMPLE_RATIO)
        return {
            **base,
            "vision_family": "internvl",
            "vision_patch_values": channels * patch * patch,
            "vision_patches_per_item": tiles_per_image * (per_tile + 1),
            "vision_tokens_per_item": max(1, tiles_per_image * int(per_tile * ratio * ratio)),
        }
    pinpoints = top.get("image_grid_pinpoints")
    if pinpoints is not None:
        best = _best_pinpoint(pinpoints, image, patch)
        return {**base, "vision_family": "llava_next", "vision_patch_values": channels * patch * patch, **best}
    if any(key in top or key in vision for key in ("max_dynamic_patch", "pixel_shuffle_ratio")):
        return {"vision_unmodelled": "the tower tiles its images in a way this planner does not read"}
    tokens = _whole(top.get("mm_tokens_per_image"), "mm_tokens_per_image", 2**31 - 1)
    top_merge = _whole(top.get("spatial_merge_size"), "spatial_merge_size", MAX_WIDTH) or 1
    return {
        **base,
        "vision_family": "fixed",
        "vision_patch_values": channels * patch * patch,
        "vision_patches_per_item": per_tile,
        "vision_tokens_per_item": tokens or max(1, per_tile // top_merge**2),
    }


def _best_pinpoint(pinpoints: Any, image: int, patch: int) -> dict[str, int]:
    """LLaVA-NeXT's largest dummy image: the pinpoint (height, width) with the most decoder tokens."""
    if not isinstance(pinpoints, list) or not pinpoints or len(pinpoints) > MAX_TILES:
        raise TowerError("config.json: image_grid_pinpoints must be a non-empty list of [height, width] pairs")
    grid = image // patch
    best: dict[str, int] = {}
    for pair in pinpoints:
        if not isinstance(pair, list) or len(pair) != 2:
            raise TowerError("config.json: image_grid_pinpoints must be a non-empty list of [height, width] pairs")
        height = _whole(pair[0], "image_grid_pinpoints", MAX_WIDTH) or image
        width = _whole(pair[1], "image_grid_pinpoints", MAX_WIDTH) or image
        rows, cols = max(1, height // image), max(1, width // image)
        feature_rows, feature_cols = rows * grid, cols * grid
        tokens = grid * grid + feature_rows * feature_cols + feature_rows
        if tokens > best.get("vision_tokens_per_item", 0):
            best = {
                "vision_tokens_per_item": tokens,
                "vision_patches_per_item": (rows * cols + 1) * (grid * grid + 1),
            }
    return best


def profile(
    *,
    family: str,
    tokens_per_item: int,
    patches_per_item: int,
    spatial_merge: int,
    mnbt: int,
    seqs: int,
    max_len: int,
    images_per_prompt: int | None,
) -> EncoderProfile | None:
    """The dummy batch (vllm v0.32.0 multimodal/encoder_budget.py:MultiModalBudget._get_max_items):
    items = max(1, min(budget // tokens_per_item, max_num_seqs x max(1, min(limit, max_model_len //
    tokens_per_item)))), budget = max(max_num_batched_tokens, tokens_per_item) (v1/core/encoder_cache_manager.py:
    compute_mm_encoder_budget, max_num_encoder_input_tokens defaulting to max_num_batched_tokens); the batch has
    been budget // tokens_per_item images since V1 first profiled image models (vllm-project/vllm#11210,
    `max_num_mm_items`). A limit of 0 images per prompt (--limit-mm-per-prompt '{"image": 0}') leaves the
    image modality out of profiling; so does --skip-mm-profiling (sizing.encoder_profile; the release that
    added the flag is not checked here: `git log -S skip_mm_profiling -- vllm/config` in a vLLM clone)."""
    if not family or images_per_prompt == 0:
        return None
    if family == "qwen_vl":
        tokens_per_item = VISION_ENCODER_TOKENS_PER_IMAGE
        patches_per_item = tokens_per_item * spatial_merge**2
    if not tokens_per_item or not patches_per_item:
        return None
    limit = DEFAULT_MM_LIMIT_PER_PROMPT if images_per_prompt is None else images_per_prompt
    budget = max(mnbt, tokens_per_item)
    per_prompt = max(1, min(limit, max_len // tokens_per_item))
    items = max(1, min(budget // tokens_per_item, seqs * per_prompt))
    return EncoderProfile(tokens_per_item, patches_per_item, items)


def peak_parts(
    *,
    prof: EncoderProfile,
    hidden: int,
    intermediate: int,
    gated: bool,
    patch_values: int,
    dense_mask: bool,
    text_hidden: int,
    mlp_shards: int,
    dtype_bytes: int,
) -> EncoderParts:
    """The encoder's torch peak on the dummy batch, term by term.

    * layers: per patch, the residual stream and its normed copy (hidden each) and the MLP's column-
      parallel output and its activation: 2 x intermediate (fc1, activation) or, gated, 3 x intermediate
      (gate_up_proj's 2 x intermediate and act_and_mul's output), sharded over `mlp_shards` (TP, or 1
      with --mm-encoder-tp-mode data). Every image goes through the tower at once.
    * pixels: the batch's pixel values, patch_values per patch.
    * mask (Pixtral): seq_len^2 in the model dtype, seq_len being every patch of the batch; and the
      padded copy PyTorch's memory-efficient SDPA makes when seq_len is not a multiple of 8.
    * embeddings: the tower's outputs, tokens x the decoder's hidden size, cached for the decoder run.
    """
    patches = prof.items * prof.patches_per_item
    mlp = (3 if gated else 2) * intermediate / mlp_shards
    layers = patches * (2 * hidden + mlp) * dtype_bytes
    pixels = patches * patch_values * dtype_bytes
    mask = padded = 0.0
    if dense_mask:
        mask = float(patches) * patches * dtype_bytes
        if patches % SDPA_MASK_ALIGNMENT:
            padded = float(patches) * (patches + SDPA_MASK_ALIGNMENT - patches % SDPA_MASK_ALIGNMENT) * dtype_bytes
    embeddings = float(prof.items) * prof.tokens_per_item * text_hidden * dtype_bytes
    return EncoderParts(layers, pixels, mask, padded, embeddings)


def describe(family: str) -> str:
    return FAMILY_SOURCES.get(family, "")
