"""A small NetworkPolicy evaluator: may endpoint A open a connection to endpoint B on a port?

Semantics of networking.k8s.io/v1 (Kubernetes docs, "Network Policies"), as far as the program's
policies use them:
- A pod is isolated for a direction when any policy of its namespace selects it (podSelector) and
  lists that direction in policyTypes; an isolated pod admits only what some such policy's rules
  allow, and the rules of all its policies add up. A pod no policy selects is not isolated.
- A connection needs both ends: the source's egress (if isolated) and the destination's ingress (if
  isolated). Endpoints outside the cluster (the internet, the API server, a load balancer's
  proxies) have no policies of their own.
- A rule with no `from`/`to` matches every peer; with no `ports` every port. A peer with only a
  podSelector means pods of the policy's namespace; with only a namespaceSelector every pod of the
  matching namespaces; with both, pods matching both; an ipBlock matches by address (`except`
  carved out). Ports match by number and protocol (endPort for ranges); a named port matches the
  destination pod's container port of that name and protocol (the API reference, NetworkPolicyPort
  `port`: "a named port on a pod"), so it never matches an address outside the cluster.
- Traffic from the node a pod runs on is always allowed ("traffic to and from the node where a Pod
  is running is always allowed, regardless of the IP address of the Pod or the node",
  https://kubernetes.io/docs/concepts/services-networking/network-policies/): kubelet probes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from policies.rules.stack import selector_matches as pack_selector_matches


@dataclass(frozen=True)
class ContainerPort:
    name: str | None
    number: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class Endpoint:
    name: str
    ip: str
    # None: outside the cluster (no namespace, no policies).
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # The container ports the pod declares (what a named port in a policy resolves against).
    ports: tuple[ContainerPort, ...] = ()
    # The node the pod runs on, as a source (its kubelet's probes): never blocked.
    node: bool = False

    def port_named(self, name: str, protocol: str = "TCP") -> ContainerPort | None:
        return next((p for p in self.ports if p.name == name and p.protocol == protocol), None)

    def __hash__(self) -> int:
        return hash((self.name, self.ip, self.namespace))


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """LabelSelector semantics (the policy pack's own matcher); no selector matches everything."""
    return pack_selector_matches(selector or {}, labels)


class Cluster:
    def __init__(self, policies: list[dict[str, Any]], namespace_labels: dict[str, dict[str, str]] | None = None):
        self.policies = policies
        self.namespace_labels = namespace_labels or {}

    def _ns_labels(self, namespace: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": namespace, **self.namespace_labels.get(namespace, {})}

    def _policies_for(self, pod: Endpoint, direction: str) -> list[dict[str, Any]]:
        if pod.namespace is None:
            return []
        out = []
        for p in self.policies:
            spec = p["spec"]
            types = spec.get("policyTypes") or (["Ingress"] + (["Egress"] if "egress" in spec else []))
            if (
                p["metadata"].get("namespace") == pod.namespace
                and direction in types
                and selector_matches(spec.get("podSelector"), pod.labels)
            ):
                out.append(p)
        return out

    def _peer_matches(self, peer: dict[str, Any], policy_namespace: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            block = peer["ipBlock"]
            address = ipaddress.ip_address(other.ip)
            if address not in ipaddress.ip_network(block["cidr"]):
                return False
            return not any(address in ipaddress.ip_network(e) for e in block.get("except") or [])
        if other.namespace is None:
            return False  # pod and namespace selectors name pods only
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self._ns_labels(other.namespace)):
                return False
        elif other.namespace != policy_namespace:
            return False
        return "podSelector" not in peer or selector_matches(peer["podSelector"], other.labels)

    @staticmethod
    def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str, dst: Endpoint) -> bool:
        if not ports:
            return True
        for p in ports:
            if p.get("protocol", "TCP") != protocol:
                continue
            if "port" not in p:
                return True
            if isinstance(p["port"], str):
                named = dst.port_named(p["port"], protocol) if dst.namespace is not None else None
                if named is not None and named.number == port:
                    return True
                continue
            low, high = int(p["port"]), int(p.get("endPort", p["port"]))
            if low <= port <= high:
                return True
        return False

    def _allows(self, pod: Endpoint, direction: str, other: Endpoint, port: int, protocol: str, dst: Endpoint) -> bool:
        if direction == "Ingress" and other.node:
            return True
        selecting = self._policies_for(pod, direction)
        if not selecting:
            return True
        rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for p in selecting:
            for rule in p["spec"].get(rules_key) or []:
                peers = rule.get(peers_key)
                if peers and not any(self._peer_matches(peer, p["metadata"]["namespace"], other) for peer in peers):
                    continue
                if self._port_matches(rule.get("ports"), port, protocol, dst):
                    return True
        return False

    def can_reach(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        return self._allows(src, "Egress", dst, port, protocol, dst) and self._allows(
            dst, "Ingress", src, port, protocol, dst
        )
