"""The Body-Based Router on GKE: the base model of the request body's `model`, in a header.

GKE's regional Gateway routes on headers, not bodies. Its "Configure Body-Based Routing" guide
(https://cloud.google.com/kubernetes-engine/docs/how-to/configure-body-based-routing, "How
body-based routing works") puts an ext_proc extension in front of routing: the load balancer sends
the request to it, it writes the body's `model` into a request header, and HTTPRoute rules match
that header to an InferencePool. The GKE Gateway controller attaches such a callout to a Gateway
through a GCPRoutingExtension (networking.gke.io/v1), which the regional classes support ("Customize
GKE Gateway traffic using Service Extensions",
https://cloud.google.com/kubernetes-engine/docs/how-to/configure-gke-service-extensions, the
GatewayClass table: gke-l7-regional-external-managed and gke-l7-rilb).

The extension is the Gateway API Inference Extension's Body-Based Router (BBR), installed from its
chart `body-based-routing` at v1.5.0, the last release that ships it
(kubernetes-sigs/gateway-api-inference-extension@v1.5.0 config/charts/body-based-routing; at v1.6.0
the README says BBR moved to llm-d/llm-d-inference-payload-processor, which has no release tag yet).
With `provider.name: gke` the chart renders, beside the router's Deployment, Service, ServiceAccount
and Role (templates/bbr.yaml, rbac.yaml), the GCPRoutingExtension targeting the Gateway named by
`inferenceGateway.name` (templates/gke.yaml: events RequestHeaders, RequestBody, RequestTrailers,
body mode FullDuplexStreamed, the Service on `bbr.port` 9004) and a gRPC HealthCheckPolicy on
`bbr.healthCheckPort` 9005.

Adapters: the body's `model` is an adapter's name as often as a base model's. BBR's
`base-model-to-header` plugin writes `contract.BASE_MODEL_HEADER` (X-Gateway-Base-Model-Name) from
ConfigMaps labelled `inference.networking.k8s.io/bbr-managed: "true"`, each with `baseModel` and a
YAML list `adapters` (pkg/bbr/plugins/basemodelextractor/adapters_store.go and
configmap_reconciler.go at v1.5.0; config/manifests/bbr/configmap.yaml is the upstream example;
site-src/guides/serving-multiple-inference-pools-latest.md, "How"). A base model named by a
ConfigMap maps to itself, each listed name to its base, anything else to "" (getBaseModel). The
route matches the same header agentgateway writes on EKS (body_routing.py), one rule per pool.
Aliases are listed with the adapters: the Gateway must send them to their pool, where the picker
rewrites them (rewrites.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common import images
from common.facts import Fact
from components.entrance.picker import chart_image

VERSION = "v1.5.0"
CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/body-based-routing"
SOURCE = f"kubernetes-sigs/gateway-api-inference-extension@{VERSION}"
# One release per stack (the chart README: "This chart should only be deployed once per Gateway").
RELEASE = "body-router"
# `bbr.name`: the Deployment, the Service the GCPRoutingExtension calls, and the pods' `app` label
# (templates/bbr.yaml).
ROUTER_NAME = "body-router"
POD_LABELS = {"app": ROUTER_NAME}
# values.yaml at the tag: bbr.port (ext_proc, gRPC) and bbr.healthCheckPort (gRPC health service).
EXT_PROC_PORT = 9004
HEALTH_CHECK_PORT = 9005
# The body-field-to-header plugin's header (values.yaml `bbr.plugins[0].json.headerName`; the one
# GKE's guide names) and the label BBR watches ConfigMaps by (configmap_reconciler.go bbrManagedLabel).
MODEL_HEADER = "X-Gateway-Model-Name"
MANAGED_LABEL = "inference.networking.k8s.io/bbr-managed"
# A served name is a DNS label (the picker release is named after it), so this is a valid ConfigMap name.
CONFIGMAP_SUFFIX = "-bbr-models"
# The two plugins, in the order the chart's values.yaml lists them (its comment: "Both plugins below
# replicate the default behavior"). Written out so the plan shows what runs.
PLUGINS: list[dict[str, Any]] = [
    {
        "type": "body-field-to-header",
        "name": "model-extractor",
        "json": {"fieldName": "model", "headerName": MODEL_HEADER},
    },
    {"type": "base-model-to-header", "name": "base-model-mapper"},
]
# The chart renders `{registry}/{repository}:{tag}` (templates/bbr.yaml), so a digest rides in the tag.
_IMAGE = images.IMAGES["body-based-router"]
if _IMAGE.tag != VERSION:
    raise ValueError(f"common/images.py pins the Body-Based Router at {_IMAGE.tag}, not the chart's {VERSION}")
IMAGE = chart_image(_IMAGE.reference)

PUBLISHED = Fact(
    subject=f"chart {CHART} {VERSION} and image {_IMAGE.repository}:{VERSION}",
    value=VERSION,
    source=f"{SOURCE}: cloudbuild.yaml (bbr-helm-chart-push, bbr-image-push) and hack/push-chart.sh (what a release "
    "pushes to the staging registry; promotion to registry.k8s.io is not a registry listing)",
    established=False,
    resolve_with=f"helm show chart {CHART} --version {VERSION} && crane manifest {_IMAGE.repository}:{VERSION}",
)
UNKNOWN_NAME = Fact(
    subject="GKE's Gateway answers 404 for a model name no ConfigMap lists (BBR sets the base-model header empty)",
    value=None,
    source=f"{SOURCE} pkg/bbr/plugins/basemodelextractor/base_model_to_header.go (empty header for an unknown name); "
    "the answer then follows from Gateway API route matching; not observed on GKE",
    established=False,
    resolve_with="curl -s -o /dev/null -w '%{http_code}' https://<host>/v1/completions "
    '-H \'Content-Type: application/json\' -d \'{"model": "nope", "prompt": "x"}\'',
)
ROUTING_EXTENSION_SERVED = Fact(
    subject="the cluster serves GCPRoutingExtension (networking.gke.io/v1), which the BBR chart renders for GKE",
    value=None,
    source="GKE docs 'Customize GKE Gateway traffic using Service Extensions' (the GKE Gateway controller supports "
    "GCPRoutingExtension on the regional classes); the CRD in tests/fixtures/crds is "
    "GoogleCloudPlatform/gke-gateway-api@fc40d606 config/crd/networking.gke.io_gcproutingextensions.yaml",
    established=False,
    resolve_with="kubectl get crd gcproutingextensions.networking.gke.io -o jsonpath='{.spec.versions[*].name}'",
)
# Like the picker's (picker.py), the router's pod template takes no securityContext value at this
# version (templates/bbr.yaml), and it keeps its ServiceAccount token: it watches ConfigMaps. Nor
# does it take resources, a nodeSelector or tolerations: the pods run without requests (plan.md's
# Helm section says so) on any untainted node, which keeps them off the tainted GPU pools.
POD_SECURITY_EXCEPTION = (
    f"baseline: the Body-Based Router pods of the body-based-routing chart {VERSION} take no securityContext "
    "value (templates/bbr.yaml), so they run without runAsNonRoot, seccomp or dropped capabilities, and they "
    "call the Kubernetes API (they watch the adapters' ConfigMaps)."
)


@dataclass(frozen=True)
class RouterSpec:
    namespace: str
    gateway: str
    """The Gateway the GCPRoutingExtension attaches the router to."""
    replicas: int


def router_values(spec: RouterSpec, image_mirrors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The chart's values: GKE's objects on, the program's image, the plugins written out.

    Replicas: the GCPRoutingExtension the chart renders sets no `failOpen`, whose default is false
    (the CRD: "a generic 500 error is returned"), so without a router no request gets through;
    more than one, under a PodDisruptionBudget (`pdb_manifest`), keeps one up through a drain."""
    ref = images.mirrored(_IMAGE.reference, dict(image_mirrors or {}))
    return {
        "bbr": {
            "name": ROUTER_NAME,
            "replicas": spec.replicas,
            "image": chart_image(ref),
            "plugins": [dict(p) for p in PLUGINS],
        },
        "provider": {"name": "gke"},
        "inferenceGateway": {"name": spec.gateway},
    }


def adapters_configmap(
    base_model: str, others: Sequence[str], namespace: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """One base model's ConfigMap for BBR: `baseModel` and every other name served on it (adapters
    and aliases) as a YAML list. A JSON string is a YAML double-quoted scalar, so json.dumps quotes
    each name safely whatever it holds."""
    data = {"baseModel": base_model}
    if others:
        data["adapters"] = "".join(f"- {json.dumps(n)}\n" for n in others)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{base_model}{CONFIGMAP_SUFFIX}",
            "namespace": namespace,
            "labels": {**labels, MANAGED_LABEL: "true"},
        },
        "data": data,
    }


def pdb_manifest(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": ROUTER_NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(POD_LABELS)}},
    }
