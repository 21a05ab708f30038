"""One Grafana dashboard per model: its SLOs, the engine, and the GPUs its pods hold.

Rows, top to bottom: the SLO burn (how fast each latency objective spends its error budget, with
the page and ticket rates drawn as thresholds), the vLLM panels (latency, queue, KV cache,
preemptions, throughput, restarts), and the GPU panels (utilization, memory, power, temperature,
throttling, XID errors) of exactly the GPUs assigned to this model's pods: the DCGM exporter
labels a GPU with the namespace and pod using it (common/gpu_metrics.py).

Shipped as a ConfigMap the Grafana sidecar of kube-prometheus-stack picks up by its label.
"""

from __future__ import annotations

import json
from typing import Any

from common import engine_metrics as m
from common import gpu_metrics as g
from common.alerting import BURN_WINDOWS, PAGE, TICKET
from components.serving import slo as slos
from components.serving.alerts import KSM_CONTAINER_RESTARTS
from components.serving.targets import Target

GRAFANA_DASHBOARD_LABEL = "grafana_dashboard"  # the Grafana sidecar's default label (value "1")
PANEL_HEIGHT = 8
HALF = 12  # Grafana's grid is 24 columns wide


def _quantile(metric: str, t: Target, q: float = 0.95) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{t.selector}}}[5m])))"


class _Grid:
    """Places panels two per row, numbering them; a full-width panel takes a row of its own."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self._x = 0
        self._y = 0

    def add(
        self,
        title: str,
        unit: str,
        exprs: list[tuple[str, str]],
        *,
        full_width: bool = False,
        thresholds: list[tuple[float, str]] | None = None,
    ) -> None:
        width = 2 * HALF if full_width else HALF
        if self._x + width > 2 * HALF:
            self._x, self._y = 0, self._y + PANEL_HEIGHT
        defaults: dict[str, Any] = {"unit": unit}
        if thresholds:
            defaults["thresholds"] = {
                "mode": "absolute",
                "steps": [{"color": "green", "value": None}]
                + [{"color": color, "value": value} for value, color in thresholds],
            }
            defaults["custom"] = {"thresholdsStyle": {"mode": "line"}}
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": PANEL_HEIGHT, "w": width, "x": self._x, "y": self._y},
                "fieldConfig": {"defaults": defaults, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + i), "expr": e, "legendFormat": legend}
                    for i, (e, legend) in enumerate(exprs)
                ],
            }
        )
        self._x += width


def _slo_panels(grid: _Grid, t: Target, objectives: list[slos.LatencySlo]) -> None:
    # Burn rate = error ratio / error budget: 1 spends exactly the budget over the 30-day period.
    page = min(w.burn_rate for w in BURN_WINDOWS if w.severity == PAGE)
    ticket = min(w.burn_rate for w in BURN_WINDOWS if w.severity == TICKET)
    for objective in objectives:
        grid.add(
            f"SLO burn rate: {objective.description}",
            "short",
            [
                (
                    f"{slos.recorded_ratio(objective, w.long)}{{{t.selector}}} / {objective.error_budget:g}",
                    f"burn rate {w.long}",
                )
                for w in BURN_WINDOWS
            ],
            thresholds=[(ticket, "orange"), (page, "red")],
        )


def _engine_panels(grid: _Grid, t: Target) -> None:
    sel = t.selector
    grid.add(
        "Time to first token",
        "s",
        [(_quantile(m.TIME_TO_FIRST_TOKEN, t, 0.5), "p50"), (_quantile(m.TIME_TO_FIRST_TOKEN, t, 0.95), "p95")],
    )
    grid.add(
        "Inter-token and end-to-end latency (p95)",
        "s",
        [
            (_quantile(m.INTER_TOKEN_LATENCY, t), "inter-token p95"),
            (_quantile(m.E2E_REQUEST_LATENCY, t), "end-to-end p95"),
            (_quantile(m.QUEUE_TIME, t), "queue time p95"),
        ],
    )
    grid.add(
        "Requests waiting / running",
        "short",
        [
            (f"sum({m.NUM_REQUESTS_WAITING}{{{sel}}})", "waiting"),
            (f"sum({m.NUM_REQUESTS_RUNNING}{{{sel}}})", "running"),
        ],
    )
    grid.add("KV-cache usage", "percentunit", [(f"max by (pod) ({m.KV_CACHE_USAGE}{{{sel}}})", "{{pod}}")])
    grid.add("Preemptions", "ops", [(f"sum(rate({m.NUM_PREEMPTIONS}{{{sel}}}[5m]))", "preemptions/s")])
    grid.add(
        "Tokens per second",
        "short",
        [
            (f"sum(rate({m.PROMPT_TOKENS}{{{sel}}}[5m]))", "prompt"),
            (f"sum(rate({m.GENERATION_TOKENS}{{{sel}}}[5m]))", "generation"),
        ],
    )
    grid.add(
        "Finished requests by reason",
        "reqps",
        [
            (f"sum by ({m.FINISHED_REASON_LABEL}) (rate({m.REQUEST_SUCCESS}{{{sel}}}[5m]))", "{{finished_reason}}"),
            (
                (
                    f"sum by ({m.HTTP_STATUS_LABEL}) (rate({m.HTTP_REQUESTS}{{{t.serving_pod_selector}, "
                    f'handler=~"{m.HTTP_API_HANDLERS}"}}[5m]))'
                ),
                "HTTP {{status}}",
            ),
        ],
    )
    grid.add(
        "Prefix-cache hit rate",
        "percentunit",
        [
            (
                (
                    f"sum(rate({m.PREFIX_CACHE_HITS}{{{sel}}}[5m])) "
                    f"/ clamp_min(sum(rate({m.PREFIX_CACHE_QUERIES}{{{sel}}}[5m])), 1)"
                ),
                "hit rate",
            )
        ],
    )
    grid.add(
        "Container restarts",
        "short",
        [
            (
                f'sum by (pod) (increase({KSM_CONTAINER_RESTARTS}{{{t.pod_selector}, container="{t.container}"}}[1h]))',
                "{{pod}}",
            )
        ],
    )


def _gpu_panels(grid: _Grid, t: Target) -> None:
    # Every pod of the workload: a LeaderWorkerSet's workers hold GPUs too.
    pods = t.pod_selector
    per_gpu = "{{pod}} GPU {{gpu}}"
    grid.add("GPU utilization", "percent", [(f"{g.GPU_UTIL}{{{pods}}}", per_gpu)])
    grid.add("GPU memory used", "mbytes", [(f"{g.FB_USED}{{{pods}}}", per_gpu)])
    grid.add("GPU power", "watt", [(f"{g.POWER_USAGE}{{{pods}}}", per_gpu)])
    grid.add(
        "GPU and memory temperature",
        "celsius",
        [(f"{g.GPU_TEMP}{{{pods}}}", "GPU " + per_gpu), (f"{g.MEMORY_TEMP}{{{pods}}}", "memory " + per_gpu)],
    )
    grid.add(
        "Share of time throttled",
        "percentunit",
        [
            (f"rate({g.POWER_VIOLATION}{{{pods}}}[5m]) / {g.VIOLATION_UNITS_PER_SECOND:g}", "power " + per_gpu),
            (f"rate({g.THERMAL_VIOLATION}{{{pods}}}[5m]) / {g.VIOLATION_UNITS_PER_SECOND:g}", "thermal " + per_gpu),
        ],
    )
    grid.add(
        "XID errors (last 5 minutes, by code)",
        "short",
        [(f"sum by (pod, {g.GPU_LABEL}, {g.XID_LABEL}) ({g.XID_COUNT}{{{pods}}})", "{{pod}} GPU {{gpu}} XID {{xid}}")],
    )


def panels(t: Target, objectives: list[slos.LatencySlo]) -> list[dict[str, Any]]:
    grid = _Grid()
    _slo_panels(grid, t, objectives)
    _engine_panels(grid, t)
    _gpu_panels(grid, t)
    return grid.panels


def dashboard(t: Target, objectives: list[slos.LatencySlo]) -> dict[str, Any]:
    return {
        "uid": f"vllm-{t.namespace}-{t.served_name}"[:40],
        "title": f"vLLM {t.served_name} ({t.namespace})",
        "tags": ["vllm", "llm-serving"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                }
            ]
        },
        "panels": panels(t, objectives),
    }


def dashboard_config_map(
    name: str, t: Target, objectives: list[slos.LatencySlo], namespace: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace or t.namespace,
            "labels": {**t.labels, GRAFANA_DASHBOARD_LABEL: "1"},
        },
        "data": {f"vllm-{t.served_name}.json": json.dumps(dashboard(t, objectives), indent=1, sort_keys=True)},
    }
