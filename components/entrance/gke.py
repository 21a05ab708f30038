"""What the GKE Gateway controller needs per InferencePool: a health check and a backend timeout.

GKE builds one backend service per InferencePool. Without a HealthCheckPolicy it checks `/` on the
serving port, which vLLM answers 404; with one it checks /health every 2 s (the values the
llm-d-router chart uses for provider gke, templates/gke.yaml at v0.10.0, "a more aggressive health
check than the default 5s for faster switch over"). The backend service's timeout (GCPBackendPolicy
`timeoutSec`, default 30 s per its CRD) bounds a whole response, streamed or not, so it is the
model's drain allowance, the longest generation the server lets finish; the chart's own policy has
a fixed 300 s, which is why the picker chart runs with provider none. Fields are checked against
the CRDs of GoogleCloudPlatform/gke-gateway-api v1.4.0, the version llm-d-router v0.10.0 validates
its GKE objects with (hack/verify-manifests.sh:23); transcribed in tests/fixtures/crds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import contract
from components.entrance.routes import INFERENCE_GROUP
from components.serving import probes

HEALTH_CHECK_SECONDS = 2
GKE_API = "networking.gke.io/v1"


def _target(pool: str) -> dict[str, str]:
    return {"group": INFERENCE_GROUP, "kind": "InferencePool", "name": pool}


def health_check_policy_manifest(pool: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": GKE_API,
        "kind": "HealthCheckPolicy",
        "metadata": {"name": pool, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "targetRef": _target(pool),
            "default": {
                "timeoutSec": HEALTH_CHECK_SECONDS,
                "checkIntervalSec": HEALTH_CHECK_SECONDS,
                "config": {
                    "type": "HTTP",
                    "httpHealthCheck": {"requestPath": probes.HEALTH_PATH, "port": contract.SERVER_PORT},
                },
            },
        },
    }


def backend_policy_manifest(
    pool: str, namespace: str, timeout_seconds: int, labels: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": GKE_API,
        "kind": "GCPBackendPolicy",
        "metadata": {"name": pool, "namespace": namespace, "labels": dict(labels)},
        "spec": {"targetRef": _target(pool), "default": {"timeoutSec": timeout_seconds}},
    }
