"""models[].load: the replicas a model's SLO needs at peak and trough, warned when the set ones fall short,
shown in plan.md's capacity table, carried in plan.json and moved in the plan diff (planner/capacity.py,
offline_plan/capacity.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from common.facts import Fact
from offline_plan import capacity, diff, plan_json
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from planner import plan, sizing
from planner.gpu_specs import PEAKS
from planner.perf_model import EFFICIENCY, Replica, Workload, predict, replicas_for_rate
from tests.support import model_plans
from tests.support.committed import committed_stack
from tests.support.stack_variants import DEV_MODELS, NO_ENTRANCE

LOAD = {
    "peakRequestsPerSecond": 20,
    "troughRequestsPerSecond": 2,
    "promptTokens": {"mean": 1000, "p95": 3000},
    "outputTokens": {"mean": 200},
}
A100_POOL = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 1, "maxNodes": 2}]}


def _a100(load: dict, max_replicas: int = 2) -> Evaluation:
    model = {
        **DEV_MODELS[0],
        "pool": "a100",
        "load": load,
        "autoscaling": {"enabled": True, "maxReplicas": max_replicas},
    }
    return evaluate_stack("dev", overrides={**NO_ENTRANCE, **A100_POOL, "models": [model]})


@pytest.fixture(scope="module")
def a100() -> Evaluation:
    return _a100(LOAD)


def _summary(evaluation: Evaluation) -> dict:
    config = offline_plan.pack_config(evaluation.stack)
    verdicts = offline_plan.policy_verdicts(evaluation, config)
    return offline_plan.plan_summary(evaluation, verdicts, config)


def _plan_folders(tmp_path: Path, base: dict, head: dict) -> list[str]:
    """Two folders holding plan.json, as `python -m offline_plan.diff BASE HEAD` reads them."""
    folders = []
    for name, data in (("base", base), ("head", head)):
        folder = tmp_path / name
        folder.mkdir()
        plan_json.write(folder / plan_json.FILENAME, data)
        folders.append(str(folder))
    return folders


def test_a_dev_variant_with_a_load_plans_with_the_table_and_says_the_l4_is_not_calibrated(monkeypatch):
    # Ada is calibrated now (one L4 source); the path for a family without efficiencies is what is tested.
    monkeypatch.delitem(EFFICIENCY, "ada")
    model = {**DEV_MODELS[0], "load": LOAD}
    evaluation = evaluate_stack("dev", overrides={**NO_ENTRANCE, "models": [model]})
    text = offline_plan.render_plan(evaluation, [], [])
    section = text.split("### Capacity at the SLO", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| llama-3-1-8b-instruct |"))
    # L4 is an Ada GPU: no calibrated efficiency, so no number is printed in its place.
    assert PEAKS["L4"].family not in EFFICIENCY
    assert "not predicted: no calibrated efficiency for ada GPUs such as L4" in row
    assert row.count("| - ") == 4
    assert "| 20 / 2 | 1,000 / 200 | 2500 ms, 100 ms |" in row
    cap = evaluation.outputs["sizing"][0]["capacity"]
    assert cap["predicted"] is False and cap["replicasAtPeak"] is None


def test_a_load_on_a_calibrated_gpu_gives_the_replicas_the_model_predicts(a100):
    row = a100.outputs["sizing"][0]
    cap = row["capacity"]
    assert cap["predicted"] is True and cap["efficiency"] == "ampere, calibrated"
    rate = cap["requestsPerSecondPerReplica"]
    assert cap["replicasAtPeak"] == math.ceil(20 / rate - 1e-6) and cap["replicasAtPeak"] >= 2
    assert cap["replicasAtTrough"] == math.ceil(2 / rate - 1e-6)
    assert cap["gpusAtPeak"] == cap["replicasAtPeak"] * row["tensorParallelSize"]
    assert cap["ttftP95Ms"] <= cap["ttftSloMs"] == 2500 and cap["tpotMs"] <= cap["itlSloMs"] == 100
    assert row["replicasAtPeak"] == cap["replicasAtPeak"]
    assert row["concurrencyPerReplicaAtSlo"] == cap["concurrencyPerReplica"] > 1


def test_a_peak_the_set_max_replicas_cannot_meet_is_warned_with_the_key_and_the_numbers(a100):
    cap = a100.outputs["sizing"][0]["capacity"]
    need = cap["replicasAtPeak"]
    assert need > 2
    warnings = [str(w) for w in a100.outputs["warnings"]]
    (maxed,) = [w for w in warnings if w.startswith("models[0].autoscaling.maxReplicas:")]
    assert f"20 requests/s at peak needs {need} replicas" in maxed and f"raise it to {need}" in maxed
    assert f"concurrency {cap['concurrencyPerReplica']}" in maxed
    (pool,) = [w for w in warnings if w.startswith("pools[0].maxNodes:")]
    assert f"needs {need} GPUs but pool a100 can have 2" in pool
    # The same warnings open plan.md.
    text = offline_plan.render_plan(a100, [], [])
    assert f"- {maxed}" in text.split("### Warnings", 1)[1]


def test_enough_replicas_are_not_warned():
    evaluation = _a100({**LOAD, "peakRequestsPerSecond": 1, "troughRequestsPerSecond": 0})
    assert not [w for w in evaluation.outputs["warnings"] if "maxReplicas" in str(w) or "maxNodes" in str(w)]
    cap = evaluation.outputs["sizing"][0]["capacity"]
    assert cap["replicasAtPeak"] == 1 and cap["replicasAtTrough"] == 0 and cap["gpusAtTrough"] == 0


def test_no_load_is_a_one_line_note_and_no_capacity_numbers():
    evaluation = evaluate_stack("dev", overrides={"models": DEV_MODELS})  # the committed dev model states a load
    assert all(row["capacity"] is None for row in evaluation.outputs["sizing"])
    section = capacity.capacity_section(evaluation.outputs["sizing"])
    assert section == [
        "### Capacity at the SLO",
        "",
        "No model sets `models[].load`; set it to derive the replicas its `slo` needs (docs/capacity.md).",
        "",
    ]


def test_the_capacity_is_deterministic(a100):
    again = _a100(LOAD)
    assert capacity.capacity_section(again.outputs["sizing"]) == capacity.capacity_section(a100.outputs["sizing"])
    assert again.outputs["sizing"][0]["capacity"] == a100.outputs["sizing"][0]["capacity"]


def test_the_plan_diff_shows_the_capacity_moving(tmp_path: Path, capsys, a100):
    base = _summary(a100)
    head = _summary(_a100({**LOAD, "peakRequestsPerSecond": 40}))
    old = base["models"][0]["replicasAtPeak"]
    new = head["models"][0]["replicasAtPeak"]
    assert new > old
    assert diff.main(_plan_folders(tmp_path, base, head)) == 0
    models = capsys.readouterr().out.split("### Models", 1)[1].split("\n### ", 1)[0]
    assert f"| `llama-3-1-8b-instruct` | replicasAtPeak | {old} | {new} |" in models


# The planner alone (no mock runtime): the problems and warnings that need no deployment.
def _plans(model: dict) -> list[plan.ModelPlan]:
    return plan.build_plans(model_plans.stack(model), model_plans.metadata_loader(), source="test stack")


LLAMA = {"repo": "meta-llama/Llama-3.1-8B-Instruct", "pool": "h100", "maxModelLen": 8192, "tensorParallelSize": 1}


def test_fixed_replicas_short_of_the_peak_are_warned_on_replicas():
    (p,) = _plans({**LLAMA, "replicas": 1, "load": {**LOAD, "peakRequestsPerSecond": 100}})
    assert p.capacity is not None and p.capacity.replicas_at_peak is not None
    (w,) = [w for w in p.sizing_warnings if w.startswith("models[0].replicas:")]
    assert f"needs {p.capacity.replicas_at_peak} replicas" in w
    # The planner's figure is the performance model's over the plan's own sizing.
    peak = PEAKS[p.gpu.name]
    replica = Replica(
        plan.ModelArch.from_hf_config(p.metadata.config), p.gpu, peak, _request(p), p.sizing, EFFICIENCY[peak.family]
    )
    count = replicas_for_rate(replica, 100, 1000, 200, 2500, 100)
    assert count.replicas == p.capacity.replicas_at_peak
    best = p.capacity.concurrency_per_replica
    assert count.concurrency_per_replica == best
    # The highest concurrency meeting the SLO: the next one misses it.
    at, above = predict(replica, Workload(best, 1000, 200)), predict(replica, Workload(best + 1, 1000, 200))
    assert at.ttft_p95_ms <= 2500 and at.tpot_ms <= 100
    assert above.ttft_p95_ms > 2500 or above.tpot_ms > 100


def _request(p: plan.ModelPlan) -> sizing.SizingRequest:
    """The request fields the performance model reads (quantization, KV dtype) at the model's defaults."""
    return sizing.SizingRequest(
        arch=plan.ModelArch.from_hf_config(p.metadata.config),
        gpu_memory_gib=p.gpu.cuda_total_gib,
        tensor_parallel_size=p.tensor_parallel_size,
        max_model_len=p.max_model_len,
        gpu_name=p.gpu.name,
    )


def test_a_slo_no_replica_meets_is_a_plan_error_with_the_numbers_and_the_fix():
    model = {**LLAMA, "load": LOAD, "slo": {"timeToFirstToken": {"seconds": 0.001}}}
    with pytest.raises(plan.PlanError) as info:
        _plans(model)
    (line,) = info.value.problems
    assert line.startswith("test stack: models[0].load: no number of replicas meets the SLO")
    assert "one request alone has TTFT p95" in line and "looser slo" in line


def test_a_mean_request_longer_than_max_model_len_is_a_plan_error_and_a_long_p95_a_warning():
    long = {**LOAD, "promptTokens": {"mean": 8000}, "outputTokens": {"mean": 500}}
    with pytest.raises(plan.PlanError, match=r"models\[0\]\.load: a mean request of 8,000 prompt \+ 500 output"):
        _plans({**LLAMA, "load": long})
    p95 = {**LOAD, "promptTokens": {"mean": 1000, "p95": 8000}, "outputTokens": {"mean": 200, "p95": 400}}
    (p,) = _plans({**LLAMA, "load": p95})
    assert any(
        w.startswith("models[0].load: the p95 prompt plus the p95 output is 8,400 tokens") for w in p.sizing_warnings
    )


def test_an_unresolved_peak_is_named_in_place_of_the_numbers(monkeypatch):
    h100 = PEAKS["H100-80GB"]
    gap = Fact(h100.bf16_tflops.subject, None, h100.bf16_tflops.source, False, "measure it")
    monkeypatch.setitem(PEAKS, "H100-80GB", dataclasses.replace(h100, bf16_tflops=gap, fp8_tflops=None))
    (p,) = _plans({**LLAMA, "load": LOAD})
    assert p.capacity is not None and p.capacity.replicas_at_peak is None
    assert p.capacity.reason == "H100-80GB dense BF16 TFLOPS is unresolved (`measure it`)"
    assert p.capacity.row()["notPredicted"] == p.capacity.reason


# The values the plan derives from the load where the stack file leaves them unset (planner/capacity.py).
DERIVED_POOL = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 1}]}


def _derived(load: dict) -> Evaluation:
    model = {**DEV_MODELS[0], "pool": "a100", "load": load, "autoscaling": {"enabled": True}}
    return evaluate_stack("dev", overrides={**NO_ENTRANCE, **DERIVED_POOL, "models": [model]})


@pytest.fixture(scope="module")
def derived() -> Evaluation:
    return _derived(LOAD)


def test_the_deployment_runs_the_derived_replicas_threshold_and_node_counts(derived):
    (row,) = derived.outputs["sizing"]
    cap = row["capacity"]
    need, trough = cap["replicasAtPeak"], cap["replicasAtTrough"]
    assert (row["minReplicas"], row["maxReplicas"]) == (max(1, trough), need)
    (scaled,) = [o for o in derived.kubernetes_objects if o["kind"] == "ScaledObject"]
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (max(1, trough), need)
    (queue,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "queue-depth"]
    assert queue["metadata"]["threshold"] == f"{row['queueThreshold']:g}" and row["queueThreshold"] != 5
    # The GKE node pool's autoscaler: the peak's GPUs plus a surge replica, on 1-GPU nodes.
    (pool,) = derived.outputs["pools"]
    assert pool["maxNodes"] == need + 1 and pool["derivedFromLoad"] == f"maxNodes={need + 1}, minNodes={max(1, trough)}"
    (node_pool,) = [r for r in derived.resources if r.type == "gcp:container/nodePool:NodePool" and "a100" in r.name]
    assert node_pool.inputs["autoscaling"]["totalMaxNodeCount"] == need + 1
    assert not [w for w in derived.outputs["warnings"] if "maxReplicas" in str(w) or "maxNodes" in str(w)]
    text = offline_plan.render_plan(derived, [], [])
    assert f"| `pools[0].maxNodes` | {need + 1} | GPUs at peak (models[0] {need} x 1 = {need})" in text


def test_the_plan_diff_shows_the_derived_values_moving(tmp_path: Path, capsys, derived):
    base, head = _summary(derived), _summary(_derived({**LOAD, "peakRequestsPerSecond": 40}))
    assert diff.main(_plan_folders(tmp_path, base, head)) == 0
    out = capsys.readouterr().out
    old, new = base["models"][0]["maxReplicas"], head["models"][0]["maxReplicas"]
    assert new > old
    models = out.split("### Models", 1)[1].split("\n### ", 1)[0]
    assert f"| `llama-3-1-8b-instruct` | maxReplicas | {old} | {new} |" in models
    assert "| `llama-3-1-8b-instruct` | derivedFromLoad |" in models
    gpus = out.split("### GPUs", 1)[1].split("\n### ", 1)[0]
    assert f"| `a100` | maxNodes | {old + 1} | {new + 1} |" in gpus


def test_the_committed_dev_stack_predicts_its_l4_at_the_slo():
    # The default stack (the main job's plan) states a load: its L4 replica is predicted with the ada family's
    # calibrated efficiencies, and the one replica the stack runs carries the peak, so nothing is warned.
    evaluation = committed_stack("dev")
    (row,) = evaluation.outputs["sizing"]
    cap = row["capacity"]
    assert cap["predicted"] and cap["efficiency"].startswith("ada, ")
    assert cap["replicasAtPeak"] == 1 and cap["concurrencyPerReplica"] >= 1
    assert not [w for w in evaluation.outputs["warnings"] if "load" in str(w) or "maxNodes" in str(w)]
