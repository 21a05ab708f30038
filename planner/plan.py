"""Per model, every number the deployment needs, decided once from the model's own config.

`build_plans` joins three things: the validated stack config, the model's metadata at its pinned
revision (planner.hub) and the sizing engine (planner.sizing). The components that create
resources receive a `ModelPlan` and never re-derive a number: the TP size in the vLLM flags, the
GPU count in the pod's limits and the startup-probe budget all come from here.

Pure Python apart from the config types: the offline plan, the tests and the program share it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from common import contract, gpus
from planner import checkpoint, sizing
from planner.hub import HubError, ModelMetadata, load_model_metadata
from planner.model_arch import ModelArch, SizingError
from stack_config import ModelConfig, PoolConfig, StackConfig, pool_machine

# Default read speed of each weight path, bytes/s. A network volume (EFS/Filestore) sustains about
# 500 MB/s for one reader; the Run:ai streamer reading S3/GCS in parallel reaches 1-2 GB/s from one
# node. Users with measured figures set modelStore.readMBps.
DEFAULT_READ_MBPS = {"volume": 500.0, "bucket": 1500.0, "existing-claim": 500.0}

# The startup probe must outlast the slowest plausible start, not the average one: the estimate is
# multiplied by this and rounded up to whole probe periods. A kill at 100% of the estimate turns a
# slightly slow volume into a crash loop that never finishes loading.
STARTUP_MARGIN = 1.5
STARTUP_MIN_SECONDS = 300
PROBE_PERIOD_SECONDS = 10
# A replica that spans nodes is ready only when every worker pod of its group runs, and the
# workers' nodes may not exist yet when the leader starts: the autoscaler must launch them, the GPU
# driver and device plugin must come up, and the 10-20 GB engine image must be pulled. The leader
# waits for all of them before loading (components/serving/vllm.py), so its startup budget includes that
# wait. 15 minutes is the Cluster Autoscaler's default allowance for a new node to become usable,
# which its maintainers give as covering "both VM creation and GPU driver installation"
# (https://github.com/kubernetes/autoscaler/issues/3464, comment of 2020-08-28;
# https://github.com/kubernetes/autoscaler/pull/461: "GPU node start-up + driver installation ...
# defaults to 15 minutes"); a user there measured 4-6 minutes on AWS, so 15 is the slow case.
NODE_PROVISIONING_ALLOWANCE_SECONDS = 900


class PlanError(Exception):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class ModelPlan:
    index: int
    model: ModelConfig
    metadata: ModelMetadata
    pool: PoolConfig
    gpu: gpus.Gpu
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    sizing: sizing.SizingResult
    weights_bytes: int
    read_bytes_per_second: float
    load_from: str
    load_seconds: float
    # `nvidia.com/gpu` the whole pool can offer at maxNodes (MIG slices and time-slicing counted).
    pool_capacity: int
    pool_has_surge_room: bool = True
    """The pool can hold one more replica of this model on top of every model's maximum replicas on
    it (decided per pool by `build_plans`): a rolling update's surge replica would be scheduled."""

    @property
    def served_name(self) -> str:
        return self.model.served_name

    @property
    def repo(self) -> str:
        return self.model.repo

    @property
    def revision(self) -> str:
        return self.model.revision

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def nodes_per_replica(self) -> int:
        """Tensor parallelism stays inside a node; each pipeline stage beyond one node is a node."""
        if self.gpus_per_replica <= self.pool.gpusPerNode:
            return 1
        return self.pipeline_parallel_size

    @property
    def gpus_per_pod(self) -> int:
        return self.gpus_per_replica // self.nodes_per_replica

    @property
    def replica_bounds(self) -> tuple[int, int]:
        """Replicas kept running and the most that may run. With queue autoscaling at least one
        stays warm: with none running no request can queue, so the model could never scale up."""
        a = self.model.autoscaling
        if a.enabled:
            low = max(1, a.minReplicas)
            return low, max(low, a.maxReplicas)
        return self.model.replicas, self.model.replicas

    @property
    def model_path(self) -> str:
        """Where the weights of this revision sit inside every container that reads them."""
        return model_path(self.repo, self.revision)

    @property
    def worker_wait_seconds(self) -> int:
        """How long the leader of a multi-node replica may wait for its workers before loading."""
        return NODE_PROVISIONING_ALLOWANCE_SECONDS if self.nodes_per_replica > 1 else 0

    @property
    def startup_budget_seconds(self) -> int:
        budget = max(STARTUP_MIN_SECONDS, self.load_seconds * STARTUP_MARGIN) + self.worker_wait_seconds
        return int(math.ceil(budget / PROBE_PERIOD_SECONDS) * PROBE_PERIOD_SECONDS)


def model_path(repo: str, revision: str) -> str:
    return f"{contract.MODEL_MOUNT_PATH}/{repo}/{revision}"


MetadataLoader = Callable[[ModelConfig], ModelMetadata]


def default_metadata_loader(token: str | None = None) -> MetadataLoader:
    def load(model: ModelConfig) -> ModelMetadata:
        return load_model_metadata(model.repo, model.revision, token=token)

    return load


def build_plans(config: StackConfig, load_metadata: MetadataLoader, source: str = "stack config") -> list[ModelPlan]:
    problems: list[str] = []
    plans: list[ModelPlan] = []
    for index, model in enumerate(config.models):
        try:
            plans.append(plan_model(config, index, model, load_metadata))
        except (PlanError, HubError, SizingError) as err:
            lines = err.problems if isinstance(err, PlanError) else [str(err)]
            problems += [f"{source}: {line}" if line.startswith("models[") else f"{source}: models[{index}]: {line}" for line in lines]
    problems += [f"{source}: {p}" for p in pool_capacity_problems(config, plans)]
    if problems:
        raise PlanError(problems)
    return with_surge_room(plans)


def with_surge_room(plans: list[ModelPlan]) -> list[ModelPlan]:
    """Decide per pool whether each model's rolling update can surge one replica.

    Every model on the pool may run at its maximum (replicas, or the autoscaler's maximum) at the
    moment one of them rolls out; the surge replica must fit on top of all of them, or it stays
    Pending and the rollout never finishes.
    """
    peak: dict[str, int] = {}
    for p in plans:
        peak[p.pool.name] = peak.get(p.pool.name, 0) + p.gpus_per_replica * p.replica_bounds[1]
    out = []
    for p in plans:
        capacity = p.pool_capacity
        out.append(dataclasses.replace(p, pool_has_surge_room=peak[p.pool.name] + p.gpus_per_replica <= capacity))
    return out


def pool_capacity_problems(config: StackConfig, plans: list[ModelPlan]) -> list[str]:
    """Replicas that could never be scheduled: the models on a pool need more GPUs than it can have."""
    problems = []
    for index, pool in enumerate(config.pools):
        on_pool = [p for p in plans if p.pool.name == pool.name]
        needed = sum(p.gpus_per_replica * p.replica_bounds[0] for p in on_pool)
        per_node = schedulable_gpus_per_node(config, pool)
        capacity = per_node * pool.maxNodes
        if needed > capacity:
            nodes = -(-needed // per_node)
            problems.append(
                f"pools[{index}].maxNodes: the models on pool {pool.name} need {needed} GPUs at their minimum "
                f"replicas but it has at most {capacity} ({pool.maxNodes} x {per_node}); raise maxNodes "
                f"to {nodes} or lower models[].replicas"
            )
    return problems


def does_not_fit(key, model, pool, gpu, max_tp, max_model_len, shared_gpus, request) -> str:
    """Why a model does not fit a pool's node, and only the fixes that can help."""
    largest = sizing.size(request(max_tp))
    where = f"{max_tp} x {gpu.name}{' slice' if shared_gpus else ''} (pool {pool.name})"
    if largest.kv_cache_gib_per_gpu <= 0:
        why = (f"even on {where} the weights ({largest.weights_gib_per_gpu:.1f} GiB per GPU) and the runtime "
               f"({largest.overhead_gib:.1f} GiB) exceed the {largest.requested_gib:.1f} GiB vLLM may use per GPU")
        fixes = "use a pool with more or larger GPUs"
    else:
        why = (f"on {where} the KV cache holds {largest.kv_cache_tokens} tokens, less than one "
               f"{max_model_len}-token request")
        fixes = "lower maxModelLen, set kvCacheDtype: fp8, or use a pool with more or larger GPUs"
    needed = sizing.smallest_tensor_parallel_size(request(1), max_tp=64)
    if needed and needed > pool.gpusPerNode and not shared_gpus:
        stages = -(-needed // pool.gpusPerNode)
        fixes += (f", or spread a replica over {stages} nodes (tensorParallelSize {pool.gpusPerNode}, "
                  f"pipelineParallelSize {stages})")
    return f"{key}: {model.repo} does not fit: {why}; {fixes}"


def schedulable_gpus_per_node(config: StackConfig, pool: PoolConfig) -> int:
    """`nvidia.com/gpu` one node of the pool advertises: its GPUs, times the MIG slices of each,
    times the time-slicing replicas the GPU Operator configures."""
    time_slices = config.operators.gpuOperator.timeSlicingReplicas or 1
    return pool.gpusPerNode * gpus.slices_per_gpu_for(pool) * time_slices


def plan_model(config: StackConfig, index: int, model: ModelConfig, load_metadata: MetadataLoader) -> ModelPlan:
    key = f"models[{index}]"
    pool = config.pool(model.pool)
    gpu = gpus.CATALOG[pool.gpu]
    metadata = load_metadata(model)
    arch = ModelArch.from_hf_config(metadata.config)
    model_max = arch.max_position_embeddings
    if model_max is None and model.maxModelLen is None:
        raise PlanError([f"{key}.maxModelLen: {model.repo}'s config.json declares no max_position_embeddings, "
                         f"so the context length cannot be derived; set maxModelLen"])
    max_model_len = model.maxModelLen or model_max
    if model_max is not None and max_model_len > model_max:
        raise PlanError([f"{key}.maxModelLen: {max_model_len} exceeds the model's maximum of "
                         f"{arch.max_position_embeddings} tokens (max_position_embeddings); lower it"])
    pp = model.pipelineParallelSize
    problems = checkpoint_problems(key, model, arch)
    if problems:
        raise PlanError(problems)
    # The checkpoint's bytes as they sit in GPU memory (a bf16 checkpoint served as float32 doubles).
    loaded_bytes = None if metadata.weights_bytes is None else checkpoint.loaded_weight_bytes(
        metadata.weights_bytes, arch, model.dtype, model.quantization)

    def request(tp: int) -> sizing.SizingRequest:
        return sizing.SizingRequest(
            arch=arch,
            # A MIG slice offers only its share of the GPU's memory.
            gpu_memory_gib=gpus.gpu_memory_gib_for(pool),
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            gpu_memory_utilization=model.gpuMemoryUtilization,
            max_model_len=max_model_len,
            dtype=model.dtype,
            kv_cache_dtype=model.kvCacheDtype,
            quantization=model.quantization,
            weights_bytes=loaded_bytes,
            max_num_batched_tokens=model.maxNumBatchedTokens,
            max_num_seqs=model.maxNumSeqs,
        )

    # A container sees one MIG slice or one time-sliced share: no tensor parallelism there.
    shared_gpus = bool(pool.migProfile) or bool(config.operators.gpuOperator.timeSlicingReplicas)
    max_tp = 1 if shared_gpus else pool.gpusPerNode
    if model.tensorParallelSize == "auto":
        tp = sizing.smallest_tensor_parallel_size(request(1), max_tp=max_tp)
        if tp is None:
            raise PlanError([does_not_fit(key, model, pool, gpu, max_tp, max_model_len, shared_gpus, request)])
    else:
        tp = model.tensorParallelSize
        valid = sizing.valid_tensor_parallel_sizes(arch, max_tp=max(tp, max_tp))
        if tp not in valid:
            raise PlanError([f"{key}.tensorParallelSize: vLLM cannot shard {model.repo} {tp} ways ({arch.heads} "
                             f"attention heads, {arch.kv_heads} KV heads); valid sizes: "
                             f"{', '.join(map(str, valid))}, or auto"])
        if tp > max_tp and shared_gpus:
            raise PlanError([f"{key}.tensorParallelSize: pool {pool.name}'s GPUs are shared (MIG or time-slicing), "
                             f"so a container sees one; use 1 or auto"])
        if tp > pool.gpusPerNode:
            raise PlanError([f"{key}.tensorParallelSize: {tp} exceeds the {pool.gpusPerNode} GPUs per node of pool "
                             f"{pool.name}; tensor parallelism stays inside a node, use pipelineParallelSize across nodes"])
    result = sizing.size(request(tp))
    if not result.fits:
        smallest = sizing.smallest_tensor_parallel_size(request(1), max_tp=64)
        hint = f" the smallest tensor-parallel size that fits is {smallest}" if smallest else " no tensor-parallel size up to 64 fits"
        raise PlanError([f"{key}: {model.repo} does not fit on {tp} x {gpu.name}: {result.reason};{hint}"])
    replica_gpus = tp * pp
    if replica_gpus > pool.gpusPerNode and replica_gpus > pool.gpusPerNode * pool.maxNodes:
        raise PlanError([f"{key}: one replica needs {replica_gpus} GPUs but pool {pool.name} has at most "
                         f"{pool.gpusPerNode * pool.maxNodes}; raise pools[].maxNodes"])
    if replica_gpus > pool.gpusPerNode and tp != pool.gpusPerNode and pp > 1 and replica_gpus % pool.gpusPerNode:
        raise PlanError([f"{key}: a replica spanning nodes needs tensorParallelSize equal to the pool's "
                         f"gpusPerNode ({pool.gpusPerNode}) so each pipeline stage fills one node"])
    weights_bytes = metadata.weights_bytes or int(result.weights_gib_per_gpu * tp * pp * 1024**3)
    load_from = config.modelStore.loadFrom
    read_bps = (config.modelStore.readMBps or DEFAULT_READ_MBPS[load_from]) * 1e6
    load_seconds = sizing.estimate_load_seconds(weights_bytes, read_bps)
    return ModelPlan(
        index=index,
        model=model,
        metadata=metadata,
        pool=pool,
        gpu=gpu,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        max_model_len=max_model_len,
        sizing=result,
        weights_bytes=weights_bytes,
        read_bytes_per_second=read_bps,
        load_from=load_from,
        load_seconds=load_seconds,
        pool_capacity=schedulable_gpus_per_node(config, pool) * pool.maxNodes,
    )


def checkpoint_problems(key: str, model: ModelConfig, arch: ModelArch) -> list[str]:
    """The stack's requests for this model that its checkpoint cannot meet (vLLM would not start, or
    the sizing arithmetic has nothing to work on), each naming its key."""
    problems = []
    if model.pipelineParallelSize > arch.layers:
        problems.append(f"{key}.pipelineParallelSize: {model.pipelineParallelSize} stages for {model.repo}'s "
                        f"{arch.layers} decoder layers; every stage needs at least one layer, use at most {arch.layers}")
    problem = checkpoint.quantization_problem(arch, model.quantization)
    if problem:
        problems.append(f"{key}.quantization: {problem}")
    else:
        problem = checkpoint.dtype_problem(arch, model.dtype, model.quantization)
        if problem:
            problems.append(f"{key}.dtype: {problem}")
    return problems


def sizing_table(plans: list[ModelPlan]) -> list[dict[str, object]]:
    """One row per model for the stack outputs and plan.md."""
    return [
        {
            "model": p.served_name,
            "repo": p.repo,
            "revision": p.revision,
            "pool": p.pool.name,
            "gpu": p.gpu.name,
            "tensorParallelSize": p.tensor_parallel_size,
            "pipelineParallelSize": p.pipeline_parallel_size,
            "minReplicas": p.replica_bounds[0],
            "maxReplicas": p.replica_bounds[1],
            "maxModelLen": p.max_model_len,
            "weightsGiB": round(p.weights_bytes / 1024**3, 2),
            "weightsGiBPerGpu": round(p.sizing.weights_gib_per_gpu, 2),
            "kvCacheGiBPerGpu": round(p.sizing.kv_cache_gib_per_gpu, 2),
            "kvCacheTokens": p.sizing.kv_cache_tokens,
            "maxConcurrency": round(p.sizing.max_concurrency, 2),
            "loadSecondsEstimate": round(p.load_seconds),
            "startupBudgetSeconds": p.startup_budget_seconds,
            # How the numbers above came about, for a reviewer of the plan.
            "gpuMemoryGiB": round(p.sizing.gpu_memory_gib, 2),
            "gpuMemoryUtilization": p.model.gpuMemoryUtilization,
            "requestedGiBPerGpu": round(p.sizing.requested_gib, 2),
            "activationGiB": round(p.sizing.activation_gib, 2),
            "nonTorchGiB": round(p.sizing.non_torch_gib, 2),
            "cudaGraphGiB": round(p.sizing.cuda_graph_gib if p.sizing.cuda_graph_in_budget else 0.0, 2),
            "loadFrom": p.load_from,
            "readMBps": round(p.read_bytes_per_second / 1e6),
            "workerWaitSeconds": p.worker_wait_seconds,
        }
        for p in plans
    ]


def pool_table(config: StackConfig) -> list[dict[str, object]]:
    """One row per GPU pool: what the cloud layer will ask for."""
    rows = []
    for pool in config.pools:
        machine = pool_machine(config.cloud, pool)
        rows.append({
            "pool": pool.name,
            "gpu": pool.gpu,
            "machineType": machine.name if machine else "(existing nodes)",
            "gpusPerNode": pool.gpusPerNode,
            "minNodes": pool.minNodes,
            "maxNodes": pool.maxNodes,
            "capacityType": pool.capacityType,
            "diskGiB": pool.diskGib,
        })
    return rows


