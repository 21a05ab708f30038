"""From a model's expected load and its SLO to the replicas it needs at peak and at trough.

`models[].load` (stack_config/models.py) names requests per second at peak and trough and the
prompt and output lengths; `models[].slo` names the TTFT and inter-token thresholds. One replica,
as the plan sizes it, runs at the highest concurrency the performance model (planner/perf_model.py)
predicts to meet both, and the rate it serves there divides the load. The plan shows the result
(offline_plan/capacity.py) and warns when the replicas the user set cannot reach the peak.

A replica the performance model does not cover (a GPU family without calibrated efficiencies, a
peak figure unresolved, pipeline parallelism, a shared GPU) gets a reason instead of numbers: the
table never carries an assumed figure. Pure arithmetic over the plan's sizing: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Any

from common.gpus import Gpu
from planner.gpu_specs import PEAKS, unresolved
from planner.model_arch import ModelArch, SizingError
from planner.perf_model import EFFICIENCY, Replica, Workload, predict, replicas_for_rate
from planner.sizing import SizingRequest, SizingResult
from stack_config.models import ModelConfig


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
    base = Capacity(load.peakRequestsPerSecond, load.troughRequestsPerSecond, prompt, output, ttft_ms, itl_ms, gpus)
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
    reason = _not_covered(i)
    if reason is not None:
        return _replace(base, reason=reason), warnings, []
    peak = PEAKS[i.gpu.name]
    efficiency = EFFICIENCY[peak.family]
    replica = Replica(i.arch, i.gpu, peak, i.request, i.sizing, efficiency)
    try:
        replica.peak_flops()
        if replica.tp > 1:
            replica.link_bytes_per_s()
    except SizingError:  # a peak figure unresolved: no number rather than a guess
        missing = "; ".join(f"{f.subject} is unresolved (`{f.resolve_with}`)" for f in unresolved(peak))
        return _replace(base, reason=missing or f"{i.gpu.name}'s peak figures are unresolved"), warnings, []
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
    trough = (
        math.ceil(load.troughRequestsPerSecond / count.rate_per_replica - 1e-9)
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
    )
    return cap, warnings + _shortfalls(i, cap), []


def _shortfalls(i: CapacityInputs, c: Capacity) -> list[str]:
    """The replicas, autoscaler maximum or pool the user set that cannot carry the peak."""
    assert c.replicas_at_peak is not None and c.rate_per_replica is not None
    need = c.replicas_at_peak
    at = (
        f"{c.peak_rate:g} requests/s at peak needs {need} replicas at the SLO (each at concurrency "
        f"{c.concurrency_per_replica}, {c.rate_per_replica:.2f} requests/s)"
    )
    out = []
    high = i.replica_bounds[1]
    if high < need:
        key = f"{i.key}.autoscaling.maxReplicas" if i.model.autoscaling.enabled else f"{i.key}.replicas"
        out.append(
            f"{key}: {high} replicas carry {high * c.rate_per_replica:.2f} requests/s at the SLO; {at}: "
            f"raise it to {need}"
        )
    gpus = need * c.gpus_per_replica
    if gpus > i.pool_capacity:
        out.append(
            f"{i.pool_key}.maxNodes: {i.key}'s peak of {need} replicas needs {gpus} GPUs but pool {i.pool_name} "
            f"can have {i.pool_capacity}; raise maxNodes"
        )
    return out


if __name__ == "__main__":  # pragma: no cover
    # `python -m planner.capacity --explain`: every term for one model, GPU and load (planner/capacity_cli.py).
    import sys

    from planner.capacity_cli import main

    sys.exit(main())
