"""models[].load to a deployment: the replica bounds, the KEDA queue threshold and the pools' node counts the
plan derives where the stack file leaves them unset, the GPU-hours and cost per day, and the loads no number of the
configured GPUs can carry (planner/capacity.py, planner/plan.py with_derived_pools, offline_plan/capacity.py)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

import stack_config as config
from common import gpu_prices
from offline_plan import capacity as capacity_md
from planner import plan
from planner.capacity import PoolDemand, derive_pool, queue_threshold
from stack_config.fields import MAX_REPLICAS
from tests.support import model_plans

LOAD = {
    "peakRequestsPerSecond": 100,
    "troughRequestsPerSecond": 10,
    "promptTokens": {"mean": 1000},
    "outputTokens": {"mean": 200},
}
LLAMA = {"repo": "meta-llama/Llama-3.1-8B-Instruct", "maxModelLen": 8192, "tensorParallelSize": 1, "pool": "h100"}
# No minNodes/maxNodes: a created EKS cluster's Karpenter pool, the program's to size.
H100 = {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8}


def _stack(model: dict[str, Any], pool: dict[str, Any] | None = None, **raw: Any) -> config.StackConfig:
    models = [{"revision": model_plans.REVISION, **model}]
    return config.parse_stack_config({"cloud": "aws", "pools": [pool or H100], "models": models, **raw}, "test stack")


def _plan(stack: config.StackConfig) -> plan.ModelPlan:
    (p,) = plan.build_plans(stack, model_plans.metadata_loader(), source="test stack")
    return p


def _autoscaled(**autoscaling: Any) -> dict[str, Any]:
    return {**LLAMA, "load": LOAD, "autoscaling": {"enabled": True, **autoscaling}}


def test_unset_replica_bounds_queue_threshold_and_node_counts_are_derived_from_the_load():
    stack = _stack(_autoscaled())
    p = _plan(stack)
    c = p.capacity
    assert c is not None and c.replicas_at_peak is not None and c.replicas_at_trough is not None
    assert c.rate_per_replica is not None and c.ttft_p95_ms is not None
    a = p.model.autoscaling
    assert (a.minReplicas, a.maxReplicas) == (max(1, c.replicas_at_trough), c.replicas_at_peak)
    assert c.replicas_at_peak == math.ceil(100 / c.rate_per_replica - 1e-9) >= 2
    # The threshold: the waiting requests at which queueing alone spends the TTFT headroom at the SLO concurrency.
    expected = max(1.0, math.floor((c.waiting_per_replica or 0) + c.rate_per_replica * (2500 - c.ttft_p95_ms) / 1000))
    assert a.queueThreshold == queue_threshold(c) == expected != 5
    # The pool: the peak's GPUs plus one surge replica over 8 GPUs per node; the trough's at minNodes.
    assert p.pool.maxNodes == math.ceil((c.replicas_at_peak + 1) / 8)
    assert p.pool.minNodes == math.ceil(a.minReplicas / 8)
    assert p.pool_capacity == 8 * p.pool.maxNodes
    keys = [d.key for d in c.derived] + [d.key for d in p.pool_derived]
    assert keys == [
        "models[0].autoscaling.maxReplicas",
        "models[0].autoscaling.minReplicas",
        "models[0].autoscaling.queueThreshold",
        "pools[0].maxNodes",
        "pools[0].minNodes",
    ]
    assert f"{c.rate_per_replica:.2f} requests/s per replica at concurrency {c.concurrency_per_replica}" in (
        c.derived[0].source
    )
    assert not [w for w in p.sizing_warnings if "maxReplicas" in w or "maxNodes" in w]
    # The stack as deployed carries the derived values to every component and the cluster layer.
    deployed = plan.deployed_config(stack, [p])
    assert deployed.models[0].autoscaling.maxReplicas == c.replicas_at_peak
    assert deployed.pools[0].maxNodes == p.pool.maxNodes
    (row,) = plan.sizing_table([p])
    assert row["maxReplicas"] == c.replicas_at_peak and row["queueThreshold"] == expected
    assert row["derivedFromLoad"] == (
        f"autoscaling.maxReplicas={c.replicas_at_peak}, autoscaling.minReplicas={a.minReplicas}, "
        f"autoscaling.queueThreshold={expected:g}"
    )
    (pool_row,) = plan.pool_table(deployed, [p])
    assert pool_row["maxNodes"] == p.pool.maxNodes
    assert pool_row["derivedFromLoad"] == f"maxNodes={p.pool.maxNodes}, minNodes={p.pool.minNodes}"


def test_set_values_win_and_a_set_value_short_of_the_peak_is_warned_with_the_numbers():
    pool = {**H100, "maxNodes": 1}
    p = _plan(_stack(_autoscaled(maxReplicas=1, queueThreshold=3), pool, cluster={"name": "c"}))
    c = p.capacity
    assert c is not None and c.replicas_at_peak is not None and c.replicas_at_peak >= 2
    a = p.model.autoscaling
    assert (a.maxReplicas, a.queueThreshold) == (1, 3) and p.pool.maxNodes == 1
    assert [d.key for d in c.derived] == ["models[0].autoscaling.minReplicas"]
    (short,) = [w for w in p.sizing_warnings if w.startswith("models[0].autoscaling.maxReplicas:")]
    assert f"raise it to {c.replicas_at_peak}" in short
    assert queue_threshold(c) > 3  # a lower set threshold only scales out earlier: no warning
    assert not [w for w in p.sizing_warnings if "queueThreshold" in w]
    # A set threshold above the load's waits for a queue that already spends the TTFT headroom.
    p = _plan(_stack(_autoscaled(queueThreshold=10_000)))
    assert p.capacity is not None and p.model.autoscaling.queueThreshold == 10_000
    (late,) = [w for w in p.sizing_warnings if w.startswith("models[0].autoscaling.queueThreshold:")]
    assert f"lower it to {queue_threshold(p.capacity):g}" in late
    # A set maxNodes too small for the peak the load needs: named with the GPUs.
    heavy = {**LOAD, "peakRequestsPerSecond": 400}
    p = _plan(_stack({**_autoscaled(maxReplicas=20), "load": heavy}, pool))
    assert p.capacity is not None and p.capacity.replicas_at_peak is not None
    need = p.capacity.replicas_at_peak
    assert need > 8
    (nodes,) = [w for w in p.sizing_warnings if w.startswith("pools[0].maxNodes:")]
    assert f"needs {max(20, need)} GPUs but pool h100 can have 8 (1 x 8)" in nodes
    assert f"raise maxNodes to {math.ceil(max(20, need) / 8)}" in nodes


def test_without_autoscaling_unset_replicas_are_the_peaks_and_set_replicas_stay():
    p = _plan(_stack({**LLAMA, "load": LOAD}))
    assert p.capacity is not None and p.capacity.replicas_at_peak is not None
    assert p.model.replicas == p.replica_bounds[0] == p.capacity.replicas_at_peak
    assert [d.key for d in p.capacity.derived] == ["models[0].replicas"]
    assert (p.capacity.running_at_peak, p.capacity.running_at_trough, p.capacity.queue_threshold) == (
        p.model.replicas,
        p.model.replicas,
        None,
    )
    p = _plan(_stack({**LLAMA, "load": LOAD, "replicas": 1}))
    assert p.model.replicas == 1 and p.capacity is not None and p.capacity.derived == ()


def test_a_pool_the_program_does_not_grow_keeps_its_node_counts():
    # An EKS cluster this program did not create: nothing grows its node groups, so no count is derived.
    stack = _stack(
        _autoscaled(),
        {**H100, "minNodes": 1},
        cluster={"create": False, "name": "theirs"},
        security={"networkPolicyEnforcement": "calico"},
    )
    p = _plan(stack)
    assert p.pool_derived == () and p.pool.maxNodes == 1
    assert p.capacity is not None and p.capacity.derived  # the replicas are still the program's


def test_gpu_hours_and_cost_compute_with_a_price_and_say_unresolved_without(monkeypatch):
    load = {**LOAD, "peakHoursPerDay": 8}
    p = _plan(_stack(_autoscaled_load(load)))
    c = p.capacity
    assert c is not None and c.running_at_peak is not None and c.running_at_trough is not None
    assert c.gpu_hours_per_day == 8 * c.running_at_peak + 16 * c.running_at_trough
    row = c.row()
    assert row["usdPerGpuHour"] is None and row["costPerDay"] is None and row["costPerMillionOutputTokens"] is None
    assert row["price"].startswith("unresolved: p5.48xlarge us-east-1 on-demand")
    assert "aws pricing get-products" in row["price"]
    # A price injected here (the shipped table holds none): every cost column computes from it.
    key = ("aws", "p5.48xlarge", "us-east-1", gpu_prices.ON_DEMAND)
    injected = dataclasses.replace(gpu_prices.PRICES[key], usd_per_hour=80.0, checked="2026-12-04")
    monkeypatch.setitem(gpu_prices.PRICES, key, injected)
    c = _plan(_stack(_autoscaled_load(load))).capacity
    assert c is not None and c.running_at_peak is not None and c.running_at_trough is not None
    row = c.row()
    assert row["usdPerGpuHour"] == 10.0  # $80 a p5.48xlarge hour over its 8 GPUs
    assert row["costPerHourAtPeak"] == 10.0 * c.running_at_peak
    assert row["costPerHourAtTrough"] == 10.0 * c.running_at_trough
    day = 10.0 * (8 * c.running_at_peak + 16 * c.running_at_trough)
    assert row["costPerDay"] == round(day, 2)
    tokens = 3600 * 200 * (8 * 100 + 16 * 10)  # output tokens of the day at the stated shape
    assert row["costPerMillionOutputTokens"] == round(day / (tokens / 1e6), 4)
    assert row["price"].startswith("p5.48xlarge us-east-1 on-demand $80/h over 8 GPUs")


def _autoscaled_load(load: dict[str, Any]) -> dict[str, Any]:
    return {**_autoscaled(), "load": load}


def test_a_peak_beyond_the_replicas_a_model_may_run_is_a_plan_error_with_the_fixes():
    with pytest.raises(plan.PlanError) as info:
        _plan(_stack(_autoscaled_load({**LOAD, "peakRequestsPerSecond": 20_000})))
    (line,) = info.value.problems
    assert line.startswith("test stack: models[0].load: 20000 requests/s at peak needs ")
    need = int(line.split("needs ", 1)[1].split(" ", 1)[0])
    assert need > MAX_REPLICAS
    assert f"above the {MAX_REPLICAS} replicas a model may run" in line
    assert "bigger GPU than H100-80GB" in line and "tensorParallelSize" in line and "looser slo" in line


def test_plan_md_names_each_derived_value_and_its_source_and_the_cost_as_unresolved():
    p = _plan(_stack(_autoscaled()))
    rows = plan.sizing_table([p])
    text = "\n".join(capacity_md.capacity_section(rows))
    c = p.capacity
    assert c is not None
    assert "#### Deployed from the load" in text
    assert f"| `models[0].autoscaling.maxReplicas` | {c.replicas_at_peak} | replicas at peak: 100 requests/s" in text
    assert f"| `pools[0].maxNodes` | {p.pool.maxNodes} | GPUs at peak (models[0] {c.replicas_at_peak} x 1" in text
    cost = next(line for line in text.splitlines() if line.startswith("| llama-3-1-8b-instruct | 24 h at peak"))
    assert cost.count("unresolved") == 5
    assert "- unresolved: p5.48xlarge us-east-1 on-demand" in text


def _cost_line(p: plan.ModelPlan) -> tuple[str, str]:
    text = "\n".join(capacity_md.capacity_section(plan.sizing_table([p])))
    assert capacity_md.COST_COLUMNS in text
    line = next(line for line in text.splitlines() if line.startswith("| llama-3-1-8b-instruct | 8 h at peak"))
    return line, text


def test_plan_md_prints_the_cost_columns_for_a_priced_pool_and_unresolved_for_an_unpriced_one(monkeypatch):
    load = {**LOAD, "peakHoursPerDay": 8}
    unpriced, text = _cost_line(_plan(_stack(_autoscaled_load(load))))
    assert unpriced.count("unresolved") == 5  # per GPU-hour, at peak, at trough, per day, per million tokens
    assert "- unresolved: p5.48xlarge us-east-1 on-demand (common/gpu_prices.py" in text
    assert "`aws pricing get-products --region us-east-1" in text
    # A price put in the table (the shipped one holds no cited figure for p5.48xlarge): docs/capacity.md's formula.
    key = ("aws", "p5.48xlarge", "us-east-1", gpu_prices.ON_DEMAND)
    cited = dataclasses.replace(gpu_prices.PRICES[key], usd_per_hour=80.0, checked="2026-12-04")
    monkeypatch.setitem(gpu_prices.PRICES, key, cited)
    p = _plan(_stack(_autoscaled_load(load)))
    c = p.capacity
    assert c is not None and c.running_at_peak is not None and c.running_at_trough is not None
    priced, text = _cost_line(p)
    assert "unresolved" not in priced
    per_gpu = 80.0 / 8
    hours = 8 * c.running_at_peak + 16 * c.running_at_trough  # one GPU per replica
    day = per_gpu * hours
    tokens = 3600 * 200 * (8 * 100 + 16 * 10)  # 3,600 x output tokens x the requests of each hour
    assert priced == (
        f"| llama-3-1-8b-instruct | 8 h at peak, 16 h at trough | {c.running_at_peak} / {c.running_at_trough} | "
        f"{hours:g} | $10.0000 | ${per_gpu * c.running_at_peak:,.2f} / ${per_gpu * c.running_at_trough:,.2f} | "
        f"${day:,.2f} | ${day / (tokens / 1e6):,.4f} |"
    )
    assert (
        "- p5.48xlarge us-east-1 on-demand $80/h over 8 GPUs (https://aws.amazon.com/ec2/pricing/on-demand/, "
        "read 2026-12-04)"
    ) in text


def test_derive_pool_counts_every_model_on_the_pool_rounds_to_zones_and_refuses_beyond_max_nodes():
    pool = config.PoolConfig.model_validate({"name": "p", "gpu": "H100-80GB", "gpusPerNode": 8})
    loaded = PoolDemand("models[0]", 2, peak_replicas=5, trough_replicas=1, needed_at_peak=5)
    other = PoolDemand("models[1]", 4, peak_replicas=2, trough_replicas=2, needed_at_peak=None)
    deployed, derived, warnings, problems = derive_pool(
        "pools[0]", pool, 8, [loaded, other], can_derive=True, reachable_nodes=1, zone_count=3
    )
    # Peak: 5 x 2 + 2 x 4 = 18 GPUs + a surge of 4 = 22 -> 3 nodes; trough: 1 x 2 + 2 x 4 = 10 GPUs -> 2 nodes,
    # which GKE would start as 3 over 3 zones, within maxNodes 3.
    assert (deployed.maxNodes, deployed.minNodes) == (3, 2)
    assert (
        derived[0].source
        == "GPUs at peak (models[0] 5 x 2 + models[1] 2 x 4 = 18) + one surge replica (4) over 8 GPUs per node"
    )
    assert warnings == [] and problems == []
    # Nothing on the pool has a load: nothing is derived.
    assert derive_pool("pools[0]", pool, 8, [other], can_derive=True, reachable_nodes=1) == (pool, (), [], [])
    huge = PoolDemand("models[0]", 64, peak_replicas=100, trough_replicas=1, needed_at_peak=100)
    _, _, _, problems = derive_pool("pools[0]", pool, 1, [huge], can_derive=True, reachable_nodes=1)
    (problem,) = problems
    assert problem.startswith("pools[0].maxNodes: the peak needs 6400 GPUs (models[0] 100 x 64) plus a surge of 64")
    assert "above the 5000 nodes a pool may have" in problem


def test_an_engine_admitting_more_than_the_slo_concurrency_is_warned_on_max_num_seqs():
    a100 = {"name": "h100", "gpu": "A100-80GB", "gpusPerNode": 8}  # named as LLAMA's pool
    p = _plan(_stack(_autoscaled_load({**LOAD, "peakRequestsPerSecond": 20}), a100))
    c = p.capacity
    assert c is not None and c.concurrency_per_replica is not None
    # Nothing waits at the SLO concurrency, and vLLM would run more at once than the SLO holds.
    assert c.waiting_per_replica == 0 and p.sizing.max_num_seqs > c.concurrency_per_replica
    (late,) = [w for w in p.sizing_warnings if w.startswith("models[0].maxNumSeqs:")]
    assert f"up to {c.concurrency_per_replica} requests at once but vLLM runs up to {p.sizing.max_num_seqs}" in late
    assert f"set maxNumSeqs to {c.concurrency_per_replica}" in late
    capped = {**_autoscaled_load({**LOAD, "peakRequestsPerSecond": 20}), "maxNumSeqs": c.concurrency_per_replica}
    p = _plan(_stack(capped, a100))
    assert not [w for w in p.sizing_warnings if "maxNumSeqs" in w]
