"""Alerts, SLO rules, dashboard and autoscaler queries: valid PromQL on metric names that exist.

Every expression the program emits is parsed (promql-parser), and every series name in it must be
one the pinned vLLM exports (declared in common/engine_metrics.py and checked against the real
/metrics in tests/vllm), one the DCGM exporter knows (tests/fixtures/dcgm), one kube-state-metrics
documents (tests/fixtures/kube-state-metrics.md), or a series our own recording rules define.
"""

from __future__ import annotations

import json
import re

import promql_parser
import pytest

from common import engine_metrics as vllm_metrics
from common import gpu_metrics
from common.alerting import BURN_WINDOWS, RUNBOOK_DOC, burn_threshold
from components.operators.gpu_alerts import gpu_alert_rules
from components.serving import alerts, dashboard, observability, scaling, slo
from components.serving.targets import LEADER_WORKER_SET, PodSet, Target
from stack_config.models import SloConfig
from tests.support import promql
from tests.support.schemas import SchemaError, validate_object

TARGET = Target(
    served_name="llama-3-1-8b-instruct",
    namespace="llm-serving",
    workload_name="llama-3-1-8b-instruct",
    load_seconds=392.2,
    startup_budget_seconds=590,
    labels={"app.kubernetes.io/name": "vllm"},
    ready_deadline_seconds=1180,
)
LWS_TARGET = Target(
    served_name="llama-70b-pp",
    namespace="llm-serving",
    workload_name="llama-70b-pp",
    load_seconds=900,
    startup_budget_seconds=2250,
    workload_kind=LEADER_WORKER_SET,
)
THRESHOLDS = alerts.AlertThresholds(queue_per_replica=8)
SLOS = slo.latency_slos(SloConfig())
SCALE_AT = scaling.ScalingTargets(queue=8, kv_cache=0.8)
DEPLOYMENT_REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}


def model_rules(t: Target = TARGET) -> list[dict]:
    return [r for g in observability.rule_groups(t, THRESHOLDS, SLOS, RUNBOOK_DOC) for r in g["rules"]]


def recorded_names() -> set[str]:
    return {r["record"] for r in model_rules() if "record" in r}


def every_query() -> list[str]:
    queries = observability.all_queries(TARGET, THRESHOLDS, SLOS) + observability.all_queries(
        LWS_TARGET, THRESHOLDS, SLOS
    )
    so = scaling.scaled_object(
        "x",
        TARGET,
        DEPLOYMENT_REF,
        min_replicas=1,
        max_replicas=3,
        scale_at=SCALE_AT,
        prometheus_url="http://prom:9090",
    )
    queries += [t["metadata"]["query"] for t in so["spec"]["triggers"]]
    queries += [
        m["external"]["metric"]["query"] for m in scaling.kserve_external_metrics(TARGET, SCALE_AT, "http://p:9090")
    ]
    queries += [r["expr"] for r in gpu_alert_rules(observability.routing_for(TARGET, RUNBOOK_DOC))]
    return queries


@pytest.mark.parametrize("expr", every_query())
def test_promql_parses(expr):
    promql_parser.parse(expr)


def test_the_parser_rejects_broken_promql():
    # Guards against a parser that accepts anything (the test above would then prove nothing).
    with pytest.raises(ValueError, match="unclosed left parenthesis"):
        promql_parser.parse('sum(vllm:num_requests_waiting{model_name="x"}')


def unknown_names(exprs: list[str]) -> dict[str, str]:
    """Series names in `exprs` that no source vouches for, with the expression they appear in."""
    engine = set(vllm_metrics.REQUIRED_METRICS)
    known_dcgm = promql.dcgm_names()
    ours = recorded_names()
    unknown = {}
    for expr in exprs:
        for name in promql.metric_names(expr):
            if name.startswith("vllm:") or name == vllm_metrics.HTTP_REQUESTS:
                ok = vllm_metrics.base_name(name) in engine
            elif name.startswith("DCGM_"):
                ok = name in known_dcgm
            elif name.startswith("kube_"):
                ok = name in promql.KUBE_STATE_METRICS
            else:
                ok = name in ours
            if not ok:
                unknown[name] = expr
    return unknown


def test_every_series_name_is_exported_by_vllm_dcgm_or_kube_state_metrics():
    exprs = every_query()
    used = set().union(*(promql.metric_names(e) for e in exprs))
    # Each source is really used, so the classification below is exercised for all of them.
    assert {
        "vllm:num_requests_waiting",
        "http_requests_total",
        "DCGM_EXP_XID_ERRORS_COUNT",
        "kube_pod_created",
        "model:ttft_slo_errors:ratio_rate1h",
    } <= used
    assert unknown_names(exprs) == {}


@pytest.mark.parametrize(
    "expr",
    [
        "sum(vllm:gpu_cache_usage_perc)",  # removed in vLLM 0.32
        "DCGM_FI_DEV_GPU_UTILIZATION > 1",  # not a DCGM field
        "kube_pod_ready == 0",  # not a kube-state-metrics series
        "model:ttft_slo_errors:ratio_rate2h > 1",  # no recording rule defines it
    ],
)
def test_an_invented_series_name_is_reported(expr):
    assert list(unknown_names([expr])) == [promql.metric_names(expr).pop()]


def test_engine_names_come_from_engine_metrics_and_are_checked_live():
    used = observability.used_metric_names()
    # REQUIRED_METRICS is what tests/vllm checks against the live /metrics of the pinned release.
    assert {vllm_metrics.base_name(n) for n in used} <= set(vllm_metrics.REQUIRED_METRICS)
    assert not used & set(vllm_metrics.REMOVED_METRICS)
    # What the regex-based used_metric_names finds equals what the parser finds.
    parsed = {
        n
        for e in observability.all_queries(TARGET, THRESHOLDS, SLOS)
        for n in promql.metric_names(e)
        if n.startswith("vllm:") or n == vllm_metrics.HTTP_REQUESTS
    }
    assert parsed == used


def test_gpu_series_used_are_enabled_by_the_counters_file_the_exporter_gets():
    # A series the exporter is not told to collect is empty, and an alert on it never fires.
    exprs = [r["expr"] for r in gpu_alert_rules(observability.routing_for(TARGET, RUNBOOK_DOC))]
    exprs += [t["expr"] for p in dashboard.panels(TARGET, SLOS) for t in p["targets"]]
    used = {n for e in exprs for n in promql.metric_names(e) if n.startswith("DCGM_")}
    assert {
        gpu_metrics.ECC_DBE_VOLATILE,
        gpu_metrics.XID_COUNT,
        gpu_metrics.THERMAL_VIOLATION,
        gpu_metrics.POWER_VIOLATION,
        gpu_metrics.MEM_MAX_OP_TEMP,
        gpu_metrics.GPU_UTIL,
    } <= used
    assert used <= gpu_metrics.series_names()


@pytest.mark.parametrize("target", [TARGET, LWS_TARGET], ids=["deployment", "lws"])
def test_engine_queries_select_one_model_in_one_namespace(target):
    for expr in observability.all_queries(target, THRESHOLDS, SLOS):
        for s in promql.selectors(expr):
            if s.name and (s.name.startswith(("vllm:", "model:"))):
                assert (s.value_of("model_name"), s.value_of("namespace")) == (target.served_name, "llm-serving"), expr
            if s.name == vllm_metrics.HTTP_REQUESTS:
                # No model_name label on the HTTP counter: the model's serving pods are selected instead.
                assert s.value_of("namespace") == "llm-serving" and s.value_of("pod").startswith(target.workload_name)


def test_each_alert_says_what_to_do():
    rules = [r for r in model_rules() if "alert" in r]
    names = {r["alert"] for r in rules}
    assert names == {
        "VllmNoReadyReplica",
        "VllmRequestErrors",
        "VllmStartupRestartLoop",
        "VllmRequestQueueBacklog",
        "VllmKvCacheNearlyFull",
        "VllmPreemptions",
        "VllmTimeToFirstTokenSloFastBurn",
        "VllmTimeToFirstTokenSloSlowBurn",
        "VllmInterTokenLatencySloFastBurn",
        "VllmInterTokenLatencySloSlowBurn",
    }
    for r in rules:
        assert r["annotations"]["summary"] and len(r["annotations"]["description"]) > 60
        assert r["for"] and r["labels"]["severity"] in ("warning", "critical")
        assert r["labels"]["model_name"] == TARGET.served_name and r["labels"]["namespace"] == TARGET.namespace
        assert r["annotations"]["runbook_url"] == f"{RUNBOOK_DOC}#{r['alert'].lower()}"


def test_the_error_alert_counts_engine_failures_and_http_5xx_each_against_its_own_total():
    expr = next(r["expr"] for r in model_rules() if r.get("alert") == "VllmRequestErrors")
    sels = promql.selectors(expr)
    engine = [s for s in sels if s.name == vllm_metrics.REQUEST_SUCCESS]
    http = [s for s in sels if s.name == vllm_metrics.HTTP_REQUESTS]
    # Numerator and denominator of each ratio.
    assert [s.value_of("finished_reason") for s in engine] == ["error|abort", None]
    assert [s.value_of("status") for s in http] == ["5xx", None]
    assert all(s.value_of("handler") == "/v1/.+" for s in http)
    assert expr.count("> 0.05") == 2


def _pod_regexes(expr: str) -> list[str]:
    return [s.value_of("pod") for s in promql.selectors(expr) if s.value_of("pod")]


OWN_AND_OTHERS = [
    (
        TARGET,
        ["llama-3-1-8b-instruct-7d9c8b6f5-x2k4p", "llama-3-1-8b-instruct-5f6b-abcde"],
        # Another model whose name starts with this one's; this model's KServe twin; an LWS of that name.
        [
            "llama-3-1-8b-instruct-fp8-7d9c8b6f5-x2k4p",
            "llama-3-1-8b-instruct-predictor-7d9c8b6f5-x2k4p",
            "llama-3-1-8b-instruct-0",
            "llama-3-1-8b-instruct-long-0-1",
        ],
    ),
    (
        LWS_TARGET,
        ["llama-70b-pp-0", "llama-70b-pp-12"],
        ["llama-70b-pp-2-0-1", "llama-70b-pp-fp8-0", "llama-70b-pp-7d9c8b6f5-x2k4p"],
    ),
]


@pytest.mark.parametrize("alert", ["VllmStartupRestartLoop", "VllmNoReadyReplica"])
@pytest.mark.parametrize("target,own,others", OWN_AND_OTHERS)
def test_pod_alerts_select_only_this_models_serving_pods(alert, target, own, others):
    expr = next(r["expr"] for r in model_rules(target) if r.get("alert") == alert)
    regexes = _pod_regexes(expr)
    assert regexes, expr
    for regex in regexes:
        assert all(re.fullmatch(regex, pod) for pod in own), (regex, own)
        assert not any(re.fullmatch(regex, pod) for pod in others), (regex, others)


def test_no_ready_replica_waits_for_the_ready_deadline_and_ignores_a_missing_kube_state_metrics():
    expr = alerts.no_ready_pods_expr(TARGET.serving_pods)
    promql_parser.parse(expr)
    assert TARGET.serving_pods.ready_deadline_seconds == 1180
    assert "(time() - min(kube_pod_created{" in expr and ") > 1180" in expr
    assert 'condition="true"' in expr and "or on() vector(0)) == 0" in expr
    # No pod at all counts as down; kube-state-metrics down does not.
    assert "or on() absent(kube_pod_created{" in expr and expr.endswith("unless on() absent(kube_pod_status_ready)")
    # Without a deadline of its own, a model gets its startup budget.
    assert LWS_TARGET.serving_pods.ready_deadline_seconds == LWS_TARGET.startup_budget_seconds


def test_an_endpoint_picker_gets_the_same_availability_alert_from_its_pods_alone():
    # The routing layer's endpoint picker (issue 16) is added by describing its pods, nothing else.
    picker = PodSet("endpoint picker of gateway public", "llm-serving", "public-epp-[a-z0-9]{1,10}-[a-z0-9]{5}", 300)
    rule = alerts.no_ready_pods_alert(
        "LlmServingEndpointPickerDown",
        picker,
        observability.routing_for(TARGET, RUNBOOK_DOC),
        what_to_do="Check its pods.",
    )
    assert rule["labels"]["severity"] == "critical"
    assert promql.metric_names(rule["expr"]) <= promql.KUBE_STATE_METRICS
    assert _pod_regexes(rule["expr"]) == [picker.pod_regex] * 3
    assert rule["annotations"]["runbook_url"].endswith("#llmservingendpointpickerdown")


def test_restart_alert_on_a_leader_worker_set_counts_recreated_pods_not_container_restarts():
    # RecreateGroupOnPodRestart replaces the pods (new UIDs, restart count 0): count UIDs per name.
    expr = alerts.restart_loop_query(LWS_TARGET)
    promql_parser.parse(expr)
    assert promql.metric_names(expr) == {"kube_pod_info", "kube_pod_status_ready"}
    assert expr.startswith("(count by (namespace, pod) (count by (namespace, pod, uid)")
    assert ">= 3" in expr and 'condition="true"} == 0' in expr


def test_restart_window_grows_with_the_startup_budget():
    slow = Target("m", "ns", "m", load_seconds=1800, startup_budget_seconds=2700)
    assert alerts.restart_window(TARGET) == "30m"
    assert alerts.restart_window(slow) == "135m"


# ---------------------------------------------------------------------------------------------
# SLOs


def _minutes(duration: str) -> float:
    value, unit = int(duration[:-1]), duration[-1]
    return value * {"m": 1, "h": 60, "d": 1440}[unit]


def test_burn_windows_are_the_sre_workbook_table():
    # 30-day budget: 1h at 14.4x spends 2%, 6h at 6x 5% (both page), 3d at 1x 10% (ticket).
    table = [(w.long, w.short, w.burn_rate, round(w.budget_spent, 6), w.severity) for w in BURN_WINDOWS]
    assert table == [
        ("1h", "5m", 14.4, 0.02, "critical"),
        ("6h", "30m", 6, 0.05, "critical"),
        ("3d", "6h", 1, 0.1, "warning"),
    ]
    for w in BURN_WINDOWS:
        assert _minutes(w.long) == w.long_hours * 60
        assert _minutes(w.short) * 12 == _minutes(w.long)  # the short window is 1/12 of the long one


@pytest.mark.parametrize(
    "objective,expected",
    [
        (0.99, {"1h": 0.144, "6h": 0.06, "3d": 0.01}),
        (0.995, {"1h": 0.072, "6h": 0.03, "3d": 0.005}),
        (0.999, {"1h": 0.0144, "6h": 0.006, "3d": 0.001}),
    ],
)
def test_burn_alerts_compare_both_windows_with_rate_times_budget(objective, expected):
    objectives = slo.latency_slos(
        SloConfig.model_validate(
            {"timeToFirstToken": {"objective": objective}, "interTokenLatency": {"objective": objective}}
        )
    )
    rules = {
        r["alert"]: r for r in slo.burn_rate_alerts(TARGET, objectives, observability.routing_for(TARGET, RUNBOOK_DOC))
    }
    for alert, longs in (
        ("VllmTimeToFirstTokenSloFastBurn", ("1h", "6h")),
        ("VllmTimeToFirstTokenSloSlowBurn", ("3d",)),
        ("VllmInterTokenLatencySloFastBurn", ("1h", "6h")),
        ("VllmInterTokenLatencySloSlowBurn", ("3d",)),
    ):
        found = promql.comparisons(rules[alert]["expr"])
        pairs = {w.long: w.short for w in BURN_WINDOWS}
        windows = {name.rsplit("ratio_rate", 1)[1]: value for name, op, value in found if op == ">"}
        assert set(windows) == {w for long in longs for w in (long, pairs[long])}
        for long in longs:
            assert windows[long] == pytest.approx(expected[long], rel=1e-9)
            assert windows[pairs[long]] == windows[long]  # both windows at the same rate
    assert burn_threshold(BURN_WINDOWS[0], objective) == pytest.approx(expected["1h"])


def test_recording_rules_hold_the_error_ratio_per_window_from_the_threshold_bucket():
    records = {r["record"]: r["expr"] for r in slo.recording_rules(TARGET, SLOS)}
    assert set(records) == {
        f"model:{k}_slo_errors:ratio_rate{w}" for k in ("ttft", "itl") for w in ("5m", "1h", "30m", "6h", "3d")
    }
    ttft = records["model:ttft_slo_errors:ratio_rate1h"]
    bucket, count = promql.selectors(ttft)
    assert bucket.name == "vllm:time_to_first_token_seconds_bucket" and bucket.value_of("le") == "2.5"
    assert count.name == "vllm:time_to_first_token_seconds_count"
    assert ttft.startswith("1 - (sum by (namespace, model_name) (rate(")
    itl = promql.selectors(records["model:itl_slo_errors:ratio_rate5m"])[0]
    assert itl.name == "vllm:inter_token_latency_seconds_bucket" and itl.value_of("le") == "0.1"


@pytest.mark.parametrize(
    "bound,spellings,not_matched",
    [
        (1.0, ["1", "1.0"], ["10.0", "0.1", "1.5"]),
        (2560.0, ["2560", "2560.0"], ["256.0", "25600"]),
        (2.5, ["2.5"], ["25.0", "2.0"]),
        (0.001, ["0.001"], ["0.01"]),
    ],
)
def test_le_matcher_selects_exactly_the_threshold_bucket(bound, spellings, not_matched):
    # Whole-number bounds: Prometheus 3 stores le="1.0", Prometheus 2 may have le="1" (see slo.le_matcher).
    matcher = slo.le_matcher(bound)
    [sel] = promql.selectors(f"x{{{matcher}}}")
    le = sel.value_of("le")
    regex = le if "=~" in matcher else re.escape(le)
    assert all(re.fullmatch(regex, s) for s in spellings)
    assert not any(re.fullmatch(regex, s) for s in not_matched)


def test_default_objectives_are_bucket_bounds_of_the_pinned_vllm():
    for objective in SLOS:
        assert objective.seconds in vllm_metrics.HISTOGRAM_BUCKETS[objective.histogram]
    assert [(o.key, o.seconds, o.objective) for o in SLOS] == [("ttft", 2.5, 0.99), ("itl", 0.1, 0.99)]
    assert slo.latency_slos(SloConfig.model_validate({"enabled": False})) == []


# ---------------------------------------------------------------------------------------------
# Manifests against the CRDs


def test_prometheus_rule_validates_against_the_crd():
    rule = observability.prometheus_rule("x", TARGET, THRESHOLDS, SLOS, RUNBOOK_DOC, {"release": "kps"})
    validate_object(rule)
    assert [g["name"] for g in rule["spec"]["groups"]] == [
        "vllm-llama-3-1-8b-instruct",
        "vllm-llama-3-1-8b-instruct-slo",
    ]
    broken = json.loads(json.dumps(rule))
    broken["spec"]["groups"][0]["rules"][0]["severity"] = "critical"  # a label put beside, not under, labels
    with pytest.raises(SchemaError, match="PrometheusRule/x"):
        validate_object(broken)


def test_keda_scaled_object_has_a_trigger_per_signal_and_validates_against_the_crd():
    so = scaling.scaled_object(
        "x",
        TARGET,
        DEPLOYMENT_REF,
        min_replicas=1,
        max_replicas=3,
        scale_at=SCALE_AT,
        prometheus_url="http://prom:9090",
    )
    validate_object(so)
    triggers = {t["name"]: t for t in so["spec"]["triggers"]}
    assert set(triggers) == {"queue-depth", "kv-cache-usage"}
    assert triggers["queue-depth"]["metadata"]["query"] == scaling.queue_depth_query(TARGET)
    assert promql.metric_names(triggers["kv-cache-usage"]["metadata"]["query"]) == {"vllm:kv_cache_usage_perc"}
    assert (triggers["queue-depth"]["metadata"]["threshold"], triggers["kv-cache-usage"]["metadata"]["threshold"]) == (
        "8",
        "0.8",
    )
    assert all(t["type"] == "prometheus" and t["metricType"] == "AverageValue" for t in triggers.values())
    broken = json.loads(json.dumps(so))
    broken["spec"]["triggers"][1]["metricTyp"] = "AverageValue"
    with pytest.raises(SchemaError, match=r"ScaledObject/x: spec\.triggers\.1"):
        validate_object(broken)


def test_hpa_reads_both_signals_through_the_adapter_rules():
    hpa = scaling.horizontal_pod_autoscaler(
        "x", TARGET, DEPLOYMENT_REF, min_replicas=1, max_replicas=2, scale_at=SCALE_AT
    )
    validate_object(hpa)
    rules = {r["name"]["as"]: r for r in scaling.prometheus_adapter_rules()}
    metrics = [m["external"] for m in hpa["spec"]["metrics"]]
    assert (
        [m["metric"]["name"] for m in metrics]
        == list(rules)
        == ["vllm_num_requests_waiting", "vllm_kv_cache_usage_perc"]
    )
    for m in metrics:
        rule = rules[m["metric"]["name"]]
        # The HPA selects by model_name, so the adapter's query must keep that label.
        assert (
            set(m["metric"]["selector"]["matchLabels"]) == {"model_name"} and "by (model_name)" in rule["metricsQuery"]
        )
        series = re.fullmatch(r'\{__name__="([^"]+)"\}', rule["seriesQuery"]).group(1)
        assert series in vllm_metrics.REQUIRED_METRICS
        # With the adapter's template filled in the way it does, the query is valid PromQL.
        filled = (
            rule["metricsQuery"]
            .replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", 'namespace="llm-serving", model_name="llama-3-1-8b-instruct"')
        )
        assert promql.metric_names(filled) == {series}


def test_scaling_windows_follow_the_cold_start():
    b = scaling.scaling_behavior(TARGET)
    assert b["scaleDown"]["stabilizationWindowSeconds"] >= TARGET.load_seconds
    assert b["scaleUp"]["policies"][0]["periodSeconds"] >= TARGET.load_seconds
    huge = Target("m", "ns", "m", load_seconds=5000, startup_budget_seconds=7500)
    hb = scaling.scaling_behavior(huge)
    # autoscaling/v2 caps: stabilization ≤ 3600 s, policy period ≤ 1800 s.
    assert hb["scaleDown"]["stabilizationWindowSeconds"] == 3600
    assert hb["scaleUp"]["policies"][0]["periodSeconds"] == 1800


# ---------------------------------------------------------------------------------------------
# Dashboard


def test_dashboard_has_slo_engine_and_gpu_panels_on_a_grid():
    cm = dashboard.dashboard_config_map("d", TARGET, SLOS, namespace="monitoring")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "monitoring"
    board = json.loads(cm["data"]["vllm-llama-3-1-8b-instruct.json"])
    panels = board["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    titles = [p["title"] for p in panels]
    # One SLO panel per objective, first.
    assert titles[:2] == [f"SLO burn rate: {o.description}" for o in SLOS]
    for title in (
        "GPU utilization",
        "GPU memory used",
        "GPU power",
        "GPU and memory temperature",
        "XID errors (last 5 minutes, by code)",
        "Time to first token",
        "KV-cache usage",
    ):
        assert title in titles
    # No two panels overlap on Grafana's 24-column grid.
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & area, p["title"]
        cells |= area


def test_gpu_panels_select_the_gpus_of_this_models_pods():
    panels = [p for p in dashboard.panels(LWS_TARGET, SLOS) if any("DCGM_" in t["expr"] for t in p["targets"])]
    assert len(panels) == 6
    for p in panels:
        for t in p["targets"]:
            for s in promql.selectors(t["expr"]):
                assert s.value_of("namespace") == "llm-serving"
                regex = s.value_of("pod")
                # Leaders and workers hold GPUs; another model's pods are not selected.
                assert re.fullmatch(regex, "llama-70b-pp-0") and re.fullmatch(regex, "llama-70b-pp-0-1")
                assert not re.fullmatch(regex, "llama-70b-pp-fp8-0")


def test_slo_panel_plots_burn_rate_with_the_page_and_ticket_rates():
    [ttft, itl] = dashboard.panels(TARGET, SLOS)[:2]
    steps = [s["value"] for s in ttft["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps == [None, 1, 6]
    exprs = [t["expr"] for t in itl["targets"]]
    assert (
        exprs[0]
        == 'model:itl_slo_errors:ratio_rate1h{model_name="llama-3-1-8b-instruct", namespace="llm-serving"} / 0.01'
    )
    assert len(exprs) == len(BURN_WINDOWS)


def _all_alerts() -> list[dict]:
    rules = (
        model_rules(TARGET) + model_rules(LWS_TARGET) + gpu_alert_rules(observability.routing_for(TARGET, RUNBOOK_DOC))
    )
    return [r for r in rules if "alert" in r]


@pytest.mark.parametrize("rule", _all_alerts(), ids=lambda r: r["alert"])
def test_every_alert_fires_only_while_its_condition_holds(rule):
    # Operator precedence: `or` binds looser than a comparison, so a branch of an `or` without its own
    # comparison would return series (and fire) whatever their value.
    assert promql.always_firing_branches(rule["expr"]) == []


def test_a_branch_that_always_fires_is_reported():
    engine, http = alerts.error_ratios(TARGET)
    assert promql.always_firing_branches(f"({engine}) or ({http}) > 0.05") == [promql_parser.parse(engine).prettify()]
    assert promql.always_firing_branches(alerts.request_errors_expr(TARGET, 0.05)) == []
    assert promql.always_firing_branches("sum(rate(x[5m])) > bool 1") != []
