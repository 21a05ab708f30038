"""From a model's expected load and its SLO to the replicas it needs at peak and at trough.

`models[].load` (stack_config/models.py) names requests per second at peak and trough and the
prompt and output lengths; `models[].slo` names the TTFT and inter-token thresholds. One replica,
as the plan sizes it, runs at the highest concurrency the performance model (planner/perf_model.py)
predicts to meet both, and the rate it serves there divides the load. The plan shows the result
(offline_plan/capacity.py) and warns when the replicas the user set cannot reach the peak.

From the same figures the plan decides what it deploys where the user left a value unset (told apart by
pydantic's `model_fields_set`): `derive_model` sets `autoscaling.maxReplicas`/`minReplicas` (or `replicas`
without autoscaling) and the KEDA queue threshold, `derive_pool` a pool's `maxNodes` and `minNodes`; each
decided value is a `Derived` with what it was derived from, for plan.md and plan.json. `with_cost` gives the
GPU-hours per day and the cost per hour and per million output tokens from common/gpu_prices.py, or names the
price as unresolved with the command that reads it. A load no number of the configured GPUs can carry (more
replicas than a stack may run, more nodes than a pool may have) is a problem with the numbers and the fixes.

A replica the performance model does not cover (a GPU family without calibrated efficiencies, a
peak figure unresolved, pipeline parallelism, a shared GPU) gets a reason instead of numbers: the
table never carries an assumed figure. Pure arithmetic over the plan's sizing: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any

from common import gpu_prices
from common.gpus import Gpu
from planner.gpu_specs import PEAKS, unresolved
from planner.model_arch import ModelArch, SizingError
from planner.perf_model import EFFICIENCY, Prediction, Replica, Workload, predict, replicas_for_rate
from planner.sizing import SizingRequest, SizingResult
from stack_config.cluster import PoolConfig
from stack_config.fields import MAX_NODES, MAX_REPLICAS
from stack_config.models import MAX_QUEUE_THRESHOLD, ModelConfig

HOURS_PER_DAY = 24
# The smallest useful per-replica queue threshold: one waiting request.
MIN_QUEUE_THRESHOLD = 1.0


@dataclass(frozen=True)
class Derived:
    """A deployed value the plan decided from the load because the user did not set it."""

    key: str  # the stack file key, e.g. models[0].autoscaling.maxReplicas
    value: float
    source: str  # what it was derived from, with the numbers

    def row(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "from": self.source}


@dataclass(frozen=True)
class Capacity:
    """One model's capacity at its SLO; `reason` set (and the numbers None) when not predicted."""

    peak_rate: float
    trough_rate: float
    prompt_tokens: int
    output_tokens: int
    ttft_slo_ms: float
    itl_slo_ms: float
    gpus_per_replica: int
    reason: str | None = None
    concurrency_per_replica: int | None = None
    rate_per_replica: float | None = None
    replicas_at_peak: int | None = None
    replicas_at_trough: int | None = None
    ttft_p95_ms: float | None = None
    tpot_ms: float | None = None
    efficiency: str | None = None
    # What runs (from the deployed replica bounds, derived or set) and what it costs; None until `with_cost`.
    peak_hours_per_day: float = HOURS_PER_DAY
    running_at_peak: int | None = None
    running_at_trough: int | None = None
    waiting_per_replica: float | None = None  # predicted queue of one replica at its SLO concurrency
    # The deployed per-replica queue threshold (derived or set); None without autoscaling.
    queue_threshold: float | None = None
    usd_per_gpu_hour: float | None = None
    price_note: str | None = None  # where the price is read, or why it is unresolved and the command that reads it
    derived: tuple[Derived, ...] = ()

    @property
    def gpu_hours_per_day(self) -> float | None:
        """GPU-hours of one day: `peakHoursPerDay` hours at the replicas running at peak, the rest at trough."""
        if self.running_at_peak is None or self.running_at_trough is None:
            return None
        h = self.peak_hours_per_day
        return self.gpus_per_replica * (h * self.running_at_peak + (HOURS_PER_DAY - h) * self.running_at_trough)

    @property
    def output_tokens_per_day(self) -> float:
        h = self.peak_hours_per_day
        return 3600 * self.output_tokens * (h * self.peak_rate + (HOURS_PER_DAY - h) * self.trough_rate)

    def _cost(self, replicas: int | None) -> float | None:
        if replicas is None or self.usd_per_gpu_hour is None:
            return None
        return replicas * self.gpus_per_replica * self.usd_per_gpu_hour

    @property
    def cost_per_day(self) -> float | None:
        gpu_hours = self.gpu_hours_per_day
        return None if gpu_hours is None or self.usd_per_gpu_hour is None else gpu_hours * self.usd_per_gpu_hour

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        """The day's cost over the day's output tokens (both at the stated daily shape)."""
        day = self.cost_per_day
        return None if day is None else day / (self.output_tokens_per_day / 1e6)

    def row(self) -> dict[str, Any]:
        """The stack output's form (camelCase, rounded so plan.md and plan.json read the same every run)."""

        def r(v: float | None, digits: int) -> float | None:
            return None if v is None else round(v, digits)

        return {
            "peakRequestsPerSecond": self.peak_rate,
            "troughRequestsPerSecond": self.trough_rate,
            "promptTokens": self.prompt_tokens,
            "outputTokens": self.output_tokens,
            "ttftSloMs": r(self.ttft_slo_ms, 1),
            "itlSloMs": r(self.itl_slo_ms, 1),
            "predicted": self.reason is None,
            "notPredicted": self.reason,
            "concurrencyPerReplica": self.concurrency_per_replica,
            "requestsPerSecondPerReplica": r(self.rate_per_replica, 3),
            "replicasAtPeak": self.replicas_at_peak,
            "replicasAtTrough": self.replicas_at_trough,
            "gpusAtPeak": None if self.replicas_at_peak is None else self.replicas_at_peak * self.gpus_per_replica,
            "gpusAtTrough": (
                None if self.replicas_at_trough is None else self.replicas_at_trough * self.gpus_per_replica
            ),
            "ttftP95Ms": r(self.ttft_p95_ms, 1),
            "tpotMs": r(self.tpot_ms, 2),
            "efficiency": self.efficiency,
            "peakHoursPerDay": self.peak_hours_per_day,
            "replicasRunningAtPeak": self.running_at_peak,
            "replicasRunningAtTrough": self.running_at_trough,
            "waitingPerReplicaAtSlo": r(self.waiting_per_replica, 2),
            "queueThreshold": self.queue_threshold,
            "gpuHoursPerDay": r(self.gpu_hours_per_day, 1),
            "usdPerGpuHour": r(self.usd_per_gpu_hour, 4),
            "costPerHourAtPeak": r(self._cost(self.running_at_peak), 2),
            "costPerHourAtTrough": r(self._cost(self.running_at_trough), 2),
            "costPerDay": r(self.cost_per_day, 2),
            "costPerMillionOutputTokens": r(self.cost_per_million_output_tokens, 4),
            "price": self.price_note,
            "derived": [d.row() for d in self.derived],
        }


@dataclass(frozen=True)
class CapacityInputs:
    """What the plan decided for one model that the capacity needs."""

    key: str  # models[i]
    model: ModelConfig
    arch: ModelArch
    gpu: Gpu
    request: SizingRequest
    sizing: SizingResult
    pipeline_parallel_size: int
    shared_gpus: bool
    replica_bounds: tuple[int, int]
    pool_name: str
    pool_key: str  # pools[j]
    pool_capacity: int  # nvidia.com/gpu the pool can reach
    # The pool's machine price at its capacity type (common/gpu_prices.py); None where no public price applies.
    price: gpu_prices.MachinePrice | None = None
    gpus_per_node: int = 1
    # The highest concurrency meeting the SLO, by (prompt, output, TTFT p95 ms, ITL ms): the capacity finds it
    # (a bisection of ~17 predictions) and the sweep prediction (planner/sweep_prediction.py) reuses it for the
    # same replica and lengths instead of searching again. Not part of what the plan decided (no eq, no hash).
    highest: dict[tuple[int, int, float, float], tuple[int, Prediction | None]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


def remember_highest(
    i: CapacityInputs, lengths: tuple[int, int], slo_ms: tuple[float, float], found: tuple[int, Prediction | None]
) -> None:
    i.highest[(*lengths, *slo_ms)] = found


def remembered_highest(
    i: CapacityInputs, lengths: tuple[int, int], slo_ms: tuple[float, float]
) -> tuple[int, Prediction | None] | None:
    """What the capacity found for these lengths and SLO (None when it did not search)."""
    return i.highest.get((*lengths, *slo_ms))


def _not_covered(i: CapacityInputs) -> str | None:
    """Why the performance model cannot predict this replica, or None."""
    if i.shared_gpus:
        return "the pool's GPUs are shared (MIG or time-slicing); the performance model assumes whole GPUs"
    if i.pipeline_parallel_size > 1:
        return "pipeline parallelism is not in the performance model (planner/perf_model.py)"
    peak = PEAKS.get(i.gpu.name)
    if peak is None:
        return f"{i.gpu.name} has no peak figures in planner/gpu_specs.py"
    if peak.family not in EFFICIENCY:
        return (
            f"no calibrated efficiency for {peak.family} GPUs such as {i.gpu.name} (planner/perf_model.py "
            "EFFICIENCY); calibrate the family on public benchmarks first"
        )
    return None


def replica_for(i: CapacityInputs) -> Replica | str:
    """The replica the performance model predicts for (the plan's sizing, the family's calibrated efficiency), or
    why it does not: a case `_not_covered` names, or a peak figure unresolved (no number rather than a guess).
    The capacity at the SLO and the sweep prediction (planner/sweep_prediction.py) both start here."""
    reason = _not_covered(i)
    if reason is not None:
        return reason
    peak = PEAKS[i.gpu.name]
    replica = Replica(i.arch, i.gpu, peak, i.request, i.sizing, EFFICIENCY[peak.family])
    try:
        replica.peak_flops()
        if replica.tp > 1:
            replica.link_bytes_per_s()
    except SizingError:
        missing = "; ".join(f"{f.subject} is unresolved (`{f.resolve_with}`)" for f in unresolved(peak))
        return missing or f"{i.gpu.name}'s peak figures are unresolved"
    return replica


def plan_capacity(i: CapacityInputs) -> tuple[Capacity | None, list[str], list[str]]:
    """(the capacity or None without a load, warnings, problems), each message naming its key."""
    load = i.model.load
    if load is None:
        return None, [], []
    slo = i.model.slo
    ttft_ms = slo.timeToFirstToken.seconds * 1000
    itl_ms = slo.interTokenLatency.seconds * 1000
    prompt, output = load.promptTokens.mean, load.outputTokens.mean
    gpus = i.request.tensor_parallel_size * i.pipeline_parallel_size
    base = Capacity(
        load.peakRequestsPerSecond,
        load.troughRequestsPerSecond,
        prompt,
        output,
        ttft_ms,
        itl_ms,
        gpus,
        peak_hours_per_day=load.peakHoursPerDay,
    )
    warnings: list[str] = []
    longest = (load.promptTokens.p95 or prompt) + (load.outputTokens.p95 or output)
    if longest > i.sizing.max_model_len and prompt + output <= i.sizing.max_model_len:
        warnings.append(
            f"{i.key}.load: the p95 prompt plus the p95 output is {longest:,} tokens, above maxModelLen "
            f"{i.sizing.max_model_len:,}; vLLM refuses those requests: raise maxModelLen or shorten them"
        )
    if prompt + output > i.sizing.max_model_len:
        problem = (
            f"{i.key}.load: a mean request of {prompt:,} prompt + {output:,} output tokens exceeds maxModelLen "
            f"{i.sizing.max_model_len:,}; raise maxModelLen or correct the token lengths"
        )
        return None, [], [problem]
    replica = replica_for(i)
    if isinstance(replica, str):
        return _replace(base, reason=replica), warnings, []
    peak, efficiency = replica.peak, replica.efficiency
    try:
        count = replicas_for_rate(replica, load.peakRequestsPerSecond, prompt, output, ttft_ms, itl_ms)
    except SizingError as err:
        fix = str(err)
        if fix.startswith("no concurrency meets the SLO"):
            one = predict(replica, Workload(1, prompt, output))
            fix = (
                f"no number of replicas meets the SLO (TTFT p95 {ttft_ms:g} ms, inter-token {itl_ms:g} ms) on "
                f"{i.gpu.name} x{replica.tp}: one request alone has TTFT p95 {one.ttft_p95_ms:.0f} ms and TPOT "
                f"{one.tpot_ms:.1f} ms; use a bigger GPU, a larger tensorParallelSize, a quantized checkpoint, "
                "or a looser slo"
            )
        return None, warnings, [f"{i.key}.load: {fix}"]
    remember_highest(i, (prompt, output), (ttft_ms, itl_ms), (count.concurrency_per_replica, count.at))
    # Any traffic at all needs a replica: a rate below a billionth of one replica's (the tolerance of the ceiling,
    # there for float noise) would otherwise round to none (troughRequestsPerSecond 1e-202 planned 0 replicas).
    trough = (
        max(1, math.ceil(load.troughRequestsPerSecond / count.rate_per_replica - 1e-9))
        if load.troughRequestsPerSecond > 0
        else 0
    )
    cap = _replace(
        base,
        concurrency_per_replica=count.concurrency_per_replica,
        rate_per_replica=count.rate_per_replica,
        replicas_at_peak=count.replicas,
        replicas_at_trough=trough,
        ttft_p95_ms=count.at.ttft_p95_ms,
        tpot_ms=count.at.tpot_ms,
        efficiency=f"{peak.family}, {efficiency.source}",
        waiting_per_replica=count.at.waiting,
    )
    too_many = _beyond_limits(i, cap)
    if too_many:
        return None, warnings, too_many
    return cap, warnings + _shortfalls(i, cap), []


def _fixes(i: CapacityInputs) -> str:
    return (
        f"use a bigger GPU than {i.gpu.name}, a larger tensorParallelSize, a quantized checkpoint (or kvCacheDtype "
        "fp8), or a looser slo"
    )


def _beyond_limits(i: CapacityInputs, c: Capacity) -> list[str]:
    """A peak no configuration of these GPUs can carry: more replicas than a stack may run, or more nodes than a
    pool may have. Never capped: the plan stops with the numbers and the fixes."""
    assert c.replicas_at_peak is not None and c.rate_per_replica is not None
    need = c.replicas_at_peak
    at = (
        f"{c.peak_rate:g} requests/s at peak needs {need} replicas at the SLO (each at concurrency "
        f"{c.concurrency_per_replica}, {c.rate_per_replica:.2f} requests/s)"
    )
    if need > MAX_REPLICAS:
        return [
            (
                f"{i.key}.load: {at}, above the {MAX_REPLICAS} replicas a model may run "
                f"(autoscaling.maxReplicas at most {MAX_REPLICAS}); {_fixes(i)}, or split the traffic over more models"
            )
        ]
    nodes = math.ceil(need * c.gpus_per_replica / max(1, i.gpus_per_node))
    if nodes > MAX_NODES:
        return [
            (
                f"{i.key}.load: {at}, {need * c.gpus_per_replica} GPUs on {nodes} nodes of pool {i.pool_name}, "
                f"above the {MAX_NODES} nodes a pool may have (pools[].maxNodes); {_fixes(i)}"
            )
        ]
    return []


def queue_threshold(c: Capacity) -> float:
    """The per-replica `vllm:num_requests_waiting` at which the autoscaler scales out, from the SLO.

    threshold = max(1, floor(W + r * (TTFT_slo - TTFT_p95(C))))

    C is the highest concurrency meeting the SLO, r the requests/s one replica serves there and W the requests the
    performance model has waiting for a slot there (planner/perf_model.py: max_num_seqs or the KV pool full). A
    replica finishes r requests a second, so each request waiting beyond W delays every later start by 1/r s (the
    model's own queueing term, waiting / rate): W + r x the TTFT headroom is the queue at which queueing alone spends
    what is left of the TTFT objective. KEDA's AverageValue trigger divides the model's waiting requests by its
    replicas, so scaling out starts there, before the SLO breaks, not at a default. At most the largest threshold
    the key accepts (MAX_QUEUE_THRESHOLD, far above any replica's batch).
    """
    assert c.rate_per_replica is not None and c.ttft_p95_ms is not None
    headroom_s = max(0.0, (c.ttft_slo_ms - c.ttft_p95_ms) / 1000)
    queue = math.floor((c.waiting_per_replica or 0.0) + c.rate_per_replica * headroom_s)
    return min(float(MAX_QUEUE_THRESHOLD), max(MIN_QUEUE_THRESHOLD, float(queue)))


def threshold_warnings(key: str, model: ModelConfig, c: Capacity, max_num_seqs: int | None = None) -> list[str]:
    """What keeps the queue trigger from scaling out before the SLO breaks: a set `queueThreshold` above the
    load's (the queue it waits for already spends the TTFT headroom), or an engine that admits more requests than
    the SLO holds (they run slower instead of waiting, so `vllm:num_requests_waiting` stays 0 past the SLO)."""
    a = model.autoscaling
    if not a.enabled or c.rate_per_replica is None or c.concurrency_per_replica is None:
        return []
    assert c.ttft_p95_ms is not None
    out = []
    if not c.waiting_per_replica and max_num_seqs is not None and max_num_seqs > c.concurrency_per_replica:
        out.append(
            f"{key}.maxNumSeqs: a replica meets the SLO up to {c.concurrency_per_replica} requests at once but vLLM "
            f"runs up to {max_num_seqs}, so requests beyond {c.concurrency_per_replica} run slower than the SLO "
            "instead of waiting and the queue-depth trigger sees them only past that; set maxNumSeqs to "
            f"{c.concurrency_per_replica} so the excess waits and scales the model out (the KV-cache trigger "
            "still sees a full cache)"
        )
    derived = queue_threshold(c)
    if "queueThreshold" not in a.model_fields_set or a.queueThreshold <= derived:
        return out
    beyond = max(0.0, a.queueThreshold - (c.waiting_per_replica or 0.0))
    out.append(
        f"{key}.autoscaling.queueThreshold: {a.queueThreshold:g} waiting requests per replica wait about "
        f"{beyond / c.rate_per_replica:.2f} s at {c.rate_per_replica:.2f} requests/s per replica, more than the "
        f"{max(0.0, c.ttft_slo_ms - c.ttft_p95_ms) / 1000:.2f} s the TTFT objective leaves at concurrency "
        f"{c.concurrency_per_replica}, so the SLO breaks before the autoscaler scales out; lower it to {derived:g} "
        "(or leave it unset to derive it)"
    )
    return out


def _per_replica(c: Capacity) -> str:
    return f"{c.rate_per_replica:.2f} requests/s per replica at concurrency {c.concurrency_per_replica}"


def derive_model(key: str, model: ModelConfig, c: Capacity) -> tuple[ModelConfig, tuple[Derived, ...]]:
    """The model as deployed: the replica bounds and queue threshold the user left unset, from the load.

    With autoscaling, maxReplicas is the replicas at peak and minReplicas those at trough (at least one stays warm:
    with none running no request can queue); without it, `replicas` is the peak's. A value the user set stays (the
    shortfall warnings name it)."""
    if c.replicas_at_peak is None or c.replicas_at_trough is None:
        return model, ()
    peak = f"{c.peak_rate:g} requests/s at peak / {_per_replica(c)}"
    trough = f"{c.trough_rate:g} requests/s at trough / {_per_replica(c)}"
    derived: list[Derived] = []
    a = model.autoscaling
    if not a.enabled:
        if "replicas" in model.model_fields_set:
            return model, ()
        value = max(1, c.replicas_at_peak)
        derived.append(Derived(f"{key}.replicas", value, f"replicas at peak: {peak} (autoscaling off)"))
        return model.model_copy(update={"replicas": value}), tuple(derived)
    update: dict[str, Any] = {}
    high = a.maxReplicas
    if "maxReplicas" not in a.model_fields_set:
        floor = a.minReplicas if "minReplicas" in a.model_fields_set else 1
        high = max(1, floor, c.replicas_at_peak)
        update["maxReplicas"] = high
        derived.append(Derived(f"{key}.autoscaling.maxReplicas", high, f"replicas at peak: {peak}"))
    if "minReplicas" not in a.model_fields_set:
        low = min(high, max(1, c.replicas_at_trough))
        update["minReplicas"] = low
        why = f"replicas at trough: {trough}" + ("; at least 1 stays warm" if c.replicas_at_trough < 1 else "")
        if low < c.replicas_at_trough:
            why += f", at most maxReplicas {high}"
        derived.append(Derived(f"{key}.autoscaling.minReplicas", low, why))
    if "queueThreshold" not in a.model_fields_set:
        q = queue_threshold(c)
        update["queueThreshold"] = q
        assert c.ttft_p95_ms is not None and c.rate_per_replica is not None
        derived.append(
            Derived(
                f"{key}.autoscaling.queueThreshold",
                q,
                f"waiting requests per replica at which queueing spends the TTFT headroom: floor("
                f"{c.waiting_per_replica or 0:.2f} waiting at concurrency {c.concurrency_per_replica} + "
                f"{c.rate_per_replica:.2f} requests/s x ({c.ttft_slo_ms:g} - {c.ttft_p95_ms:.0f}) ms), at least 1",
            )
        )
    if not update:
        return model, ()
    return model.model_copy(update={"autoscaling": a.model_copy(update=update)}), tuple(derived)


def with_cost(c: Capacity, model: ModelConfig, i: CapacityInputs) -> Capacity:
    """The replicas that run at peak and trough under the deployed bounds, the queue threshold deployed, and the
    price of a GPU-hour (the pool machine's price over its GPUs) or why it is unresolved."""
    if c.replicas_at_peak is None or c.replicas_at_trough is None:
        return c
    a = model.autoscaling
    if a.enabled:
        low = max(1, a.minReplicas)
        high = max(low, a.maxReplicas)
        running = (min(high, max(low, c.replicas_at_peak)), min(high, max(low, c.replicas_at_trough)))
        threshold: float | None = a.queueThreshold
    else:
        running = (model.replicas, model.replicas)
        threshold = None
    price, note = None, "no public hourly price applies (an existing cluster's nodes, or a capacity block)"
    if i.price is not None and i.price.established:
        assert i.price.usd_per_hour is not None
        price = i.price.usd_per_hour / max(1, i.gpus_per_node)
        note = (
            f"{i.price.machine} {i.price.region} {i.price.capacity} ${i.price.usd_per_hour:g}/h over "
            f"{i.gpus_per_node} GPUs ({i.price.source}, read {i.price.checked})"
        )
    elif i.price is not None:
        note = (
            f"unresolved: {i.price.machine} {i.price.region} {i.price.capacity} (common/gpu_prices.py, "
            f"{i.price.source}); `{i.price.resolve_with}`"
        )
    return _replace(
        c,
        running_at_peak=running[0],
        running_at_trough=running[1],
        queue_threshold=threshold,
        usd_per_gpu_hour=price,
        price_note=note,
    )


@dataclass(frozen=True)
class PoolDemand:
    """One model's GPUs on a pool at its peak and at its trough, as deployed (derived or set)."""

    key: str  # models[i]
    gpus_per_replica: int
    peak_replicas: int  # the deployed maximum
    trough_replicas: int  # the deployed minimum
    needed_at_peak: int | None  # replicas the predicted load needs at peak; None without one

    @property
    def at_peak(self) -> int:
        """Replicas the pool must hold at peak: the deployed maximum, or more where the load needs more."""
        return max(self.peak_replicas, self.needed_at_peak or 0)


def derive_pool(
    pool_key: str,
    pool: PoolConfig,
    per_node: int,
    demands: list[PoolDemand],
    *,
    can_derive: bool,
    reachable_nodes: int,
    zone_count: int = 1,
) -> tuple[PoolConfig, tuple[Derived, ...], list[str], list[str]]:
    """(the pool as deployed, what was derived, warnings, problems) for a pool with at least one loaded model.

    maxNodes: the GPUs every model on the pool needs at its peak, plus one rolling-update surge of its largest
    replica (so `updateStrategy: auto` keeps RollingUpdate), over the pool's GPUs per node. minNodes: the GPUs at
    trough over the GPUs per node. Derived only where the program creates the nodes (`can_derive`: Karpenter on EKS,
    GKE's autoscaler), and never over a set value: a set maxNodes too small for the peak is a warning."""
    loaded = [d for d in demands if d.needed_at_peak is not None]
    if not loaded:
        return pool, (), [], []
    peak_gpus = sum(d.gpus_per_replica * d.peak_replicas for d in demands)
    trough_gpus = sum(d.gpus_per_replica * d.trough_replicas for d in demands)
    surge = max(d.gpus_per_replica for d in demands)
    parts = " + ".join(f"{d.key} {d.peak_replicas} x {d.gpus_per_replica}" for d in demands)
    trough_parts = " + ".join(f"{d.key} {d.trough_replicas} x {d.gpus_per_replica}" for d in demands)
    peak_nodes = math.ceil((peak_gpus + surge) / per_node)
    trough_nodes = math.ceil(trough_gpus / per_node)
    derived: list[Derived] = []
    warnings: list[str] = []
    update: dict[str, int] = {}
    if can_derive and "maxNodes" not in pool.model_fields_set:
        start = pool.desiredNodes if pool.desiredNodes is not None else pool.minNodes
        if "minNodes" not in pool.model_fields_set and pool.desiredNodes is None:
            start = trough_nodes
        # GKE starts the same number of nodes in each zone (stack_config/stack.py zone_problems).
        start_total = math.ceil(start / zone_count) * zone_count
        value = max(1, peak_nodes, start_total)
        if value > MAX_NODES:
            problem = (
                f"{pool_key}.maxNodes: the peak needs {peak_gpus} GPUs ({parts}) plus a surge of {surge}, "
                f"{peak_nodes} nodes of {per_node}, above the {MAX_NODES} nodes a pool may have; use larger GPUs, "
                "more GPUs per node, a quantized checkpoint, or a looser slo"
            )
            return pool, (), [], [problem]
        update["maxNodes"] = value
        derived.append(
            Derived(
                f"{pool_key}.maxNodes",
                value,
                f"GPUs at peak ({parts} = {peak_gpus}) + one surge replica ({surge}) over {per_node} GPUs per node",
            )
        )
    else:
        capacity = per_node * reachable_nodes
        needed = sum(d.gpus_per_replica * d.at_peak for d in demands)
        if needed > capacity:
            needs = " + ".join(f"{d.key} {d.at_peak} x {d.gpus_per_replica}" for d in demands)
            warnings.append(
                f"{pool_key}.maxNodes: the peak of the models on pool {pool.name} ({needs}) needs {needed} GPUs "
                f"but pool {pool.name} can have {capacity} ({reachable_nodes} x {per_node}); raise maxNodes to "
                f"{math.ceil(needed / per_node)} (or {math.ceil((needed + surge) / per_node)} with room for a "
                "rolling update's surge)"
            )
    if can_derive and "minNodes" not in pool.model_fields_set and pool.desiredNodes is None:
        most = update.get("maxNodes", pool.maxNodes)
        value = min(trough_nodes, most)
        if math.ceil(value / zone_count) * zone_count > most:  # GKE starts as many nodes in each zone
            value = most // zone_count * zone_count
        if value != pool.minNodes:
            update["minNodes"] = value
            derived.append(
                Derived(
                    f"{pool_key}.minNodes",
                    value,
                    f"GPUs at trough ({trough_parts} = {trough_gpus}) over {per_node} GPUs per node",
                )
            )
    if not update:
        return pool, tuple(derived), warnings, []
    return pool.model_copy(update=update), tuple(derived), warnings, []


def _shortfalls(i: CapacityInputs, c: Capacity) -> list[str]:
    """The replicas or autoscaler maximum the user set that cannot carry the peak (a pool's node count: at the
    pool's level, `derive_pool`)."""
    assert c.replicas_at_peak is not None and c.rate_per_replica is not None
    need = c.replicas_at_peak
    at = (
        f"{c.peak_rate:g} requests/s at peak needs {need} replicas at the SLO (each at concurrency "
        f"{c.concurrency_per_replica}, {c.rate_per_replica:.2f} requests/s)"
    )
    out = []
    high = i.replica_bounds[1]
    user_set = (
        "maxReplicas" in i.model.autoscaling.model_fields_set
        if i.model.autoscaling.enabled
        else ("replicas" in i.model.model_fields_set)
    )
    if high < need and user_set:
        key = f"{i.key}.autoscaling.maxReplicas" if i.model.autoscaling.enabled else f"{i.key}.replicas"
        out.append(
            f"{key}: {high} replicas carry {high * c.rate_per_replica:.2f} requests/s at the SLO; {at}: "
            f"raise it to {need}"
        )
    return out


if __name__ == "__main__":  # pragma: no cover
    # `python -m planner.capacity --explain`: every term for one model, GPU and load (planner/capacity_cli.py).
    import sys

    from planner.capacity_cli import main

    sys.exit(main())
