"""First-apply rules for what runs on the cluster: CRDs before their objects, and waits that wait.

Registered with tests/support/first_apply.py (`check(evaluation)` runs them with the other layers' rules):

- `crd-before-custom-resource`: an object of a custom kind is created only after something that
  makes its kind served: a Helm release whose chart ships the CRD, the Gateway API manifests, a
  read of the CRD on an existing cluster (the add-on declared present), a GKE version that ships
  the CRDs, or, for kinds an operator applies at run time (the Network Operator's IPPool), the
  operator's policy awaited to ready. pulumi-kubernetes retries an unknown kind for about a minute
  and then fails the update; `pulumi preview` does not notice at all.
- `chart-renders-after-its-crds`: a Helm release whose templates render custom resources comes
  after the CRDs of those kinds (Helm refuses the whole release otherwise).
- `custom-resource-waits-are-real`: pulumi-kubernetes waits for a custom resource only with
  `pulumi.com/waitFor`; customTimeouts on one without it bound nothing, and the kinds whose
  readiness the servers depend on must carry it.
- `waits-cover-the-plan`: each model's workload waits (customTimeouts) and may progress
  (progressDeadlineSeconds) at least its startup budget plus the node-provisioning allowance the
  plan gives it; a mirror Job is waited for at least as long as it may run.
- `service-does-not-outwait-its-pods`: a Service with a selector is either created with
  skipAwait or after the workload whose pods back it; otherwise its 10-minute wait for a ready
  endpoint runs out while the pods wait for the mirror and the model load.
- `picker-starts-after-the-kinds-it-discovers`: the endpoint picker looks for the
  InferenceModelRewrite and InferenceObjective kinds once, when it starts (llm-d-router v0.10.0
  pkg/epp/server/controller_config.go:59-87), so its release comes after their CRDs; otherwise
  aliases are ignored until the pickers happen to restart.
- `picker-release-does-not-wait-for-its-standby`: a release of the endpoint picker chart with more
  than one replica runs them under leader election, where only the leader is Ready; Helm's wait
  counts the Deployment (strategy Recreate) ready only when every replica is, so an awaited release
  times out and, atomic, is rolled back (components/entrance/picker.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from common import contract
from components.addons import CATALOG, gateway_api, inference_extension, kserve, leader_worker_set
from components.addons.catalog import HelmChart, Manifests
from components.addons.needs import VARIANTS
from components.operators import nic_cluster_policy
from offline_plan.mock_runtime import CRD_TYPE, RecordedResource
from offline_plan.waits import KUBERNETES_DEFAULT_WAIT_SECONDS, duration_seconds
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
GKE_CLUSTER = "gcp:container/cluster:Cluster"

# API groups Kubernetes serves itself (no CRD needed).
BUILTIN_GROUPS = {
    "",
    "apps",
    "batch",
    "policy",
    "autoscaling",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "apiextensions.k8s.io",
    "admissionregistration.k8s.io",
    "certificates.k8s.io",
    "discovery.k8s.io",
    "node.k8s.io",
}

Kind = tuple[str, str]  # (group, kind)


def _kinds_by_chart() -> dict[str, set[Kind]]:
    """Chart name -> the kinds whose CRDs the chart installs."""
    table: dict[str, set[Kind]] = {
        # deployment/network-operator/crds/ at v26.4.1 (components/operators/nic_cluster_policy.py).
        "network-operator": set(nic_cluster_policy.CHART_KINDS),
    }
    for addon in CATALOG + VARIANTS:
        step = addon.steps[addon.crd_step]
        if isinstance(step, HelmChart):
            table.setdefault(step.chart.rsplit("/", 1)[-1], set()).update((c.group, c.kind) for c in addon.crds)
    return table


def _kinds_by_manifest_url() -> dict[str, set[Kind]]:
    table: dict[str, set[Kind]] = {}
    for addon in CATALOG + VARIANTS:
        step = addon.steps[addon.crd_step]
        if isinstance(step, Manifests):
            table[step.url] = {(c.group, c.kind) for c in addon.crds}
    return table


def _crd_names() -> dict[str, Kind]:
    return {c.name: (c.group, c.kind) for addon in CATALOG + VARIANTS for c in addon.crds}


GATEWAY_KINDS = {(c.group, c.kind) for c in gateway_api.ADDON.crds}
# GKE's Gateway controller, on with the cluster's Gateway API: the standard CRDs and GKE's policies.
GKE_GATEWAY_KINDS = {(c.group, c.kind) for c in gateway_api.GKE_GATEWAY_BODY_ROUTING.crds}
INFERENCE_POOL = (inference_extension.GROUP, "InferencePool")
PICKER_DISCOVERS = {("llm-d.ai", "InferenceModelRewrite"), ("llm-d.ai", "InferenceObjective")}
MONITORING = "monitoring.coreos.com"

# What a chart's own templates render, by chart name: kinds that need their CRD before the release.
# kube-prometheus-stack 88.3.0 renders its kube-* ServiceMonitors and default PrometheusRules;
# kserve-resources v0.20.0 a cert-manager Certificate and Issuer and the default
# ClusterStorageContainer; kserve-runtime-configs v0.20.0 the ClusterServingRuntimes; gpu-operator
# v26.7.0 a ServiceMonitor for DCGM when dcgmExporter.serviceMonitor.enabled.
# llm-d-router-gateway v0.10.0 renders its InferencePool always and a ServiceMonitor when
# router.monitoring.prometheus.enabled (routerlib templates/_inferencepool.yaml, _servicemonitor.yaml).
RENDERED_KINDS: dict[str, set[Kind]] = {
    contract.PICKER_CHART: {INFERENCE_POOL},
    "kube-prometheus-stack": {(MONITORING, "ServiceMonitor"), (MONITORING, "PrometheusRule")},
    "kserve-resources": {
        ("cert-manager.io", "Certificate"),
        ("cert-manager.io", "Issuer"),
        ("serving.kserve.io", "ClusterStorageContainer"),
    },
    "kserve-runtime-configs": {("serving.kserve.io", "ClusterServingRuntime")},
    # body-based-routing v1.5.0 with provider.name gke: its GCPRoutingExtension and HealthCheckPolicy
    # (templates/gke.yaml; components/entrance/bbr.py).
    "body-based-routing": {("networking.gke.io", "GCPRoutingExtension"), ("networking.gke.io", "HealthCheckPolicy")},
}
# kserve-crd installs the ClusterServingRuntime CRD too (charts/kserve-crd/templates at v0.20.0).
# The Karpenter chart (components/cluster/aws/karpenter.py, the EKS autoscaler, not an add-on)
# ships its CRDs in its crds/ folder (aws/karpenter-provider-aws v1.14.1 charts/karpenter/crds).
EXTRA_CHART_KINDS = {
    "kserve-crd": {("serving.kserve.io", "ClusterServingRuntime")},
    "karpenter": {("karpenter.sh", "NodePool"), ("karpenter.sh", "NodeClaim"), ("karpenter.k8s.aws", "EC2NodeClass")},
}

# Kinds whose readiness the servers depend on, and the waitFor each must carry.
READINESS = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): leader_worker_set.READY,
    ("serving.kserve.io", "InferenceService"): kserve.READY,
    ("mellanox.com", "NicClusterPolicy"): nic_cluster_policy.READY,
    ("mellanox.com", "MacvlanNetwork"): nic_cluster_policy.READY,
}
# Kinds an operator applies at run time, and the policy whose readiness means they are served.
RUNTIME_KINDS = dict.fromkeys(nic_cluster_policy.RUNTIME_KINDS, ("mellanox.com", "NicClusterPolicy"))


def group_kind(resource: RecordedResource) -> Kind:
    api_version = str(resource.inputs.get("apiVersion", ""))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return group, str(resource.inputs.get("kind", ""))


def is_custom(resource: RecordedResource) -> bool:
    return resource.is_kubernetes_object and group_kind(resource)[0] not in BUILTIN_GROUPS


def annotations(resource: RecordedResource) -> dict:
    return (resource.inputs.get("metadata") or {}).get("annotations") or {}


def chart_of(resource: RecordedResource) -> str:
    return str(resource.inputs.get("chart", "")).rsplit("/", 1)[-1]


def _gke_minor(resource: RecordedResource) -> tuple[int, int] | None:
    version = str(resource.inputs.get("minMasterVersion") or "")
    parts = version.split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) else None


def kinds_provided_by(resource: RecordedResource) -> set[Kind]:
    """The custom kinds that are served once `resource` exists."""
    charts = _kinds_by_chart()
    if resource.type == RELEASE:
        return charts.get(chart_of(resource), set()) | EXTRA_CHART_KINDS.get(chart_of(resource), set())
    if resource.type == CONFIG_FILE:
        return _kinds_by_manifest_url().get(str(resource.inputs.get("file")), set())
    if resource.type == CRD_TYPE and resource.read_id is not None:
        kind = _crd_names().get(resource.read_id)
        return {kind} if kind else set()
    if resource.type == GKE_CLUSTER:
        minor = _gke_minor(resource)
        kinds: set[Kind] = set()
        if minor and minor >= gateway_api.GKE_INSTALLS_FROM_MINOR:
            kinds |= GATEWAY_KINDS
        if minor and minor >= inference_extension.GKE_INSTALLS_FROM_MINOR:
            kinds.add(INFERENCE_POOL)
        if ((resource.inputs.get("gatewayApiConfig") or {}).get("channel") or "CHANNEL_DISABLED") != "CHANNEL_DISABLED":
            kinds |= GKE_GATEWAY_KINDS
        return kinds
    if resource.is_kubernetes_object and contract.PULUMI_WAIT_FOR in annotations(resource):
        return {kind for kind, policy in RUNTIME_KINDS.items() if policy == group_kind(resource)}
    return set()


def _provided_upstream(graph: ApplyGraph, resource: RecordedResource) -> set[Kind]:
    kinds: set[Kind] = set()
    for urn in graph.upstream(resource):
        kinds |= kinds_provided_by(graph.by_urn[urn])
    return kinds


@rule("crd-before-custom-resource")
def crd_before_custom_resource(graph: ApplyGraph) -> Iterable[Violation]:
    for resource in graph.kubernetes_objects():
        if not is_custom(resource):
            continue
        kind = group_kind(resource)
        if kind not in _provided_upstream(graph, resource):
            yield Violation(
                "crd-before-custom-resource",
                describe(resource),
                f"{kind[1]} ({kind[0]}) is created before anything that installs its CRD (an add-on "
                "release, or the CRD looked up on an existing cluster); the provider gives up on an "
                "unknown kind after about a minute",
            )


@rule("chart-renders-after-its-crds")
def chart_renders_after_its_crds(graph: ApplyGraph) -> Iterable[Violation]:
    for release in graph.of_type(RELEASE):
        rendered = set(RENDERED_KINDS.get(chart_of(release), set()))
        values = release.inputs.get("values") or {}
        if chart_of(release) == "gpu-operator" and ((values.get("dcgmExporter") or {}).get("serviceMonitor") or {}).get(
            "enabled"
        ):
            rendered.add((MONITORING, "ServiceMonitor"))
        if chart_of(release) == contract.PICKER_CHART and (
            ((values.get("router") or {}).get("monitoring") or {}).get("prometheus") or {}
        ).get("enabled"):
            rendered.add((MONITORING, "ServiceMonitor"))
        missing = rendered - _provided_upstream(graph, release) - kinds_provided_by(release)
        for group, kind in sorted(missing):
            yield Violation(
                "chart-renders-after-its-crds",
                describe(release),
                f"the chart renders a {kind} ({group}) but nothing before the release installs its CRD; "
                "Helm refuses the whole release",
            )


@rule("custom-resource-waits-are-real")
def custom_resource_waits_are_real(graph: ApplyGraph) -> Iterable[Violation]:
    for resource in graph.kubernetes_objects():
        if not is_custom(resource):
            continue
        wait_for = annotations(resource).get(contract.PULUMI_WAIT_FOR)
        expected = READINESS.get(group_kind(resource))
        if resource.custom_timeouts and wait_for is None:
            yield Violation(
                "custom-resource-waits-are-real",
                describe(resource),
                "has customTimeouts but no pulumi.com/waitFor: the provider counts a custom resource "
                "created as soon as the API server accepts it, so the timeouts bound nothing",
            )
        if expected is not None and wait_for != expected:
            yield Violation(
                "custom-resource-waits-are-real",
                describe(resource),
                f"its readiness matters but it does not wait for it: pulumi.com/waitFor should be "
                f"{expected!r}, is {wait_for!r}",
            )


def _sizing(graph: ApplyGraph) -> dict[str, dict]:
    return {row["model"]: row for row in graph.evaluation.outputs.get("sizing") or []}


WORKLOAD_KINDS = {
    ("apps", "Deployment"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    ("serving.kserve.io", "InferenceService"),
}


@rule("waits-cover-the-plan")
def waits_cover_the_plan(graph: ApplyGraph) -> Iterable[Violation]:
    sizing = _sizing(graph)
    for resource in graph.kubernetes_objects():
        labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
        row = sizing.get(labels.get(contract.LABEL_MODEL, ""))
        kind = group_kind(resource)
        if kind in WORKLOAD_KINDS and row is not None:
            needed = row["startupBudgetSeconds"] + row["nodeProvisioningSeconds"]
            waited = (
                duration_seconds(resource.custom_timeouts["create"])
                if "create" in resource.custom_timeouts
                else KUBERNETES_DEFAULT_WAIT_SECONDS
            )
            if waited < needed:
                yield Violation(
                    "waits-cover-the-plan",
                    describe(resource),
                    f"`pulumi up` waits {waited} s, less than the startup budget plus node provisioning "
                    f"({row['startupBudgetSeconds']} + {row['nodeProvisioningSeconds']} s)",
                )
            deadline = (resource.inputs.get("spec") or {}).get("progressDeadlineSeconds")
            if kind == ("apps", "Deployment") and (deadline or 600) < needed:
                yield Violation(
                    "waits-cover-the-plan",
                    describe(resource),
                    f"progressDeadlineSeconds {deadline or 600} is less than the startup budget plus node "
                    f"provisioning ({needed} s): a healthy rollout would be marked failed",
                )
        if kind == ("batch", "Job"):
            active = (resource.inputs.get("spec") or {}).get("activeDeadlineSeconds")
            waited = (
                duration_seconds(resource.custom_timeouts["create"])
                if "create" in resource.custom_timeouts
                else KUBERNETES_DEFAULT_WAIT_SECONDS
            )
            if active is not None and waited < active:
                yield Violation(
                    "waits-cover-the-plan",
                    describe(resource),
                    f"`pulumi up` waits {waited} s for a Job that may run {active} s",
                )


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _pod_labels(resource: RecordedResource) -> list[dict]:
    spec = resource.inputs.get("spec") or {}
    templates = [spec.get("template")]
    lws = spec.get("leaderWorkerTemplate") or {}
    templates += [lws.get("leaderTemplate"), lws.get("workerTemplate")]
    return [((t or {}).get("metadata") or {}).get("labels") or {} for t in templates if t]


@rule("service-does-not-outwait-its-pods")
def service_does_not_outwait_its_pods(graph: ApplyGraph) -> Iterable[Violation]:
    for service in graph.kubernetes_objects():
        if group_kind(service) != ("", "Service"):
            continue
        spec = service.inputs.get("spec") or {}
        selector = spec.get("selector") or {}
        if not selector or spec.get("clusterIP") == "None" or spec.get("type") == "ExternalName":
            continue
        if str(annotations(service).get(contract.PULUMI_SKIP_AWAIT, "")).lower() == "true":
            continue
        backing = [
            r for r in graph.kubernetes_objects() if any(_matches(selector, labels) for labels in _pod_labels(r))
        ]
        if backing and not any(graph.waits_for(service, r) for r in backing):
            yield Violation(
                "service-does-not-outwait-its-pods",
                describe(service),
                "waits up to 10 minutes for a ready endpoint but is created beside, not after, the "
                "workload whose pods back it; set pulumi.com/skipAwait or create it after the workload",
            )


@rule("picker-release-does-not-wait-for-its-standby")
def picker_release_does_not_wait_for_its_standby(graph: ApplyGraph) -> Iterable[Violation]:
    for release in graph.of_type(RELEASE):
        if chart_of(release) != contract.PICKER_CHART:
            continue
        replicas = int((((release.inputs.get("values") or {}).get("router") or {}).get("epp") or {}).get("replicas", 1))
        if replicas > 1 and not release.inputs.get("skipAwait"):
            yield Violation(
                "picker-release-does-not-wait-for-its-standby",
                describe(release),
                f"{replicas} pickers run under leader election and only the leader is Ready, but "
                "Helm's wait needs every replica of a Recreate Deployment Ready: the release would "
                "time out (and roll back when atomic); set skipAwait",
            )


@rule("picker-starts-after-the-kinds-it-discovers")
def picker_starts_after_the_kinds_it_discovers(graph: ApplyGraph) -> Iterable[Violation]:
    for release in graph.of_type(RELEASE):
        if chart_of(release) != contract.PICKER_CHART:
            continue
        for group, kind in sorted(PICKER_DISCOVERS - _provided_upstream(graph, release)):
            yield Violation(
                "picker-starts-after-the-kinds-it-discovers",
                describe(release),
                f"the picker looks for {kind} ({group}) only when it starts, and nothing before the "
                "release installs its CRD: objects of that kind would be ignored until a restart",
            )
