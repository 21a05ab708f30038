"""cert-manager: issues the certificates of KServe's admission webhooks, and the entrance's HTTPS
certificate from an ACME CA.

cert-manager/cert-manager at tag v1.21.1; the chart version keeps the "v" (make/manifests.mk
packages with --version $(VERSION), the git tag). CRDs are templates gated by `crds.enabled`,
default false, so the install turns them on (KServe's own install script does the same:
hack/setup/quick-install/kserve-standard-mode-full-install-helm.sh at kserve v0.20.0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from common import images
from components.addons.catalog import AddOn, Crd, HelmChart

# Values path of each image mapping -> the image table's entry (common/images.py). The chart renders
# `repository` (a full override), then ":tag@digest" when both are set ("image:tag@digest, though
# only the digest will be used for pulling": values.yaml, and templates/_helpers.tpl:233-241 at
# v1.21.1). `tag` and `digest` appear only as comments in values.yaml; values.schema.json declares
# both for every image mapping (additionalProperties false), so they are keys of the chart.
IMAGES = {
    "": "cert-manager-controller",
    "webhook": "cert-manager-webhook",
    "cainjector": "cert-manager-cainjector",
    "acmesolver": "cert-manager-acmesolver",
    "startupapicheck": "cert-manager-startupapicheck",
}


def image_values(image_mirrors: Mapping[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for component, key in IMAGES.items():
        entry = images.chart_image(key, dict(image_mirrors or {}))
        image = {"repository": entry.name, "tag": entry.tag, **({"digest": entry.digest} if entry.digest else {})}
        if component:
            out[component] = {"image": image}
        else:
            out["image"] = image
    return out


def values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"crds": {"enabled": True}, **image_values(image_mirrors)}
    if system_node_selector:
        # Merged into every component's own nodeSelector (templates/deployment.yaml at the tag).
        out["global"] = {"nodeSelector": dict(system_node_selector)}
    return out


CHART = HelmChart(
    release="cert-manager",
    chart="cert-manager",
    version="v1.21.1",
    namespace="cert-manager",
    repo="https://charts.jetstack.io",
    values_url="https://github.com/cert-manager/cert-manager/blob/v1.21.1/deploy/charts/cert-manager/values.yaml",
    values=values,
)

ADDON = AddOn(
    key="certManager",
    title="cert-manager",
    version="v1.21.1",
    steps=(CHART,),
    # The program creates no cert-manager objects itself; kserve-resources renders these two
    # (files/kserve/certificate-patch.yaml, templates/common/certmanager.yaml at kserve v0.20.0).
    crds=(Crd("cert-manager.io", "Certificate", "certificates"), Crd("cert-manager.io", "Issuer", "issuers")),
    docs="Only as KServe's dependency: kserve-resources renders a cert-manager Certificate for its webhooks.",
)


# The entrance's certificate (exposure.entrance.tls.certificate acme): cert-manager watches the
# Gateway (its gateway-shim turns the `cert-manager.io/issuer` annotation and the HTTPS listener
# into a Certificate) and answers HTTP-01 challenges with an HTTPRoute on the Gateway. Gateway API
# support is off by default: the controller configuration's `gatewayAPI.enabled` turns it on
# (cert-manager v1.21.1 pkg/apis/config/controller/v1alpha1/types.go:86-97, default false in
# internal/apis/config/controller/v1alpha1/defaults.go:75; the chart passes `config` through as the
# ControllerConfiguration, values.yaml:278-333), and the Gateway API CRDs must exist before the
# controller starts, so this variant requires the Gateway API add-on first.
CONTROLLER_CONFIG = {
    "apiVersion": "controller.config.cert-manager.io/v1alpha1",
    "kind": "ControllerConfiguration",
    "gatewayAPI": {"enabled": True},
}


def gateway_values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {**values(system_node_selector, image_mirrors), "config": CONTROLLER_CONFIG}


WITH_GATEWAY_API = dataclasses.replace(
    ADDON,
    steps=(dataclasses.replace(CHART, values=gateway_values),),
    requires=("gatewayApi",),
    docs="KServe's webhook certificates, and the entrance's HTTPS certificate (ACME, answered through the Gateway).",
)
