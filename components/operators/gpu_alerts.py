"""Alerts on the GPUs themselves, from the DCGM exporter the GPU Operator runs on every GPU node.

Cluster-wide (one PrometheusRule next to the operator), one alert per GPU: each expression keeps
the node (`Hostname`), the GPU index and its UUID, so the alert says which card on which node. A
GPU assigned to a pod also carries the pod's namespace and name (common/gpu_metrics.py); the
aggregation by GPU keeps one alert per card whichever pod holds it.

The series come from the counters file the operator is given (common/gpu_metrics.metrics_csv);
the default file would leave ECC, throttling, the XID count and the memory's temperature limit
empty, and an alert on an empty series never fires.
"""

from __future__ import annotations

from typing import Any

from common import gpu_metrics as g
from common.alerting import PAGE, TICKET, AlertRouting, alert_rule

XID_ERROR = "GpuXidError"
FELL_OFF_THE_BUS = "GpuFellOffTheBus"
ECC_DOUBLE_BIT = "GpuEccDoubleBitError"
ROW_REMAP_FAILURE = "GpuRowRemapFailure"
THERMAL_THROTTLING = "GpuThermalThrottling"
POWER_THROTTLING = "GpuPowerThrottling"
MEMORY_TEMPERATURE = "GpuMemoryTemperatureHigh"

# One alert per physical GPU.
BY_GPU = f"{g.NODE_LABEL}, {g.GPU_LABEL}, {g.UUID_LABEL}"
# Throttling is judged as the share of time the clocks were held down over this window.
THROTTLE_WINDOW = "5m"
# Thermal throttling is not part of normal operation in a cooled data centre: a tenth of the time
# for 10 minutes is a cooling problem. Power capping is, under full load, how a GPU holds its power
# limit; half of the time for 30 minutes says the limit (or the supply) costs real throughput.
THERMAL_THROTTLE_SHARE = 0.1
POWER_THROTTLE_SHARE = 0.5
# Warn this many degrees before the memory's own maximum operating temperature, while there is still
# time to act on the cooling.
MEMORY_TEMP_MARGIN_C = 5


def _throttled_share(counter: str) -> str:
    return f"max by ({BY_GPU}) (rate({counter}[{THROTTLE_WINDOW}])) / {g.VIOLATION_UNITS_PER_SECOND:g}"


def _identify() -> str:
    return "GPU {{ $labels.gpu }} (UUID {{ $labels.UUID }}) on node {{ $labels.Hostname }}"


def gpu_alert_rules(routing: AlertRouting) -> list[dict[str, Any]]:
    off_bus = g.XID_FELL_OFF_THE_BUS
    gone = (
        f"count by ({g.NODE_LABEL}) (count by ({g.NODE_LABEL}, {g.UUID_LABEL}) (max_over_time({g.GPU_TEMP}[1h]))) "
        f"> count by ({g.NODE_LABEL}) (count by ({g.NODE_LABEL}, {g.UUID_LABEL}) ({g.GPU_TEMP}))"
    )
    return [
        alert_rule(
            FELL_OFF_THE_BUS,
            (
                f'max by ({BY_GPU}) ({g.XID_COUNT}{{{g.XID_LABEL}="{off_bus}"}}) > 0 '
                f"or max by ({BY_GPU}) ({g.XID_LAST} == {off_bus}) "
                f"or {gone}"
            ),
            severity=PAGE,
            for_="1m",
            routing=routing,
            summary="A GPU fell off the bus (XID 79) or vanished from its node",
            description=(
                f"{_identify()} raised XID {off_bus}, or a node ({{{{ $labels.Hostname }}}}) reports fewer GPUs "
                "than in the last hour. The GPU is unusable until the node is rebooted (often it needs replacing); "
                "pods on it fail. Cordon and drain the node (kubectl cordon / drain), then reboot or replace it."
            ),
        ),
        alert_rule(
            XID_ERROR,
            f'max by ({BY_GPU}, {g.XID_LABEL}) ({g.XID_COUNT}{{{g.XID_LABEL}!="{off_bus}"}}) > 0',
            severity=TICKET,
            for_="1m",
            routing=routing,
            summary="GPU XID error {{ $labels.xid }}",
            description=(
                f"{_identify()} raised XID {{{{ $labels.xid }}}} in the last 5 minutes. Look the code up in "
                "NVIDIA's Xid catalog (linked from the runbook) for its immediate action: restart the pod for an "
                "application-class code; for memory, NVLink or firmware codes (48, 63, 64, 74, 92, 94, 95, 119, 120) "
                "cordon and drain the node and reset the GPU."
            ),
        ),
        alert_rule(
            ECC_DOUBLE_BIT,
            f"max by ({BY_GPU}) (increase({g.ECC_DBE_VOLATILE}[10m])) > 0",
            severity=PAGE,
            for_="0m",
            routing=routing,
            summary="Uncorrectable (double-bit) ECC error on a GPU",
            description=(
                f"{_identify()} reported a double-bit ECC error: data in GPU memory was corrupted. The process that "
                "owned it is killed by the driver; outputs computed before may be wrong. Drain the node and reset the "
                "GPU (a reboot remaps the row); if it repeats, replace the GPU."
            ),
        ),
        alert_rule(
            ROW_REMAP_FAILURE,
            f"max by ({BY_GPU}) ({g.ROW_REMAP_FAILURE}) > 0",
            severity=PAGE,
            for_="0m",
            routing=routing,
            summary="GPU memory row remapping failed",
            description=(
                f"{_identify()} could not remap a failing memory row: it has run out of spare rows. The GPU must be "
                "replaced; drain the node now."
            ),
        ),
        alert_rule(
            THERMAL_THROTTLING,
            f"{_throttled_share(g.THERMAL_VIOLATION)} > {THERMAL_THROTTLE_SHARE:g}",
            severity=TICKET,
            for_="10m",
            routing=routing,
            summary="GPU clocks held down for heat",
            description=(
                f"{_identify()} spent {{{{ $value | humanizePercentage }}}} of the last {THROTTLE_WINDOW} thermally "
                "throttled: tokens come slower on this GPU and every replica that shares its tensor-parallel group. "
                "Check the node's cooling (fans, airflow, inlet temperature) with the provider; move the workload "
                "off the node if it persists."
            ),
        ),
        alert_rule(
            POWER_THROTTLING,
            f"{_throttled_share(g.POWER_VIOLATION)} > {POWER_THROTTLE_SHARE:g}",
            severity=TICKET,
            for_="30m",
            routing=routing,
            summary="GPU clocks held down by its power limit",
            description=(
                f"{_identify()} spent {{{{ $value | humanizePercentage }}}} of the last {THROTTLE_WINDOW} capped by "
                "power. Compare the enforced power limit with the default (nvidia-smi -q -d POWER): a lowered limit "
                "or a power-brake event (power supply) costs throughput; at the default limit under full load this "
                "is how the GPU works, and the remedy is more GPUs, not this one."
            ),
        ),
        alert_rule(
            MEMORY_TEMPERATURE,
            (
                f"max by ({BY_GPU}) ({g.MEMORY_TEMP}) >= on ({BY_GPU}) "
                f"max by ({BY_GPU}) ({g.MEM_MAX_OP_TEMP}) - {MEMORY_TEMP_MARGIN_C} "
                f"and on ({BY_GPU}) max by ({BY_GPU}) ({g.MEM_MAX_OP_TEMP}) > 0"
            ),
            severity=TICKET,
            for_="10m",
            routing=routing,
            summary="GPU memory close to its maximum operating temperature",
            description=(
                f"{_identify()} memory is at {{{{ $value }}}} C, within {MEMORY_TEMP_MARGIN_C} C of the maximum the "
                "GPU reports for it; beyond that it runs outside its rated range. Check the node's cooling; drain "
                "the node if the temperature keeps rising."
            ),
        ),
    ]


def gpu_prometheus_rule(name: str, namespace: str, labels: dict[str, str], runbook_url: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "groups": [{"name": "llm-serving-gpus", "rules": gpu_alert_rules(AlertRouting(runbook_url=runbook_url))}]
        },
    }
