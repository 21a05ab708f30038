"""Gateway API CRDs (standard channel) for the HTTPRoutes of `exposure.gateway`.

No chart exists; each release publishes `standard-install.yaml` (kubernetes-sigs/gateway-api at
tag v1.6.1: hack/build-install-yaml.sh concatenates config/crd/standard/*, among them
gateway.networking.k8s.io_httproutes.yaml, the project's HTTPRoute fixture; the release workflow
checks the asset equals that build). The provider applies it server-side, which the 429 KB
HTTPRoute CRD needs. Only the CRDs: the Gateway the routes attach to, and the controller that
implements it, are the user's (docs/addons.md).
"""

from __future__ import annotations

from components.addons.catalog import AddOn, Crd, Manifests

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
    crds=(Crd("gateway.networking.k8s.io", "HTTPRoute", "httproutes"),),
    docs="HTTPRoutes attach each model to the Gateway named in exposure.gateway.",
)
