"""The metric names the stack queries exist in the pinned vLLM's real /metrics."""

from __future__ import annotations

import pytest

from common.engine_metrics import REQUIRED_METRICS, missing_names, referenced_names
from endpoint_tools.openai_client import Client

from .conftest import SERVED_NAME
from .stack_commands import collect_metric_reference_texts


@pytest.fixture(scope="session")
def metrics_text(vllm_server) -> str:
    client = Client(vllm_server.base_url)
    # One finished request first, so per-request histograms have samples as in production.
    assert client.post("/v1/completions", {"model": vllm_server.model, "prompt": "Hi", "max_tokens": 2}).status == 200
    resp = client.get("/metrics")
    assert resp.status == 200
    return resp.text()


def test_required_metrics_are_exposed(metrics_text):
    assert missing_names(REQUIRED_METRICS, metrics_text) == []


def test_names_removed_before_0_32_are_reported_missing(metrics_text):
    # Proves the check can fail: names from older tutorials are absent in 0.32.
    stale = {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"}
    assert missing_names(stale, metrics_text) == sorted(stale)


def test_metric_names_used_by_the_stack_exist(metrics_text):
    texts = collect_metric_reference_texts()
    used = {name: source for source, text in texts.items() for name in referenced_names(text)}
    # The stacks' PrometheusRules, dashboards and ScaledObjects query vLLM series; none found means
    # the collection broke, not that all is well.
    assert {"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= set(used), sorted(used)
    missing = missing_names(set(used), metrics_text)
    assert not missing, "series not exposed by vLLM: " + ", ".join(f"{n} ({used[n]})" for n in missing)


def test_metric_names_queried_by_alerts_dashboards_and_autoscaler_exist(metrics_text):
    # The PrometheusRule, dashboard and KEDA/HPA queries the program emits (components/observability).
    from components.serving.observability import used_metric_names

    used = used_metric_names()
    assert used, "components.serving.observability.used_metric_names() returned nothing to check"
    assert missing_names(used, metrics_text) == []


def test_queue_metric_carries_the_served_model_name(metrics_text, vllm_server):
    # The autoscaler, alerts and adapter select series by model_name="<served name>"
    # (components/observability.Target.selector); a label named otherwise would select nothing.
    import re

    from common.engine_metrics import NUM_REQUESTS_WAITING

    pattern = re.compile(rf'^{re.escape(NUM_REQUESTS_WAITING)}\{{[^}}]*\bmodel_name="([^"]*)"', re.MULTILINE)
    names = set(pattern.findall(metrics_text))
    assert names == {SERVED_NAME} and vllm_server.model == SERVED_NAME, names
