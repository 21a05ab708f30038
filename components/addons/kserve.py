"""KServe v0.20.0: InferenceServices for models with `engine: kserve`.

Three charts from `oci://ghcr.io/kserve/charts` at v0.20.0 (kserve/kserve at tag v0.20.0,
charts/*/Chart.yaml `version: v0.20.0`), installed in the order KServe's own Helm install script
uses (hack/setup/quick-install/kserve-standard-mode-full-install-helm.sh): `kserve-crd`, then
`kserve-resources` (the controller, its webhooks, the inferenceservice ConfigMap), then
`kserve-runtime-configs` with `kserve.servingruntime.enabled` (the ClusterServingRuntimes,
kserve-huggingfaceserver among them). `kserve-resources` always renders a cert-manager
Certificate for the webhook server, so cert-manager comes first.

`kserve.controller.deploymentMode: Standard` makes raw Deployments the default, the mode every
InferenceService of this program asks for by annotation; the default (Knative) needs Knative
Serving, which the program does not install.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import images
from components.addons.catalog import AddOn, Crd, HelmChart

VERSION = "v0.20.0"
OCI = "oci://ghcr.io/kserve/charts"
NAMESPACE = "kserve"
_VALUES = f"https://github.com/kserve/kserve/blob/{VERSION}/charts/{{chart}}/values.yaml"
GROUP = "serving.kserve.io"
# `pulumi.com/waitFor` for an InferenceService: its aggregated Ready condition
# (pkg/apis/serving/v1beta1/inference_service_status.go at v0.20.0).
READY = "condition=Ready"
STANDARD_MODE = "Standard"


# The controller's image from the one table (common/images.py). The chart writes
# "{image}:{tag | default kserve.version}" (files/kserve/deployment-patch.yaml:61 at v0.20.0), so a
# tag of `v0.20.0@sha256:...` pins the digest. The agent, router and other images in the chart's
# inferenceservice ConfigMap serve features the program does not use (docs/security.md).
CONTROLLER_IMAGE = "kserve-controller"
RBAC_PROXY_IMAGE = "kube-rbac-proxy"


def resources_values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    image = images.chart_image(CONTROLLER_IMAGE, dict(image_mirrors or {}))
    controller: dict[str, Any] = {
        "deploymentMode": STANDARD_MODE,
        "image": image.name,
        "tag": image.pinned_tag,
        # The controller pod's kube-rbac-proxy sidecar takes one whole reference
        # (files/kserve/deployment-patch.yaml:51 at v0.20.0: `image: "{{ .Values.kserve.controller.rbacProxyImage }}"`).
        "rbacProxyImage": images.chart_image(RBAC_PROXY_IMAGE, dict(image_mirrors or {})).reference,
    }
    if system_node_selector:
        controller["nodeSelector"] = dict(system_node_selector)
    return {"kserve": {"controller": controller}}


def runtime_values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {"kserve": {"servingruntime": {"enabled": True}}}


CRD_CHART = HelmChart(
    release="kserve-crd",
    chart=f"{OCI}/kserve-crd",
    version=VERSION,
    namespace=NAMESPACE,
    values_url=_VALUES.format(chart="kserve-crd"),
)
RESOURCES_CHART = HelmChart(
    release="kserve-resources",
    chart=f"{OCI}/kserve-resources",
    version=VERSION,
    namespace=NAMESPACE,
    values_url=_VALUES.format(chart="kserve-resources"),
    values=resources_values,
)
RUNTIMES_CHART = HelmChart(
    release="kserve-runtime-configs",
    chart=f"{OCI}/kserve-runtime-configs",
    version=VERSION,
    namespace=NAMESPACE,
    values_url=_VALUES.format(chart="kserve-runtime-configs"),
    values=runtime_values,
)

ADDON = AddOn(
    key="kserve",
    title="KServe",
    version=VERSION,
    steps=(CRD_CHART, RESOURCES_CHART, RUNTIMES_CHART),
    crds=(
        Crd(GROUP, "InferenceService", "inferenceservices"),
        Crd(GROUP, "ClusterStorageContainer", "clusterstoragecontainers"),
        # Each model's own runtime (components/serving/kserve.py serving_runtime): the pinned vLLM.
        Crd(GROUP, "ServingRuntime", "servingruntimes"),
    ),
    requires=("certManager",),
    docs="InferenceServices in Standard (raw Deployment) mode, each on the program's own vLLM ServingRuntime.",
)
