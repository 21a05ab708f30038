"""What vLLM does with a checkpoint's dtype and quantization, and what it refuses to start with.

The sizing arithmetic trusts two requests of the stack file: `dtype` (the dtype the weights are
served in) and `quantization` (the method that reads them). Both must agree with the checkpoint, or
the plan sizes a server vLLM never starts, or sizes it wrong:

* `quantization: awq` on an unquantized bf16 checkpoint: vLLM looks for the AWQ scales and stops
  (common.engine.ONLINE_QUANTIZATION_METHODS says which methods quantize while loading instead);
  sizing it would halve the weights on paper.
* a method other than the one the checkpoint declares: vLLM stops (common.engine.QUANTIZATION_FAMILIES).
* a dtype the method does not run (float32 with AWQ): vLLM stops (common.engine.QUANTIZATION_ACT_DTYPES).
* `dtype: float32` on a bf16 checkpoint is served: vLLM casts the weights, which then take twice the
  memory (`loaded_weight_bytes`).

Pure Python; the planner (per model of the stack) and the sizing CLI share it.
"""

from __future__ import annotations

from common.engine import ONLINE_QUANTIZATION_METHODS, QUANTIZATION_ACT_DTYPES, QUANTIZATION_FAMILIES
from planner.model_arch import ModelArch

# Bytes per weight of the dtypes a checkpoint is stored in and served as.
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


# What CUDA GPUs of compute capability 8.0 and later serve (every GPU of the catalog), the preferred one
# first (vllm@v0.32.0 vllm/platforms/cuda.py supported_dtypes).
PLATFORM_DTYPES = ("bfloat16", "float16", "float32")


def served_dtype(arch: ModelArch, dtype: str | None) -> str:
    """The dtype vLLM serves in: the requested one, or with `auto` the checkpoint's when the platform
    supports it, float32 checkpoints downcast, and any other (an int8 or float64 torch_dtype) replaced by
    the preferred one with a warning (vllm@v0.32.0 vllm/config/model.py _resolve_auto_dtype, lines
    2405-2446: "Downcast for float32 models", then "Falling back to ... for compatibility")."""
    if dtype and dtype != "auto":
        return dtype
    checkpoint = {"half": "float16", "float": "float32"}.get(
        (arch.torch_dtype or "bfloat16").lower(), (arch.torch_dtype or "bfloat16").lower()
    )
    if checkpoint == "float32" or checkpoint not in PLATFORM_DTYPES:
        return PLATFORM_DTYPES[0]
    return checkpoint


def quantization_problem(arch: ModelArch, quantization: str | None) -> str | None:
    """Why vLLM would not start with `quantization` on this checkpoint, or None."""
    if quantization is None:
        return None
    declared = arch.quant_method
    if declared is None:
        if quantization in ONLINE_QUANTIZATION_METHODS:
            return None
        return (
            f"{quantization} reads the scales of a checkpoint quantized with {quantization}, but this checkpoint "
            f"is unquantized {arch.torch_dtype} (its config.json declares no quantization_config); vLLM stops with "
            f'"Cannot find the config file for {quantization}" (vllm/model_executor/model_loader/weight_utils.py '
            f"get_quant_config). Remove quantization, serve a checkpoint quantized with {quantization}, or use "
            f"a method that quantizes while loading: {', '.join(ONLINE_QUANTIZATION_METHODS)}"
        )
    if quantization == declared or any({quantization, declared} <= family for family in QUANTIZATION_FAMILIES):
        return None
    return (
        f"the checkpoint is quantized with {declared} (config.json quantization_config), not {quantization}; "
        f'vLLM stops with "Quantization method specified in the model config ({declared}) does not match the '
        f'quantization method specified in the `quantization` argument ({quantization})" '
        f"(vllm/config/model.py _verify_quantization). Remove quantization or set it to {declared}"
    )


def dtype_problem(arch: ModelArch, dtype: str | None, quantization: str | None) -> str | None:
    """Why vLLM would not run the weights in this dtype with the checkpoint's quantization, or None."""
    method = quantization or arch.quant_method
    supported = QUANTIZATION_ACT_DTYPES.get(method or "")
    served = served_dtype(arch, dtype)
    if supported is None or served in supported:
        return None
    return (
        f"quantization method {method} runs in {' or '.join(supported)}, not {served}; vLLM stops with "
        f'"{served} is not supported for quantization method {method}" (vllm/config/vllm.py); set dtype to '
        f"{supported[0]} or auto"
    )


def loaded_weight_bytes(checkpoint_bytes: int, arch: ModelArch, dtype: str | None, quantization: str | None) -> int:
    """GPU memory the weights of an unquantized checkpoint take once cast to the served dtype.

    vLLM builds the model in the served dtype and copies the checkpoint's tensors into it, so a bf16
    checkpoint served as float32 takes twice its file size. Quantized checkpoints (and online
    quantization) keep the checkpoint's size: their layout is not a plain cast.
    """
    if arch.quant_method is not None or quantization is not None:
        return checkpoint_bytes
    stored = _DTYPE_BYTES.get((arch.torch_dtype or "").lower())
    served = _DTYPE_BYTES.get(served_dtype(arch, dtype))
    if stored is None or served is None:
        return checkpoint_bytes
    return checkpoint_bytes * served // stored
