"""KEDA: scales a model's servers on vLLM's queue depth (autoscaling.kind keda).

kedacore/charts at tag v2.20.2 (chart and app 2.20.2). The chart installs its CRDs as templates
(keda/templates/crds/, gated by `crds.install`, default true), so Helm also upgrades them; the
ScaledObject CRD equals the project's fixture (kedacore/keda v2.20.2 with its scaledobject patch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import images
from components.addons.catalog import AddOn, Crd, HelmChart

# Values key under `image` -> the image table's entry (common/images.py). The templates write
# "{registry}/{repository}:{tag}" (keda/templates/manager/deployment.yaml:74,
# metrics-server/deployment.yaml:74, webhooks/deployment.yaml:72 at v2.20.2), so a tag field of
# `2.20.2@sha256:...` renders a reference pinned by digest that still names its tag.
IMAGES = {
    "keda": "keda-operator",
    "metricsApiServer": "keda-metrics-apiserver",
    "webhooks": "keda-admission-webhooks",
}


def image_values(image_mirrors: Mapping[str, str] | None = None) -> dict[str, Any]:
    out = {}
    for field, key in IMAGES.items():
        image = images.chart_image(key, dict(image_mirrors or {}))
        out[field] = {"registry": image.registry, "repository": image.path, "tag": image.pinned_tag}
    return out


def values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    # The top-level nodeSelector is the default of the operator, metrics server and webhooks
    # (templates use `<component>.nodeSelector | default .Values.nodeSelector`).
    out: dict[str, Any] = {"image": image_values(image_mirrors)}
    if system_node_selector:
        out["nodeSelector"] = dict(system_node_selector)
    return out


CHART = HelmChart(
    release="keda",
    chart="keda",
    version="2.20.2",
    namespace="keda",
    repo="https://kedacore.github.io/charts",
    values_url="https://github.com/kedacore/charts/blob/v2.20.2/keda/values.yaml",
    values=values,
)

ADDON = AddOn(
    key="keda",
    title="KEDA",
    version="2.20.2",
    steps=(CHART,),
    crds=(Crd("keda.sh", "ScaledObject", "scaledobjects"),),
    docs="ScaledObjects scale each model on vllm:num_requests_waiting read from Prometheus.",
)
