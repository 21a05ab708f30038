"""network-policy-no-allow-all (stack rule): no policy undoes the namespace's default-deny.

NetworkPolicies are additive: a pod's allowed traffic is the union of every policy that selects it
(https://kubernetes.io/docs/concepts/services-networking/network-policies/, "The two sorts of
isolation": "the allowed connections ... is the union of what the applicable policies allow").
So beside the default-deny that network-policy-present asks for, one policy whose rule admits every
peer on every port reopens the selected pods completely, and network-policy-present (which only
asks that the default-deny exists) cannot see it. A rule opens everything when it names no ports
(an empty or absent `ports` means all ports) and its peers are everyone: no `from`/`to` at all (the
API's "matches all sources/destinations"), an `ipBlock` whose CIDR is a /0, or a
`namespaceSelector: {}` with no narrowing `podSelector` (every pod of every namespace). Such a rule
is refused when its policy selects every pod of the namespace (`podSelector: {}`, the classic
allow-all) or any GPU server pod of the namespace (the servers are what the default-deny guards).
A policy that opens other chosen pods to everyone is a deliberate door (the program's in-cluster
Gateway proxy takes clients from anywhere: components/network_policy/rules.py "entrance-gateway"),
and a hole limited by port or by peer is the allowed path the default-deny is for; neither is
judged here.
"""

from __future__ import annotations

import ipaddress

from policies.gpu import pod_uses_gpus
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.network import is_default_deny
from policies.rules.stack import selector_matches
from policies.workloads import workload

_DIRECTIONS = (("ingress", "from", "Ingress"), ("egress", "to", "Egress"))


def _selects_all(selector: object) -> bool:
    return isinstance(selector, dict) and not any(selector.get(k) for k in ("matchLabels", "matchExpressions"))


def _everyone(peer: dict) -> str | None:
    cidr = as_str(as_dict(peer.get("ipBlock")).get("cidr"))
    if cidr:
        try:
            if ipaddress.ip_network(cidr, strict=False).prefixlen == 0:
                return f"every address ({cidr})"
        except ValueError:
            return None
    if _selects_all(peer.get("namespaceSelector")) and (
        "podSelector" not in peer or _selects_all(peer.get("podSelector"))
    ):
        return "every pod of every namespace (namespaceSelector {})"
    return None


def _open_rules(spec: dict) -> list[str]:
    types = set(as_list(spec.get("policyTypes"))) or {"Ingress"} | ({"Egress"} if "egress" in spec else set())
    found = []
    for key, peers_key, policy_type in _DIRECTIONS:
        if policy_type not in types:
            continue
        for i, rule in enumerate(as_list(spec.get(key))):
            rule = as_dict(rule)
            if as_list(rule.get("ports")):
                continue
            peers = [as_dict(p) for p in as_list(rule.get(peers_key))]
            who = (
                "every peer (no '" + peers_key + "')" if not peers else next(filter(None, map(_everyone, peers)), None)
            )
            if who:
                found.append(f"{key}[{i}] admits {who} on every port")
    return found


def _gpu_servers(resources: list[Resource], namespace: str, selector: dict) -> list[str]:
    """The GPU workloads of `namespace` whose pods `selector` selects."""
    found = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None or is_unknown(w.namespace) or (w.namespace or "default") != namespace:
            continue
        if any(pod_uses_gpus(pod) and selector_matches(selector, pod.labels) for pod in w.pods):
            found.append(w.ref)
    return found


def network_policy_no_allow_all(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    policies = [r for r in resources if r.is_kubernetes and r.kind == "NetworkPolicy" and not is_unknown(r.namespace)]
    denied = {(p.namespace or "default") for p in policies if is_default_deny(p)}
    out = []
    for p in policies:
        namespace = p.namespace or "default"
        if namespace not in denied or is_default_deny(p):
            continue
        spec = as_dict(p.props.get("spec"))
        name = as_str(as_dict(p.props.get("metadata")).get("name")) or p.name
        selector = spec.get("podSelector")
        if _selects_all(selector):
            selected = "every pod"
        elif isinstance(selector, dict) and (servers := _gpu_servers(resources, namespace, selector)):
            selected = f"the GPU servers of {', '.join(servers)}"
        else:
            continue
        for problem in _open_rules(spec):
            out.append(
                (
                    p,
                    Finding(
                        f"NetworkPolicy/{name}: {problem}, which undoes the default-deny of namespace '{namespace}' "
                        f"for {selected} (policies add up); name the peers and ports the pods need instead."
                    ),
                )
            )
    return out
