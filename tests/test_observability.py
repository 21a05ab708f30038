"""Alerts, dashboard and autoscaler queries: valid PromQL on metric names vLLM 0.32 really exports."""

from __future__ import annotations

import json

import promql_parser
import pytest

from common import engine_metrics as vllm_metrics
from components.serving import observability as obs

TARGET = obs.Target(served_name="llama-3-1-8b-instruct", namespace="llm-serving", workload_name="llama-3-1-8b-instruct",
                    load_seconds=392.2, startup_budget_seconds=590, labels={"app.kubernetes.io/name": "vllm"})
THRESHOLDS = obs.AlertThresholds(queue_per_replica=8)
LWS_TARGET = obs.Target(served_name="llama-70b-pp", namespace="llm-serving", workload_name="llama-70b-pp",
                        load_seconds=900, startup_budget_seconds=2250, workload_kind=obs.LEADER_WORKER_SET)


def every_query() -> list[str]:
    queries = obs.all_queries(TARGET, THRESHOLDS) + obs.all_queries(LWS_TARGET, THRESHOLDS)
    so = obs.scaled_object("x", TARGET, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                           min_replicas=1, max_replicas=3, threshold=8, prometheus_url="http://prom:9090")
    queries.append(so["spec"]["triggers"][0]["metadata"]["query"])
    return queries


@pytest.mark.parametrize("expr", every_query())
def test_promql_parses(expr):
    promql_parser.parse(expr)


def test_the_parser_rejects_broken_promql():
    # Guards against a parser that accepts anything (the test above would then prove nothing).
    with pytest.raises(ValueError):
        promql_parser.parse('sum(vllm:num_requests_waiting{model_name="x"}')


def _known_names() -> set[str]:
    return {v for k, v in vars(vllm_metrics).items() if k.isupper() and isinstance(v, str) and v.startswith("vllm:")}


def test_every_vllm_name_comes_from_vllm_metrics():
    known = _known_names()
    used = obs.used_metric_names()
    assert used, "no vLLM metric referenced at all"
    unknown = {n for n in used if vllm_metrics.base_name(n) not in known}
    assert not unknown, f"not declared in common/engine_metrics.py: {sorted(unknown)}"
    assert not used & set(vllm_metrics.REMOVED_METRICS)
    # REQUIRED_METRICS is what tests/vllm checks against the live /metrics of the pinned release.
    assert {vllm_metrics.base_name(n) for n in used} <= set(vllm_metrics.REQUIRED_METRICS)


def test_used_metric_names_cover_the_operated_signals():
    used = {vllm_metrics.base_name(n) for n in obs.used_metric_names()}
    for name in (vllm_metrics.NUM_REQUESTS_WAITING, vllm_metrics.KV_CACHE_USAGE, vllm_metrics.NUM_PREEMPTIONS,
                 vllm_metrics.TIME_TO_FIRST_TOKEN):
        assert name in used
    # Everything the rules and dashboard query is in the set the live-/metrics test checks.
    text = json.dumps(obs.dashboard(TARGET)) + json.dumps(obs.alert_rules(TARGET, THRESHOLDS))
    assert vllm_metrics.referenced_names(text) <= obs.used_metric_names()


@pytest.mark.parametrize("target", [TARGET, LWS_TARGET], ids=["deployment", "lws"])
def test_queries_select_one_model_in_one_namespace(target):
    for expr in obs.all_queries(target, THRESHOLDS):
        if "vllm:" in expr:
            assert f'model_name="{target.served_name}"' in expr and 'namespace="llm-serving"' in expr, expr


def test_each_alert_says_what_to_do():
    rules = obs.alert_rules(TARGET, THRESHOLDS)
    names = {r["alert"] for r in rules}
    assert names == {"VllmTimeToFirstTokenHigh", "VllmRequestQueueBacklog", "VllmKvCacheNearlyFull",
                     "VllmPreemptions", "VllmStartupRestartLoop"}
    for r in rules:
        assert r["annotations"]["summary"] and len(r["annotations"]["description"]) > 60
        assert r["for"] and r["labels"]["severity"] in ("warning", "critical")
    ttft = next(r for r in rules if r["alert"] == "VllmTimeToFirstTokenHigh")
    assert "histogram_quantile(0.95" in ttft["expr"] and "vllm:time_to_first_token_seconds_bucket" in ttft["expr"]
    restart = next(r for r in rules if r["alert"] == "VllmStartupRestartLoop")
    assert "kube_pod_container_status_restarts_total" in restart["expr"]


def _pod_regexes(expr: str) -> list[str]:
    """The pod=~ regexes of every selector in a parsed expression (PromQL anchors them: fullmatch)."""
    found: list[str] = []

    def walk(node) -> None:
        matchers = getattr(node, "matchers", None)
        for m in getattr(matchers, "matchers", None) or []:
            if m.name == "pod":
                found.append(m.value)
        for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for child in getattr(node, "args", None) or []:
            walk(child)

    walk(promql_parser.parse(expr))
    return found


@pytest.mark.parametrize("target,own,others", [
    (TARGET,
     ["llama-3-1-8b-instruct-7d9c8b6f5-x2k4p", "llama-3-1-8b-instruct-5f6b-abcde"],
     # Another model whose name starts with this one's; this model's KServe twin; an LWS of that name.
     ["llama-3-1-8b-instruct-fp8-7d9c8b6f5-x2k4p", "llama-3-1-8b-instruct-predictor-7d9c8b6f5-x2k4p",
      "llama-3-1-8b-instruct-0", "llama-3-1-8b-instruct-long-0-1"]),
    (LWS_TARGET,
     ["llama-70b-pp-0", "llama-70b-pp-12"],
     ["llama-70b-pp-2-0-1", "llama-70b-pp-fp8-0", "llama-70b-pp-7d9c8b6f5-x2k4p"]),
])
def test_restart_alert_selects_only_this_models_serving_pods(target, own, others):
    import re

    expr = next(r for r in obs.alert_rules(target, THRESHOLDS) if r["alert"] == "VllmStartupRestartLoop")["expr"]
    regexes = _pod_regexes(expr)
    assert len(regexes) == 2, expr  # the restart (or instance) count and the readiness condition
    for regex in regexes:
        assert all(re.fullmatch(regex, pod) for pod in own), (regex, own)
        assert not any(re.fullmatch(regex, pod) for pod in others), (regex, others)


def test_lws_restart_alert_counts_recreated_pods_not_container_restarts():
    # RecreateGroupOnPodRestart replaces the pods (new UIDs, restart count 0): count UIDs per name.
    expr = obs.restart_loop_query(LWS_TARGET)
    promql_parser.parse(expr)
    assert "kube_pod_info" in expr and "uid" in expr and "kube_pod_container_status_restarts_total" not in expr
    assert expr.startswith("(count by (namespace, pod) (count by (namespace, pod, uid)")
    assert ">= 3" in expr and 'condition="true"} == 0' in expr
    # Both are kube-state-metrics series with these labels (docs/metrics/workload/pod-metrics.md).
    assert "kube_pod_status_ready" in expr


def test_restart_window_grows_with_the_startup_budget():
    slow = obs.Target("m", "ns", "m", load_seconds=1800, startup_budget_seconds=2700)
    assert obs.restart_window(TARGET) == "30m"
    assert obs.restart_window(slow) == "135m"


def test_scaling_windows_follow_the_cold_start():
    b = obs.scaling_behavior(TARGET)
    assert b["scaleDown"]["stabilizationWindowSeconds"] >= TARGET.load_seconds
    assert b["scaleUp"]["policies"][0]["periodSeconds"] >= TARGET.load_seconds
    huge = obs.Target("m", "ns", "m", load_seconds=5000, startup_budget_seconds=7500)
    hb = obs.scaling_behavior(huge)
    # autoscaling/v2 caps: stabilization ≤ 3600 s, policy period ≤ 1800 s.
    assert hb["scaleDown"]["stabilizationWindowSeconds"] == 3600
    assert hb["scaleUp"]["policies"][0]["periodSeconds"] == 1800


def test_dashboard_is_a_sidecar_config_map():
    cm = obs.dashboard_config_map("d", TARGET, namespace="monitoring")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "monitoring"
    board = json.loads(cm["data"]["vllm-llama-3-1-8b-instruct.json"])
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) >= 6


def test_prometheus_adapter_rule_serves_the_hpa_metric():
    rule = obs.prometheus_adapter_rule()
    assert rule["name"]["as"] == obs.EXTERNAL_QUEUE_METRIC
    assert vllm_metrics.NUM_REQUESTS_WAITING in rule["seriesQuery"]
    # The HPA selects by model_name, so the adapter's query must keep that label.
    hpa = obs.horizontal_pod_autoscaler("x", TARGET, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                                        min_replicas=1, max_replicas=2, threshold=8)
    selector = hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"]
    assert set(selector) <= {"model_name"} and "by (model_name)" in rule["metricsQuery"]
    # With the adapter's template filled in the way it does, the query is valid PromQL.
    filled = rule["metricsQuery"].replace("<<.Series>>", vllm_metrics.NUM_REQUESTS_WAITING).replace(
        "<<.LabelMatchers>>", 'namespace="llm-serving", model_name="llama-3-1-8b-instruct"')
    promql_parser.parse(filled)
