"""The KServe path at parity with the vLLM path: a disruption budget, the same alerts and dashboard,
and the policy pack walking every pod template an InferenceService holds (canaries included)."""

from __future__ import annotations

import copy
import json

import pytest

from common import contract
from components.serving import alerts, dashboard, kserve, observability, slo
from offline_plan.mock_runtime import evaluate_stack
from policies.check import check_objects
from tests.stack_variants import KSERVE, variant
from tests.test_kserve import BASELINE, evaluate, objects
from tests.test_policies_support import analyze_k8s, load_fixture
from tests.vllm_server_fixtures import LLAMA_8B

TWO_REPLICAS = {**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 2, "maxReplicas": 3}}


def test_two_replicas_get_the_vllm_paths_budget_over_predictor_and_canary_pods():
    p, ev = evaluate(TWO_REPLICAS)
    [pdb] = objects(ev, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {contract.LABEL_MODEL: p.served_name}}}
    [isvc] = objects(ev, "InferenceService")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= isvc["spec"]["predictor"]["labels"].items()
    # The pack's server-disruption-budget rule is satisfied by it, and fails without it.
    assert [v for v in check_objects([isvc, pdb]) if v.policy == "server-disruption-budget"] == []
    assert [v.policy for v in check_objects([isvc]) if v.policy == "server-disruption-budget"] == [
        "server-disruption-budget"]


def test_one_replica_needs_no_budget():
    _, ev = evaluate(LLAMA_8B)
    assert objects(ev, "PodDisruptionBudget") == []


def test_the_same_alerts_and_dashboard_as_the_vllm_path():
    p, ev = evaluate(TWO_REPLICAS)
    [rule] = objects(ev, "PrometheusRule")
    t = kserve.target(p.served_name, kserve.KServeModelArgs(plan=p, placement=None, namespace="llm-serving", crds=None))
    thresholds = alerts.AlertThresholds(queue_per_replica=p.model.autoscaling.queueThreshold)
    expected = observability.rule_groups(t, thresholds, slo.latency_slos(p.model.slo), kserve.RUNBOOK_DOC)
    assert rule["spec"]["groups"] == json.loads(json.dumps(expected))
    names = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert len(names) >= 5, names
    text = json.dumps(rule)
    # KServe's predictor pods and container, not the vLLM Deployment's.
    assert f'pod=~\\"{p.served_name}-predictor-' in text and 'container=\\"kserve-container\\"' in text
    assert 'container=\\"vllm\\"' not in text
    [board] = [o for o in objects(ev, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    assert board["metadata"]["labels"][dashboard.GRAFANA_DASHBOARD_LABEL] == "1"
    assert json.loads(next(iter(board["data"].values()))) == json.loads(json.dumps(dashboard.dashboard(t, slo.latency_slos(p.model.slo))))


def test_without_monitoring_no_rule_or_dashboard():
    _, ev = evaluate(LLAMA_8B, monitoring=False)
    assert objects(ev, "PrometheusRule") == [] and objects(ev, "PodMonitor") == []


def test_the_kserve_stack_variant_carries_rules_and_passes_the_pack():
    ev = variant(KSERVE)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in ev.kubernetes_objects]
    for name in ("llama-kserve", "llama-kserve-hf"):
        assert ("PrometheusRule", name) in kinds
    assert [v for v in check_objects(ev.kubernetes_objects) if v.level == "mandatory"] == []


# The pack walks the canary -----------------------------------------------------------------------

def test_a_canary_on_a_moving_branch_without_a_startup_probe_fails():
    (obj,) = load_fixture("multi-rule", "kserve-canary.yaml")
    result = analyze_k8s(obj)
    # Without a startup probe the liveness window is the whole load budget, so that rule fires too.
    assert result.policies() == {"model-revision-pinned", "probes-declared", "startup-probe-budget"}
    assert any("hf://Qwen/Qwen2.5-7B-Instruct:main" in v.message for v in result.of("model-revision-pinned"))
    [probe] = result.of("probes-declared")
    assert "startupProbe" in probe.message or "startup probe" in probe.message
    # The same object with the canary fixed passes: the findings came from the canary alone.
    fixed = copy.deepcopy(obj)
    model = fixed["spec"]["canary"][0]["predictor"]["model"]
    model["storageUri"] = "hf://Qwen/Qwen2.5-7B-Instruct:a09a35458c702b33eeacc393d103063234e8bc28"
    model["startupProbe"] = obj["spec"]["predictor"]["model"]["startupProbe"]
    assert analyze_k8s(fixed).violations == []


def test_a_canary_component_storage_uri_is_checked_too():
    (obj,) = load_fixture("multi-rule", "kserve-canary.yaml")
    older = copy.deepcopy(obj)
    canary = older["spec"]["canary"][0]["predictor"]
    canary["storageUri"] = canary["model"].pop("storageUri")
    canary["model"]["startupProbe"] = obj["spec"]["predictor"]["model"]["startupProbe"]
    [v] = analyze_k8s(older).of("model-revision-pinned")
    assert "spec.canary[0].predictor" in v.message


def test_the_programs_canary_passes_and_fails_once_unpinned():
    _, ev = evaluate({**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
                     storage="hf", canary_baseline_revision=BASELINE)
    [isvc] = objects(ev, "InferenceService")
    assert [v for v in check_objects([isvc]) if v.level == "mandatory"] == []
    broken = copy.deepcopy(isvc)
    model = broken["spec"]["canary"][0]["predictor"]["model"]
    model["storageUri"] = "hf://meta-llama/Llama-3.1-8B-Instruct:main"
    del model["startupProbe"]
    assert {v.policy for v in check_objects([broken])} == {"model-revision-pinned", "probes-declared",
                                                           "startup-probe-budget"}
