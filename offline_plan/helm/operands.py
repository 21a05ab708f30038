"""The pods the Prometheus Operator starts for a rendered Prometheus or Alertmanager, as PodSummary,
so placement and fit count them like the chart's own workloads.

The operator builds a StatefulSet per Prometheus shard with `spec.replicas` pods (default 1) and
one for an Alertmanager with `spec.replicas` (default 1); the pod takes the custom resource's
`nodeSelector`, `tolerations` and `affinity`, its main container `spec.resources`, and a
config-reloader sidecar (plus an init container of the same image) whose requests the operator
sets from its `--config-reloader-cpu-request` and `--config-reloader-memory-request` flags
(https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PrometheusSpec;
prometheus-operator/prometheus-operator cmd/operator/main.go, flag `config-reloader-cpu-request`:
"Value \"0\" disables it and causes no request to be configured"; kube-prometheus-stack passes them
from `prometheusOperator.prometheusConfigReloader.resources`). When the release renders no
operator with those flags, the sidecar's request is left out and the pod is listed among those
with an unset request.
"""

from __future__ import annotations

from typing import Any

from offline_plan.helm import quantities
from offline_plan.helm.pods import HOSTNAME_LABEL, PodSummary

API_GROUP = "monitoring.coreos.com/"
KINDS = ("Prometheus", "Alertmanager")
RELOADER_FLAGS = {"cpu": "--config-reloader-cpu-request=", "memory": "--config-reloader-memory-request="}
RELOADER = "config-reloader"


def _reloader_requests(objects: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The sidecar's CPU and memory request from the operator Deployment's arguments, if rendered."""
    for obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        pod = (((obj.get("spec") or {}).get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or []:
            args = [str(a) for a in container.get("args") or []]
            found = {
                what: next((a[len(flag) :] for a in args if a.startswith(flag)), None)
                for what, flag in RELOADER_FLAGS.items()
            }
            if all(v is not None for v in found.values()):
                cpu, memory = quantities.parse(found["cpu"]), quantities.parse(found["memory"])
                if cpu is not None and memory is not None:
                    return cpu, memory
    return None


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def operand_summaries(objects: list[dict[str, Any]]) -> list[PodSummary]:
    reloader = _reloader_requests(objects)
    found = []
    for obj in objects:
        if obj.get("kind") not in KINDS or not str(obj.get("apiVersion", "")).startswith(API_GROUP):
            continue
        spec = obj.get("spec") or {}
        meta = obj.get("metadata") or {}
        requests = (spec.get("resources") or {}).get("requests") or {}
        cpu, memory = quantities.parse(requests.get("cpu")), quantities.parse(requests.get("memory"))
        unset = [obj["kind"].lower()] if cpu is None or memory is None else []
        if reloader is None:
            unset.append(RELOADER)
        extra_cpu, extra_memory = reloader or (0.0, 0.0)
        replicas = _number(spec.get("replicas"), 1.0) * (
            _number(spec.get("shards"), 1.0) if obj["kind"] == "Prometheus" else 1.0
        )
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        found.append(
            PodSummary(
                ref=f"{obj['kind']}/{meta.get('name')}",
                namespace=meta.get("namespace"),
                count=f"{replicas:g}",
                replicas=replicas,
                cpu=(cpu or 0.0) + extra_cpu,
                memory=(memory or 0.0) + extra_memory,
                node_selector=dict(spec.get("nodeSelector") or {}),
                tolerations=list(spec.get("tolerations") or []),
                affinity_keys=[],
                images=[str(spec["image"])] if isinstance(spec.get("image"), str) else [],
                unset=unset,
                required_terms=[t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]
                if isinstance(required, dict)
                else None,
                # The operator's pods carry labels the CR does not show; a required anti-affinity by
                # host is taken to spread the replicas, as the chart's own ones do.
                spread_by_host=any(isinstance(t, dict) and t.get("topologyKey") == HOSTNAME_LABEL for t in anti),
            )
        )
    return found
