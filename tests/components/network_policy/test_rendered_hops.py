"""The serving namespace's NetworkPolicies against the pods that will really run (issue 26, item 3).

The pods are the program's own workloads, every Helm release rendered by Helm's engine from
charts/ (the endpoint pickers, agentgateway's controller, KEDA, cert-manager, the Prometheus stack,
the GPU Operator, Karpenter), agentgateway's proxy rendered from the chart its controller embeds,
and the few pods an operator makes from a rendered resource (tests/support/rendered_pods.py). The
hops the stack needs are read from the objects that cause them: routes, InferencePools, monitors,
webhooks, the proxy's xDS address, probes (tests/support/stack_hops.py), never from the policies.

Then: every needed hop is open, and every other connection that starts or ends in the serving
namespace is closed, except the few openings the policies make on purpose (WIDENINGS, each with
the reason docs/security.md gives). A connection is tried on every container port the destination
declares or is probed on, plus one it does not (22).
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
from collections.abc import Callable

import pytest

from common import contract
from components.addons import agentgateway
from components.entrance import picker
from components.network_policy.rules import (
    API_SERVER_PORTS,
    GATEWAY_NAME_LABEL,
    GATEWAY_POD_FACT,
    PRIVATE_RANGES,
    NetworkPolicySpec,
    ServerGroup,
    network_policies,
)
from components.serving import kserve, vllm
from offline_plan.mock_runtime import Evaluation
from tests.support import stack_hops as sh
from tests.support.committed import committed_stack
from tests.support.netpol_eval import Cluster, ContainerPort, Endpoint
from tests.support.rendered_pods import StackPod, StackView, stack_view
from tests.support.stack_variants import KSERVE, variant

NS = "llm-serving"
# The committed stacks, and dev with KServe models (its controller's webhooks, predictors that
# download through the storage initializer).
STACKS = ["dev", "prod", "kserve"]
OTHER_NS_POD = Endpoint("a pod of another team", "10.4.240.7", "team-a", {"app": "x"})
UNDECLARED = ContainerPort(None, 22)


@dataclasses.dataclass
class Rendered:
    evaluation: Evaluation
    view: StackView
    policies: list[dict]
    hops: sh.Hops
    cloud: str


@functools.cache
def _rendered(stack: str) -> Rendered:
    evaluation = variant(KSERVE) if stack == "kserve" else committed_stack(stack)
    cloud = str(evaluation.config["llm-serving:cloud"])
    view = stack_view(evaluation)
    policies = [o for o in evaluation.kubernetes_objects if o["kind"] == "NetworkPolicy"]
    return Rendered(evaluation, view, policies, sh.needed_hops(view, NS, cloud), cloud)


def _pods(r: Rendered, test: Callable[[StackPod], bool]) -> list[StackPod]:
    return [p for p in r.view.pods if test(p)]


def _pickers(r: Rendered) -> list[StackPod]:
    return _pods(r, lambda p: p.endpoint.namespace == NS and contract.PICKER_POD_LABEL in p.endpoint.labels)


def _proxies(r: Rendered) -> list[StackPod]:
    return _pods(r, lambda p: p.origin.startswith("agentgateway controller"))


@pytest.mark.parametrize("stack", STACKS)
def test_every_needed_hop_resolves_to_pods_that_run(stack):
    r = _rendered(stack)
    assert r.hops.problems == []
    whys = {h.why.split(": ")[-1] for h in r.hops.hops}
    if stack == "kserve":
        assert {"KServe's storage initializer copies the model", "kubelet probes"} <= whys
        hooks = {h.dst.name for h in r.hops.hops if h.src is sh.API_SERVER}
        assert any("kserve-controller-manager" in name for name in hooks), hooks
        assert any(h.why.startswith("PodMonitor") and h.port == kserve.HTTP_PORT for h in r.hops.hops)
        return
    expected = {
        "name lookups",
        "a request to the pod its picker chose",
        "ext_proc to the endpoint picker",
        "the picker scrapes the pod's /metrics",
        "the picker watches its pool and pods",
        "the verification Job's checks",
        "the mirror downloads the revision",
        "kubelet probes",
    }
    if stack == "dev":
        expected |= {"GKE's health check of the pool", "GKE's gRPC health check of the picker"}
    else:
        expected |= {
            "the proxy's configuration (xDS)",
            "clients through the load balancer",
            "an ACME HTTP-01 challenge",
        }
    assert expected <= whys, expected - whys
    assert any(h.src is sh.API_SERVER for h in r.hops.hops), "no webhook of the rendered charts found"
    assert any(h.why.startswith("ServiceMonitor") and h.port == picker.METRICS_PORT for h in r.hops.hops)


@pytest.mark.parametrize("stack", STACKS)
def test_every_needed_hop_is_open(stack):
    r = _rendered(stack)
    cluster = Cluster(r.policies)
    closed = [
        f"{h.src.name} -> {h.dst.name} {h.port}/{h.protocol} ({h.why})"
        for h in r.hops.hops
        if not cluster.can_reach(h.src, h.dst, h.port, h.protocol)
    ]
    assert closed == []


# --- what the policies open on purpose beyond the needed hops (docs/security.md, "NetworkPolicies in
# the serving namespace"). Each takes (rendered stack, src, dst, port, protocol).


def _scrape_targets(r: Rendered) -> set[tuple[str, int]]:
    return {(h.dst.name, h.port) for h in r.hops.hops if h.why.startswith(("ServiceMonitor", "PodMonitor"))}


def _gke_entrance_targets(r: Rendered) -> set[tuple[str, int]]:
    return {(h.dst.name, h.port) for h in r.hops.hops if h.src is sh.GKE_PROXY}


def _is_public(endpoint: Endpoint) -> bool:
    address = ipaddress.ip_address(endpoint.ip)
    return not any(address in ipaddress.ip_network(c) for c in PRIVATE_RANGES)


WIDENINGS: dict[str, Callable[[Rendered, Endpoint, Endpoint, int, str], bool]] = {
    # The policy admits the monitoring namespace, not Prometheus' pods alone: their labels are the
    # operator's (and on an existing cluster another Prometheus'), so any pod there reaches what is scraped.
    "the monitoring namespace reaches every scraped port": lambda r, s, d, port, proto: (
        s.namespace == contract.MONITORING_NAMESPACE and (d.name, port) in _scrape_targets(r)
    ),
    # The proxy takes connections from anywhere on any port: the load balancer in front decides the ports.
    "agentgateway's proxy takes every connection from outside the namespace": lambda r, s, d, port, proto: (
        d in {p.endpoint for p in _proxies(r)} and s.namespace != NS
    ),
    # The API server is no pod and its address is the cloud's, so the picker may open 443/6443 anywhere.
    "the pickers open TCP 443/6443 to anything that admits them": lambda r, s, d, port, proto: (
        s in {p.endpoint for p in _pickers(r)}
        and proto == "TCP"
        and port in API_SERVER_PORTS
        and (d.namespace != NS or d in {p.endpoint for p in _proxies(r)})
    ),
    # NetworkPolicy cannot name a host: the Hub and the buckets are "HTTPS to any public address".
    "pods that download open HTTPS to any public address": lambda r, s, d, port, proto: (
        any(h.src == s and h.dst is sh.HUB for h in r.hops.hops)
        and d.namespace is None
        and port == 443
        and proto == "TCP"
        and _is_public(d)
    ),
    # GKE's proxies and health checkers share one peer list for the entrance's ports.
    "GKE's health checkers reach the entrance's ports": lambda r, s, d, port, proto: (
        s in sh.GKE_HEALTH_CHECKERS and (d.name, port) in _gke_entrance_targets(r)
    ),
}


def _sources(r: Rendered) -> list[Endpoint]:
    # hostNetwork pods send from their node's address, which the policies cannot hold back
    # (Kubernetes docs, Network Policies, "NetworkPolicy and hostNetwork pods": undefined), so they
    # are no source here.
    pods = [p.endpoint for p in r.view.pods if not p.host_network]
    outside = [sh.INTERNET_CLIENT, sh.PRIVATE_HOST, sh.API_SERVER, sh.GKE_PROXY, *sh.GKE_HEALTH_CHECKERS, OTHER_NS_POD]
    return pods + outside


def _destinations(r: Rendered, cloud: str) -> list[tuple[Endpoint, list[ContainerPort]]]:
    found = []
    for pod in r.view.pods:
        ports = {*pod.endpoint.ports, *sh.probe_ports(pod), UNDECLARED}
        found.append((pod.endpoint, sorted(ports, key=lambda p: (p.number, p.protocol, p.name or ""))))
    found += [
        (sh.HUB, [ContainerPort(None, 443), ContainerPort(None, 80)]),
        (sh.INTERNET_CLIENT, [ContainerPort(None, 443), ContainerPort(None, 80)]),
        (sh.PRIVATE_HOST, [ContainerPort(None, 443), UNDECLARED]),
        (sh.API_SERVER, [ContainerPort(None, p) for p in API_SERVER_PORTS]),
        *((e, [ContainerPort(None, port)]) for e, port in sh.identity_endpoints(cloud)),
    ]
    return found


def _unexpected(r: Rendered, cluster: Cluster, cloud: str) -> tuple[list[str], int]:
    needed = r.hops.keys()
    wrong, tried = [], 0
    for src in _sources(r):
        for dst, ports in _destinations(r, cloud):
            if src == dst or NS not in (src.namespace, dst.namespace):
                continue
            for port in ports:
                tried += 1
                is_open = cluster.can_reach(src, dst, port.number, port.protocol)
                reasons = [w for w, test in WIDENINGS.items() if test(r, src, dst, port.number, port.protocol)]
                expected = (src.name, dst.name, port.number, port.protocol) in needed or bool(reasons)
                if is_open != expected:
                    state = "open, needed by nothing" if is_open else "closed, yet expected open"
                    wrong.append(f"{src.name} -> {dst.name} {port.number}/{port.protocol}: {state} {reasons}")
    return wrong, tried


@pytest.mark.parametrize("stack", STACKS)
def test_every_other_hop_is_closed(stack):
    r = _rendered(stack)
    wrong, tried = _unexpected(r, Cluster(r.policies), r.cloud)
    assert tried > 300
    assert wrong == [], "\n".join(wrong[:30])


def test_the_matrix_catches_a_policy_that_opens_too_much():
    """A picker policy with `ports` dropped opens the pickers to the monitoring namespace on every
    port: the matrix must report it (a permissive evaluator or an empty matrix would not)."""
    r = _rendered("prod")
    loose = []
    for p in r.policies:
        if p["metadata"]["name"] == "endpoint-pickers":
            p = {
                **p,
                "spec": {
                    **p["spec"],
                    "ingress": [{k: v for k, v in rule.items() if k != "ports"} for rule in p["spec"]["ingress"]],
                },
            }
        loose.append(p)
    wrong, _ = _unexpected(r, Cluster(loose), r.cloud)
    prometheus = next(
        p.endpoint.name for p in r.view.pods if p.origin.startswith("prometheus-operator, from Prometheus")
    )
    for port in (picker.EXT_PROC_PORT, picker.HEALTH_PORT, UNDECLARED.number):
        assert any(line.startswith(prometheus) and "-epp" in line and f" {port}/TCP: open" in line for line in wrong), (
            port
        )


def test_without_the_gke_health_rule_the_picker_fails_its_health_check():
    """The rendered picker is health-checked by GKE on its gRPC health port: drop the rule that
    admits Google's ranges there and the needed-hop check sees it closed."""
    r = _rendered("dev")
    health = [h for h in r.hops.hops if h.why.endswith("GKE's gRPC health check of the picker")]
    assert health
    kept = []
    for p in r.policies:
        if p["metadata"]["name"] == "endpoint-pickers":
            rules = [
                rule
                for rule in p["spec"]["ingress"]
                if rule.get("ports") != [{"protocol": "TCP", "port": picker.HEALTH_PORT}]
            ]
            assert len(rules) == len(p["spec"]["ingress"]) - 1
            p = {**p, "spec": {**p["spec"], "ingress": rules}}
        kept.append(p)
    assert not any(Cluster(kept).can_reach(h.src, h.dst, h.port) for h in health)
    assert all(Cluster(r.policies).can_reach(h.src, h.dst, h.port) for h in health)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_policies_name_the_labels_and_ports_that_run(stack):
    """Each label and port the program's policies assume, against the rendered pods."""
    r = _rendered(stack)
    pickers = _pickers(r)
    assert pickers
    for p in pickers:
        ports = {(c.name, c.number) for c in p.endpoint.ports}
        # routerlib templates/_deployment.yaml at v0.10.0: container ports grpc, grpc-health, metrics.
        assert {
            ("grpc", picker.EXT_PROC_PORT),
            ("grpc-health", picker.HEALTH_PORT),
            ("metrics", picker.METRICS_PORT),
        } <= ports
        release = p.origin.rsplit("/", 1)[-1]
        assert p.endpoint.labels[contract.PICKER_POD_LABEL] == contract.picker_name(release)
    if stack == "prod":
        proxies = _proxies(r)
        assert proxies and all(p.endpoint.namespace == NS for p in proxies)
        assert all(p.endpoint.labels.get(GATEWAY_NAME_LABEL) == "llm-serving" for p in proxies)
        assert GATEWAY_POD_FACT.established
        xds = [h for h in r.hops.hops if h.why == "the proxy's configuration (xDS)"]
        assert {(h.dst.namespace, h.port) for h in xds} == {(agentgateway.NAMESPACE, agentgateway.XDS_PORT)}


@pytest.mark.parametrize("stack", STACKS)
def test_named_ports_in_the_policies_resolve_to_container_ports(stack):
    """A named port in a rule must be a container port name of every pod it can select; the
    program's policies name ports by number today, so this holds them to it if that changes."""
    r = _rendered(stack)
    problems = named_port_problems(r.policies, r.view)
    assert problems == []


def named_port_problems(policies: list[dict], view: StackView) -> list[str]:
    from tests.support.netpol_eval import selector_matches

    problems = []
    for p in policies:
        spec, ns = p["spec"], p["metadata"]["namespace"]
        selected = [q for q in view.in_namespace(ns) if selector_matches(spec.get("podSelector"), q.endpoint.labels)]
        for rule in spec.get("ingress") or []:
            for port in rule.get("ports") or []:
                if isinstance(port.get("port"), str):
                    for q in selected:
                        if q.endpoint.port_named(port["port"], port.get("protocol", "TCP")) is None:
                            problems.append(f"{p['metadata']['name']}: {q.endpoint.name} has no port {port['port']}")
        for rule in spec.get("egress") or []:
            names = [x["port"] for x in rule.get("ports") or [] if isinstance(x.get("port"), str)]
            if not names:
                continue
            for peer in rule.get("to") or []:
                targets = [
                    q
                    for q in view.in_namespace(ns)
                    if "podSelector" in peer and selector_matches(peer["podSelector"], q.endpoint.labels)
                ]
                for q in targets:
                    for name in names:
                        if q.endpoint.port_named(name) is None:
                            problems.append(f"{p['metadata']['name']}: {q.endpoint.name} has no port {name}")
    return problems


def test_named_port_check_and_evaluation():
    """A named port matches the destination's container port of that name, and nothing else."""
    r = _rendered("prod")
    server_policy = next(p for p in r.policies if p["metadata"]["name"].endswith("-server"))
    renamed = {
        **server_policy,
        "spec": {
            **server_policy["spec"],
            "ingress": [
                {**rule, "ports": [{"protocol": "TCP", "port": "api"}]} for rule in server_policy["spec"]["ingress"]
            ],
        },
    }
    assert named_port_problems([renamed], r.view), "a port name no server declares passed"
    a = Endpoint("a", "10.4.0.1", NS, {"role": "a"})
    b = Endpoint("b", "10.4.0.2", NS, {"role": "b"}, (ContainerPort("http", 8000),))
    allow = {
        "metadata": {"name": "b-in", "namespace": NS},
        "spec": {
            "podSelector": {"matchLabels": {"role": "b"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": "http"}]}],
        },
    }
    assert Cluster([allow]).can_reach(a, b, 8000)
    assert not Cluster([allow]).can_reach(a, b, 8001)
    unnamed = dataclasses.replace(b, ports=(ContainerPort(None, 8000),))
    assert not Cluster([allow]).can_reach(a, unnamed, 8000)
    deny = {
        "metadata": {"name": "deny", "namespace": NS},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []},
    }
    assert not Cluster([deny]).can_reach(a, b, 8000)
    assert Cluster([deny]).can_reach(sh.NODE, b, 8000)  # the node's kubelet always gets through


def _spec(**kw) -> NetworkPolicySpec:
    servers = tuple(ServerGroup(m, (vllm.COMPONENT_SERVER,), contract.SERVER_PORT) for m in ("a", "b"))
    return NetworkPolicySpec(namespace=NS, cloud="aws", servers=servers, entrance="in-cluster", gateway_name="gw", **kw)


def _pod(name: str, labels: dict, namespace: str = NS, n: int = 1) -> Endpoint:
    return Endpoint(name, f"10.4.77.{n}", namespace, labels)


def test_the_proxy_reaches_its_controller_on_the_xds_port_only_where_the_stack_installs_it():
    proxy = _pod("proxy", {GATEWAY_NAME_LABEL: "gw"})
    controller = _pod("controller", {"app.kubernetes.io/name": "agentgateway"}, agentgateway.NAMESPACE, 2)
    pinned = Cluster(
        network_policies(_spec(gateway_controller_namespace=agentgateway.NAMESPACE, gateway_controller_port=9978))
    )
    assert pinned.can_reach(proxy, controller, 9978)
    assert not pinned.can_reach(proxy, controller, 9092)
    # On a cluster the stack does not create, the controller's namespace and port are the owner's.
    unknown = Cluster(network_policies(_spec()))
    assert unknown.can_reach(proxy, controller, 9092)


def test_a_server_admits_its_own_picker_only():
    cluster = Cluster(network_policies(_spec()))
    server_a = _pod("a", {contract.LABEL_COMPONENT: vllm.COMPONENT_SERVER, contract.LABEL_MODEL: "a"})
    picker_a = _pod("picker a", {contract.PICKER_POD_LABEL: contract.picker_name("a")}, n=2)
    picker_b = _pod("picker b", {contract.PICKER_POD_LABEL: contract.picker_name("b")}, n=3)
    assert cluster.can_reach(picker_a, server_a, contract.SERVER_PORT)
    assert not cluster.can_reach(picker_b, server_a, contract.SERVER_PORT)
