"""How a vLLM server is watched and scaled: scrape config, alerts, dashboard, autoscaler.

Pure functions that return Kubernetes manifests as dicts (no Pulumi): the server component turns
them into resources, and the tests parse every PromQL expression and check every metric name
against the live /metrics of the pinned vLLM (`used_metric_names`).

Every vLLM metric name comes from common/engine_metrics.py. vLLM 0.32 labels its series with
`model_name` = the served model name (vllm/v1/metrics/loggers.py: labelnames ["model_name",
"engine"]); the Prometheus Operator adds `namespace` and `pod` from the scrape target, so each
query selects one model in one namespace.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from common import engine_metrics as m
from components.serving.probes import METRICS_PATH, PORT_NAME

SCRAPE_INTERVAL = "15s"
GRAFANA_DASHBOARD_LABEL = "grafana_dashboard"  # the Grafana sidecar's default label (value "1")
# The HPA caps stabilization windows and policy periods (autoscaling/v2 validation).
HPA_MAX_WINDOW_SECONDS = 3600
HPA_MAX_POLICY_PERIOD_SECONDS = 1800
# Name under which an external metrics adapter (prometheus-adapter) must expose the queue depth
# for kind: hpa. Kubernetes metric names cannot contain ':'; see `prometheus_adapter_rule`.
EXTERNAL_QUEUE_METRIC = "vllm_num_requests_waiting"
SERVER_CONTAINER = "vllm"


@dataclass(frozen=True)
class AlertThresholds:
    ttft_p95_seconds: float = 2.0
    """p95 time to first token that pages: users see a stalled answer."""
    kv_cache_usage: float = 0.95
    """Share of the KV cache in use (vLLM reports 0..1) above which requests start to preempt."""
    preemptions_per_second: float = 0.1
    queue_per_replica: float = 5.0


# Pod names per workload kind, as anchored regexes (PromQL anchors =~ at both ends), so that one
# model's queries never select another model whose name merely starts with this one's:
# - Deployment pods are <deployment>-<pod-template-hash>-<5 random characters> (the hash is 1-10
#   characters and the suffix 5, both from Kubernetes' safe alphabet, which has no '-').
# - LeaderWorkerSet leaders are <lws>-<group index>, workers <lws>-<group index>-<worker index>
#   (sigs.k8s.io/lws pod naming; the leader's name is LWS_LEADER_ADDRESS's first label).
DEPLOYMENT = "Deployment"
LEADER_WORKER_SET = "LeaderWorkerSet"


@dataclass(frozen=True)
class Target:
    """What the queries select: one served model in one namespace, and its pods."""

    served_name: str
    namespace: str
    # The workload's name; its pods' names start with it (see the regexes above).
    workload_name: str
    # Seconds from container start to /health (plan.load_seconds) and the startup probe budget.
    load_seconds: float
    startup_budget_seconds: int
    labels: dict[str, str] = field(default_factory=dict)
    workload_kind: str = DEPLOYMENT

    @property
    def selector(self) -> str:
        return f'model_name="{self.served_name}", namespace="{self.namespace}"'

    def _pods(self, regex: str) -> str:
        # Workload names are DNS labels ([-a-z0-9]): no regex metacharacter to escape.
        return f'namespace="{self.namespace}", pod=~"{self.workload_name}-{regex}"'

    @property
    def pod_selector(self) -> str:
        """Every pod of the workload (for a LeaderWorkerSet, leaders and workers)."""
        if self.workload_kind == LEADER_WORKER_SET:
            return self._pods("[0-9]+(-[0-9]+)?")
        return self._pods("[a-z0-9]{1,10}-[a-z0-9]{5}")

    @property
    def serving_pod_selector(self) -> str:
        """The pods that serve HTTP and turn ready: Deployment pods, or LeaderWorkerSet leaders."""
        if self.workload_kind == LEADER_WORKER_SET:
            return self._pods("[0-9]+")
        return self.pod_selector


# ---------------------------------------------------------------------------------------------
# Queries


def queue_depth_query(t: Target) -> str:
    return f"sum({m.NUM_REQUESTS_WAITING}{{{t.selector}}})"


def ttft_p95_query(t: Target, window: str = "5m") -> str:
    return (f"histogram_quantile(0.95, sum by (le) (rate({m.TIME_TO_FIRST_TOKEN}_bucket{{{t.selector}}}[{window}])))")


def _quantile(metric: str, t: Target, q: float = 0.95) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{t.selector}}}[5m])))"


def restart_window(t: Target) -> str:
    """Long enough to see two restarts of a model whose start-up takes the whole budget."""
    minutes = max(30, math.ceil(3 * t.startup_budget_seconds / 60))
    return f"{minutes}m"


def restart_loop_query(t: Target) -> str:
    """Serving pods that started over at least twice in the window and are still not ready.

    A Deployment's kubelet restarts the failing container in place, so its restart counter climbs.
    A LeaderWorkerSet with RecreateGroupOnPodRestart instead deletes and recreates the whole group
    when any of its containers restarts: the new pods have the same names, new UIDs and a restart
    count of zero, so the counter never reaches 2. There, count the distinct pod UIDs each leader
    name had in the window (kube-state-metrics' kube_pod_info carries `uid`; deduplicating by uid
    first keeps the pod_ip/node label changes of one pod from counting twice): 3 instances = 2
    recreations.
    """
    ready = f'(kube_pod_status_ready{{{t.serving_pod_selector}, condition="true"}} == 0)'
    window = restart_window(t)
    if t.workload_kind == LEADER_WORKER_SET:
        started = (f"count by (namespace, pod) (count by (namespace, pod, uid) "
                   f"(last_over_time(kube_pod_info{{{t.serving_pod_selector}}}[{window}]))) >= 3")
    else:
        started = (f'increase(kube_pod_container_status_restarts_total{{{t.pod_selector}, '
                   f'container="{SERVER_CONTAINER}"}}[{window}]) >= 2')
    return f"({started}) and on (namespace, pod) {ready}"


def alert_rules(t: Target, th: AlertThresholds) -> list[dict[str, Any]]:
    sel = t.selector
    name = t.served_name
    return [
        {
            "alert": "VllmTimeToFirstTokenHigh",
            "expr": f"{ttft_p95_query(t)} > {th.ttft_p95_seconds:g}",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{name}: p95 time to first token above {th.ttft_p95_seconds:g}s for 10 minutes",
                "description": (
                    "Prompts wait too long before the first token. Check the queue and KV-cache panels: a "
                    "long queue means add replicas (raise autoscaling.maxReplicas or replicas); a full KV "
                    "cache means lower maxModelLen or maxNumSeqs, use kvCacheDtype fp8 or larger GPUs; "
                    "long prompts alone call for a lower maxNumBatchedTokens."
                ),
            },
        },
        {
            "alert": "VllmRequestQueueBacklog",
            "expr": (f"sum({m.NUM_REQUESTS_WAITING}{{{sel}}}) / "
                     f"clamp_min(count({m.NUM_REQUESTS_WAITING}{{{sel}}}), 1) > {th.queue_per_replica:g}"),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{name}: more than {th.queue_per_replica:g} requests waiting per replica for 10 minutes",
                "description": (
                    "Requests queue faster than the replicas serve them. If the autoscaler is at maxReplicas, "
                    "raise it (and the pool's maxNodes); if it is not scaling, check the KEDA ScaledObject or "
                    "HPA events and that Prometheus scrapes the servers."
                ),
            },
        },
        {
            "alert": "VllmKvCacheNearlyFull",
            "expr": f"max({m.KV_CACHE_USAGE}{{{sel}}}) > {th.kv_cache_usage:g}",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{name}: KV cache over {th.kv_cache_usage:.0%} full for 15 minutes",
                "description": (
                    "New requests wait for cache blocks and running ones get preempted. Add replicas, lower "
                    "maxNumSeqs or maxModelLen, set kvCacheDtype: fp8, or move to a pool with more GPU memory "
                    "(the sizing table shows KV tokens per replica)."
                ),
            },
        },
        {
            "alert": "VllmPreemptions",
            "expr": f"sum(rate({m.NUM_PREEMPTIONS}{{{sel}}}[5m])) > {th.preemptions_per_second:g}",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{name}: requests are being preempted (KV cache exhausted)",
                "description": (
                    "Preempted requests are recomputed from scratch, wasting GPU time and raising latency. "
                    "Reduce concurrency per replica (maxNumSeqs), add replicas, or give the KV cache more "
                    "memory (kvCacheDtype: fp8, higher gpuMemoryUtilization, larger GPUs)."
                ),
            },
        },
        {
            "alert": "VllmStartupRestartLoop",
            "expr": restart_loop_query(t),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"{name}: server restarts before it ever becomes ready",
                "description": (
                    "The server crashes or is killed during start-up. Read the previous container log "
                    "(kubectl logs --previous): an OOMKilled status means the memory limit is too small for "
                    "weight staging; 'startup probe failed' means loading takes longer than the probe budget "
                    f"({t.startup_budget_seconds}s; set modelStore.readMBps to the measured storage speed); "
                    "a CUDA out-of-memory error means the model does not fit at this maxModelLen."
                ),
            },
        },
    ]


def all_queries(t: Target, th: AlertThresholds) -> list[str]:
    """Every PromQL expression this module emits (alerts, autoscaler, dashboard)."""
    exprs = [r["expr"] for r in alert_rules(t, th)]
    exprs.append(queue_depth_query(t))
    for panel in _panels(t):
        exprs += [target["expr"] for target in panel["targets"]]
    return exprs


def used_metric_names() -> set[str]:
    """Every vLLM series name the rules, dashboard and autoscaler query (for live /metrics checks)."""
    t = Target("model", "namespace", "model", 600, 900)
    names: set[str] = set()
    for expr in all_queries(t, AlertThresholds()):
        names |= m.referenced_names(expr)
    return names


# ---------------------------------------------------------------------------------------------
# Manifests


def service_monitor(name: str, t: Target, service_labels: dict[str, str], extra_labels: dict[str, str]) -> dict[str, Any]:
    # /metrics is outside vLLM's API-key guard (GUARDED_PREFIX covers /v1 and friends), so the
    # scrape needs no credentials.
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": t.namespace, "labels": {**t.labels, **extra_labels}},
        "spec": {
            "selector": {"matchLabels": dict(service_labels)},
            "namespaceSelector": {"matchNames": [t.namespace]},
            "endpoints": [{"port": PORT_NAME, "path": METRICS_PATH, "interval": SCRAPE_INTERVAL}],
        },
    }


def prometheus_rule(name: str, t: Target, th: AlertThresholds, extra_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": t.namespace, "labels": {**t.labels, **extra_labels}},
        "spec": {"groups": [{"name": f"vllm-{t.served_name}", "rules": alert_rules(t, th)}]},
    }


def scaling_behavior(t: Target) -> dict[str, Any]:
    """HPA behaviour sized from the cold start.

    Scale up one replica per load time: a new replica helps only once loaded, so adding another
    while the first is still loading over-provisions GPUs. Scale down only after the queue has stayed
    low for at least the start-up budget: a replica that took ten minutes to load is not dropped
    after five quiet minutes, only to be needed (and loaded again) right after.
    """
    up_period = min(HPA_MAX_POLICY_PERIOD_SECONDS, max(60, math.ceil(t.load_seconds)))
    down_window = min(HPA_MAX_WINDOW_SECONDS, max(300, t.startup_budget_seconds))
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 60,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": up_period}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": down_window,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": min(HPA_MAX_POLICY_PERIOD_SECONDS, down_window)}],
        },
    }


def scaled_object(name: str, t: Target, target_ref: dict[str, str], *, min_replicas: int, max_replicas: int,
                  threshold: float, prometheus_url: str) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": t.namespace, "labels": dict(t.labels)},
        "spec": {
            "scaleTargetRef": dict(target_ref),
            # Kept warm: a replica from zero costs the full load time before it serves anything.
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": max(300, t.startup_budget_seconds),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": scaling_behavior(t)}},
            "triggers": [{
                "type": "prometheus",
                # AverageValue: KEDA divides the sum by the replica count, so `threshold` is per replica.
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": queue_depth_query(t),
                    "threshold": f"{threshold:g}",
                },
            }],
        },
    }


def horizontal_pod_autoscaler(name: str, t: Target, target_ref: dict[str, str], *, min_replicas: int,
                              max_replicas: int, threshold: float) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": t.namespace, "labels": dict(t.labels)},
        "spec": {
            "scaleTargetRef": dict(target_ref),
            "minReplicas": max(1, min_replicas),
            "maxReplicas": max_replicas,
            "metrics": [{
                "type": "External",
                "external": {
                    "metric": {
                        "name": EXTERNAL_QUEUE_METRIC,
                        "selector": {"matchLabels": {"model_name": t.served_name}},
                    },
                    "target": {"type": "AverageValue", "averageValue": f"{threshold:g}"},
                },
            }],
            "behavior": scaling_behavior(t),
        },
    }


def prometheus_adapter_rule() -> dict[str, Any]:
    """The prometheus-adapter `externalRules` entry that serves EXTERNAL_QUEUE_METRIC for kind: hpa."""
    return {
        "seriesQuery": f'{{__name__="{m.NUM_REQUESTS_WAITING}"}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
        "name": {"matches": ".*", "as": EXTERNAL_QUEUE_METRIC},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (model_name)",
    }


def _panels(t: Target) -> list[dict[str, Any]]:
    sel = t.selector

    def panel(pid: int, title: str, unit: str, exprs: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
        return {
            "id": pid,
            "type": "timeseries",
            "title": title,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + i), "expr": e, "legendFormat": legend} for i, (e, legend) in enumerate(exprs)],
        }

    return [
        panel(1, "Time to first token", "s", [
            (_quantile(m.TIME_TO_FIRST_TOKEN, t, 0.5), "p50"), (_quantile(m.TIME_TO_FIRST_TOKEN, t, 0.95), "p95")], 0, 0),
        panel(2, "Inter-token and end-to-end latency (p95)", "s", [
            (_quantile(m.INTER_TOKEN_LATENCY, t), "inter-token p95"),
            (_quantile(m.E2E_REQUEST_LATENCY, t), "end-to-end p95"),
            (_quantile(m.QUEUE_TIME, t), "queue time p95")], 12, 0),
        panel(3, "Requests waiting / running", "short", [
            (f"sum({m.NUM_REQUESTS_WAITING}{{{sel}}})", "waiting"),
            (f"sum({m.NUM_REQUESTS_RUNNING}{{{sel}}})", "running")], 0, 8),
        panel(4, "KV-cache usage", "percentunit", [
            (f"max by (pod) ({m.KV_CACHE_USAGE}{{{sel}}})", "{{pod}}")], 12, 8),
        panel(5, "Preemptions", "ops", [(f"sum(rate({m.NUM_PREEMPTIONS}{{{sel}}}[5m]))", "preemptions/s")], 0, 16),
        panel(6, "Tokens per second", "short", [
            (f"sum(rate({m.PROMPT_TOKENS}{{{sel}}}[5m]))", "prompt"),
            (f"sum(rate({m.GENERATION_TOKENS}{{{sel}}}[5m]))", "generation")], 12, 16),
        panel(7, "Prefix-cache hit rate", "percentunit", [
            (f"sum(rate({m.PREFIX_CACHE_HITS}{{{sel}}}[5m])) / clamp_min(sum(rate({m.PREFIX_CACHE_QUERIES}{{{sel}}}[5m])), 1)",
             "hit rate")], 0, 24),
        panel(8, "Container restarts", "short", [
            (f'sum by (pod) (increase(kube_pod_container_status_restarts_total{{{t.pod_selector}, container="{SERVER_CONTAINER}"}}[1h]))',
             "{{pod}}")], 12, 24),
    ]


def dashboard(t: Target) -> dict[str, Any]:
    return {
        "uid": f"vllm-{t.namespace}-{t.served_name}"[:40],
        "title": f"vLLM {t.served_name} ({t.namespace})",
        "tags": ["vllm", "llm-serving"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{
            "name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
        }]},
        "panels": _panels(t),
    }


def dashboard_config_map(name: str, t: Target, namespace: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace or t.namespace,
            "labels": {**t.labels, GRAFANA_DASHBOARD_LABEL: "1"},
        },
        "data": {f"vllm-{t.served_name}.json": json.dumps(dashboard(t), indent=1, sort_keys=True)},
    }
