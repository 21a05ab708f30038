"""The Prometheus Operator and one Prometheus that scrapes every ServiceMonitor, PodMonitor and
PrometheusRule in the cluster (when monitoring is on, or the GPU Operator's DCGM ServiceMonitor is).

Two releases, both carrying prometheus-operator v0.93.0 (the version of the project's CRD
fixtures, tests/fixtures/crds/monitoring.coreos.com_*.yaml):
- `prometheus-operator-crds` 31.0.0: only the CRDs, as templates, so Helm also upgrades them
  (kube-prometheus-stack's own copy sits in a `crds/` folder Helm installs once and never updates:
  its README, "CRDs created by this chart are not updated by default");
- `kube-prometheus-stack` 88.3.0 with `crds.enabled: false`: the operator, Prometheus,
  Alertmanager, Grafana (whose dashboard sidecar already watches every namespace for ConfigMaps
  labelled grafana_dashboard: "1", the label the servers' dashboards carry), kube-state-metrics and
  node-exporter.

Selection: with `*SelectorNilUsesHelmValues: false` and the selectors left empty, the chart renders
empty selectors, and an empty selector matches every object in every namespace
(templates/prometheus/prometheus.yaml at the tag renders `serviceMonitorSelector: {}` in that case).
Without it, the Prometheus would select only objects labelled `release: kube-prometheus-stack`
and ignore the servers' monitors.

Chart facts: prometheus-community/helm-charts at tags kube-prometheus-stack-88.3.0 and
prometheus-operator-crds-31.0.0 (Chart.yaml appVersion v0.93.0 in both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import contract, images
from components.addons.catalog import AddOn, Crd, HelmChart

REPO = "https://prometheus-community.github.io/helm-charts"
_VALUES = "https://github.com/prometheus-community/helm-charts/blob/{tag}/charts/{chart}/values.yaml"

CRDS_CHART = HelmChart(
    release="prometheus-operator-crds",
    chart="prometheus-operator-crds",
    version="31.0.0",
    namespace=contract.MONITORING_NAMESPACE,
    repo=REPO,
    values_url=_VALUES.format(tag="prometheus-operator-crds-31.0.0", chart="prometheus-operator-crds"),
)


# Values path of each image mapping -> the image table's entry (common/images.py). The templates
# render "{registry}/{repository}:{tag}@sha256:{sha}" when `sha` is set (the hex alone, without
# "sha256:"): templates/prometheus-operator/deployment.yaml:53-57 (operator) and 96-100 (config
# reloader), prometheus/prometheus.yaml:55-56, alertmanager/alertmanager.yaml:20-23,
# prometheus-operator/admission-webhooks/job-patch/job-createSecret.yaml:39-40, at
# kube-prometheus-stack-88.3.0. The admission webhook Deployment is off by default
# (admissionWebhooks.deployment.enabled false). The subcharts' images are SUBCHART_IMAGES below.
IMAGES = {
    "prometheusOperator.image": "prometheus-operator",
    "prometheusOperator.prometheusConfigReloader.image": "prometheus-config-reloader",
    "prometheus.prometheusSpec.image": "prometheus",
    "alertmanager.alertmanagerSpec.image": "alertmanager",
    "prometheusOperator.admissionWebhooks.patch.image": "kube-webhook-certgen",
}


def _set(values: dict[str, Any], dotted: str, leaf: dict[str, Any]) -> None:
    *parents, last = dotted.split(".")
    node = values
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = leaf


def image_mapping(key: str, image_mirrors: Mapping[str, str] | None = None) -> dict[str, str]:
    entry = images.chart_image(key, dict(image_mirrors or {}))
    out = {"registry": entry.registry, "repository": entry.path, "tag": entry.tag}
    if entry.digest is not None:
        out["sha"] = entry.digest.removeprefix("sha256:")
    return out


# The subcharts' image mappings (charts/kube-prometheus-stack-88.3.0/charts/<subchart>/ at the
# tag), each spelled as its own template reads it:
# - grafana (templates/_pod.tpl:1246-1250, the sidecars :120-124 and after): "{registry}/{repository}:{tag}
#   @sha256:{sha}", `sha` the hex alone, as the parent's own images;
# - kube-state-metrics (templates/_helpers.tpl:142-156): "{registry}/{repository}:{tag}@{sha}", `sha`
#   the whole "sha256:..." digest;
# - prometheus-node-exporter (templates/_helpers.tpl:77-93): "{registry}/{repository}:{tag}{-distroless}
#   @{digest}" (`sha` is refused there); the parent turns `distroless` on (values.yaml:2746-2747), and the
#   table's tag already ends in "-distroless", so the suffix is turned off here rather than doubled.
SUBCHART_IMAGES = {
    "grafana.image": "grafana",
    "grafana.sidecar.image": "grafana-sidecar",
    "kube-state-metrics.image": "kube-state-metrics",
    "prometheus-node-exporter.image": "node-exporter",
}


def subchart_image_mapping(path: str, key: str, image_mirrors: Mapping[str, str] | None = None) -> dict[str, Any]:
    entry = images.chart_image(key, dict(image_mirrors or {}))
    out: dict[str, Any] = {"registry": entry.registry, "repository": entry.path, "tag": entry.tag}
    if path == "prometheus-node-exporter.image":
        out["distroless"] = False
        if entry.digest is not None:
            out["digest"] = entry.digest
    elif entry.digest is not None:
        out["sha"] = entry.digest if path == "kube-state-metrics.image" else entry.digest.removeprefix("sha256:")
    return out


def stack_values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """kube-prometheus-stack values: CRDs from their own release, every monitor and rule selected."""
    spec: dict[str, Any] = {
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
    }
    values: dict[str, Any] = {
        "crds": {"enabled": False},
        "prometheus": {"prometheusSpec": spec},
    }
    if system_node_selector:
        selector = dict(system_node_selector)
        spec["nodeSelector"] = selector
        values["prometheusOperator"] = {
            "nodeSelector": selector,
            "admissionWebhooks": {"deployment": {"nodeSelector": selector}, "patch": {"nodeSelector": selector}},
        }
        values["alertmanager"] = {"alertmanagerSpec": {"nodeSelector": selector}}
    for path, key in IMAGES.items():
        _set(values, path, image_mapping(key, image_mirrors))
    for path, key in SUBCHART_IMAGES.items():
        _set(values, path, subchart_image_mapping(path, key, image_mirrors))
    return values


STACK_CHART = HelmChart(
    release=contract.PROMETHEUS_RELEASE,
    chart="kube-prometheus-stack",
    version="88.3.0",
    namespace=contract.MONITORING_NAMESPACE,
    repo=REPO,
    values_url=_VALUES.format(tag="kube-prometheus-stack-88.3.0", chart="kube-prometheus-stack"),
    values=stack_values,
    # prometheus-node-exporter, a dependency of the chart, runs on every node with hostNetwork,
    # hostPID and hostPath mounts of the node's root (its values.yaml: hostNetwork: true, hostPID:
    # true, hostRootFsMount.enabled: true), which only the privileged level admits.
    pod_security=(
        "privileged: kube-prometheus-stack's node-exporter DaemonSet uses the host network and PID "
        "namespaces and mounts the node's root filesystem to read its metrics."
    ),
)

GROUP = "monitoring.coreos.com"
ADDON = AddOn(
    key="prometheusOperator",
    title="Prometheus Operator (kube-prometheus-stack)",
    version="v0.93.0 (kube-prometheus-stack 88.3.0)",
    steps=(CRDS_CHART, STACK_CHART),
    crds=(
        Crd(GROUP, "ServiceMonitor", "servicemonitors"),
        Crd(GROUP, "PodMonitor", "podmonitors"),
        Crd(GROUP, "PrometheusRule", "prometheusrules"),
    ),
    docs=f"Prometheus at {contract.PROMETHEUS_URL} selects every ServiceMonitor, PodMonitor and PrometheusRule; "
    'Grafana loads every ConfigMap labelled grafana_dashboard: "1".',
)
