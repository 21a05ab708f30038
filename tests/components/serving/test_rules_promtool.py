"""The alerts fire when they should and stay quiet when they should, on Prometheus' own engine.

`promtool test rules` evaluates the rule files the program emits (the model's PrometheusRule and
the GPU alerts) over synthetic series, minute by minute, and compares the firing alerts with the
expected ones. promtool is not a Python package: it comes with Prometheus (Debian: `apt-get install
prometheus`, which ships promtool 2.42). Without it these tests skip, unless
LLM_SERVING_REQUIRE_PROMTOOL is set (this repository's CI, .ci/run, installs it and sets it, so
there they must run); everything else about the rules (parsing, names, thresholds, runbook) is
checked without it in test_observability.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from common.alerting import RUNBOOK_DOC
from components.operators.gpu_alerts import gpu_prometheus_rule
from components.serving import alerts, observability, slo
from components.serving.targets import Target
from stack_config.models import SloConfig

PROMTOOL = shutil.which("promtool")
if PROMTOOL is None and os.environ.get("LLM_SERVING_REQUIRE_PROMTOOL", "") not in ("", "0"):
    raise RuntimeError("LLM_SERVING_REQUIRE_PROMTOOL is set but promtool is not on PATH (apt-get install prometheus)")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: apt-get install prometheus)")

NS = "llm-serving"
MODEL = "m"
POD = "m-7d9c8b6f5-x2k4p"
# Deadline for a replica to turn ready: 20 minutes.
TARGET = Target(MODEL, NS, MODEL, load_seconds=300, startup_budget_seconds=600, ready_deadline_seconds=1200)
ENGINE = f'model_name="{MODEL}", namespace="{NS}", pod="{POD}"'
GPU = 'Hostname="node-a", gpu="0", UUID="GPU-a"'


def run_promtool(tmp_path, tests: list[dict]) -> subprocess.CompletedProcess:
    groups = observability.rule_groups(TARGET, alerts.AlertThresholds(), slo.latency_slos(SloConfig()), RUNBOOK_DOC)
    groups += gpu_prometheus_rule("gpu-alerts", "gpu-operator", {}, RUNBOOK_DOC)["spec"]["groups"]
    # promtool compares annotations too; they are text for people (test_runbook.py checks them), so
    # the expectations here are on labels only.
    groups = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]} for g in groups]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "tests.yaml")], capture_output=True, text=True, timeout=300
    )


def firing(alert: str, at: str, labels: dict[str, str] | None = None) -> dict:
    """An expected firing alert with the labels the rule's result carries (annotations unchecked)."""
    return {
        "eval_time": at,
        "alertname": alert,
        "exp_alerts": [{"exp_labels": labels or {}}] if labels is not None else [],
    }


def quiet(alert: str, at: str) -> dict:
    return {"eval_time": at, "alertname": alert, "exp_alerts": []}


def model_labels(severity: str) -> dict[str, str]:
    return {"severity": severity, "model_name": MODEL, "namespace": NS}


def requests(stop_per_min: int, error_per_min: int, ok_http: int, bad_http: int) -> list[dict]:
    series = [
        (f'vllm:request_success_total{{{ENGINE}, finished_reason="stop"}}', stop_per_min),
        (f'vllm:request_success_total{{{ENGINE}, finished_reason="error"}}', error_per_min),
        (f'vllm:request_success_total{{{ENGINE}, finished_reason="abort"}}', 0),
        (
            f'http_requests_total{{namespace="{NS}", pod="{POD}", handler="/v1/chat/completions", status="2xx"}}',
            ok_http,
        ),
        (
            f'http_requests_total{{namespace="{NS}", pod="{POD}", handler="/v1/chat/completions", status="5xx"}}',
            bad_http,
        ),
    ]
    return [{"series": s, "values": f"0+{per_min * 60}x30"} for s, per_min in series]


def ttft(total_per_min: int, under_2_5s_per_min: int, minutes: int) -> list[dict]:
    return [
        {
            "series": f'vllm:time_to_first_token_seconds_bucket{{{ENGINE}, le="2.5"}}',
            "values": f"0+{under_2_5s_per_min}x{minutes}",
        },
        {"series": f"vllm:time_to_first_token_seconds_count{{{ENGINE}}}", "values": f"0+{total_per_min}x{minutes}"},
    ]


def check(tmp_path, tests: list[dict]) -> None:
    proc = run_promtool(tmp_path, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_request_errors_fire_on_engine_errors_or_http_5xx_above_the_threshold(tmp_path):
    labels = model_labels("critical")
    check(
        tmp_path,
        [
            # 10% of finished requests are errors: fires once the ratio held for 5 minutes.
            {
                "interval": "1m",
                "input_series": requests(9, 1, 10, 0),
                "alert_rule_test": [quiet("VllmRequestErrors", "4m"), firing("VllmRequestErrors", "12m", labels)],
            },
            # 1% errors: below 5%, quiet.
            {
                "interval": "1m",
                "input_series": requests(99, 1, 100, 0),
                "alert_rule_test": [quiet("VllmRequestErrors", "20m")],
            },
            # The engine is clean but half the API calls get a 500 (e.g. before they reach the engine): fires.
            {
                "interval": "1m",
                "input_series": requests(10, 0, 10, 10),
                "alert_rule_test": [firing("VllmRequestErrors", "12m", labels)],
            },
            # No traffic at all: no ratio, quiet.
            {
                "interval": "1m",
                "input_series": requests(0, 0, 0, 0),
                "alert_rule_test": [quiet("VllmRequestErrors", "20m")],
            },
        ],
    )


def _pod(ready: str, created: str = "0x60") -> list[dict]:
    return [
        {"series": f'kube_pod_status_ready{{namespace="{NS}", pod="{POD}", condition="true"}}', "values": ready},
        {"series": f'kube_pod_created{{namespace="{NS}", pod="{POD}"}}', "values": created},
    ]


def test_no_ready_replica_waits_for_the_deadline_then_pages(tmp_path):
    labels = model_labels("critical")
    check(
        tmp_path,
        [
            # A pod created at 0 that never turns ready: quiet inside its 20-minute deadline, then pages.
            {
                "interval": "1m",
                "input_series": _pod("0x60"),
                "alert_rule_test": [quiet("VllmNoReadyReplica", "15m"), firing("VllmNoReadyReplica", "30m", labels)],
            },
            # Ready: quiet.
            {"interval": "1m", "input_series": _pod("1x60"), "alert_rule_test": [quiet("VllmNoReadyReplica", "40m")]},
            # The model's pods are gone (e.g. nothing could be created) while kube-state-metrics runs: pages.
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'kube_pod_status_ready{{namespace="{NS}", pod="other-0", condition="true"}}',
                        "values": "1x60",
                    }
                ],
                "alert_rule_test": [firing("VllmNoReadyReplica", "10m", labels)],
            },
            # kube-state-metrics itself is down (no series at all): not this model's outage, quiet.
            {
                "interval": "1m",
                "input_series": [{"series": 'up{job="other"}', "values": "1x60"}],
                "alert_rule_test": [quiet("VllmNoReadyReplica", "40m")],
            },
        ],
    )


def test_ttft_slo_pages_on_fast_burn_and_tickets_on_slow_burn(tmp_path):
    page, ticket = model_labels("critical"), model_labels("warning")
    check(
        tmp_path,
        [
            # 20% of first tokens over 2.5 s: above 14.4 x 1% in the 1h and 5m windows: page.
            {
                "interval": "1m",
                "input_series": ttft(100, 80, 180),
                "alert_rule_test": [firing("VllmTimeToFirstTokenSloFastBurn", "70m", page)],
            },
            # 3%: below 6 x 1% and 14.4 x 1%, above 1 x 1%: no page; a ticket once it held for an hour.
            {
                "interval": "1m",
                "input_series": ttft(100, 97, 180),
                "alert_rule_test": [
                    quiet("VllmTimeToFirstTokenSloFastBurn", "150m"),
                    firing("VllmTimeToFirstTokenSloSlowBurn", "150m", ticket),
                ],
            },
            # 0.5%: within the objective: quiet.
            {
                "interval": "1m",
                "input_series": ttft(200, 199, 180),
                "alert_rule_test": [
                    quiet("VllmTimeToFirstTokenSloFastBurn", "150m"),
                    quiet("VllmTimeToFirstTokenSloSlowBurn", "150m"),
                ],
            },
        ],
    )


def test_gpu_alerts_on_synthetic_dcgm_series(tmp_path):
    gpu = {"Hostname": "node-a", "gpu": "0", "UUID": "GPU-a"}
    check(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'DCGM_EXP_XID_ERRORS_COUNT{{{GPU}, xid="79"}}', "values": "0 0 1 1 1 1 1"},
                    {
                        "series": 'DCGM_EXP_XID_ERRORS_COUNT{Hostname="node-b", gpu="1", UUID="GPU-b", xid="13"}',
                        "values": "0 0 2 2 2 2 2",
                    },
                ],
                "alert_rule_test": [
                    firing("GpuFellOffTheBus", "5m", {**gpu, "severity": "critical"}),
                    firing(
                        "GpuXidError",
                        "5m",
                        {"Hostname": "node-b", "gpu": "1", "UUID": "GPU-b", "xid": "13", "severity": "warning"},
                    ),
                ],
            },
            # A GPU that stops reporting on a node that still reports others: fell off the bus.
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}", "values": "40x30"},
                    {
                        "series": 'DCGM_FI_DEV_GPU_TEMP{Hostname="node-a", gpu="1", UUID="GPU-b"}',
                        "values": "40x10 stale",
                    },
                ],
                "alert_rule_test": [
                    quiet("GpuFellOffTheBus", "8m"),
                    firing("GpuFellOffTheBus", "20m", {"Hostname": "node-a", "severity": "critical"}),
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{GPU}}}", "values": "0 0 0 1 1 1 1 1"},
                    # Held down 20% of the time for heat (0.2 s of every second, in ns), 30% for power.
                    {"series": f"DCGM_FI_DEV_THERMAL_VIOLATION{{{GPU}}}", "values": "0+12000000000x40"},
                    {"series": f"DCGM_FI_DEV_POWER_VIOLATION{{{GPU}}}", "values": "0+18000000000x40"},
                    {"series": f"DCGM_FI_DEV_MEMORY_TEMP{{{GPU}}}", "values": "91x40"},
                    {"series": f"DCGM_FI_DEV_MEM_MAX_OP_TEMP{{{GPU}}}", "values": "95x40"},
                    {"series": 'DCGM_FI_DEV_MEMORY_TEMP{Hostname="node-a", gpu="1", UUID="GPU-b"}', "values": "91x40"},
                    {
                        "series": 'DCGM_FI_DEV_MEM_MAX_OP_TEMP{Hostname="node-a", gpu="1", UUID="GPU-b"}',
                        "values": "0x40",
                    },
                ],
                "alert_rule_test": [
                    firing("GpuEccDoubleBitError", "5m", {**gpu, "severity": "critical"}),
                    firing("GpuThermalThrottling", "20m", {**gpu, "severity": "warning"}),
                    quiet("GpuPowerThrottling", "40m"),
                    # 91 C is within 5 C of 95 C; the GPU that reports no limit (0) stays quiet.
                    firing("GpuMemoryTemperatureHigh", "20m", {**gpu, "severity": "warning"}),
                ],
            },
        ],
    )


def test_a_wrong_expectation_fails(tmp_path):
    # promtool really compares: the same scenario with the opposite expectation is reported.
    proc = run_promtool(
        tmp_path,
        [
            {
                "interval": "1m",
                "input_series": requests(99, 1, 100, 0),
                "alert_rule_test": [firing("VllmRequestErrors", "20m", model_labels("critical"))],
            }
        ],
    )
    assert proc.returncode != 0 and "VllmRequestErrors" in proc.stdout + proc.stderr
