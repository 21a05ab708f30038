"""CPU, memory, /dev/shm and rollout numbers of one vLLM server pod, derived from its plan.

Pure Python (no Pulumi). The GPU count comes from the plan (`gpus_per_pod`); everything else here
is sized from the bytes of weights one pod loads and capped by the node it lands on (the catalog
machine of the pool, `stack_config.pool_machine`), because a request the node cannot hold
leaves the pod Pending forever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from common.gpus import CloudMachine
from planner.plan import ModelPlan

GIB = 1024**3

# Host memory a pod needs besides the weights: Python, tokenizer, CUDA contexts and pinned
# buffers. Per GPU: each TP worker process holds its own CUDA context and NCCL buffers in host
# memory (about 2 GiB each in vLLM logs' RSS); plus a fixed base for the API server and engine core.
BASE_MEMORY_GIB = 6
MEMORY_PER_GPU_GIB = 2
# Weight staging: safetensors are memory-mapped and copied to the GPU; while a shard is in flight
# its pages sit in the page cache charged to the pod's cgroup, and the Run:ai streamer keeps its own
# read buffers. Allowing 1.5 × the pod's weights above the base avoids an OOM kill mid-load; the
# page cache is reclaimable, so the request (what the scheduler reserves) does not include it.
STAGING_FACTOR = 1.5
# Share of a node's memory pods may claim: the kubelet's reservations, system daemons and the
# GPU/Network Operator daemonsets need the rest (EKS and GKE reserve a few percent on large nodes).
NODE_MEMORY_SHARE = 0.85
# vLLM busy-polls: the API server, the engine core and each GPU worker want a core each, and
# tokenisation under load wants more. No CPU limit: throttling the engine loop stalls every stream.
BASE_CPUS = 2
CPUS_PER_GPU = 2
NODE_CPU_SHARE = 0.85
# /dev/shm: the TP workers exchange tensors and the engine's message queue through shared memory;
# the container runtime's 64 MiB default breaks NCCL. 2 GiB per GPU (16 GiB for eight), at least
# 2 GiB for one GPU (the engine core's shared-memory broadcast queue uses it too).
SHM_PER_GPU_GIB = 2
SHM_MIN_GIB = 2
SHM_MAX_GIB = 16

UpdateStrategy = Literal["auto", "RollingUpdate", "Recreate"]


@dataclass(frozen=True)
class PodResources:
    gpus: int
    cpu_request: float
    memory_request_gib: int
    memory_limit_gib: int
    shm_gib: int
    capped_by_node: bool
    """The node's memory cannot hold the weights next to the engine: loading may be OOM-killed."""

    def requirements(self, gpu_resource: str) -> dict[str, Any]:
        # GPU limits == requests (extended resources cannot be overcommitted; the device plugin
        # rejects a mismatch). Memory limit ≥ request so weight staging has room; no CPU limit.
        gpus = str(self.gpus)
        return {
            "requests": {gpu_resource: gpus, "cpu": _cpu(self.cpu_request), "memory": f"{self.memory_request_gib}Gi"},
            "limits": {gpu_resource: gpus, "memory": f"{self.memory_limit_gib}Gi"},
        }


def weights_gib_per_pod(plan: ModelPlan) -> float:
    """Each pod of a multi-node replica loads only its pipeline stage's share of the weights."""
    return plan.weights_bytes / GIB / plan.nodes_per_replica


def pod_resources(plan: ModelPlan, machine: CloudMachine | None) -> PodResources:
    """Requests and limits for one server pod; `machine` is the pool's catalog machine or None."""
    gpus = plan.gpus_per_pod
    weights = weights_gib_per_pod(plan)
    shm = min(SHM_MAX_GIB, max(SHM_MIN_GIB, SHM_PER_GPU_GIB * gpus))
    base = BASE_MEMORY_GIB + MEMORY_PER_GPU_GIB * gpus
    # A memory-backed emptyDir is charged to the pod's memory, so shm is inside request and limit.
    request = math.ceil(base + shm)
    limit = math.ceil(base + shm + STAGING_FACTOR * weights)
    cpus = float(BASE_CPUS + CPUS_PER_GPU * gpus)
    capped = False
    if machine is not None:
        # Pods that share a node (fewer GPUs per pod than per node) get the GPU share of the node.
        share = gpus / machine.gpus if machine.gpus else 1.0
        mem_cap = math.floor(machine.memory_gib * NODE_MEMORY_SHARE * share)
        cpu_cap = math.floor(machine.vcpus * NODE_CPU_SHARE * share * 10) / 10
        if limit > mem_cap:
            # Trimming the staging allowance is fine (page cache is reclaimable); a node that cannot
            # hold the weights once next to the engine's own memory is worth a warning.
            capped = mem_cap < base + shm + weights
            limit = mem_cap
        request = min(request, limit)
        if cpus > cpu_cap:
            cpus = cpu_cap
    return PodResources(gpus, cpus, request, limit, shm, capped)


def update_strategy(plan: ModelPlan, configured: UpdateStrategy = "auto") -> str:
    """RollingUpdate (surge one replica, never below the serving replicas) or Recreate.

    auto: RollingUpdate when the pool can hold one replica of this model more than every model on it
    runs at most (`plan.pool_has_surge_room`, decided per pool in planner/plan.py), since a surge
    replica that cannot be scheduled blocks the rollout forever; otherwise Recreate, which accepts
    downtime instead of a stuck rollout.
    """
    if configured != "auto":
        return configured
    return "RollingUpdate" if plan.pool_has_surge_room else "Recreate"


def _cpu(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{int(value * 1000)}m"
