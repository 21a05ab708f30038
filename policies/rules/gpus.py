"""gpu-taint-tolerated: a pod that asks for GPUs can land on the tainted GPU nodes.

GPU pools carry the GPU taint (gpu-pool-tainted) so that ordinary pods stay off expensive nodes;
the flip side is that a GPU pod without the toleration stays Pending forever. The taint value
differs per cloud, so this rule checks the key and effect; the stack rule
gpu-toleration-matches-pool compares against the pools' exact taints.
"""

from __future__ import annotations

from common.contract import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from policies.gpu import is_gpu_container, pod_tolerates
from policies.objects import Finding
from policies.workloads import workload


def gpu_taint_tolerated(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    key = config.get("taintKey") or GPU_TAINT_KEY
    out = []
    for pod in w.pods:
        gpu = [c for c in pod.containers if is_gpu_container(c)]
        if gpu and not pod_tolerates(pod, key, GPU_TAINT_EFFECT):
            out.append(
                Finding(
                    f"{w.ref}: {gpu[0].label} requests GPUs but the pod ({pod.where}) does not tolerate the GPU "
                    f"taint '{key}:{GPU_TAINT_EFFECT}'; add a toleration {{key: {key}, operator: Exists, "
                    f"effect: {GPU_TAINT_EFFECT}}} so it can schedule onto the GPU nodes.",
                    gpu[0].name,
                )
            )
    return out
