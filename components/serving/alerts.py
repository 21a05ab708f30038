"""The alerts of one served model: is it up, does it fail requests, is it saturated.

What users feel first: no replica answering (`VllmNoReadyReplica`), requests failing
(`VllmRequestErrors`), and a server that never comes up (`VllmStartupRestartLoop`). Then the
saturation that precedes slow answers: a queue (`VllmRequestQueueBacklog`), a full KV cache
(`VllmKvCacheNearlyFull`) and the preemptions it causes (`VllmPreemptions`). Latency is judged
against the model's SLOs by burn rate (components/serving/slo.py), not by a fixed percentile.

Every alert goes through common.alerting.alert_rule (severity, what to do, runbook link); each
has a section of that name in docs/runbook.md. vLLM names come from common/engine_metrics.py;
kube-state-metrics names are written here (kube-state-metrics v2.19.1, the version the
kube-prometheus-stack chart ships, docs/metrics/workload/pod-metrics.md; checked against
tests/fixtures/kube-state-metrics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from common import engine_metrics as m
from common.alerting import PAGE, TICKET, AlertRouting, alert_rule
from components.serving.targets import LEADER_WORKER_SET, PodSet, Target

# kube-state-metrics series (labels namespace, pod, uid; container for the restart counter).
KSM_POD_READY = "kube_pod_status_ready"
KSM_POD_CREATED = "kube_pod_created"
KSM_POD_INFO = "kube_pod_info"
KSM_CONTAINER_RESTARTS = "kube_pod_container_status_restarts_total"

NO_READY_REPLICA = "VllmNoReadyReplica"
REQUEST_ERRORS = "VllmRequestErrors"
STARTUP_RESTART_LOOP = "VllmStartupRestartLoop"
QUEUE_BACKLOG = "VllmRequestQueueBacklog"
KV_CACHE_NEARLY_FULL = "VllmKvCacheNearlyFull"
PREEMPTIONS = "VllmPreemptions"

# The window the error ratio is measured over and how long it must hold.
ERROR_WINDOW = "5m"


@dataclass(frozen=True)
class AlertThresholds:
    kv_cache_usage: float = 0.95
    """Share of the KV cache in use (vLLM reports 0..1) above which requests start to preempt."""
    preemptions_per_second: float = 0.1
    queue_per_replica: float = 5.0
    error_ratio: float = 0.05
    """Share of requests failing (HTTP 5xx, or finished by the engine with error/abort) that pages."""


# ---------------------------------------------------------------------------------------------
# Availability


def no_ready_pods_expr(pods: PodSet) -> str:
    """True while none of `pods` is ready although one should have been by now.

    "By now": the oldest of the pods exists longer than their ready deadline, or there is no pod at
    all. A rollout that replaces every pod (Recreate, or a LeaderWorkerSet group) is expected to
    have none ready while the new pods load, and stays quiet until the deadline; a crash loop in
    that time is VllmStartupRestartLoop's. When kube-state-metrics itself is gone every series is
    missing, which is not this model's outage (alerts on Prometheus' own scrape targets cover it),
    so the alert stays quiet then.
    """
    sel = pods.selector
    none_ready = f'(sum({KSM_POD_READY}{{{sel}, condition="true"}}) or on() vector(0)) == 0'
    overdue = (
        f"((time() - min({KSM_POD_CREATED}{{{sel}}})) > {pods.ready_deadline_seconds} "
        f"or on() absent({KSM_POD_CREATED}{{{sel}}}))"
    )
    return f"{none_ready} and on() {overdue} unless on() absent({KSM_POD_READY})"


def no_ready_pods_alert(
    name: str, pods: PodSet, routing: AlertRouting, *, what_to_do: str, for_: str = "5m"
) -> dict[str, Any]:
    """Page when none of `pods` is ready past their deadline: every request to them fails."""
    return alert_rule(
        name,
        no_ready_pods_expr(pods),
        severity=PAGE,
        for_=for_,
        routing=routing,
        summary=f"{pods.description}: no ready pod, every request fails",
        description=(
            f"No pod of {pods.description} in namespace {pods.namespace} has been ready for {for_}, although "
            f"the oldest is past its {pods.ready_deadline_seconds}s start-up deadline. {what_to_do}"
        ),
    )


def error_ratios(t: Target) -> tuple[str, str]:
    """(engine, HTTP) ratios of failed requests over all requests in ERROR_WINDOW.

    The engine counts requests it finished with `error` (an internal failure, answered with a 500)
    or `abort` (cut by the engine, e.g. a stream ended mid-answer) among all it finished. The HTTP
    counter sees what the engine never did: 5xx answers before a request reached it, or every
    request once the engine died. The two are separate ratios, each against its own total, so a
    non-streamed 500 counted by both never counts twice.
    """
    w = ERROR_WINDOW
    sel = t.selector
    engine = (
        f"sum(rate({m.REQUEST_SUCCESS}{{{sel}, "
        f'{m.FINISHED_REASON_LABEL}=~"{m.FINISHED_ERROR}|{m.FINISHED_ABORT}"}}[{w}])) '
        f"/ sum(rate({m.REQUEST_SUCCESS}{{{sel}}}[{w}]))"
    )
    api = f'{t.serving_pod_selector}, handler=~"{m.HTTP_API_HANDLERS}"'
    http = (
        f'sum(rate({m.HTTP_REQUESTS}{{{api}, {m.HTTP_STATUS_LABEL}="{m.HTTP_SERVER_ERROR}"}}[{w}])) '
        f"/ sum(rate({m.HTTP_REQUESTS}{{{api}}}[{w}]))"
    )
    return engine, http


def request_errors_expr(t: Target, threshold: float) -> str:
    # Each ratio compared on its own: `or` binds looser than `>`, so "(a) or (b) > x" would return
    # the engine ratio whatever its value.
    engine, http = error_ratios(t)
    return f"({engine} > {threshold:g}) or ({http} > {threshold:g})"


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
    ready = f'({KSM_POD_READY}{{{t.serving_pod_selector}, condition="true"}} == 0)'
    window = restart_window(t)
    if t.workload_kind == LEADER_WORKER_SET:
        started = (
            f"count by (namespace, pod) (count by (namespace, pod, uid) "
            f"(last_over_time({KSM_POD_INFO}{{{t.serving_pod_selector}}}[{window}]))) >= 3"
        )
    else:
        started = f'increase({KSM_CONTAINER_RESTARTS}{{{t.pod_selector}, container="{t.container}"}}[{window}]) >= 2'
    return f"({started}) and on (namespace, pod) {ready}"


# ---------------------------------------------------------------------------------------------
# Saturation


def queue_per_replica_query(t: Target) -> str:
    return (
        f"sum({m.NUM_REQUESTS_WAITING}{{{t.selector}}}) / clamp_min(count({m.NUM_REQUESTS_WAITING}{{{t.selector}}}), 1)"
    )


def model_alerts(t: Target, th: AlertThresholds, routing: AlertRouting) -> list[dict[str, Any]]:
    """Availability and saturation alerts of one model (its SLO alerts are slo.burn_rate_alerts)."""
    sel = t.selector
    name = t.served_name
    return [
        no_ready_pods_alert(
            NO_READY_REPLICA,
            t.serving_pods,
            routing,
            what_to_do=(
                "Check the pods' events and the previous container log (kubectl describe pod, kubectl logs "
                "--previous): Pending means no GPU node could take it (pool at maxNodes, capacity, taints); "
                "a crash or OOM needs the fix VllmStartupRestartLoop describes."
            ),
        ),
        alert_rule(
            REQUEST_ERRORS,
            request_errors_expr(t, th.error_ratio),
            severity=PAGE,
            for_="5m",
            routing=routing,
            summary=f"{name}: more than {th.error_ratio:.0%} of requests fail",
            description=(
                "Requests end in HTTP 5xx or are finished by the engine with an error or abort ({{ $value | "
                "humanizePercentage }} over 5 minutes). Read the server log for the exception (an engine that died "
                "answers 500 to everything until the pod restarts); check GPU alerts on the same node (XID, ECC); "
                "if one pod fails and others do not, delete that pod."
            ),
        ),
        alert_rule(
            STARTUP_RESTART_LOOP,
            restart_loop_query(t),
            severity=PAGE,
            for_="5m",
            routing=routing,
            summary=f"{name}: server restarts before it ever becomes ready",
            description=(
                "The server crashes or is killed during start-up. Read the previous container log "
                "(kubectl logs --previous): an OOMKilled status means the memory limit is too small for "
                "weight staging; 'startup probe failed' means loading takes longer than the probe budget "
                f"({t.startup_budget_seconds}s; set modelStore.readMBps to the measured storage speed); "
                "a CUDA out-of-memory error means the model does not fit at this maxModelLen."
            ),
        ),
        alert_rule(
            QUEUE_BACKLOG,
            f"{queue_per_replica_query(t)} > {th.queue_per_replica:g}",
            severity=TICKET,
            for_="10m",
            routing=routing,
            summary=f"{name}: more than {th.queue_per_replica:g} requests waiting per replica for 10 minutes",
            description=(
                "Requests queue faster than the replicas serve them. If the autoscaler is at maxReplicas, "
                "raise it (and the pool's maxNodes); if it is not scaling, check the KEDA ScaledObject or "
                "HPA events and that Prometheus scrapes the servers."
            ),
        ),
        alert_rule(
            KV_CACHE_NEARLY_FULL,
            f"max({m.KV_CACHE_USAGE}{{{sel}}}) > {th.kv_cache_usage:g}",
            severity=TICKET,
            for_="15m",
            routing=routing,
            summary=f"{name}: KV cache over {th.kv_cache_usage:.0%} full for 15 minutes",
            description=(
                "New requests wait for cache blocks and running ones get preempted. Add replicas, lower "
                "maxNumSeqs or maxModelLen, set kvCacheDtype: fp8, or move to a pool with more GPU memory "
                "(the sizing table shows KV tokens per replica)."
            ),
        ),
        alert_rule(
            PREEMPTIONS,
            f"sum(rate({m.NUM_PREEMPTIONS}{{{sel}}}[5m])) > {th.preemptions_per_second:g}",
            severity=TICKET,
            for_="15m",
            routing=routing,
            summary=f"{name}: requests are being preempted (KV cache exhausted)",
            description=(
                "Preempted requests are recomputed from scratch, wasting GPU time and raising latency. "
                "Reduce concurrency per replica (maxNumSeqs), add replicas, or give the KV cache more "
                "memory (kvCacheDtype: fp8, higher gpuMemoryUtilization, larger GPUs)."
            ),
        ),
    ]
