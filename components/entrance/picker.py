"""The endpoint picker of one base model: the llm-d-router-gateway chart's values, and our PDB.

One Helm release of `oci://ghcr.io/llm-d/charts/llm-d-router-gateway` version `v0.10.0` per base
model, release name = the model's served name. The chart (llm-d/llm-d-router at v0.10.0,
config/charts/llm-d-router-gateway with its library chart config/charts/routerlib, aliased
`router`) renders the InferencePool (named after the release, selecting the model's server pods on
the server port), the picker (Deployment `<release>-epp`, its Service on ext_proc port 9002 and
metrics port 9090, its ConfigMap, ServiceAccount and Roles) and, with monitoring, a ServiceMonitor.
The published chart's version keeps the "v" and its values name the picker image
`ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0` (hack/push-chart.sh at the tag rewrites
`.router.epp.image.*` to the release before packaging; the repository's own values say `main`).
The program sets the image anyway, so the version it runs is written here, not inherited.

What the picker does per request: it scores every ready server of the pool by its queue depth
(`vllm:num_requests_waiting`), KV-cache usage (`vllm:kv_cache_usage_perc`) and how much of the
prompt's prefix its cache already holds (weights 2, 2 and 3 in the chart's default-plugins.yaml),
scraped from each server's /metrics every 50 ms, and sends the request to the best one.

Choices made here, each against a fact of the chart:
- `router.epp.replicas` >= 2: the chart then adds `--ha-enable-leader-election` and a Role for the
  lease (routerlib templates/_deployment.yaml, _leader-election-rbac.yaml). Only the leader passes
  its readiness probe (cmd/epp/runner/health.go:83-100: readiness needs isLeader), so exactly one
  picker serves and a standby takes over within a lease period.
- The chart has no PodDisruptionBudget (none under config/charts at the tag): `pdb_manifest` adds
  one, maxUnavailable 1. With the leader Ready and the standby not, the budget's healthy count is
  met exactly: the standby (not Ready) may be evicted (the default unhealthyPodEvictionPolicy
  IfHealthyBudget allows it while the healthy count holds), the leader may not, and while the
  leader is down the standby taking over cannot be evicted either. A drain of the leader's node
  waits until the leader moves (docs/routing.md has the step).
- Helm's wait counts a Deployment ready only when `replicas - maxUnavailable` pods are Ready
  (helm pkg/kube/ready.go deploymentReady), and the chart's Deployment uses strategy Recreate
  (maxUnavailable 0): with leader election one pod is never Ready, so an awaited install would
  time out. The release therefore does not wait (components/entrance/entrance.py).
- `router.epp.resources` requests default to 8 CPUs and 8 GiB (routerlib values.yaml:60-65), sized
  for large pools; the chart refuses empty requests (`validations.epp.resources`). A pool here has
  a handful of servers, so 1 CPU and 1 GiB are requested, memory capped at 4 GiB.
- `router.inferencePool.failureMode`: the stack's choice, spelled as the InferencePool CRD's enum
  (FailOpen | FailClose; the chart README's "FailClosed" is not in it).
- `router.monitoring.provider.name: prometheusoperator` and a per-release token Secret name: the
  chart would otherwise pick Google Managed Prometheus when `provider.name` is gke, and every
  release in the namespace would render the same Secret `inference-gateway-sa-metrics-reader-secret`
  (routerlib values.yaml:141), which Helm refuses to share between releases.
- `provider.name: none`: the GKE objects the chart renders for provider gke include a
  GCPBackendPolicy with a fixed 300 s timeout (templates/gke.yaml), shorter than a long stream; the
  entrance renders its own HealthCheckPolicy and GCPBackendPolicy instead (components/entrance/gke.py).
- `httpRoute.create: false`: the program writes the one HTTPRoute for all pools itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import contract, images
from common.facts import Fact

VERSION = "v0.10.0"
CHART = f"oci://ghcr.io/llm-d/charts/{contract.PICKER_CHART}"
VALUES_URL = f"https://github.com/llm-d/llm-d-router/blob/{VERSION}/config/charts/{contract.PICKER_CHART}/values.yaml"
LIBRARY_VALUES_URL = f"https://github.com/llm-d/llm-d-router/blob/{VERSION}/config/charts/routerlib/values.yaml"
# From the one image table (common/images.py). The chart renders the picker's image as
# `{registry}/{repository}:{tag}` (routerlib templates/_deployment.yaml, container `epp`), so a tag of
# `v0.10.0@sha256:...` deploys `...:v0.10.0@sha256:...`, pinned by digest.
_PICKER = images.IMAGES["endpoint-picker"]
if _PICKER.tag != VERSION:
    raise ValueError(f"common/images.py pins the endpoint picker at {_PICKER.tag}, not the chart's {VERSION}")


def chart_image(ref: str) -> dict[str, str]:
    """A reference as the chart's image values: everything up to the last path component is the
    registry, then the repository, then the tag (with the digest after it)."""
    name, at, digest = ref.partition("@")
    head, _, last = name.rpartition("/")
    repository, _, tag = last.partition(":")
    return {
        "registry": head,
        "repository": repository,
        "tag": tag + (f"@{digest}" if at else ""),
        "pullPolicy": "IfNotPresent",
    }


IMAGE = chart_image(_PICKER.reference)
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}
PUBLISHED = Fact(
    subject=f"chart {CHART} {VERSION} and image {IMAGE['registry']}/{IMAGE['repository']}:{VERSION}",
    value=VERSION,
    source=f"llm-d/llm-d-router@{VERSION}:hack/push-chart.sh and .github/ISSUE_TEMPLATE/new-release.md:143-148 "
    "(what a release publishes; not a registry listing)",
    established=False,
    resolve_with=f"helm show chart {CHART} --version {VERSION} && "
    f"crane manifest {IMAGE['registry']}/{IMAGE['repository']}:{VERSION}",
)
# The chart's picker pod (routerlib templates/_deployment.yaml at v0.10.0) has no securityContext
# value, at pod or container level, for the epp container (only the unused proxy sidecar takes one),
# so it cannot be made to meet the restricted level; it meets baseline (no host namespaces, paths
# or ports, no privileged mode, no added capabilities). It also keeps its ServiceAccount token: the
# picker watches the InferencePool and its pods and holds a leader-election Lease.
POD_SECURITY_EXCEPTION = (
    "baseline: the endpoint picker pods of the llm-d-router-gateway chart v0.10.0 take no "
    "securityContext value (routerlib templates/_deployment.yaml), so they run without "
    "runAsNonRoot, seccomp or dropped capabilities, and they call the Kubernetes API."
)

# The picker Service's ports (routerlib templates/_service.yaml): ext_proc, which the Gateway calls,
# and metrics, which Prometheus scrapes.
EXT_PROC_PORT = 9002
METRICS_PORT = 9090
# The picker container's gRPC health port (routerlib templates/_deployment.yaml: `--grpc-health-port`
# and container port `grpc-health`, `.Values.router.epp.grpcHealthPort | default 9003`; not set here):
# its probes, and GKE's health check of the picker backend.
HEALTH_PORT = 9003


@dataclass(frozen=True)
class PickerSpec:
    """Everything one base model's picker release needs, decided by the entrance."""

    release: str
    namespace: str
    server_labels: Mapping[str, str]
    """The server pods' selector labels: the InferencePool selects exactly these."""
    replicas: int
    failure_mode: str
    monitoring: bool
    monitoring_labels: Mapping[str, str]
    system_node_selector: Mapping[str, str] | None = None
    image_mirrors: Mapping[str, str] = field(default_factory=dict)
    """images.pullThrough: upstream registry -> the cluster's cache for it (Cluster.image_mirrors)."""

    @property
    def picker_name(self) -> str:
        return contract.picker_name(self.release)

    @property
    def pod_labels(self) -> dict[str, str]:
        return {contract.PICKER_POD_LABEL: self.picker_name}


def picker_values(spec: PickerSpec) -> dict[str, Any]:
    """The chart values of one base model's picker (keys checked against the chart's values.yaml and
    the routerlib key list, tests/fixtures/helm)."""
    epp: dict[str, Any] = {
        "replicas": spec.replicas,
        "image": chart_image(images.mirrored(_PICKER.reference, dict(spec.image_mirrors))),
        "resources": {side: dict(v) for side, v in RESOURCES.items()},
    }
    if spec.system_node_selector:
        # The chart takes affinity, not a nodeSelector (routerlib values.yaml:67).
        epp["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": k, "operator": "In", "values": [v]}
                                for k, v in spec.system_node_selector.items()
                            ]
                        }
                    ]
                }
            }
        }
    router: dict[str, Any] = {
        "modelServers": {
            "type": "vllm",
            "protocol": "http",
            "targetPorts": [{"number": contract.SERVER_PORT}],
            "matchLabels": dict(spec.server_labels),
        },
        "inferencePool": {"create": True, "failureMode": spec.failure_mode},
        "epp": epp,
    }
    if spec.monitoring:
        router["monitoring"] = {
            "provider": {"name": "prometheusoperator"},
            "prometheus": {
                "enabled": True,
                "auth": {"secretName": f"{spec.picker_name}-metrics-reader"},
                "extraLabels": dict(spec.monitoring_labels),
            },
        }
    return {"provider": {"name": "none"}, "httpRoute": {"create": False}, "router": router}


def pdb_manifest(spec: PickerSpec, labels: Mapping[str, str]) -> dict[str, Any]:
    """At most one picker pod down by choice (see the module docstring for what that means under
    leader election)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": spec.picker_name, "namespace": spec.namespace, "labels": dict(labels)},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": spec.pod_labels},
        },
    }
