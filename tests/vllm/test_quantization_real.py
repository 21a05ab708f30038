"""The quantization facts the planner relies on (common/engine.py) are the installed vLLM's own.

No server: the release's quantization registry is read in the vLLM venv and compared with the
project's tables, so a vLLM bump that changes a method's name, whether it quantizes an unquantized
checkpoint while loading, or the activation dtypes it runs fails here instead of in production.
"""

from __future__ import annotations

import json
import subprocess

from common.engine import ONLINE_QUANTIZATION_METHODS, QUANTIZATION_ACT_DTYPES, QUANTIZATION_METHODS

# What vLLM itself says, printed as JSON from inside its venv.
PROBE = r"""
import json
from vllm.config.quantization import _ONLINE_SHORTHANDS
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config
out = {"methods": list(QUANTIZATION_METHODS), "shorthands": sorted(_ONLINE_SHORTHANDS), "act": {}, "files": {}}
for m in QUANTIZATION_METHODS:
    c = get_quantization_config(m)
    for args in ((), (None,)):
        try:
            out["act"][m] = [str(d).replace("torch.", "") for d in c.get_supported_act_dtypes(*args)]
            break
        except TypeError:
            pass
    out["files"][m] = list(c.get_config_filenames())
print("PROBE" + json.dumps(out))
"""


def _vllm_facts(vllm_python) -> dict:
    proc = subprocess.run([str(vllm_python), "-c", PROBE], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("PROBE"))
    return json.loads(line[len("PROBE") :])


def test_quantization_tables_match_the_installed_vllm(vllm_python):
    facts = _vllm_facts(vllm_python)
    # Every method the stack may name is one vLLM knows; `online` alone is left out on purpose.
    assert set(QUANTIZATION_METHODS) == set(facts["methods"]) - {"online"}
    # A method counted as quantizing while loading needs no config file from the checkpoint.
    for method in ONLINE_QUANTIZATION_METHODS:
        assert method in facts["shorthands"] or not facts["files"][method], method
    # Every shorthand vLLM treats as online is counted as online here.
    assert set(facts["shorthands"]) <= set(ONLINE_QUANTIZATION_METHODS)
    # Methods that read a quantization config file from the checkpoint are never counted as online.
    needs_files = {m for m, files in facts["files"].items() if files and m not in facts["shorthands"]}
    assert not needs_files & set(ONLINE_QUANTIZATION_METHODS)
    for method in QUANTIZATION_METHODS:
        assert set(QUANTIZATION_ACT_DTYPES[method]) == set(facts["act"][method]) - {"float8_e4m3fn"}, method
