"""The serving namespace's NetworkPolicies, as plain manifests: deny everything, then open exactly
the paths the stack needs.

A NetworkPolicy selects pods; a pod selected by any policy for a direction (Ingress, Egress) admits
only what some policy allows it, and the allowed sets add up (Kubernetes docs, "Network Policies":
"policies are additive"). `default-deny` selects every pod of the namespace in both directions with
no rule, so each path below is a hole in it that names both ends:

| path | from | to | port |
|---|---|---|---|
| DNS | every pod | kube-system's kube-dns / CoreDNS (label k8s-app=kube-dns on EKS and GKE) | UDP+TCP 53 |
| requests | the Gateway's data plane; the model's own endpoint picker | vLLM servers (leaders) | contract.SERVER_PORT |
| scrapes | the monitoring namespace (Prometheus) | servers' /metrics (same port); pickers' metrics | 8000; 9090 |
| ext_proc | the Gateway's data plane | endpoint pickers | 9002 |
| picker health | GKE's health checkers (GKE only) | endpoint pickers' gRPC health port | 9003 |
| xDS | the Gateway's proxy (agentgateway) | its controller's namespace | the controller's xDS port (9978) |
| cluster API | endpoint pickers (they watch the InferencePool and its pods) | any address | 443, 6443 |
| one replica | pods of one multi-node model (LWS leader and workers) | each other | all (Ray, NCCL) |
| downloads | mirror Jobs (and servers that read a bucket or the Hub) | any address outside private ranges | 443 |
| credentials | the same pods | the cloud's credential endpoint | its port |
| ACME | the Gateway's data plane | cert-manager's HTTP-01 solver | 8089 |

NetworkPolicy cannot name a DNS host (only pods, namespaces and IP blocks), and the Hub, S3 and GCS
sit behind many changing addresses, so the download path is "HTTPS to anything that is not a
private range": a mirror Job can still reach the internet on 443, but no pod of the cluster and no
other port. A stricter egress needs an egress proxy or an FQDN-aware policy (Cilium, Calico
Enterprise, GKE FQDNNetworkPolicy), which this program does not install.

Which pods are the Gateway's data plane follows from the implementation (stack_config/entrance.py
`implementation_for`): agentgateway runs its proxy as pods beside the Gateway in the serving
namespace; GKE's managed load balancer sends from the region's proxy-only subnet and checks health
from Google's ranges; an unknown implementation ("other") may run anywhere in the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from common import contract
from common.facts import Fact

API = "networking.k8s.io/v1"
DEFAULT_DENY = "default-deny"

# The namespace label every namespace carries since Kubernetes 1.22 (NamespaceDefaultLabelName
# feature, GA: "kubernetes.io/metadata.name" set to the namespace's name).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# CoreDNS on EKS and kube-dns on GKE both carry k8s-app=kube-dns (the label the cluster DNS Service
# selects in both distributions' manifests).
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# Where the Kubernetes API server answers: 443 on EKS and GKE, 6443 on many self-managed clusters.
API_SERVER_PORTS = (443, 6443)
HTTPS_PORT = 443
# Private, shared, link-local and loopback ranges a download never needs: every pod, node and
# internal service of the cluster sits in one of them (RFC 1918, RFC 6598, RFC 3927).
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
# Where a pod gets its cloud identity, by cloud: EKS Pod Identity's agent (169.254.170.23 port 80,
# "Understand how EKS Pod Identity works", EKS User Guide); GKE's metadata server for Workload
# Identity (169.254.169.254:80, answered through 169.254.169.252:988 on Dataplane V2 and
# 127.0.0.1:988 otherwise, GKE docs "Workload Identity Federation for GKE", restrictions on
# NetworkPolicy; unverified, see IDENTITY_FACT).
IDENTITY_ENDPOINTS: dict[str, tuple[tuple[str, int], ...]] = {
    "aws": (("169.254.170.23/32", 80),),
    "gcp": (("169.254.169.254/32", 80), ("169.254.169.252/32", 988), ("127.0.0.1/32", 988)),
    "existing": (),
}
IDENTITY_FACT = Fact(
    subject="addresses and ports pods reach for cloud credentials (EKS Pod Identity, GKE Workload Identity)",
    value="aws 169.254.170.23:80; gcp 169.254.169.254:80, 169.254.169.252:988, 127.0.0.1:988",
    source="EKS User Guide 'Understand how EKS Pod Identity works'; GKE docs 'Workload Identity Federation for GKE' "
    "(https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html, "
    "https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity); unverified on a cluster",
    established=False,
    resolve_with="kubectl -n <serving namespace> logs job/<mirror job> (a credential error names the address), or "
    "kubectl -n kube-system get ds eks-pod-identity-agent -o yaml | grep -A3 ports (EKS); "
    "kubectl -n kube-system get ds gke-metadata-server -o yaml | grep -i port (GKE)",
)
# cert-manager's HTTP-01 solver pod: its label and port (cert-manager pkg/issuer/acme/http/pod.go:
# the solver listens on 8089 and carries acme.cert-manager.io/http01-solver=true).
ACME_SOLVER_LABELS = {"acme.cert-manager.io/http01-solver": "true"}
ACME_SOLVER_PORT = 8089
# Gateway API GEP-1762 ("In-Cluster Gateway Deployments"): the pods an implementation deploys for a
# Gateway carry gateway.networking.k8s.io/gateway-name=<Gateway>; agentgateway's docs select its
# proxy by that label (kubectl get svc --selector=gateway.networking.k8s.io/gateway-name=...).
# agentgateway v1.4.1's controller writes the proxy from the Helm chart embedded in it, whose pod
# template carries this label with the Gateway's name (agentgateway/agentgateway@v1.4.1
# controller/pkg/helm/agentgateway/templates/_helpers.tpl, "kgateway.gateway.selectorLabels" in
# "kgateway.gateway.podTemplate"); tests/components/network_policy/test_rendered_hops.py renders
# that chart with the values the controller passes.
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
GATEWAY_POD_FACT = Fact(
    subject="label of agentgateway's proxy pods",
    value=f"{GATEWAY_NAME_LABEL}=<Gateway name>",
    source="agentgateway/agentgateway@v1.4.1 controller/pkg/helm/agentgateway/templates/_helpers.tpl "
    "(kgateway.gateway.selectorLabels, in the proxy's pod template); Gateway API GEP-1762",
    established=True,
    resolve_with=f"kubectl -n <serving namespace> get pods -l {GATEWAY_NAME_LABEL}=llm-serving (the proxy pods)",
)
GKE_EXT_PROC_FACT = Fact(
    subject="source addresses of GKE's regional Gateway calling an InferencePool's endpoint picker (ext_proc)",
    value="the region's proxy-only subnet, health checks from 35.191.0.0/16 and 130.211.0.0/22",
    source="GKE's Envoy-based load balancers connect to backends from the proxy-only subnet ('Proxy-only subnets for "
    "Envoy-based load balancers'); that the picker's callout takes the same path is inferred",
    established=False,
    resolve_with="kubectl -n <serving namespace> logs deploy/<pool>-epp | grep -i ext_proc (requests arrive), and "
    "`kubectl describe gateway llm-serving` shows no backend unhealthy",
)
FACTS = (IDENTITY_FACT, GATEWAY_POD_FACT, GKE_EXT_PROC_FACT)


@dataclass(frozen=True)
class ServerGroup:
    """The pods of one model's servers, and what they need."""

    model: str
    # Values of contract.LABEL_COMPONENT its pods carry: API-serving pods first, then the rest of a
    # multi-node replica (workers).
    api_components: tuple[str, ...]
    port: int
    worker_components: tuple[str, ...] = ()
    # Pods of one replica span nodes and talk to each other on every port (Ray, NCCL).
    multi_node: bool = False
    # The pods download at start (weights from a bucket, or a KServe storage initializer from the Hub).
    downloads: bool = False


Entrance = Literal["none", "in-cluster", "gke", "anywhere"]


@dataclass(frozen=True)
class NetworkPolicySpec:
    namespace: str
    cloud: str
    servers: tuple[ServerGroup, ...]
    # The mirror Jobs' pods (contract.LABEL_COMPONENT value, store.COMPONENT_MIRROR); None without them.
    mirror_component: str | None = None
    # The verification Job's pods (contract.LABEL_COMPONENT value), which call every vLLM server's
    # API port after `pulumi up`; None without the Job.
    verification_component: str | None = None
    # Where the entrance's data plane runs: none (no entrance), in-cluster (pods with
    # GATEWAY_NAME_LABEL=gateway_name in this namespace), gke (managed proxies: gke_proxy_cidrs),
    # anywhere (an implementation whose pods are unknown: any pod of the cluster).
    entrance: Entrance = "none"
    gateway_name: str = ""
    # in-cluster: the namespace of the implementation's controller, which the proxy fetches its
    # configuration from, and the port it serves that on (xDS); None: any namespace, any port.
    gateway_controller_namespace: str | None = None
    gateway_controller_port: int | None = None
    gke_proxy_cidrs: tuple[str, ...] = ()
    gke_health_check_cidrs: tuple[str, ...] = ()
    # The picker's ext_proc and metrics ports, and its gRPC health port (which GKE's health checkers
    # call; kubelet probes come from the node and need no rule).
    picker_ports: tuple[int, int] = (9002, 9090)
    picker_health_port: int = 9003
    acme: bool = False
    monitoring_namespace: str | None = contract.MONITORING_NAMESPACE
    # Namespaces whose pods may call the servers' API port (security.allowedClientNamespaces, and the
    # namespace of an exposure.gateway).
    client_namespaces: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


def _policy(
    name: str, spec: NetworkPolicySpec, pod_selector: dict, *, ingress: list | None = None, egress: list | None = None
) -> dict[str, Any]:
    types = [t for t, rules in (("Ingress", ingress), ("Egress", egress)) if rules is not None]
    body: dict[str, Any] = {"podSelector": pod_selector, "policyTypes": types}
    if ingress is not None:
        body["ingress"] = ingress
    if egress is not None:
        body["egress"] = egress
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": {contract.LABEL_PART_OF: contract.PART_OF, **spec.labels},
        },
        "spec": body,
    }


def _ports(*ports: int, protocol: str = "TCP") -> list[dict[str, Any]]:
    return [{"protocol": protocol, "port": p} for p in ports]


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def _components(*values: str, model: str | None = None) -> dict[str, Any]:
    selector: dict[str, Any] = {
        "matchExpressions": [{"key": contract.LABEL_COMPONENT, "operator": "In", "values": list(values)}]
    }
    if model is not None:
        selector["matchLabels"] = {contract.LABEL_MODEL: model}
    return selector


PICKERS = {"matchExpressions": [{"key": contract.PICKER_POD_LABEL, "operator": "Exists"}]}


def _picker_of(model: str) -> dict[str, Any]:
    """The pods of one model's picker: its release is the model's served name, and the chart labels
    the pods with the picker's name (common.contract.picker_name)."""
    return {"matchLabels": {contract.PICKER_POD_LABEL: contract.picker_name(model)}}


def _gateway_peers(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Who sends the entrance's requests into the namespace."""
    if spec.entrance == "in-cluster":
        return [{"podSelector": {"matchLabels": {GATEWAY_NAME_LABEL: spec.gateway_name}}}]
    if spec.entrance == "gke":
        return [{"ipBlock": {"cidr": c}} for c in (*spec.gke_proxy_cidrs, *spec.gke_health_check_cidrs)]
    if spec.entrance == "anywhere":
        return [{"namespaceSelector": {}}]
    return []


def _downloads(cloud: str) -> list[dict[str, Any]]:
    """HTTPS to any address outside the private ranges, and the cloud's credential endpoint."""
    rules = [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_RANGES)}}], "ports": _ports(HTTPS_PORT)}]
    for cidr, port in IDENTITY_ENDPOINTS.get(cloud, ()):
        rules.append({"to": [{"ipBlock": {"cidr": cidr}}], "ports": _ports(port)})
    return rules


def network_policies(spec: NetworkPolicySpec) -> list[dict[str, Any]]:
    """Every NetworkPolicy of the serving namespace, default-deny first."""
    out = [_policy(DEFAULT_DENY, spec, {}, ingress=[], egress=[])]
    dns = [
        {
            "to": [{**_namespace(DNS_NAMESPACE), "podSelector": {"matchLabels": dict(DNS_POD_LABELS)}}],
            "ports": _ports(DNS_PORT, protocol="UDP") + _ports(DNS_PORT),
        }
    ]
    out.append(_policy("allow-dns", spec, {}, egress=dns))

    gateway = _gateway_peers(spec)
    monitoring = [_namespace(spec.monitoring_namespace)] if spec.monitoring_namespace else []
    clients = [_namespace(n) for n in spec.client_namespaces]
    has_pickers = spec.entrance != "none" and any(g.port == contract.SERVER_PORT for g in spec.servers)
    for group in spec.servers:
        # Requests from the entrance (through a picker's choice) and the pickers' own metric scrapes;
        # Prometheus scrapes /metrics on the same port (vLLM serves both on one port).
        via_entrance = has_pickers and group.port == contract.SERVER_PORT
        verifier = (
            [{"podSelector": {"matchLabels": {contract.LABEL_COMPONENT: spec.verification_component}}}]
            if spec.verification_component and group.port == contract.SERVER_PORT
            else []
        )
        sources = [
            *(gateway if via_entrance else []),
            # Only the model's own picker: another model's picker has no business with these pods.
            *([{"podSelector": _picker_of(group.model)}] if via_entrance else []),
            *verifier,
            *monitoring,
            *clients,
        ]
        ingress = [{"from": sources, "ports": _ports(group.port)}] if sources else []
        egress: list[dict[str, Any]] = _downloads(spec.cloud) if group.downloads else []
        out.append(
            _policy(
                f"{group.model}-server",
                spec,
                _components(*group.api_components, model=group.model),
                ingress=ingress,
                egress=egress,
            )
        )
        if group.multi_node:
            members = _components(*group.api_components, *group.worker_components, model=group.model)
            # Every port: Ray's head and workers, NCCL's bootstrap and its sockets pick ports at run time.
            same = [{"from": [{"podSelector": members}]}]
            out.append(
                _policy(
                    f"{group.model}-replica", spec, members, ingress=same, egress=[{"to": [{"podSelector": members}]}]
                )
            )

    if spec.entrance != "none":
        ext_proc, metrics = spec.picker_ports
        picker_in = []
        if gateway:
            picker_in.append({"from": gateway, "ports": _ports(ext_proc)})
        if monitoring:
            picker_in.append({"from": monitoring, "ports": _ports(metrics)})
        if spec.gke_health_check_cidrs:
            # GKE's Gateway controller health-checks the picker's backend on its gRPC health port
            # (llm-d-router-gateway v0.10.0 templates/gke.yaml: "The GKE gateway controller
            # health-checks the EPP backend on gRPC port 9003 by default"), from Google's ranges.
            checkers = [{"ipBlock": {"cidr": c}} for c in spec.gke_health_check_cidrs]
            picker_in.append({"from": checkers, "ports": _ports(spec.picker_health_port)})
        api_servers = [g for g in spec.servers if g.port == contract.SERVER_PORT]
        picker_out = (
            [
                {
                    "to": [{"podSelector": _components(*g.api_components, model=g.model)} for g in api_servers],
                    "ports": _ports(contract.SERVER_PORT),
                }
            ]
            if api_servers
            else []
        )
        # The picker watches its InferencePool and the pods behind it. The API server is no pod, and
        # its address is the cloud's (an ENI in the VPC, a Google address), so only the port is named.
        picker_out.append({"ports": _ports(*API_SERVER_PORTS)})
        out.append(_policy("endpoint-pickers", spec, PICKERS, ingress=picker_in, egress=picker_out))

    if spec.entrance == "in-cluster":
        proxy = {"matchLabels": {GATEWAY_NAME_LABEL: spec.gateway_name}}
        controller = (
            _namespace(spec.gateway_controller_namespace)
            if spec.gateway_controller_namespace
            else {"namespaceSelector": {}}
        )
        to_servers = [
            {"podSelector": _components(*g.api_components, model=g.model)}
            for g in spec.servers
            if g.port == contract.SERVER_PORT
        ]
        proxy_out = [
            {"to": to_servers, "ports": _ports(contract.SERVER_PORT)} if to_servers else None,
            {"to": [{"podSelector": PICKERS}], "ports": _ports(spec.picker_ports[0])},
            # Its configuration (xDS) from the controller, on the controller's xDS port where known.
            {
                "to": [controller],
                **({"ports": _ports(spec.gateway_controller_port)} if spec.gateway_controller_port else {}),
            },
            {"to": [{"podSelector": {"matchLabels": dict(ACME_SOLVER_LABELS)}}], "ports": _ports(ACME_SOLVER_PORT)}
            if spec.acme
            else None,
        ]
        # Clients from anywhere on any port: the load balancer in front decides which ports exist.
        out.append(
            _policy("entrance-gateway", spec, proxy, ingress=[{}], egress=[r for r in proxy_out if r is not None])
        )
    if spec.acme and gateway:
        out.append(
            _policy(
                "acme-solver",
                spec,
                {"matchLabels": dict(ACME_SOLVER_LABELS)},
                ingress=[{"from": gateway, "ports": _ports(ACME_SOLVER_PORT)}],
            )
        )
    vllm_servers = [
        {"podSelector": _components(*g.api_components, model=g.model)}
        for g in spec.servers
        if g.port == contract.SERVER_PORT
    ]
    if spec.verification_component and vllm_servers:
        # The smoke checks go to each server's in-cluster Service (its pods' API port), nowhere else.
        out.append(
            _policy(
                "verification",
                spec,
                {"matchLabels": {contract.LABEL_COMPONENT: spec.verification_component}},
                egress=[{"to": vllm_servers, "ports": _ports(contract.SERVER_PORT)}],
            )
        )
    if spec.mirror_component:
        out.append(
            _policy(
                "mirror-downloads",
                spec,
                {"matchLabels": {contract.LABEL_COMPONENT: spec.mirror_component}},
                egress=_downloads(spec.cloud),
            )
        )
    return out
