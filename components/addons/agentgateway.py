"""agentgateway: the Gateway implementation of the entrance on EKS (and on existing clusters that
declare it).

Why agentgateway (docs/routing.md has the comparison): it is one of the two implementations that
pass the Gateway API Inference Extension conformance suite in full and that GIE v1.6.0 lists as
conformant (site-src/implementations/gateways.md at the tag: Istio, Agentgateway, NGINX Gateway
Fabric; NGF's report is partial), llm-d's released gateway guides cover it, it honours the pool's
`failureMode` and talks TLS to the endpoint picker itself, and it routes on the request body
without an extra ext_proc deployment (an AgentgatewayPolicy PreRouting transformation, the
entrance's body-based routing). Envoy Gateway needs a second controller (Envoy AI Gateway) for
InferencePool backends and has no v1 conformance report; kgateway's inference support now is
agentgateway.

agentgateway/agentgateway at tag v1.4.1 (commit 163ea214, the newest release in the snapshot read).
Two OCI charts, `cr.agentgateway.dev/charts/agentgateway-crds` and `.../agentgateway`, both with
version `v1.4.1` (.github/workflows/release.yml, the release notes' "Helm charts are available:
cr.agentgateway.dev/charts/agentgateway:v<version>"; controller/Makefile packages them with the
v-prefixed version). The CRD chart first (AgentgatewayPolicy, AgentgatewayParameters, ...), then
the controller with `inferenceExtension.enabled: true` (values.yaml:211-214; default false), which
makes it reconcile InferencePool backends; so the Gateway API and InferencePool CRDs come first.
The controller creates the GatewayClass `agentgateway` (values.yaml:236-238, gatewayClassName
default) and, per Gateway, a proxy Deployment and a Service of type LoadBalancer that carries the
Gateway's `spec.infrastructure.annotations` (controller/pkg/helm/agentgateway/templates/
service.yaml:1-13, controller/pkg/deployer/agentgateway_parameters.go:539-541).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import images
from common.facts import Fact
from components.addons.catalog import AddOn, Crd, HelmChart

VERSION = "v1.4.1"
OCI = "oci://cr.agentgateway.dev/charts"
NAMESPACE = "agentgateway-system"
# The controller's xDS port, which every proxy fetches its configuration from (values.yaml:79
# `controller.service.ports.agwGrpc: 9978`, templates/deployment.yaml container port `grpc-xds-agw`
# and the AGW_AGENTGATEWAY_XDS_SERVICE_PORT the proxies are told; not set here).
XDS_PORT = 9978
GROUP = "agentgateway.dev"
_VALUES = f"https://github.com/agentgateway/agentgateway/blob/{VERSION}/controller/install/helm/{{chart}}/values.yaml"


# The controller's image from the one table (common/images.py, "agentgateway-controller"). The template
# writes "{controller.image.registry | image.registry}/{controller.image.repository}:{tag}", the tag
# through agentgateway.imageTag, which keeps a tag starting with "v" as it is
# (templates/deployment.yaml:59, templates/_helpers.tpl:87-96 at v1.4.1), so `v1.4.1@sha256:...` pins it.
CONTROLLER_IMAGE = "agentgateway-controller"


def controller_image(image_mirrors: Mapping[str, str] | None = None) -> dict[str, str]:
    image = images.chart_image(CONTROLLER_IMAGE, dict(image_mirrors or {}))
    return {"registry": image.registry, "repository": image.path, "tag": image.pinned_tag}


def values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "inferenceExtension": {"enabled": True},
        "controller": {"image": controller_image(image_mirrors)},
    }
    if system_node_selector:
        # The controller's pods (values.yaml:44-45); the proxies run where their Deployment lands,
        # and with no GPU toleration that is an untainted system node.
        out["nodeSelector"] = dict(system_node_selector)
    return out


CRDS_CHART = HelmChart(
    release="agentgateway-crds",
    chart=f"{OCI}/agentgateway-crds",
    version=VERSION,
    namespace=NAMESPACE,
    values_url=_VALUES.format(chart="agentgateway-crds"),
)
CHART = HelmChart(
    release="agentgateway",
    chart=f"{OCI}/agentgateway",
    version=VERSION,
    namespace=NAMESPACE,
    values_url=_VALUES.format(chart="agentgateway"),
    values=values,
)

PUBLISHED = Fact(
    subject=f"charts {OCI}/agentgateway-crds and {OCI}/agentgateway at {VERSION}",
    value=VERSION,
    source=f"agentgateway/agentgateway@{VERSION}:.github/workflows/release.yml (release notes' chart references)",
    established=False,
    resolve_with=f"helm show chart {OCI}/agentgateway --version {VERSION}",
)

ADDON = AddOn(
    key="agentgateway",
    title="agentgateway (Gateway API implementation with InferencePool support)",
    version=VERSION,
    steps=(CRDS_CHART, CHART),
    crds=(Crd(GROUP, "AgentgatewayPolicy", "agentgatewaypolicies"),),
    requires=("gatewayApi", "inferenceExtension"),
    docs="Serves the entrance's Gateway (class agentgateway) and copies the body's model into a routing header.",
)
