"""KEDA: scales a model's servers on vLLM's queue depth (autoscaling.kind keda).

kedacore/charts at tag v2.20.2 (chart and app 2.20.2). The chart installs its CRDs as templates
(keda/templates/crds/, gated by `crds.install`, default true), so Helm also upgrades them; the
ScaledObject CRD equals the project's fixture (kedacore/keda v2.20.2 with its scaledobject patch).
"""

from __future__ import annotations

from typing import Any, Mapping

from components.addons.catalog import AddOn, Crd, HelmChart


def values(system_node_selector: Mapping[str, str] | None) -> dict[str, Any]:
    # The top-level nodeSelector is the default of the operator, metrics server and webhooks
    # (templates use `<component>.nodeSelector | default .Values.nodeSelector`).
    return {"nodeSelector": dict(system_node_selector)} if system_node_selector else {}


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
