"""The KServe path at parity with the vLLM path: a disruption budget, the same alerts and dashboard,
and the policy pack walking every pod template an InferenceService holds (canaries included)."""

from __future__ import annotations

import copy
import json

from common import contract
from components.serving import alerts, dashboard, kserve, observability, slo
from policies.check import check_objects
from tests.support.kserve_runs import BASELINE, evaluate, objects
from tests.support.model_plans import LLAMA_8B
from tests.support.policy_engine import analyze_k8s, load_fixture
from tests.support.stack_variants import KSERVE, variant

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
        "server-disruption-budget"
    ]


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
    assert json.loads(next(iter(board["data"].values()))) == json.loads(
        json.dumps(dashboard.dashboard(t, slo.latency_slos(p.model.slo)))
    )


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
    _, ev = evaluate(
        {**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
        storage="hf",
        canary_baseline_revision=BASELINE,
    )
    [isvc] = objects(ev, "InferenceService")
    assert [v for v in check_objects([isvc]) if v.level == "mandatory"] == []
    broken = copy.deepcopy(isvc)
    model = broken["spec"]["canary"][0]["predictor"]["model"]
    model["storageUri"] = "hf://meta-llama/Llama-3.1-8B-Instruct:main"
    del model["startupProbe"]
    assert {v.policy for v in check_objects([broken])} == {
        "model-revision-pinned",
        "probes-declared",
        "startup-probe-budget",
    }


# The engine: the pinned vLLM, its metric names, its API key ------------------------------------


def _series(text: str) -> set[str]:
    import re

    return set(re.findall(r"vllm:[a-z_]+", text))


def test_the_alerts_and_dashboard_read_the_series_the_vllm_path_reads():
    # One engine, one set of names: KServe's model container now runs `vllm serve` from the pinned
    # image, so its /metrics are the vLLM path's (the names tests/vllm checks against 0.32).
    from tests.support.vllm_runs import evaluate as evaluate_vllm

    _, ev = evaluate(TWO_REPLICAS)
    _, _, vllm_objects = evaluate_vllm(TWO_REPLICAS)
    ours = json.dumps(objects(ev, "PrometheusRule")) + json.dumps(
        [o for o in objects(ev, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    )
    theirs = json.dumps([o for o in vllm_objects if o["kind"] in ("PrometheusRule", "ConfigMap")])
    assert _series(ours) and _series(ours) == _series(theirs)
    # The container the restart alert counts is the runtime's container, which runs vLLM.
    [rt] = objects(ev, "ServingRuntime")
    assert rt["spec"]["containers"][0]["name"] == kserve.RUNTIME_CONTAINER
    assert f'container=\\"{kserve.RUNTIME_CONTAINER}\\"' in ours


def test_the_runtime_and_the_inference_service_pass_the_pack_together():
    _, ev = evaluate(TWO_REPLICAS, api_key="sk-k")
    objs = objects(ev)
    assert {"ServingRuntime", "InferenceService"} <= {o["kind"] for o in objs}
    assert [v for v in check_objects(objs) if v.level == "mandatory"] == []


# authenticated-exposure on a KServe model ------------------------------------------------------
# The program never routes a Gateway to a KServe model (the entrance and exposure.gateway take vLLM
# servers only), but a route written by hand can; the rule must then read the key on the model
# container as it does on a Deployment.


def _route_to(served_name: str) -> list[dict]:
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": served_name, "namespace": "llm-serving"},
        "spec": {
            "parentRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "gateways"}
            ],
            "rules": [{"backendRefs": [{"name": f"{served_name}-open", "port": 80}]}],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{served_name}-open", "namespace": "llm-serving"},
        "spec": {"selector": {contract.LABEL_MODEL: served_name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    return [route, service]


def _exposure(objs: list[dict]) -> list:
    return [v for v in check_objects(objs) if v.policy == "authenticated-exposure"]


def test_an_exposed_kserve_model_without_the_key_fails_authenticated_exposure():
    p, ev = evaluate(LLAMA_8B)
    [finding] = _exposure(_route_to(p.served_name) + objects(ev))
    assert f"InferenceService/{p.served_name}" in finding.message and "asks for no API key" in finding.message
    # The same model with the key from the Secret passes, and so does the explicit waiver.
    _, keyed = evaluate(LLAMA_8B, api_key="sk-k")
    assert _exposure(_route_to(p.served_name) + objects(keyed)) == []
    _, waived = evaluate(LLAMA_8B, allow_unauthenticated=True)
    assert _exposure(_route_to(p.served_name) + objects(waived)) == []
    # Not routed: nothing to check.
    assert _exposure(objects(ev)) == []


def test_a_kserve_canary_without_the_key_is_caught_too():
    p, ev = evaluate(
        {**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
        canary_baseline_revision=BASELINE,
        api_key="sk-k",
    )
    objs = objects(ev)
    assert _exposure(_route_to(p.served_name) + objs) == []
    broken = copy.deepcopy(objs)
    [isvc] = [o for o in broken if o["kind"] == "InferenceService"]
    model = isvc["spec"]["canary"][0]["predictor"]["model"]
    model["env"] = [e for e in model["env"] if not e["name"].startswith("VLLM_API_KEY")]
    [finding] = _exposure(_route_to(p.served_name) + broken)
    assert "spec.canary[0].predictor" in finding.message
