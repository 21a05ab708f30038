"""The connections a stack needs, derived from the objects that make them happen, never from the
NetworkPolicies that are to allow them.

Each hop names a source pod (or an address outside the cluster), a destination pod and the
container port the connection lands on (a Service's port is translated to its targetPort, a
named targetPort to the selected pod's container port of that name, as kube-proxy does;
https://kubernetes.io/docs/concepts/services-networking/service/#field-spec-ports). What makes
each hop, and the object it is read from:

- every serving pod to the cluster DNS, UDP and TCP 53: the Service names in its URLs;
- the entrance's data plane to the pool's pods on its targetPorts, and to the endpoint picker: the
  HTTPRoute's InferencePool backendRef, the rendered InferencePool and its endpointPickerRef;
- the picker to the pool's pods on the targetPorts (the /metrics it scores them by; vLLM serves the
  API and /metrics on one port, components/entrance/picker.py) unless its args name
  `--model-server-metrics-port`, and to the Kubernetes API on 443 (it watches its pool and pods);
- GKE's health checkers to the pool's pods (the HealthCheckPolicy targeting the pool) and to the
  picker's `--grpc-health-port` (llm-d-router-gateway v0.10.0 templates/gke.yaml: "The GKE gateway
  controller health-checks the EPP backend on gRPC port 9003 by default");
- agentgateway's proxy to its controller: the proxy's XDS_ADDRESS; clients to the proxy: its
  LoadBalancer Service; the proxy to cert-manager's HTTP-01 solver: an Issuer whose HTTP-01
  solver routes through the Gateway;
- Prometheus to each scraped port: every ServiceMonitor and PodMonitor a Prometheus selects;
- the verification Job to each server: the baseUrl of each target in the targets.json it mounts;
- mirror Jobs, and KServe predictors whose storageUri is fetched over the network, to the Hub
  (443) and the cloud's credential endpoint (rules.IDENTITY_ENDPOINTS): docs/model-store.md;
- the Kubernetes API to each webhook and aggregated API: every webhook configuration and APIService;
- the node to each probed port: every liveness, readiness and startup probe (kubelet).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from common import contract
from components.cluster.gcp import network as gke_network
from components.model_store import store
from components.network_policy.rules import HTTPS_PORT, IDENTITY_ENDPOINTS
from tests.support.netpol_eval import ContainerPort, Endpoint, selector_matches
from tests.support.rendered_pods import StackPod, StackView

# Addresses outside the cluster. The API server's is in the VPC (an EKS private endpoint's ENI; a GKE
# private endpoint), so no pod-side rule can tell it from another private address.
API_SERVER = Endpoint("Kubernetes API server", "10.0.12.34")
HUB = Endpoint("huggingface.co", "18.160.10.1")
INTERNET_CLIENT = Endpoint("a client on the internet", "198.51.100.7")
PRIVATE_HOST = Endpoint("a VM in the VPC", "10.0.5.5")
NODE = Endpoint("the pod's node (kubelet probes)", "10.0.3.3", node=True)


def _in(cidr: str, offset: int = 17) -> str:
    return str(ipaddress.ip_network(cidr)[offset])


GKE_PROXY = Endpoint("GKE regional load balancer proxy (proxy-only subnet)", _in(gke_network.PROXY_ONLY_RANGE))
GKE_HEALTH_CHECKERS = tuple(
    Endpoint(f"Google health checker in {cidr}", _in(cidr)) for cidr in gke_network.HEALTH_CHECK_RANGES
)


def identity_endpoints(cloud: str) -> list[tuple[Endpoint, int]]:
    return [
        (Endpoint(f"credential endpoint {cidr}", cidr.split("/")[0]), port)
        for cidr, port in IDENTITY_ENDPOINTS.get(cloud, ())
    ]


@dataclass(frozen=True)
class Hop:
    src: Endpoint
    dst: Endpoint
    port: int
    protocol: str
    why: str


@dataclass
class Hops:
    hops: list[Hop] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """What could not be resolved against the pods that run (a Service with no pod, a named port
    no selected container declares): each is a broken path, whatever the policies say."""

    def add(self, src: Endpoint, dst: Endpoint, port: int, why: str, protocol: str = "TCP") -> None:
        self.hops.append(Hop(src, dst, port, protocol, why))

    def keys(self) -> set[tuple[str, str, int, str]]:
        return {(h.src.name, h.dst.name, h.port, h.protocol) for h in self.hops}


def _find(view: StackView, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    return next(
        (
            o
            for o in view.of_kind(kind)
            if o["metadata"].get("name") == name and o["metadata"].get("namespace") == namespace
        ),
        None,
    )


def resolve_port(pod: StackPod, target: int | str, protocol: str = "TCP") -> ContainerPort | None:
    """A Service targetPort (or probe port) on one pod: a number is that port (declared or not), a
    name must be one of the pod's container ports."""
    if isinstance(target, int) or str(target).isdigit():
        number = int(target)
        declared = next((p for p in pod.endpoint.ports if p.number == number and p.protocol == protocol), None)
        return declared or ContainerPort(None, number, protocol)
    return pod.endpoint.port_named(str(target), protocol)


def service_backends(
    view: StackView, namespace: str, name: str, port: int | str, out: Hops, context: str
) -> list[tuple[StackPod, ContainerPort]]:
    """The pods and container ports behind port `port` (number or name) of Service namespace/name."""
    svc = _find(view, "Service", namespace, name)
    if svc is None:
        out.problems.append(f"{context}: no Service {namespace}/{name}")
        return []
    spec = svc["spec"]
    svc_port = next((p for p in spec.get("ports") or [] if port in (p.get("port"), p.get("name"))), None)
    if svc_port is None:
        out.problems.append(f"{context}: Service {namespace}/{name} has no port {port}")
        return []
    target = svc_port.get("targetPort", svc_port["port"])
    protocol = str(svc_port.get("protocol") or "TCP")
    selector = spec.get("selector") or {}
    pods = [
        p
        for p in view.in_namespace(namespace)
        if selector and selector_matches({"matchLabels": selector}, p.endpoint.labels)
    ]
    if not pods:
        out.problems.append(f"{context}: Service {namespace}/{name} selects no pod the stack runs")
    found = []
    for pod in pods:
        resolved = resolve_port(pod, target, protocol)
        if resolved is None:
            out.problems.append(
                f"{context}: Service {namespace}/{name} port {port} targets '{target}', which "
                f"{pod.endpoint.name} declares no container port named"
            )
            continue
        found.append((pod, resolved))
    return found


def _service_url(url: str, default_namespace: str) -> tuple[str, str, int] | None:
    """(namespace, service, port) of an in-cluster URL such as http://svc.ns.svc.cluster.local:8000."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    labels = parts.hostname.split(".")
    namespace = labels[1] if len(labels) > 1 else default_namespace
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return namespace, labels[0], port


def _pods_matching(view: StackView, namespace: str, selector: dict[str, Any]) -> list[StackPod]:
    return [p for p in view.in_namespace(namespace) if selector_matches(selector, p.endpoint.labels)]


def _dns(view: StackView, namespace: str, out: Hops) -> None:
    dns = [p for p in view.pods if p.origin == "the cluster"]
    for pod in view.in_namespace(namespace):
        for d in dns:
            for port in d.endpoint.ports:
                out.add(pod.endpoint, d.endpoint, port.number, "name lookups", port.protocol)


def _arg(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return str(args[i + 1])
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _picker_args(pod: StackPod) -> list[str]:
    return [str(a) for c in pod.containers for a in c.get("args") or []]


def _gateway_of(view: StackView, route: dict[str, Any]) -> dict[str, Any] | None:
    for ref in route["spec"].get("parentRefs") or []:
        if ref.get("kind", "Gateway") == "Gateway":
            gw = _find(view, "Gateway", ref.get("namespace") or route["metadata"]["namespace"], ref["name"])
            if gw is not None:
                return gw
    return None


def _proxy_pods(view: StackView, gateway: dict[str, Any]) -> list[StackPod]:
    meta = gateway["metadata"]
    origin = f"agentgateway controller, for Gateway {meta['namespace']}/{meta['name']}"
    return [p for p in view.pods if p.origin == origin]


def _data_plane(view: StackView, gateway: dict[str, Any]) -> tuple[list[Endpoint], bool]:
    """Who sends the entrance's requests, and whether it is GKE's managed load balancer."""
    cls = str(gateway["spec"].get("gatewayClassName"))
    if cls.startswith("gke-"):
        return [GKE_PROXY], True
    return [p.endpoint for p in _proxy_pods(view, gateway)], False


def _entrance(view: StackView, namespace: str, out: Hops) -> None:
    for route in view.of_kind("HTTPRoute"):
        if route["metadata"].get("namespace") != namespace:
            continue
        gateway = _gateway_of(view, route)
        if gateway is None:
            continue
        senders, gke = _data_plane(view, gateway)
        if not senders:
            out.problems.append(f"HTTPRoute {route['metadata']['name']}: no data-plane pod for its Gateway")
        for rule in route["spec"].get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                if ref.get("kind") != "InferencePool":
                    continue
                _pool(view, namespace, ref, senders, gke, out)


def _pool(view: StackView, namespace: str, ref: dict[str, Any], senders: list[Endpoint], gke: bool, out: Hops) -> None:
    pool_ns = ref.get("namespace") or namespace
    pool = _find(view, "InferencePool", pool_ns, ref["name"])
    context = f"InferencePool {pool_ns}/{ref['name']}"
    if pool is None:
        out.problems.append(f"{context}: the HTTPRoute names it, nothing renders it")
        return
    spec = pool["spec"]
    servers = _pods_matching(view, pool_ns, spec["selector"])
    if not servers:
        out.problems.append(f"{context}: its selector matches no pod the stack runs")
    ports = [int(t["number"]) for t in spec.get("targetPorts") or []]
    picker_ref = spec["endpointPickerRef"]
    pickers = service_backends(view, pool_ns, picker_ref["name"], int(picker_ref["port"]["number"]), out, context)
    for sender in senders:
        for server in servers:
            for port in ports:
                out.add(sender, server.endpoint, port, f"{context}: a request to the pod its picker chose")
        for picker, ext_proc in pickers:
            out.add(sender, picker.endpoint, ext_proc.number, f"{context}: ext_proc to the endpoint picker")
    for picker, _ in pickers:
        metrics = _arg(_picker_args(picker), "--model-server-metrics-port")
        for server in servers:
            for port in [int(metrics)] if metrics else ports:
                out.add(picker.endpoint, server.endpoint, port, f"{context}: the picker scrapes the pod's /metrics")
        out.add(picker.endpoint, API_SERVER, HTTPS_PORT, f"{context}: the picker watches its pool and pods")
    if not gke:
        return
    for policy in view.of_kind("HealthCheckPolicy"):
        target = policy["spec"].get("targetRef") or {}
        if target.get("kind") != "InferencePool" or target.get("name") != ref["name"]:
            continue
        config = (policy["spec"].get("default") or {}).get("config") or {}
        check = config.get("httpHealthCheck") or config.get("grpcHealthCheck") or {}
        for checker in GKE_HEALTH_CHECKERS:
            for server in servers:
                out.add(checker, server.endpoint, int(check["port"]), f"{context}: GKE's health check of the pool")
    for picker, _ in pickers:
        health = _arg(_picker_args(picker), "--grpc-health-port")
        if health is None or resolve_port(picker, int(health)) is None:
            out.problems.append(f"{context}: the picker declares no gRPC health port")
            continue
        for checker in GKE_HEALTH_CHECKERS:
            out.add(checker, picker.endpoint, int(health), f"{context}: GKE's gRPC health check of the picker")


def _agentgateway(view: StackView, namespace: str, out: Hops) -> None:
    for gateway in view.of_kind("Gateway"):
        if gateway["metadata"].get("namespace") != namespace:
            continue
        proxies = _proxy_pods(view, gateway)
        for proxy in proxies:
            for c in proxy.containers:
                env = {e["name"]: e.get("value") for e in c.get("env") or []}
                where = _service_url(str(env.get("XDS_ADDRESS") or ""), namespace)
                if where is None:
                    continue
                context = f"proxy {proxy.endpoint.name} XDS_ADDRESS"
                for controller, port in service_backends(view, *where, out, context):
                    out.add(proxy.endpoint, controller.endpoint, port.number, "the proxy's configuration (xDS)")
        meta = gateway["metadata"]
        svc = _find(view, "Service", meta["namespace"], meta["name"])
        if proxies and svc is not None and svc["spec"].get("type") == "LoadBalancer":
            for p in svc["spec"].get("ports") or []:
                for proxy, port in service_backends(view, meta["namespace"], meta["name"], p["port"], out, "proxy"):
                    out.add(INTERNET_CLIENT, proxy.endpoint, port.number, "clients through the load balancer")
        for issuer in view.of_kind("Issuer"):
            for solver in (issuer["spec"].get("acme") or {}).get("solvers") or []:
                parents = ((solver.get("http01") or {}).get("gatewayHTTPRoute") or {}).get("parentRefs") or []
                if not any(r.get("name") == meta["name"] for r in parents):
                    continue
                solvers = [
                    p
                    for p in view.in_namespace(issuer["metadata"]["namespace"])
                    if p.origin.startswith("cert-manager, from Issuer")
                ]
                for proxy in proxies:
                    for s in solvers:
                        for port in s.endpoint.ports:
                            out.add(proxy.endpoint, s.endpoint, port.number, "an ACME HTTP-01 challenge")


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    # prometheus-operator: a nil monitor selector selects nothing, {} everything (PrometheusSpec
    # serviceMonitorSelector / podMonitorSelector, API reference).
    return selector is not None and selector_matches(selector, labels)


def _monitors(view: StackView, namespace: str, out: Hops) -> None:
    proms = [p for p in view.pods if p.origin.startswith("prometheus-operator, from Prometheus ")]
    for prom_obj in view.of_kind("Prometheus"):
        prom_pods = [
            p for p in proms if p.origin.endswith(f"{prom_obj['metadata']['namespace']}/{prom_obj['metadata']['name']}")
        ]
        for kind, sel_key, ns_key in (
            ("ServiceMonitor", "serviceMonitorSelector", "serviceMonitorNamespaceSelector"),
            ("PodMonitor", "podMonitorSelector", "podMonitorNamespaceSelector"),
        ):
            for mon in view.of_kind(kind):
                mon_ns = mon["metadata"]["namespace"]
                ns_sel = prom_obj["spec"].get(ns_key)
                in_scope = (
                    mon_ns == prom_obj["metadata"]["namespace"]
                    if ns_sel is None
                    else selector_matches(ns_sel, {"kubernetes.io/metadata.name": mon_ns})
                )
                if not in_scope or not _selects(prom_obj["spec"].get(sel_key), mon["metadata"].get("labels") or {}):
                    continue
                for target, port in _monitor_targets(view, mon, namespace, out):
                    for prom in prom_pods:
                        out.add(
                            prom.endpoint, target.endpoint, port.number, f"{kind} {mon_ns}/{mon['metadata']['name']}"
                        )


def _monitor_targets(
    view: StackView, mon: dict[str, Any], namespace: str, out: Hops
) -> Iterable[tuple[StackPod, ContainerPort]]:
    spec = mon["spec"]
    ns_sel = spec.get("namespaceSelector") or {}
    namespaces = ns_sel.get("matchNames") or ([] if ns_sel.get("any") else [mon["metadata"]["namespace"]])
    if not ns_sel.get("any") and namespace not in namespaces:
        return []
    context = f"{mon['kind']} {mon['metadata']['namespace']}/{mon['metadata']['name']}"
    found: list[tuple[StackPod, ContainerPort]] = []
    if mon["kind"] == "PodMonitor":
        # Prometheus discovers one target per declared container port and the operator keeps those
        # whose name (`port`) or number (`portNumber`) matches, so a selected pod that declares no
        # such port is no target; a monitor no selected pod answers is a broken scrape.
        pods = _pods_matching(view, namespace, spec.get("selector") or {})
        for ep in spec.get("podMetricsEndpoints") or []:
            wanted = ep.get("port") or ep.get("portNumber")
            hits = [
                (pod, port)
                for pod in pods
                for port in pod.endpoint.ports
                if wanted in (port.name, port.number) and port.protocol == "TCP"
            ]
            if not hits:
                out.problems.append(f"{context}: no pod it selects declares container port '{wanted}'")
            found += hits
        return found
    for svc in view.of_kind("Service"):
        if svc["metadata"].get("namespace") != namespace:
            continue
        if not selector_matches(spec.get("selector") or {}, svc["metadata"].get("labels") or {}):
            continue
        for ep in spec.get("endpoints") or []:
            if ep.get("port"):
                found += service_backends(view, namespace, svc["metadata"]["name"], ep["port"], out, context)
            elif ep.get("targetPort") is not None:
                for pod in _pods_matching(view, namespace, {"matchLabels": svc["spec"].get("selector") or {}}):
                    port = resolve_port(pod, ep["targetPort"])
                    if port is not None:
                        found.append((pod, port))
    return found


def _verification(view: StackView, namespace: str, out: Hops) -> None:
    maps = {
        o["metadata"]["name"]: o
        for o in view.of_kind("ConfigMap")
        if o["metadata"].get("namespace") == namespace and "targets.json" in (o.get("data") or {})
    }
    for pod in view.in_namespace(namespace):
        for volume in pod.spec.get("volumes") or []:
            cm = maps.get(str((volume.get("configMap") or {}).get("name")))
            if cm is None:
                continue
            for target in json.loads(cm["data"]["targets.json"]).get("targets") or []:
                where = _service_url(str(target.get("baseUrl")), namespace)
                if where is None:
                    continue
                for server, port in service_backends(view, *where, out, f"verification target {target['baseUrl']}"):
                    out.add(pod.endpoint, server.endpoint, port.number, "the verification Job's checks")


# Storage URIs KServe's storage initializer copies from the network (hf://, a bucket, https); a
# pvc:// claim is mounted instead (KServe docs, "Storage Containers"; components/network_policy/policies.py).
DOWNLOADED_SCHEMES = ("hf", "s3", "gs", "https")


def _downloads(view: StackView, namespace: str, cloud: str, out: Hops) -> None:
    for pod in view.in_namespace(namespace):
        if pod.endpoint.labels.get(contract.LABEL_COMPONENT) == store.COMPONENT_MIRROR:
            why = "the mirror downloads the revision"
        elif urlsplit(str((pod.spec.get("model") or {}).get("storageUri") or "")).scheme in DOWNLOADED_SCHEMES:
            why = "KServe's storage initializer copies the model"
        else:
            continue
        out.add(pod.endpoint, HUB, HTTPS_PORT, why)
        for endpoint, port in identity_endpoints(cloud):
            out.add(pod.endpoint, endpoint, port, f"{why}: cloud credentials")


def _api_callbacks(view: StackView, out: Hops) -> None:
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for cfg in view.of_kind(kind):
            for hook in cfg.get("webhooks") or []:
                svc = (hook.get("clientConfig") or {}).get("service")
                if not svc:
                    continue
                context = f"{kind} {cfg['metadata']['name']} webhook {hook.get('name')}"
                for pod, port in service_backends(
                    view, svc["namespace"], svc["name"], int(svc.get("port") or 443), out, context
                ):
                    out.add(API_SERVER, pod.endpoint, port.number, context)
    for api in view.of_kind("APIService"):
        svc = (api.get("spec") or {}).get("service")
        if svc:
            context = f"APIService {api['metadata']['name']}"
            for pod, port in service_backends(
                view, svc["namespace"], svc["name"], int(svc.get("port") or 443), out, context
            ):
                out.add(API_SERVER, pod.endpoint, port.number, context)


def probe_ports(pod: StackPod) -> list[ContainerPort]:
    found = []
    for c in pod.containers:
        for key in ("livenessProbe", "readinessProbe", "startupProbe"):
            probe = c.get(key) or {}
            for action in ("httpGet", "tcpSocket", "grpc"):
                if action in probe:
                    port = resolve_port(pod, probe[action]["port"])
                    if port is not None:
                        found.append(port)
    return found


def _probes(view: StackView, namespace: str, out: Hops) -> None:
    for pod in view.in_namespace(namespace):
        for port in probe_ports(pod):
            out.add(NODE, pod.endpoint, port.number, "kubelet probes")


def needed_hops(view: StackView, namespace: str, cloud: str) -> Hops:
    """Every connection the stack needs that starts or ends in the serving namespace, and the
    webhooks the API server calls."""
    out = Hops()
    _dns(view, namespace, out)
    _entrance(view, namespace, out)
    _agentgateway(view, namespace, out)
    _monitors(view, namespace, out)
    _verification(view, namespace, out)
    _downloads(view, namespace, cloud, out)
    _api_callbacks(view, out)
    _probes(view, namespace, out)
    return out
