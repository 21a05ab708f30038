"""Every pod a stack runs, as the NetworkPolicy evaluator sees it: the pod template's labels, its
namespace and its declared container ports (names included), taken from what will really run.

- The program's own workloads (the mock runtime's Kubernetes objects).
- Every Helm release's workloads, rendered by Helm's engine from charts/ (offline_plan.helm).
- agentgateway's proxy for each Gateway of its class, rendered from the controller's embedded chart
  with the values the controller passes (tests/support/agentgateway_proxy.py).
- Pods that an operator creates from a rendered custom resource, where the labels are the
  operator's: Prometheus and Alertmanager (prometheus-operator labels each pod
  `operator.prometheus.io/name=<resource name>`, pkg/prometheus `PrometheusNameLabelName`; the
  serving namespace's policies select Prometheus by its namespace only), and cert-manager's
  HTTP-01 solver in the namespace of an Issuer that solves HTTP-01 (its label and port,
  components/network_policy/rules.py ACME_SOLVER_*).
- The cluster's DNS pods, which no chart of the stack installs (k8s-app=kube-dns in kube-system on
  EKS and GKE, rules.DNS_POD_LABELS; ports 53 UDP and TCP).

Objects a chart leaves without a namespace land in the release's namespace (what `helm install
--namespace` does for namespaced kinds).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from components.addons import agentgateway
from components.network_policy.rules import ACME_SOLVER_LABELS, ACME_SOLVER_PORT, DNS_NAMESPACE, DNS_POD_LABELS
from offline_plan import helm
from offline_plan.mock_runtime import Evaluation
from policies.workloads import workload
from tests.support import agentgateway_proxy
from tests.support.netpol_eval import ContainerPort, Endpoint

# Kinds that live outside namespaces; every other kind a chart renders without a namespace takes
# the release's (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/).
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "PriorityClass",
    "StorageClass",
    "GatewayClass",
    "ClusterIssuer",
    "ClusterPolicy",
    "NicClusterPolicy",
    "IngressClass",
    "RuntimeClass",
    "PersistentVolume",
    "CSIDriver",
    "NodePool",
    "EC2NodeClass",
    "ClusterServingRuntime",
    "ClusterStorageContainer",
}
PROGRAM = "the program"
COREDNS_PORTS = (ContainerPort("dns", 53, "UDP"), ContainerPort("dns-tcp", 53, "TCP"))


@dataclass
class StackPod:
    endpoint: Endpoint
    origin: str
    """What creates it: the program, a Helm release, or a controller from one of their objects."""
    spec: dict[str, Any] = field(default_factory=dict)
    """The pod spec (hostNetwork, volumes); empty for pods known only by their labels and ports."""
    containers: list[dict[str, Any]] = field(default_factory=list)
    """The containers that run for the pod's life (main ones, native sidecars, KServe's model)."""

    @property
    def host_network(self) -> bool:
        return bool(self.spec.get("hostNetwork"))


@dataclass
class StackView:
    objects: list[dict[str, Any]]
    """Every object: the program's, every release's (namespaces filled in) and the proxies'."""
    pods: list[StackPod]
    origins: dict[int, str]
    """id(object) -> what created it."""

    def in_namespace(self, namespace: str) -> list[StackPod]:
        return [p for p in self.pods if p.endpoint.namespace == namespace]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]


def container_ports(containers: list[dict[str, Any]]) -> tuple[ContainerPort, ...]:
    return tuple(
        ContainerPort(p.get("name"), int(p["containerPort"]), str(p.get("protocol") or "TCP"))
        for c in containers
        for p in c.get("ports") or []
    )


class _Addresses:
    """Pod addresses in 10.4.0.0/16, one per pod, in the order pods are found (deterministic)."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"10.4.{self.n // 250}.{self.n % 250 + 1}"


def _with_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    if obj.get("kind") not in CLUSTER_SCOPED and not meta.get("namespace"):
        meta["namespace"] = namespace
    return obj


# A (Cluster)ServingRuntime is no pod: KServe merges its containers into the predictor pod of each
# InferenceService that uses it (KServe docs, "Serving Runtimes"), whose pod the InferenceService stands for.
NOT_PODS = {"ServingRuntime", "ClusterServingRuntime"}


def _workload_pods(obj: dict[str, Any], origin: str, addresses: _Addresses) -> list[StackPod]:
    w = workload(obj) if obj.get("kind") not in NOT_PODS else None
    if w is None:
        return []
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    found = []
    for pod in w.pods:
        running = [c.container for c in pod.containers if c.runs_alongside]
        found.append(
            StackPod(
                Endpoint(
                    f"{obj['kind']}/{w.name} {pod.where} ({origin})",
                    addresses.next(),
                    namespace,
                    {str(k): str(v) for k, v in pod.labels.items()},
                    container_ports(running),
                ),
                origin,
                pod.spec,
                running,
            )
        )
    return found


def _operator_pods(objects: list[dict[str, Any]], addresses: _Addresses) -> list[StackPod]:
    found = []
    for obj in objects:
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        if kind in ("Prometheus", "Alertmanager"):
            # The web port the resource names (`portName`, default "web"): 9090 for Prometheus,
            # 9093 for Alertmanager (prometheus-operator API reference, PrometheusSpec/AlertmanagerSpec).
            number = 9090 if kind == "Prometheus" else 9093
            port = ContainerPort(str(obj["spec"].get("portName") or "web"), number)
            found.append(
                StackPod(
                    Endpoint(
                        f"{kind}/{meta['name']} pods (prometheus-operator)",
                        addresses.next(),
                        str(meta["namespace"]),
                        {"operator.prometheus.io/name": str(meta["name"])},
                        (port,),
                    ),
                    f"prometheus-operator, from {kind} {meta['namespace']}/{meta['name']}",
                )
            )
        if kind == "Issuer" and any(
            "http01" in (s or {}) for s in (obj["spec"].get("acme") or {}).get("solvers") or []
        ):
            found.append(
                StackPod(
                    Endpoint(
                        f"cert-manager HTTP-01 solver for Issuer {meta['name']}",
                        addresses.next(),
                        str(meta["namespace"]),
                        dict(ACME_SOLVER_LABELS),
                        (ContainerPort(None, ACME_SOLVER_PORT),),
                    ),
                    f"cert-manager, from Issuer {meta['namespace']}/{meta['name']}",
                )
            )
    return found


def stack_view(evaluation: Evaluation) -> StackView:
    addresses = _Addresses()
    objects: list[dict[str, Any]] = []
    origins: dict[int, str] = {}
    pods: list[StackPod] = []

    def add(obj: dict[str, Any], origin: str) -> None:
        objects.append(obj)
        origins[id(obj)] = origin
        pods.extend(_workload_pods(obj, origin, addresses))

    for obj in evaluation.kubernetes_objects:
        add(obj, PROGRAM)
    releases = helm.rendered(evaluation)
    for rendered in releases:
        origin = f"helm release {rendered.release.namespace}/{rendered.release.name}"
        for obj in rendered.objects:
            add(_with_namespace(copy.deepcopy(obj), rendered.release.namespace), origin)
    controller = next((r for r in releases if r.release.name == agentgateway.CHART.release), None)
    if controller is not None:
        for gateway in agentgateway_proxy.gateways_of_class(evaluation.kubernetes_objects):
            origin = (
                f"agentgateway controller, for Gateway {gateway['metadata']['namespace']}/{gateway['metadata']['name']}"
            )
            for obj in agentgateway_proxy.proxy_objects(gateway, controller):
                add(obj, origin)
    pods.extend(_operator_pods(objects, addresses))
    pods.append(
        StackPod(
            Endpoint(
                "cluster DNS (CoreDNS / kube-dns)", addresses.next(), DNS_NAMESPACE, dict(DNS_POD_LABELS), COREDNS_PORTS
            ),
            "the cluster",
        )
    )
    return StackView(objects, pods, origins)
