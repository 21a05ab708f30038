"""The vLLM metric names this stack depends on, and how to find them in text.

The stack's alerts, SLO recording rules, dashboards and the KEDA/HPA autoscaler query vLLM's
/metrics. vLLM renames series between releases (0.32 has no `vllm:gpu_cache_usage_perc`), and a
query on a missing series is silently empty: the alert never fires, the autoscaler never scales.
So the names (and the label values and histogram buckets the queries depend on) live here once;
the server components build their queries from them, the smoke command checks a live endpoint
exposes them, and tests/vllm checks them against the real /metrics of the pinned release
(common/engine.py).

GPU metric names (the DCGM exporter's) are in common/gpu_metrics.py; kube-state-metrics names are
written where they are used (components/serving/alerts.py) and checked against its documentation.
"""

from __future__ import annotations

import re

# Gauges: the autoscaler scales on queue depth; alerts watch KV pressure and running load.
NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
# Counters (prometheus_client exposes them with the `_total` suffix).
NUM_PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
# Histograms: latency SLO alerts and dashboards use their `_bucket`, `_sum`, `_count` series.
TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"
INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"
TIME_PER_OUTPUT_TOKEN = "vllm:request_time_per_output_token_seconds"
E2E_REQUEST_LATENCY = "vllm:e2e_request_latency_seconds"
QUEUE_TIME = "vllm:request_queue_time_seconds"

# The KV-cache capacity the engine allocated, as labels of an info gauge (value 1, one series per
# engine) that vLLM 0.32.0 sets once the cache is sized: every CacheConfig field becomes a label
# (vllm/v1/metrics/loggers.py:1114 log_metrics_info). `kv_cache_size_tokens` is
# int(max_concurrency x max_model_len), the "KV cache size: N tokens" of the startup log
# (vllm/v1/core/kv_cache_utils.py:2313 update_kv_cache_capacity; per engine, not summed across data
# parallel ranks, vllm/v1/engine/core_client.py:862), which planner/kv_layout.reported_tokens
# predicts; `num_gpu_blocks` and `block_size` are its pages (on CPU the blocks come from
# --kv-cache-memory-bytes or VLLM_CPU_KVCACHE_SPACE). Read live in tests/vllm/test_kv_capacity_real.py.
CACHE_CONFIG_INFO = "vllm:cache_config_info"
KV_SIZE_TOKENS_LABEL = "kv_cache_size_tokens"
NUM_GPU_BLOCKS_LABEL = "num_gpu_blocks"
BLOCK_SIZE_LABEL = "block_size"

# vllm:request_success_total counts finished requests by `finished_reason` (vllm/v1/engine/__init__.py
# FinishReason: stop, length, abort, error, repetition; every value is pre-created at 0, so the series
# exist before the first failure). "error" is an internal request-level failure, always answered with
# a 500; "abort" is a request the engine aborted. A client that hangs up mid-stream is NOT counted
# under any reason (the output processor drops the request before its stats are recorded; measured
# on the real server in tests/vllm/test_metrics_real.py), so neither value pages for impatient users.
FINISHED_REASON_LABEL = "finished_reason"
FINISHED_ERROR = "error"
FINISHED_ABORT = "abort"

# The HTTP layer: vLLM's API server instruments every route with prometheus-fastapi-instrumentator
# (vllm/entrypoints/serve/instrumentator/metrics.py, attach_router): a counter per `handler` (the
# route template, e.g. /v1/chat/completions), `method` and `status`, where status is the class
# ("2xx", "4xx", "5xx": the instrumentator groups status codes by default). /metrics, /health,
# /load, /ping, /version and /server_info are excluded. It has no model_name label: queries select
# the pods instead (components/serving/observability.Target.serving_pod_selector).
HTTP_REQUESTS = "http_requests_total"
HTTP_STATUS_LABEL = "status"
HTTP_SERVER_ERROR = "5xx"
# The OpenAI API routes (the only ones clients call); health probes never reach the counter anyway.
HTTP_API_HANDLERS = "/v1/.+"

# Default bucket bounds (seconds) of the two latency histograms the SLOs count against, from
# vllm/v1/metrics/buckets.py (TIME_TO_FIRST_TOKEN_BUCKETS line 57, INTER_TOKEN_LATENCY_BUCKETS
# line 84) of vLLM 0.32.0. A latency SLO counts the requests under a threshold by reading the
# cumulative bucket `le=<threshold>`, so a threshold must be one of these bounds; tests/vllm checks
# the live /metrics offers exactly these `le` values.
TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
HISTOGRAM_BUCKETS: dict[str, tuple[float, ...]] = {
    TIME_TO_FIRST_TOKEN: TIME_TO_FIRST_TOKEN_BUCKETS,
    INTER_TOKEN_LATENCY: INTER_TOKEN_LATENCY_BUCKETS,
}

REQUIRED_METRICS: tuple[str, ...] = (
    NUM_REQUESTS_WAITING,
    NUM_REQUESTS_RUNNING,
    KV_CACHE_USAGE,
    NUM_PREEMPTIONS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    REQUEST_SUCCESS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    QUEUE_TIME,
    HTTP_REQUESTS,
)

# Names from older releases and tutorials that 0.32 no longer exposes, with their replacement, so a
# check can say what to use instead of only "missing".
REMOVED_METRICS: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": KV_CACHE_USAGE,
    "vllm:cpu_cache_usage_perc": KV_CACHE_USAGE,
    "vllm:time_per_output_token_seconds": INTER_TOKEN_LATENCY,
}

# A series name the engine exposes as it appears in PromQL, dashboard JSON or relabel regexes: the
# `vllm:` families, and the HTTP counter that has no prefix. Stops at anything that cannot be part
# of a metric name ({, [, space, quote, parenthesis, operator).
_ENGINE_NAME = re.compile(r"vllm:[A-Za-z0-9_:]+|(?<![A-Za-z0-9_:])" + re.escape(HTTP_REQUESTS) + r"(?![A-Za-z0-9_:])")
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def _parse(metrics_text: str) -> tuple[set[str], set[str]]:
    """(every sample and family name, the histogram family names) of a text exposition."""
    names: set[str] = set()
    histograms: set[str] = set()
    for line in metrics_text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                names.add(parts[2])
                if parts[3] == "histogram":
                    histograms.add(parts[2])
            continue
        # A sample line: name, optional {labels}, value.
        end = len(line)
        for stop in ("{", " "):
            pos = line.find(stop)
            if pos != -1:
                end = min(end, pos)
        names.add(line[:end])
    return names, histograms


def exposed_names(metrics_text: str) -> set[str]:
    """Every name a query may use against this Prometheus text exposition.

    That is each sample's name (`..._bucket`, `..._total`) and each `# TYPE` family name (the bare
    histogram name), so both `vllm:e2e_request_latency_seconds_bucket` and the family count.
    """
    return _parse(metrics_text)[0]


def referenced_names(text: str) -> set[str]:
    """The engine's series names a query, rule or dashboard text refers to."""
    return set(_ENGINE_NAME.findall(text))


def bucket_bounds(metrics_text: str, family: str) -> set[float]:
    """The finite `le` bounds a text exposition offers for a histogram family (any label set)."""
    pattern = re.compile(rf'^{re.escape(family)}_bucket\{{[^}}]*\ble="([^"]+)"', re.MULTILINE)
    return {float(v) for v in pattern.findall(metrics_text) if v != "+Inf"}


def base_name(name: str) -> str:
    """The family name of a histogram sample (`x_bucket` -> `x`); other names unchanged."""
    for suffix in _HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def missing_names(wanted: set[str] | tuple[str, ...], metrics_text: str) -> list[str]:
    """The names in `wanted` that the exposition does not offer, sorted.

    A histogram's `_bucket`/`_sum`/`_count` series count as offered when the family is declared,
    even before its first observation; that allowance is for histograms only, so a gauge name with
    a `_sum` tacked on is still reported missing.
    """
    have, histograms = _parse(metrics_text)
    return sorted(n for n in set(wanted) if n not in have and base_name(n) not in histograms)


def describe_missing(name: str) -> str:
    """One line for a missing name, naming the replacement when the name was renamed."""
    if name in REMOVED_METRICS:
        return f"{name} (removed in vLLM 0.32; use {REMOVED_METRICS[name]})"
    return name
