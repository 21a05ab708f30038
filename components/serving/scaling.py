"""How a model scales: on whichever saturates first, its queue or its KV cache.

Two signals, per replica:
- queue depth, `sum(vllm:num_requests_waiting)`: requests the scheduler could not start yet;
- KV-cache usage, `sum(vllm:kv_cache_usage_perc)`: the share of cache blocks held by running
  requests (0..1 per replica; blocks only cached for prefix reuse count as free, vLLM 0.32
  vllm/v1/core/block_pool.py get_usage). It climbs before the queue does: once it is full the
  scheduler stops admitting (the queue grows) and starts preempting.

Each is an AverageValue target (the metric summed over the model, divided by the replica count).
The HorizontalPodAutoscaler computes a replica count per metric and takes the largest ("the maximum
replica count across all metrics will be used", autoscaling/v2 HorizontalPodAutoscalerSpec.metrics
in the Kubernetes API reference); KEDA turns each trigger into one metric of the HPA it manages, so
both paths scale on whichever signal saturates first.

The windows come from the cold start (`scaling_behavior`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from common import engine_metrics as m
from components.serving.targets import Target
from stack_config.models import AutoscalingConfig

# The HPA caps stabilization windows and policy periods (autoscaling/v2 validation).
HPA_MAX_WINDOW_SECONDS = 3600
HPA_MAX_POLICY_PERIOD_SECONDS = 1800


@dataclass(frozen=True)
class Signal:
    key: str
    """KEDA trigger name: lower-case letters, digits and '-'."""
    engine_metric: str
    external_metric: str
    """The name prometheus-adapter serves it under for the HPA (Kubernetes metric names cannot contain ':')."""


QUEUE = Signal("queue-depth", m.NUM_REQUESTS_WAITING, "vllm_num_requests_waiting")
KV_CACHE = Signal("kv-cache-usage", m.KV_CACHE_USAGE, "vllm_kv_cache_usage_perc")
SIGNALS = (QUEUE, KV_CACHE)


@dataclass(frozen=True)
class ScalingTargets:
    """Per-replica values that trigger a scale-up (models[].autoscaling)."""

    queue: float
    kv_cache: float

    def of(self, signal: Signal) -> float:
        return {QUEUE.key: self.queue, KV_CACHE.key: self.kv_cache}[signal.key]

    @classmethod
    def of_model(cls, autoscaling: AutoscalingConfig) -> ScalingTargets:
        """From a model's `autoscaling` section."""
        return cls(queue=autoscaling.queueThreshold, kv_cache=autoscaling.kvCacheThreshold)


def signal_query(t: Target, signal: Signal) -> str:
    return f"sum({signal.engine_metric}{{{t.selector}}})"


def queue_depth_query(t: Target) -> str:
    return signal_query(t, QUEUE)


def scaling_behavior(t: Target) -> dict[str, Any]:
    """HPA behaviour sized from the cold start.

    Scale up one replica per load time: a new replica helps only once loaded, so adding another
    while the first is still loading over-provisions GPUs. Scale down only after the signals have
    stayed low for at least the start-up budget: a replica that took ten minutes to load is not
    dropped after five quiet minutes, only to be needed (and loaded again) right after.
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
            "policies": [
                {"type": "Pods", "value": 1, "periodSeconds": min(HPA_MAX_POLICY_PERIOD_SECONDS, down_window)}
            ],
        },
    }


def scaled_object(
    name: str,
    t: Target,
    target_ref: dict[str, str],
    *,
    min_replicas: int,
    max_replicas: int,
    scale_at: ScalingTargets,
    prometheus_url: str,
) -> dict[str, Any]:
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
            "triggers": [
                {
                    "type": "prometheus",
                    "name": signal.key,
                    # AverageValue: the HPA divides the sum by the replica count, so each threshold is per replica.
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": prometheus_url,
                        "query": signal_query(t, signal),
                        "threshold": f"{scale_at.of(signal):g}",
                    },
                }
                for signal in SIGNALS
            ],
        },
    }


def kserve_external_metrics(t: Target, scale_at: ScalingTargets, prometheus_url: str) -> list[dict[str, Any]]:
    """The InferenceService's `autoScaling.metrics` for KServe's KEDA autoscaler class: one per signal.

    KServe copies each target.value into a KEDA trigger's threshold, and KEDA's default metric type
    (AverageValue) makes it per replica, as on the vLLM path.
    """
    return [
        {
            "type": "External",
            "external": {
                "metric": {"backend": "prometheus", "serverAddress": prometheus_url, "query": signal_query(t, signal)},
                "target": {"type": "Value", "value": f"{scale_at.of(signal):g}"},
            },
        }
        for signal in SIGNALS
    ]


def horizontal_pod_autoscaler(
    name: str, t: Target, target_ref: dict[str, str], *, min_replicas: int, max_replicas: int, scale_at: ScalingTargets
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": t.namespace, "labels": dict(t.labels)},
        "spec": {
            "scaleTargetRef": dict(target_ref),
            "minReplicas": max(1, min_replicas),
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {
                            "name": signal.external_metric,
                            "selector": {"matchLabels": {"model_name": t.served_name}},
                        },
                        "target": {"type": "AverageValue", "averageValue": f"{scale_at.of(signal):g}"},
                    },
                }
                for signal in SIGNALS
            ],
            "behavior": scaling_behavior(t),
        },
    }


def prometheus_adapter_rules() -> list[dict[str, Any]]:
    """prometheus-adapter `rules.external` entries serving each signal's external metric (kind: hpa).

    The namespace override makes the adapter add the HPA's namespace to the query; the HPA's
    `model_name` selector arrives in <<.LabelMatchers>>, and the sum keeps model_name so it can.
    """
    return [
        {
            "seriesQuery": f'{{__name__="{signal.engine_metric}"}}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "name": {"matches": ".*", "as": signal.external_metric},
            "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (model_name)",
        }
        for signal in SIGNALS
    ]
