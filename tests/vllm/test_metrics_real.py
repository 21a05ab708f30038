"""The metric names the stack queries exist in the pinned vLLM's real /metrics."""

from __future__ import annotations

import pytest

from common.engine_metrics import REQUIRED_METRICS, missing_names, referenced_names
from tests.support.stack_commands import collect_metric_reference_texts
from tests.support.vllm_server import FIGURES, SERVED_NAME


@pytest.fixture(scope="session")
def metrics_text(vllm_server) -> str:
    client = vllm_server.client()
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


# ---------------------------------------------------------------------------------------------
# What the alerts, SLOs and autoscaler rely on, measured on the real server


def _sample(metrics_text: str, name: str, **labels: str) -> float:
    """The value of the one sample of `name` whose labels include `labels` (0 when absent)."""
    import re

    total = 0.0
    for line in metrics_text.splitlines():
        match = re.match(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


def test_every_series_the_stacks_query_is_vllms_or_comes_from_the_dcgm_or_kube_state_metrics_fixtures(metrics_text):
    # The stacks' rules, dashboards and autoscalers query three sources. Only vLLM's can be checked
    # live here; the others must not be on vLLM's /metrics (so no vLLM name hides among them) and
    # must be in their own fixtures (tests/components/serving/test_observability.py checks the same offline).
    from common.engine_metrics import base_name, exposed_names
    from tests.support import promql
    from tests.support.stack_commands import collect_promql_expressions

    exprs = collect_promql_expressions()
    assert len(exprs) > 50, exprs
    recorded = {n for _, e in exprs for n in promql.metric_names(e) if n.startswith("model:")}
    engine, dcgm, ksm = set(), set(), set()
    for _, expr in exprs:
        for name in promql.metric_names(expr):
            if name.startswith("DCGM_"):
                dcgm.add(name)
            elif name.startswith("kube_"):
                ksm.add(name)
            elif name not in recorded:
                engine.add(name)
    assert missing_names(engine, metrics_text) == [], "not on vLLM's /metrics"
    live = {base_name(n) for n in exposed_names(metrics_text)}
    assert not (dcgm | ksm | recorded) & live
    assert dcgm and dcgm <= promql.dcgm_names()
    assert ksm and ksm <= promql.KUBE_STATE_METRICS


def test_latency_histograms_have_the_bucket_bounds_the_slo_config_accepts(metrics_text):
    from common.engine_metrics import HISTOGRAM_BUCKETS, bucket_bounds

    for family, bounds in HISTOGRAM_BUCKETS.items():
        assert bucket_bounds(metrics_text, family) == set(bounds), family


def test_each_slo_threshold_selects_exactly_its_bucket(metrics_text):
    # The recording rules read the cumulative bucket of the threshold through slo.le_matcher; on the
    # real exposition the matcher must pick one `le` value, the threshold's.
    import re

    from common.engine_metrics import HISTOGRAM_BUCKETS
    from components.serving.slo import le_matcher

    for family, bounds in HISTOGRAM_BUCKETS.items():
        offered = set(re.findall(rf'^{re.escape(family)}_bucket\{{[^}}]*\ble="([^"]+)"', metrics_text, re.MULTILINE))
        for bound in bounds:
            op, value = re.fullmatch(r'le(=~?)"([^"]+)"', le_matcher(bound)).groups()
            picked = {v for v in offered if (re.fullmatch(value, v) if op == "=~" else v == value)}
            assert len(picked) == 1 and float(picked.pop()) == bound, (family, bound, picked)


def test_failure_reasons_and_http_status_classes_exist_before_any_failure(metrics_text, vllm_server):
    # The error alert divides error+abort by all finished requests and 5xx by all /v1 requests: the
    # label values it selects must be the ones vLLM writes.
    from common.engine_metrics import FINISHED_ABORT, FINISHED_ERROR, HTTP_REQUESTS, REQUEST_SUCCESS

    for reason in (FINISHED_ERROR, FINISHED_ABORT):
        assert (
            f'finished_reason="{reason}"' in metrics_text
            and _sample(metrics_text, REQUEST_SUCCESS, finished_reason=reason) == 0
        )
    client = vllm_server.client()
    before = _sample(client.get("/metrics").text(), HTTP_REQUESTS, handler="/v1/completions", status="4xx")
    assert client.post("/v1/completions", {"model": "no-such-model", "prompt": "Hi", "max_tokens": 1}).status == 404
    after = client.get("/metrics").text()
    # Status codes are grouped by class ("4xx", not "404"), so "5xx" is the literal the alert needs.
    assert _sample(after, HTTP_REQUESTS, handler="/v1/completions", status="4xx") == before + 1
    assert 'status="404"' not in after


def test_a_client_hanging_up_mid_stream_is_not_counted_as_a_failure(vllm_server):
    # Measured, not assumed: the error alert must not page because users close a tab. The client
    # resets the connection after the first chunk of a 900-token stream. Measured on vLLM 0.32 (CPU),
    # 8 runs: 6 times the server aborted the request and recorded it under NO finished_reason, twice
    # it missed the reset and finished the stream ("length"). Never was it an abort or an error.
    import json
    import socket
    import struct
    import time
    from urllib.parse import urlparse

    from common.engine_metrics import GENERATION_TOKENS, NUM_REQUESTS_RUNNING, NUM_REQUESTS_WAITING, REQUEST_SUCCESS

    client = vllm_server.client()

    def idle_metrics() -> str:
        # Requests other tests left running would finish during the measurement; wait them out.
        deadline = time.monotonic() + 120
        while True:
            text = client.get("/metrics").text()
            if _sample(text, NUM_REQUESTS_RUNNING) == 0 and _sample(text, NUM_REQUESTS_WAITING) == 0:
                return text
            assert time.monotonic() < deadline, "the server did not become idle within 120 s"
            time.sleep(0.5)

    before = idle_metrics()
    url = urlparse(vllm_server.base_url)
    body = json.dumps(
        {
            "model": vllm_server.model,
            "prompt": "Once upon a time",
            "max_tokens": 900,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer %s\r\n"
            % vllm_server.api_key.encode()
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body
        )
        assert b"data: " in sock.recv(4096) or b"data: " in sock.recv(4096)
        # Hang up the way a killed client does: a reset, not an orderly close the server may only
        # notice at its next write.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(1)
    after = idle_metrics()

    def counted(reason: str, text: str = after, since: str = before) -> float:
        return _sample(text, REQUEST_SUCCESS, finished_reason=reason) - _sample(
            since, REQUEST_SUCCESS, finished_reason=reason
        )

    generated = _sample(after, GENERATION_TOKENS) - _sample(before, GENERATION_TOKENS)
    assert counted("abort") == counted("error") == counted("stop") == 0
    if generated < 900:  # cut: recorded under no reason at all
        assert generated > 0 and counted("length") == 0, generated
        FIGURES.append(
            f"client reset mid-stream: request cut after {generated:.0f} of 900 tokens, "
            "counted under no finished_reason"
        )
    else:  # the reset was missed and the stream ran to its end
        assert counted("length") == 1
        FIGURES.append("client reset mid-stream: not noticed, the stream ran its 900 tokens (finished_reason length)")
    # The same comparison does see a request that finishes: the counters move when they should.
    assert client.post("/v1/completions", {"model": vllm_server.model, "prompt": "Hi", "max_tokens": 2}).status == 200
    done = client.get("/metrics").text()
    assert (
        _sample(done, REQUEST_SUCCESS, finished_reason="length")
        == _sample(after, REQUEST_SUCCESS, finished_reason="length") + 1
    )
