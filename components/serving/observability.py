"""How a vLLM server is watched: its scrape config and the rules Prometheus evaluates for it.

Pure functions that return Kubernetes manifests as dicts (no Pulumi): the server component turns
them into resources. The pieces live beside this module, one concern each:
- targets.py: what one model's queries select (its series and its pods);
- alerts.py: availability and saturation alerts;
- slo.py: latency SLO recording rules and burn-rate alerts;
- dashboard.py: the Grafana dashboard;
- scaling.py: the KEDA ScaledObject / HPA and the prometheus-adapter rules.

Every vLLM metric name comes from common/engine_metrics.py and every GPU metric name from
common/gpu_metrics.py; the tests parse every PromQL expression here and check each name against
the live /metrics of the pinned vLLM, the DCGM exporter's counters file or kube-state-metrics'
documentation (`all_queries`, `used_metric_names`).
"""

from __future__ import annotations

from typing import Any

from common import engine_metrics as m
from common.alerting import RUNBOOK_DOC, AlertRouting
from components.serving import alerts, dashboard, scaling, slo
from components.serving.probes import METRICS_PATH, PORT_NAME
from components.serving.targets import Target
from stack_config.models import SloConfig

SCRAPE_INTERVAL = "15s"


def routing_for(t: Target, runbook_url: str) -> AlertRouting:
    # model_name and namespace on every alert of the model, for Alertmanager routing and silences.
    return AlertRouting(runbook_url=runbook_url, labels={"model_name": t.served_name, "namespace": t.namespace})


def rule_groups(
    t: Target, th: alerts.AlertThresholds, objectives: list[slo.LatencySlo], runbook_url: str
) -> list[dict[str, Any]]:
    routing = routing_for(t, runbook_url)
    groups = [{"name": f"vllm-{t.served_name}", "rules": alerts.model_alerts(t, th, routing)}]
    if objectives:
        groups.append(
            {
                "name": f"vllm-{t.served_name}-slo",
                "rules": slo.recording_rules(t, objectives) + slo.burn_rate_alerts(t, objectives, routing),
            }
        )
    return groups


def prometheus_rule(
    name: str,
    t: Target,
    th: alerts.AlertThresholds,
    objectives: list[slo.LatencySlo],
    runbook_url: str,
    extra_labels: dict[str, str],
) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": t.namespace, "labels": {**t.labels, **extra_labels}},
        "spec": {"groups": rule_groups(t, th, objectives, runbook_url)},
    }


def service_monitor(
    name: str, t: Target, service_labels: dict[str, str], extra_labels: dict[str, str]
) -> dict[str, Any]:
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


def all_queries(t: Target, th: alerts.AlertThresholds, objectives: list[slo.LatencySlo]) -> list[str]:
    """Every PromQL expression the vLLM path emits: rules, dashboard, KEDA triggers and HPA adapter rules."""
    exprs = [r["expr"] for g in rule_groups(t, th, objectives, RUNBOOK_DOC) for r in g["rules"]]
    for panel in dashboard.panels(t, objectives):
        exprs += [target["expr"] for target in panel["targets"]]
    exprs += [scaling.signal_query(t, s) for s in scaling.SIGNALS]
    return exprs


def used_metric_names() -> set[str]:
    """Every engine series name the rules, dashboard and autoscaler query (for live /metrics checks)."""
    t = Target("model", "namespace", "model", 600, 900)
    names: set[str] = set()
    for expr in all_queries(t, alerts.AlertThresholds(), slo.latency_slos(SloConfig())):
        names |= m.referenced_names(expr)
    return names
