"""Gateway API CRDs (standard channel) for the entrance's Gateway and HTTPRoutes, or the per-model
HTTPRoutes of `exposure.gateway`.

No chart exists; each release publishes `standard-install.yaml` (kubernetes-sigs/gateway-api at
tag v1.6.1: hack/build-install-yaml.sh concatenates config/crd/standard/*, among them
gateway.networking.k8s.io_httproutes.yaml and _gateways.yaml, the project's fixtures; the release
workflow checks the asset equals that build). The provider applies it server-side, which the 429 KB
HTTPRoute CRD needs. Only the CRDs: the controller that implements a Gateway is the cloud's (GKE),
agentgateway (components/addons/agentgateway.py) or the user's (docs/addons.md).

On GKE, turning on the cluster's Gateway API (`gateway_api_config` channel CHANNEL_STANDARD, which
the entrance needs for the GKE Gateway controller; `gcloud ... --gateway-api=standard`) makes GKE
install and manage the standard-channel CRDs with its GatewayClasses (GKE docs, "Deploying
Gateways", "Enable Gateway API in your cluster",
https://cloud.google.com/kubernetes-engine/docs/how-to/deploying-gateways; unverified against a
cluster: settle with `kubectl get crd gateways.gateway.networking.k8s.io -o
jsonpath='{.metadata.labels}'` on one). Applying the standard install over GKE's copies would
fight them, so such a cluster relies on GKE's (needs.py).
"""

from __future__ import annotations

import dataclasses

from components.addons.catalog import AddOn, CloudFeature, Crd, Manifests

VERSION = "v1.6.1"
MANIFESTS = Manifests(
    name="gateway-api-standard",
    url=f"https://github.com/kubernetes-sigs/gateway-api/releases/download/{VERSION}/standard-install.yaml",
    version=VERSION,
)

# GKE installs the GA Gateway API CRDs itself from 1.34.0-gke.1626000 on ("GKE automatically
# installs all GA CRDs for Gateway API ... on GKE versions 1.34.0-gke.1626000 or later",
# https://llm-d.ai/docs/dev/resources/gateway/install-crds); a second install would fail with
# AlreadyExists. A created GKE cluster at this minor or later relies on GKE's.
GKE_INSTALLS_FROM_MINOR = (1, 34)

ADDON = AddOn(
    key="gatewayApi",
    title="Gateway API CRDs (standard channel)",
    version=VERSION,
    steps=(MANIFESTS,),
    crds=(
        Crd("gateway.networking.k8s.io", "HTTPRoute", "httproutes"),
        Crd("gateway.networking.k8s.io", "Gateway", "gateways"),
    ),
    docs="The entrance's Gateway and HTTPRoutes (exposure.entrance), or an HTTPRoute per model on the Gateway "
    "named in exposure.gateway.",
)


# The entrance on GKE: the GKE Gateway controller (the cluster's Gateway API, standard channel)
# brings the Gateway API CRDs and GKE's own policy CRDs, HealthCheckPolicy and GCPBackendPolicy
# (networking.gke.io/v1), which the entrance attaches to each InferencePool
# (components/entrance/gke.py). A created cluster gets it from the cluster layer
# (components/cluster/gcp/gke.py gateway_api_config); an existing one is turned on by its owner.
GKE_GROUP = "networking.gke.io"
GKE_GATEWAY = dataclasses.replace(
    ADDON,
    title="Gateway API on GKE (GKE Gateway controller, standard channel)",
    version="GKE-managed",
    steps=(
        CloudFeature(
            name="gke-gateway-api",
            command="gcloud container clusters update <cluster> --location <region> --gateway-api=standard",
            version="GKE-managed",
        ),
    ),
    crds=(
        *ADDON.crds,
        Crd(GKE_GROUP, "HealthCheckPolicy", "healthcheckpolicies"),
        Crd(GKE_GROUP, "GCPBackendPolicy", "gcpbackendpolicies"),
    ),
    docs="The entrance's Gateway (GKE Gateway controller), its HTTPRoutes, and GKE's health-check and backend "
    "policies per InferencePool.",
)
# With several base models the entrance also needs GKE's routing extension, through which the load
# balancer calls the Body-Based Router (components/entrance/bbr.py; GKE docs "Customize GKE Gateway
# traffic using Service Extensions"). A variant of its own, so a one-model stack on an existing GKE
# cluster does not look up a kind it never creates.
GKE_GATEWAY_BODY_ROUTING = dataclasses.replace(
    GKE_GATEWAY,
    crds=(*GKE_GATEWAY.crds, Crd(GKE_GROUP, "GCPRoutingExtension", "gcproutingextensions")),
    docs="The entrance's Gateway (GKE Gateway controller), its HTTPRoutes, GKE's health-check and backend "
    "policies per InferencePool, and the routing extension through which the Gateway calls the Body-Based "
    "Router (several base models).",
)
