"""The GPU side: the DCGM exporter's counters file, the operator values that deliver it, the GPU alerts."""

from __future__ import annotations

import csv
import io
import re

import pytest

from common import gpu_metrics as g
from common.alerting import RUNBOOK_DOC, AlertRouting
from components.operators import gpu_alerts
from components.operators import values as ov
from tests.support import promql
from tests.support.helm_values import TEMPLATE_ONLY_KEYS, check_chart_values
from tests.support.operator_values import h100_pool
from tests.support.schemas import validate_object

FIXTURE = promql.FIXTURES / "dcgm" / "dcp-metrics-included.csv"


def _rows(text: str) -> list[list[str]]:
    """Records as the exporter reads them: Go's encoding/csv with Comment '#', fields trimmed of spaces
    (NVIDIA/dcgm-exporter internal/pkg/counters/counter_config.go ReadCSVFile / ExtractCounters)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [[field.strip(" ") for field in record] for record in csv.reader(io.StringIO("\n".join(lines)), strict=True)]


def counters_file_problems(text: str) -> list[str]:
    """What would stop the exporter reading a counters file: a record that is not exactly three fields,
    a quote (Go's csv rejects a bare one), or a Prometheus type it does not know."""
    problems = []
    for record in _rows(text):
        if len(record) != 3:
            problems.append(f"{record[0]}: {len(record)} fields")
        elif any('"' in f for f in record):
            problems.append(f"{record[0]}: quote")
        elif record[1] not in ("gauge", "counter", "histogram", "summary", "label"):
            problems.append(f"{record[0]}: type {record[1]}")
    return problems


def test_the_default_rows_are_every_enabled_row_of_the_exporters_file():
    upstream = [tuple(r) for r in _rows(FIXTURE.read_text())]
    assert len(upstream) == 28
    assert list(g.DEFAULT_COUNTERS) == upstream


def test_added_rows_are_fields_the_exporter_knows_and_the_default_file_leaves_out():
    upstream_enabled = {r[0] for r in _rows(FIXTURE.read_text())}
    commented = {
        m.group(1): m.group(3).strip()
        for m in re.finditer(r"^#\s*(DCGM_[A-Z0-9_]+)\s*,\s*(\w+)\s*,(.*)$", FIXTURE.read_text(), re.MULTILINE)
    }
    for field, _, help_text in g.ADDED_COUNTERS:
        assert field not in upstream_enabled
        assert field in promql.dcgm_names(), field
        if field in commented:
            assert help_text == commented[field]  # the help text carried over from the commented row


def test_counters_file_is_what_the_exporter_can_read():
    text = g.metrics_csv()
    assert counters_file_problems(text) == []
    assert [tuple(r) for r in _rows(text)] == list(g.DEFAULT_COUNTERS + g.ADDED_COUNTERS)
    # The check catches what would stop the exporter.
    assert counters_file_problems(text + "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature, in C.\n") == [
        "DCGM_FI_DEV_GPU_TEMP: 4 fields"
    ]
    assert counters_file_problems(text + "DCGM_FI_DEV_GPU_TEMP, gauges, t\n") == ["DCGM_FI_DEV_GPU_TEMP: type gauges"]


def test_operator_values_point_the_exporter_at_the_config_map_and_keep_the_pod_labels():
    values = ov.gpu_operator_values(
        "aws", "auto", _options(), [h100_pool()], "gpu-operator", dcgm_metrics_config_map="dcgm-exporter-metrics"
    )
    exporter = values["dcgmExporter"]
    assert exporter["config"] == {"name": "dcgm-exporter-metrics"}
    assert exporter["serviceMonitor"]["honorLabels"] is True
    assert check_chart_values("gpu-operator", values) == []
    # The key is read by the chart's template though values.yaml only shows it in a comment.
    assert "dcgmExporter.config.name" in TEMPLATE_ONLY_KEYS["gpu-operator"]
    exporter["config"] = {"nmae": "x"}
    assert check_chart_values("gpu-operator", values) == [
        "gpu-operator: dcgmExporter.config.nmae: not a key of the chart's values.yaml"
    ]


def _options():
    from stack_config.operators import GpuOperatorConfig

    return GpuOperatorConfig()


def _rules():
    return {r["alert"]: r for r in gpu_alerts.gpu_alert_rules(AlertRouting())}


def test_gpu_alerts_cover_what_the_issue_asks_for():
    rules = _rules()
    assert set(rules) == {
        "GpuFellOffTheBus",
        "GpuXidError",
        "GpuEccDoubleBitError",
        "GpuRowRemapFailure",
        "GpuThermalThrottling",
        "GpuPowerThrottling",
        "GpuMemoryTemperatureHigh",
    }
    for r in rules.values():
        assert r["annotations"]["runbook_url"] == f"{RUNBOOK_DOC}#{r['alert'].lower()}"
        assert len(r["annotations"]["description"]) > 60


def test_xid_79_pages_as_fallen_off_the_bus_and_is_not_counted_twice():
    rules = _rules()
    bus = promql.selectors(rules["GpuFellOffTheBus"]["expr"])
    assert any(s.name == g.XID_COUNT and s.value_of("xid") == "79" for s in bus)
    assert "DCGM_FI_DEV_XID_ERRORS == 79" in rules["GpuFellOffTheBus"]["expr"]
    # A GPU that vanished from its node: fewer GPU UUIDs than in the last hour.
    assert "max_over_time(DCGM_FI_DEV_GPU_TEMP[1h])" in rules["GpuFellOffTheBus"]["expr"]
    [xid] = promql.selectors(rules["GpuXidError"]["expr"])
    assert xid.name == g.XID_COUNT and ("xid", "MatchOp.NotEqual", "79") in xid.matchers
    assert rules["GpuFellOffTheBus"]["labels"]["severity"] == "critical"


def test_throttling_is_a_share_of_time_from_nanosecond_counters():
    rules = _rules()
    for alert, counter, share in (
        ("GpuThermalThrottling", g.THERMAL_VIOLATION, 0.1),
        ("GpuPowerThrottling", g.POWER_VIOLATION, 0.5),
    ):
        expr = rules[alert]["expr"]
        assert expr == f"max by (Hostname, gpu, UUID) (rate({counter}[5m])) / 1e+09 > {share:g}"
        assert promql.metric_names(expr) == {counter}


def test_memory_temperature_is_judged_against_the_gpus_own_limit():
    expr = _rules()["GpuMemoryTemperatureHigh"]["expr"]
    assert promql.metric_names(expr) == {g.MEMORY_TEMP, g.MEM_MAX_OP_TEMP}
    # A GPU that reports no limit (0) is left alone instead of alerting at -5 C.
    assert expr.endswith(f"max by (Hostname, gpu, UUID) ({g.MEM_MAX_OP_TEMP}) > 0")


def test_gpu_prometheus_rule_validates_against_the_crd():
    rule = gpu_alerts.gpu_prometheus_rule("gpu-alerts", "gpu-operator", {"release": "kps"}, "https://x/runbook.md")
    validate_object(rule)
    assert rule["metadata"]["labels"] == {"release": "kps"}
    assert all(
        r["annotations"]["runbook_url"].startswith("https://x/runbook.md#") for r in rule["spec"]["groups"][0]["rules"]
    )


@pytest.mark.parametrize("name", sorted(g.series_names()))
def test_every_series_in_the_counters_file_is_a_name_the_exporter_knows(name):
    assert name in promql.dcgm_names()
