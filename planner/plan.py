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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common import contract, gpu_prices, gpus
from planner import checkpoint, sizing, sweep_prediction
from planner.capacity import (
    Capacity,
    CapacityInputs,
    Derived,
    PoolDemand,
    derive_model,
    derive_pool,
    plan_capacity,
    threshold_warnings,
    with_cost,
)
from planner.hub import AdapterMetadata, HubError, ModelMetadata, load_adapter_metadata, load_model_metadata
from planner.lora import AdapterLoader, LoraPlan, plan_lora
from planner.model_arch import ModelArch, SizingError
from stack_config import Autoscaler, Cloud, LoadFrom, ModelConfig, PoolConfig, StackConfig, pool_machine, pool_scaling

# Default read speed of each weight path, bytes/s. A network volume (EFS/Filestore) sustains about
# 500 MB/s for one reader; the Run:ai streamer reading S3/GCS in parallel reaches 1-2 GB/s from one
# node. Users with measured figures set modelStore.readMBps.
DEFAULT_READ_MBPS = {"volume": 500.0, "bucket": 1500.0, "existing-claim": 500.0}

# The servers' start check against the mirror's manifest (models[].verifyAtStart; an init container
# of the vLLM pod, components/serving/vllm.py). `sizes` stats each file: seconds, not counted.
# `sha256` reads every byte once more before vLLM loads them, at the slower of the volume's read
# speed and the node's hashing speed. Hashing measured on this project's CI-class machine
# (2026-12-01, AMD EPYC with SHA-NI, 2 vCPUs shared with other jobs): hashlib.sha256 over 8 MiB
# buffers, one thread, 289-304 MB/s in three 3-second runs. Taken conservatively as 250 MB/s per
# node (the check hashes a few files at once, but a busy node may give it one core).
HASH_BYTES_PER_SECOND = 250e6


def start_check_seconds(weights_bytes: int, read_bytes_per_second: float, mode: str, checks_volume: bool) -> float:
    """Seconds the servers' start check adds before the engine starts loading."""
    if not checks_volume or mode != "sha256":
        return 0.0
    return weights_bytes / min(read_bytes_per_second, HASH_BYTES_PER_SECOND)


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
# A rollout may take twice the startup budget (the 10-20 GB engine image is pulled before the
# startup probe's clock starts), never less than Kubernetes' own default progress deadline.
MIN_ROLLOUT_DEADLINE_SECONDS = 600
# `pulumi up` waits this much longer than the rollout deadline, so the workload's own failure
# (ProgressDeadlineExceeded, a failed condition) is what the update reports, not a bare timeout.
WAIT_MARGIN_SECONDS = 60


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
    load_from: LoadFrom
    load_seconds: float
    """Container start to /health, the servers' start check included (`start_check_seconds`)."""
    # `nvidia.com/gpu` the whole pool can reach (MIG slices and time-slicing counted): at maxNodes
    # only where an autoscaler can grow it (stack_config.pool_scaling), else at its fixed size.
    pool_capacity: int
    # Sizing findings a user should read before deploying (plan.md and the stack's `warnings`).
    sizing_warnings: tuple[str, ...] = ()
    pool_has_surge_room: bool = True
    """The pool can hold one more replica of this model on top of every model's maximum replicas on
    it (decided per pool by `build_plans`): a rolling update's surge replica would be scheduled."""
    pool_starts_empty: bool = False
    """The pool has no node until a pod asks for one (minNodes 0 where an autoscaler grows it)."""
    lora: LoraPlan | None = None
    """The model's LoRA adapters and the flags derived from them (planner/lora.py); None without adapters."""
    start_check_seconds: float = 0.0
    """Of `load_seconds`: the check of the mirrored files against the manifest before loading
    (models[].verifyAtStart sha256 on a mounted volume; 0 for sizes, for bucket streaming and KServe)."""
    capacity: Capacity | None = None
    """Replicas the model's `load` needs at its SLO (planner/capacity.py); None without a load."""
    prediction: dict[str, Any] | None = None
    """TTFT, TPOT and tokens/s per concurrency level for a load sweep to be checked against
    (planner/sweep_prediction.py); None without a load or an enabled verification sweep."""
    pool_waits_for_nodes: bool = False
    """Some replica of a model on this pool (at its maximum, plus a rolling update's surge) does not fit
    on the nodes the pool starts with, so it waits for the autoscaler to launch a node (decided per
    pool by `build_plans`; always true when the pool starts empty)."""
    pool_derived: tuple[Derived, ...] = ()
    """The pool's node counts `build_plans` derived from the loads of the models on it (planner/capacity.py
    `derive_pool`); the same on every model of the pool, empty where the user set them or no load is predicted."""

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
    def adapters_bytes(self) -> int:
        """Upper bound of the LoRA adapters' files on the model volume (0 without adapters)."""
        return sum(a.bytes_bound for a in self.lora.adapters) if self.lora else 0

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
        return replica_bounds(self.model)

    @property
    def model_path(self) -> str:
        """Where the weights of this revision sit inside every container that reads them."""
        return model_path(self.repo, self.revision)

    @property
    def worker_wait_seconds(self) -> int:
        """How long the leader of a multi-node replica may wait for its workers before loading."""
        return NODE_PROVISIONING_ALLOWANCE_SECONDS if self.nodes_per_replica > 1 else 0

    @property
    def node_provisioning_seconds(self) -> int:
        """What every wait on this model's pods adds for a node to be launched and made GPU-ready:
        the allowance when the pool may have to grow for them, else nothing."""
        return NODE_PROVISIONING_ALLOWANCE_SECONDS if self.pool_waits_for_nodes else 0

    @property
    def rollout_deadline_seconds(self) -> int:
        """How long a rollout of this model may take: pulling a 10-20 GB engine image and the startup
        budget (twice the budget, at least 10 minutes), plus a node's provisioning where the pool
        may have to grow. The Deployment's progressDeadlineSeconds and, with a margin, how long
        `pulumi up` waits for the server workload (LeaderWorkerSet, InferenceService included)."""
        return max(MIN_ROLLOUT_DEADLINE_SECONDS, self.startup_budget_seconds * 2) + self.node_provisioning_seconds

    @property
    def startup_budget_seconds(self) -> int:
        budget = max(STARTUP_MIN_SECONDS, self.load_seconds * STARTUP_MARGIN) + self.worker_wait_seconds
        return int(math.ceil(budget / PROBE_PERIOD_SECONDS) * PROBE_PERIOD_SECONDS)

    @property
    def server_wait_seconds(self) -> int:
        """`pulumi up`'s wait (customTimeouts) for the model's workload to become ready."""
        return self.rollout_deadline_seconds + WAIT_MARGIN_SECONDS


def replica_bounds(model: ModelConfig) -> tuple[int, int]:
    """Replicas kept running and the most that may run (ModelPlan.replica_bounds)."""
    a = model.autoscaling
    if a.enabled:
        low = max(1, a.minReplicas)
        return low, max(low, a.maxReplicas)
    return model.replicas, model.replicas


def model_path(repo: str, revision: str) -> str:
    return f"{contract.MODEL_MOUNT_PATH}/{repo}/{revision}"


MetadataLoader = Callable[[ModelConfig], ModelMetadata]


def default_metadata_loader(token: str | None = None) -> MetadataLoader:
    def load(model: ModelConfig) -> ModelMetadata:
        return load_model_metadata(model.repo, model.revision, token=token)

    return load


def default_adapter_loader(token: str | None = None) -> AdapterLoader:
    def load(repo: str, revision: str) -> AdapterMetadata:
        return load_adapter_metadata(repo, revision, token=token)

    return load


def build_plans(
    config: StackConfig,
    load_metadata: MetadataLoader,
    source: str = "stack config",
    load_adapter: AdapterLoader | None = None,
) -> list[ModelPlan]:
    problems: list[str] = []
    plans: list[ModelPlan] = []
    load_adapter = load_adapter or default_adapter_loader()
    for index, model in enumerate(config.models):
        try:
            plans.append(plan_model(config, index, model, load_metadata, load_adapter))
        except (PlanError, HubError, SizingError) as err:
            lines = err.problems if isinstance(err, PlanError) else [str(err)]
            problems += [
                f"{source}: {line}" if line.startswith("models[") else f"{source}: models[{index}]: {line}"
                for line in lines
            ]
    config, plans, pool_problems = with_derived_pools(config, plans)
    problems += [f"{source}: {p}" for p in pool_problems]
    problems += [f"{source}: {p}" for p in pool_capacity_problems(config, plans)]
    if problems:
        raise PlanError(problems)
    return with_node_waits(config, with_surge_room(plans))


# Where the program creates a pool's nodes and an autoscaler grows it, so its node counts are the program's to decide.
DERIVABLE_POOLS = (Autoscaler.karpenter, Autoscaler.gke)


def with_derived_pools(config: StackConfig, plans: list[ModelPlan]) -> tuple[StackConfig, list[ModelPlan], list[str]]:
    """Each pool's node counts from the loads of the models on it, where the user left them unset (`derive_pool`);
    the plans get the pool as deployed, its capacity, its warnings (on the pool's first model) and what was derived."""
    problems: list[str] = []
    pools = list(config.pools)
    out = list(plans)
    for index, pool in enumerate(config.pools):
        on_pool = [k for k, p in enumerate(out) if p.pool.name == pool.name]
        if not on_pool:
            continue
        per_node = schedulable_gpus_per_node(config, pool)
        scaling = pool_scaling(config, pool)
        demands = [_demand(out[k]) for k in on_pool]
        zones = len(pool.zones) if config.cloud == Cloud.gcp and pool.zones else 1
        deployed, derived, warnings, pool_problems = derive_pool(
            f"pools[{index}]",
            pool,
            per_node,
            demands,
            can_derive=scaling.autoscaler in DERIVABLE_POOLS,
            reachable_nodes=scaling.reachable_nodes,
            zone_count=zones,
        )
        problems += pool_problems
        pools[index] = deployed
        reachable = pool_scaling(config, deployed).reachable_nodes
        for n, k in enumerate(on_pool):
            p = out[k]
            out[k] = dataclasses.replace(
                p,
                pool=deployed,
                pool_capacity=per_node * reachable,
                pool_derived=derived,
                sizing_warnings=p.sizing_warnings + (tuple(warnings) if n == 0 else ()),
            )
    return config.model_copy(update={"pools": pools}), out, problems


def _demand(p: ModelPlan) -> PoolDemand:
    need = p.capacity.replicas_at_peak if p.capacity is not None else None
    return PoolDemand(f"models[{p.index}]", p.gpus_per_replica, p.replica_bounds[1], p.replica_bounds[0], need)


def deployed_config(config: StackConfig, plans: list[ModelPlan]) -> StackConfig:
    """The stack as deployed: every model and pool as its plan decided them (the values derived from `load` in
    place of the unset ones). The cluster layer and every component read this, so a derived value is decided once,
    in `build_plans`, and never re-derived."""
    models = list(config.models)
    for p in plans:
        models[p.index] = p.model
    deployed = {p.pool.name: p.pool for p in plans}
    pools = [deployed.get(pool.name, pool) for pool in config.pools]
    return config.model_copy(update={"models": models, "pools": pools})


def pool_price(config: StackConfig, pool: PoolConfig) -> gpu_prices.MachinePrice | None:
    """The pool machine's hourly price at its capacity type (common/gpu_prices.py); None where none applies."""
    machine = pool_machine(config.cloud, pool)
    region = config.region
    if machine is None or not region:
        return None
    return gpu_prices.price(config.cloud.value, machine.name, region, pool.capacityType)


def with_node_waits(config: StackConfig, plans: list[ModelPlan]) -> list[ModelPlan]:
    """Decide per pool whether its pods may wait for a node to be launched.

    A pool that starts empty always does. Otherwise the pods wait when every model on it at its
    maximum replicas, plus one surge replica, needs more GPUs than the nodes it starts with: which
    pod is the one left Pending is the scheduler's choice, so every model on the pool gets the
    allowance.
    """
    out = []
    for p in plans:
        scaling = pool_scaling(config, p.pool)
        on_pool = [q for q in plans if q.pool.name == p.pool.name]
        peak = sum(q.gpus_per_replica * q.replica_bounds[1] for q in on_pool) + max(q.gpus_per_replica for q in on_pool)
        start_gpus = schedulable_gpus_per_node(config, p.pool) * scaling.start_nodes
        waits = scaling.can_grow and (scaling.starts_empty or peak > start_gpus)
        out.append(dataclasses.replace(p, pool_starts_empty=scaling.starts_empty, pool_waits_for_nodes=waits))
    return out


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
        scaling = pool_scaling(config, pool)
        capacity = per_node * scaling.reachable_nodes
        if needed > capacity:
            nodes = -(-needed // per_node)
            if scaling.why_fixed:
                problems.append(
                    f"pools[{index}].minNodes: the models on pool {pool.name} need {needed} GPUs at their minimum "
                    f"replicas but it has {capacity} ({scaling.reachable_nodes} x {per_node}): {scaling.why_fixed}; "
                    f"raise minNodes (or desiredNodes) to {nodes} or lower models[].replicas"
                )
            else:
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
        why = (
            f"even on {where} the weights ({largest.weights_gib_per_gpu:.1f} GiB per GPU) and the runtime "
            f"({largest.overhead_gib:.1f} GiB) exceed the {largest.requested_gib:.1f} GiB vLLM may use per GPU"
        )
        fixes = "use a pool with more or larger GPUs"
    else:
        why = (
            f"on {where} the KV cache holds {largest.kv_cache_tokens} tokens, less than one "
            f"{max_model_len}-token request"
        )
        fixes = "lower maxModelLen, set kvCacheDtype: fp8, or use a pool with more or larger GPUs"
    needed = sizing.smallest_tensor_parallel_size(request(1), max_tp=64)
    if needed and needed > pool.gpusPerNode and not shared_gpus:
        stages = -(-needed // pool.gpusPerNode)
        fixes += (
            f", or spread a replica over {stages} nodes (tensorParallelSize {pool.gpusPerNode}, "
            f"pipelineParallelSize {stages})"
        )
    return f"{key}: {model.repo} does not fit: {why}; {fixes}"


def schedulable_gpus_per_node(config: StackConfig, pool: PoolConfig) -> int:
    """`nvidia.com/gpu` one node of the pool advertises: its GPUs, times the MIG slices of each,
    times the time-slicing replicas the GPU Operator configures."""
    time_slices = config.operators.gpuOperator.timeSlicingReplicas or 1
    return pool.gpusPerNode * gpus.slices_per_gpu_for(pool) * time_slices


def plan_model(
    config: StackConfig,
    index: int,
    model: ModelConfig,
    load_metadata: MetadataLoader,
    load_adapter: AdapterLoader | None = None,
) -> ModelPlan:
    key = f"models[{index}]"
    pool = config.pool(model.pool)
    gpu = gpus.CATALOG[pool.gpu]
    metadata = load_metadata(model)
    arch = ModelArch.from_hf_config(metadata.config)
    lora, lora_problems = plan_lora(
        key, list(model.adapters), load_adapter or default_adapter_loader(), model_path, arch
    )
    if lora_problems:
        raise PlanError(lora_problems)
    model_max = arch.max_position_embeddings
    if model_max is None and model.maxModelLen is None:
        raise PlanError(
            [
                (
                    f"{key}.maxModelLen: {model.repo}'s config.json declares no max_position_embeddings, "
                    f"so the context length cannot be derived; set maxModelLen"
                )
            ]
        )
    max_model_len = model.maxModelLen or model_max
    assert max_model_len is not None  # the check above raised when neither is set
    too_long = sizing.context_problem(arch, max_model_len)
    if too_long:
        raise PlanError([f"{key}.maxModelLen: {too_long}"])
    pp = model.pipelineParallelSize
    problems = checkpoint_problems(key, model, arch)
    if problems:
        raise PlanError(problems)
    # The checkpoint's bytes as they sit in GPU memory (a bf16 checkpoint served as float32 doubles).
    loaded_bytes = (
        None
        if metadata.weights_bytes is None
        else checkpoint.loaded_weight_bytes(metadata.weights_bytes, arch, model.dtype, model.quantization)
    )

    # A container sees one MIG slice or one time-sliced share: no tensor parallelism there.
    shared_gpus = bool(pool.migProfile) or bool(config.operators.gpuOperator.timeSlicingReplicas)
    max_tp = 1 if shared_gpus else pool.gpusPerNode

    def request(tp: int, length: int = max_model_len) -> sizing.SizingRequest:
        return sizing.SizingRequest(
            arch=arch,
            # A MIG slice offers only its share of the GPU's memory.
            gpu_memory_gib=gpus.gpu_memory_gib_for(pool),
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            gpu_memory_utilization=model.gpuMemoryUtilization,
            max_model_len=length,
            dtype=model.dtype,
            kv_cache_dtype=model.kvCacheDtype,
            quantization=model.quantization,
            weights_bytes=loaded_bytes,
            max_num_batched_tokens=model.maxNumBatchedTokens,
            max_num_seqs=model.maxNumSeqs,
            gpu_name=gpu.name,
            # Tensor parallelism stays inside a node: its GPUs' interconnect decides NCCL's buffers.
            interconnect="single" if shared_gpus else gpu.interconnect(pool.gpusPerNode),
            enable_prefix_caching=model.enablePrefixCaching,
            lora_max_loras=lora.max_loras if lora else 0,
            lora_max_rank=lora.max_lora_rank if lora else 0,
        )

    target = model.targetConcurrentRequests
    if model.tensorParallelSize == "auto":
        # No size inside the node reaches the target: the one that holds the most requests, if any fits.
        tp = sizing.auto_tensor_parallel_size(request(1), max_tp=max_tp, target_concurrency=target)
        if tp is None:
            raise PlanError([does_not_fit(key, model, pool, gpu, max_tp, max_model_len, shared_gpus, request)])
    else:
        tp = model.tensorParallelSize
        valid = sizing.valid_tensor_parallel_sizes(arch, max_tp=max(tp, max_tp))
        if tp not in valid:
            raise PlanError(
                [
                    (
                        f"{key}.tensorParallelSize: vLLM cannot shard {model.repo} {tp} ways ({arch.heads} "
                        f"attention heads, {arch.kv_heads} KV heads); valid sizes: "
                        f"{', '.join(map(str, valid))}, or auto"
                    )
                ]
            )
        if tp > max_tp and shared_gpus:
            raise PlanError(
                [
                    (
                        f"{key}.tensorParallelSize: pool {pool.name}'s GPUs are shared (MIG or time-slicing), "
                        f"so a container sees one; use 1 or auto"
                    )
                ]
            )
        if tp > pool.gpusPerNode:
            raise PlanError(
                [
                    (
                        f"{key}.tensorParallelSize: {tp} exceeds the {pool.gpusPerNode} GPUs per node of pool "
                        f"{pool.name}; tensor parallelism stays inside a node, use pipelineParallelSize across nodes"
                    )
                ]
            )
    result = sizing.size(request(tp))
    if not result.fits:
        smallest = sizing.smallest_tensor_parallel_size(request(1), max_tp=64)
        hint = (
            f" the smallest tensor-parallel size that fits is {smallest}"
            if smallest
            else " no tensor-parallel size up to 64 fits"
        )
        raise PlanError([f"{key}: {model.repo} does not fit on {tp} x {gpu.name}: {result.reason};{hint}"])
    replica_gpus = tp * pp
    reachable_nodes = pool_scaling(config, pool).reachable_nodes
    if replica_gpus > pool.gpusPerNode and replica_gpus > pool.gpusPerNode * reachable_nodes:
        raise PlanError(
            [
                (
                    f"{key}: one replica needs {replica_gpus} GPUs but pool {pool.name} can have at most "
                    f"{pool.gpusPerNode * reachable_nodes}; raise pools[].maxNodes"
                )
            ]
        )
    if replica_gpus > pool.gpusPerNode and tp != pool.gpusPerNode and pp > 1 and replica_gpus % pool.gpusPerNode:
        raise PlanError(
            [
                (
                    f"{key}: a replica spanning nodes needs tensorParallelSize equal to the pool's "
                    f"gpusPerNode ({pool.gpusPerNode}) so each pipeline stage fills one node"
                )
            ]
        )
    warnings = sizing_warnings(
        key,
        model,
        gpu,
        pool,
        result,
        request,
        max_tp=max_tp,
        model_max=model_max,
        valid=sizing.valid_tensor_parallel_sizes(arch, max_tp),
    )
    capacity_inputs = CapacityInputs(
        key=key,
        model=model,
        arch=arch,
        gpu=gpu,
        request=request(tp),
        sizing=result,
        pipeline_parallel_size=pp,
        shared_gpus=shared_gpus,
        replica_bounds=replica_bounds(model),
        pool_name=pool.name,
        pool_key=f"pools[{[q.name for q in config.pools].index(pool.name)}]",
        pool_capacity=schedulable_gpus_per_node(config, pool) * reachable_nodes,
        price=pool_price(config, pool),
        gpus_per_node=pool.gpusPerNode,
    )
    capacity, capacity_warnings, capacity_problems = plan_capacity(capacity_inputs)
    # The prediction a load sweep is checked against (plan.json, the verification Job's sweep).
    sweep_problem = sweep_prediction.sweep_problem(capacity_inputs)
    capacity_problems += [sweep_problem] if sweep_problem else []
    if capacity_problems:
        raise PlanError(capacity_problems)
    warnings += capacity_warnings
    if capacity is not None:
        # The replica bounds and queue threshold the user left unset, from the load: the model as deployed.
        warnings += threshold_warnings(key, model, capacity, result.max_num_seqs)
        model, derived = derive_model(key, model, capacity)
        capacity = with_cost(dataclasses.replace(capacity, derived=derived), model, capacity_inputs)
    weights_bytes = metadata.weights_bytes or int(result.weights_gib_per_gpu * tp * pp * 1024**3)
    load_from = config.modelStore.loadFrom
    read_bps = (config.modelStore.readMBps or DEFAULT_READ_MBPS[load_from]) * 1e6
    # Only a vLLM server reading the model volume runs the check (bucket streaming has no local copy).
    check_seconds = start_check_seconds(
        weights_bytes, read_bps, model.verifyAtStart, checks_volume=load_from != "bucket" and model.engine == "vllm"
    )
    load_seconds = sizing.estimate_load_seconds(weights_bytes, read_bps) + check_seconds
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
        start_check_seconds=check_seconds,
        pool_capacity=schedulable_gpus_per_node(config, pool) * reachable_nodes,
        sizing_warnings=tuple(warnings),
        lora=lora,
        capacity=capacity,
        prediction=sweep_prediction.prediction(capacity_inputs),
    )


# A context window at least this long, left at the model's own maximum, gets a warning with its cost.
LONG_CONTEXT_TOKENS = 32768
# The context the warning compares against: a common serving length for chat.
SHORTER_CONTEXT_TOKENS = 8192
# The command that measures a GPU's CUDA total on a node of the pool (common/gpus.py).
MEASURE_CUDA_TOTAL = 'python3 -c "import torch; print(torch.cuda.mem_get_info()[1] / 1024**3)"'


def sizing_warnings(
    key: str,
    model: ModelConfig,
    gpu: gpus.Gpu,
    pool: PoolConfig,
    result: sizing.SizingResult,
    request: Callable[..., sizing.SizingRequest],
    *,
    max_tp: int,
    model_max: int | None,
    valid: list[int],
) -> list[str]:
    """What the sizing found that deploys but costs the user: each finding with its number and the fix."""
    warnings: list[str] = []
    tp, length = result.tensor_parallel_size, result.max_model_len
    if not gpu.cuda_total_confirmed and not pool.migProfile:
        warnings.append(
            f"{key}: sized against {gpu.name}'s CUDA total of {gpu.cuda_total_gib} GiB, which no cited log confirms "
            f"(common/gpus.py); measure it on a node of pool {pool.name} with `{MEASURE_CUDA_TOTAL}` and correct "
            f"the catalog, or the KV-cache figures below may be off by about 1%"
        )
    target = model.targetConcurrentRequests
    if result.max_concurrency < target:
        fixes = []
        room = int(result.kv_cache_tokens / target) // 1024 * 1024
        if room >= 1024:
            fixes.append(f"lower maxModelLen to {room:,}")
        if model.kvCacheDtype == "auto" and gpu.supports_fp8:
            fixes.append("set kvCacheDtype: fp8")
        larger = [t for t in valid if t > tp]
        if larger and model.tensorParallelSize != "auto":
            fixes.append(f"raise tensorParallelSize to {larger[0]}")
        elif not larger:
            fixes.append(f"use a pool with more than {max_tp} GPU(s) per node")
        fixes.append(f"or lower targetConcurrentRequests to {max(1, int(result.max_concurrency))}")
        warnings.append(
            f"{key}: {model.repo} holds {result.max_concurrency:.2f} requests of {length:,} tokens at once on "
            f"{tp} x {gpu.name}, below targetConcurrentRequests {target}; " + ", ".join(fixes)
        )
    if model.maxModelLen is None and model_max and model_max >= LONG_CONTEXT_TOKENS:
        shorter = sizing.size(request(tp, SHORTER_CONTEXT_TOKENS))
        per_request = result.kv_cache_gib_per_gpu / result.max_concurrency if result.max_concurrency else 0.0
        warnings.append(
            f"{key}.maxModelLen: left at {model.repo}'s maximum of {model_max:,} tokens; one full-length request "
            f"takes {per_request:.2f} GiB of KV cache per GPU, so a replica holds {result.max_concurrency:.2f} of them "
            f"at once (at {SHORTER_CONTEXT_TOKENS:,} tokens it would hold {shorter.max_concurrency:.2f}); "
            f"set maxModelLen to the longest prompt plus output you serve"
        )
    return warnings


def checkpoint_problems(key: str, model: ModelConfig, arch: ModelArch) -> list[str]:
    """The stack's requests for this model that its checkpoint cannot meet (vLLM would not start, or
    the sizing arithmetic has nothing to work on), each naming its key."""
    problems = []
    if model.pipelineParallelSize > arch.layers:
        problems.append(
            f"{key}.pipelineParallelSize: {model.pipelineParallelSize} stages for {model.repo}'s "
            f"{arch.layers} decoder layers; every stage needs at least one layer, use at most {arch.layers}"
        )
    problem = checkpoint.quantization_problem(arch, model.quantization)
    if problem:
        problems.append(f"{key}.quantization: {problem}")
    else:
        problem = checkpoint.dtype_problem(arch, model.dtype, model.quantization)
        if problem:
            problems.append(f"{key}.dtype: {problem}")
    return problems


def provenance(p: ModelPlan) -> str:
    """What proves the served bytes are the publisher's: the plan.md line of each model."""
    hub = "the Hub's published hashes at the pinned commit (mirror Job)"
    if p.model.engine == "kserve" and p.model.kserveStorage == "hf":
        hub = "KServe's storage initializer at the pinned commit (no manifest)"
    signed = (
        f"signature verified by the mirror Job: {p.model.signature.describe()}"
        if p.model.signature
        else "unsigned: no publisher signature verified (set models[].signature where the publisher signs)"
    )
    if p.model.engine != "vllm":
        start = "no start check (KServe)"
    elif p.load_from == "bucket":
        start = "no start check (streamed from the bucket)"
    else:
        start = f"start check: {p.model.verifyAtStart} against the manifest"
    return f"{hub}; {signed}; {start}"


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
            # LoRA adapters served on this model, and the GPU memory their slots take (planner/lora.py).
            "adapters": p.lora.names if p.lora else [],
            "maxLoraRank": p.lora.max_lora_rank if p.lora else None,
            "loraGiBPerGpu": round(p.sizing.lora_gib_per_gpu, 2),
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
            "interconnect": p.sizing.interconnect,
            "targetConcurrentRequests": p.model.targetConcurrentRequests,
            "cudaTotalConfirmed": p.gpu.cuda_total_confirmed,
            "nodeProvisioningSeconds": p.node_provisioning_seconds,
            "rolloutDeadlineSeconds": p.rollout_deadline_seconds,
            "serverWaitSeconds": p.server_wait_seconds,
            "provenance": provenance(p),
            "startCheckSeconds": round(p.start_check_seconds),
            # The load's capacity at the SLO (planner/capacity.py), for plan.md's capacity table and the diff.
            "capacity": p.capacity.row() if p.capacity else None,
            "replicasAtPeak": p.capacity.replicas_at_peak if p.capacity else None,
            "replicasAtTrough": p.capacity.replicas_at_trough if p.capacity else None,
            "concurrencyPerReplicaAtSlo": p.capacity.concurrency_per_replica if p.capacity else None,
            "queueThreshold": p.model.autoscaling.queueThreshold if p.model.autoscaling.enabled else None,
            "gpuHoursPerDay": p.capacity.row()["gpuHoursPerDay"] if p.capacity else None,
            "costPerHourAtPeak": p.capacity.row()["costPerHourAtPeak"] if p.capacity else None,
            "costPerMillionOutputTokens": p.capacity.row()["costPerMillionOutputTokens"] if p.capacity else None,
            # The deployed values derived from the load (planner/capacity.py derive_model), by key.
            "derivedFromLoad": derived_keys(p.capacity.derived if p.capacity else ()) or None,
            # The pool's node counts derived from the loads of its models (derive_pool), with what from.
            "poolDerivedFromLoad": [d.row() for d in p.pool_derived],
            # Per concurrency level, what a load sweep should measure (planner/sweep_prediction.py).
            "prediction": p.prediction,
        }
        for p in plans
    ]


def derived_keys(derived: tuple[Derived, ...]) -> str:
    """`autoscaling.maxReplicas=6, ...`: the derived keys and values, without the models[i]/pools[j] prefix."""
    return ", ".join(f"{d.key.split('.', 1)[1]}={d.value:g}" for d in derived)


def pool_table(config: StackConfig, plans: list[ModelPlan] | None = None) -> list[dict[str, object]]:
    """One row per GPU pool: what the cloud layer will ask for (`config` as deployed, `deployed_config`)."""
    derived = {p.pool.name: p.pool_derived for p in plans or []}
    rows = []
    for pool in config.pools:
        machine = pool_machine(config.cloud, pool)
        scaling = pool_scaling(config, pool)
        rows.append(
            {
                "pool": pool.name,
                "gpu": pool.gpu,
                "machineType": machine.name if machine else "(existing nodes)",
                "gpusPerNode": pool.gpusPerNode,
                "minNodes": pool.minNodes,
                "maxNodes": pool.maxNodes,
                "capacityType": pool.capacityType,
                "diskGiB": pool.diskGib,
                "autoscaler": scaling.autoscaler.value,
                "nodesCounted": scaling.reachable_nodes,
                # The node counts derived from the loads of the pool's models (planner/capacity.py derive_pool).
                "derivedFromLoad": derived_keys(derived.get(pool.name, ())) or "none",
            }
        )
    return rows
