"""Gateway API Inference Extension: the InferencePool CRD behind the entrance's routes.

kubernetes-sigs/gateway-api-inference-extension at tag v1.6.0 (commit 992e5c29). Its release
assets are built by `make artifacts` (Makefile:259-266 at the tag): `v1-manifests.yaml` is
`kustomize build config/crd` filtered to the CRDs served at v1, which is the InferencePool CRD
(config/crd/bases/inference.networking.k8s.io_inferencepools.yaml, the project's fixture,
tests/fixtures/crds). Only the CRD: the endpoint picker that serves each pool is the
llm-d-router chart the entrance installs per base model (components/entrance/picker.py), and the
Gateway implementation is the cloud's (GKE) or agentgateway (components/addons/agentgateway.py).

GKE installs the GA Inference Extension CRDs itself from 1.34.0-gke.1626000 on ("GKE
automatically installs all GA CRDs for Gateway API and Gateway API Inference Extension on GKE
versions 1.34.0-gke.1626000 or later", https://llm-d.ai/docs/dev/resources/gateway/gke), so a
created GKE cluster at that minor or later relies on GKE's (needs.py).
"""

from __future__ import annotations

from common.facts import Fact
from components.addons.catalog import AddOn, Crd, Manifests

VERSION = "v1.6.0"
GROUP = "inference.networking.k8s.io"
MANIFESTS = Manifests(
    name="inference-extension-v1",
    url=f"https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/{VERSION}/v1-manifests.yaml",
    version=VERSION,
)
GKE_INSTALLS_FROM_MINOR = (1, 34)
PUBLISHED = Fact(
    subject=f"release asset {MANIFESTS.url}",
    value=VERSION,
    source=f"kubernetes-sigs/gateway-api-inference-extension@{VERSION}:Makefile `artifacts` (v1-manifests.yaml)",
    established=False,
    resolve_with=f"curl -fsSLI {MANIFESTS.url}",
)

ADDON = AddOn(
    key="inferenceExtension",
    title="Gateway API Inference Extension CRDs (InferencePool)",
    version=VERSION,
    steps=(MANIFESTS,),
    crds=(Crd(GROUP, "InferencePool", "inferencepools"),),
    docs="The endpoint picker chart of each base model renders its InferencePool; the HTTPRoute sends to it.",
)
