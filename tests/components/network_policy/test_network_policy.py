"""The serving namespace's NetworkPolicies (issue 17, item 2), evaluated hop by hop.

Pods are taken from what the program emits (the server Deployments and LeaderWorkerSets, the mirror
Jobs) plus the pods that charts and controllers run (the endpoint pickers, agentgateway's proxy,
Prometheus, CoreDNS, cert-manager's solver), and tests/support/netpol_eval.py answers "may A reach B on
this port" under the emitted policies. Every hop the stack needs must be open; the hops an attacker
would use (a mirror Job to a server, a server to the internet, one model's pods to another's, the
internet straight to a server) must be closed.
"""

from __future__ import annotations

import pytest

from common import contract
from components.entrance.entrance import GATEWAY_NAME
from components.network_policy.rules import (
    ACME_SOLVER_LABELS,
    ACME_SOLVER_PORT,
    DEFAULT_DENY,
    DNS_POD_LABELS,
    GATEWAY_NAME_LABEL,
    NetworkPolicySpec,
    ServerGroup,
    network_policies,
)
from components.serving import vllm
from components.verification import job as verification_job
from offline_plan.mock_runtime import evaluate_stack
from policies.workloads import workload
from tests.support.committed import committed_stack
from tests.support.netpol_eval import Cluster, Endpoint
from tests.support.stack_variants import MULTI_NODE, variant

NS = "llm-serving"
HUB = Endpoint("huggingface.co", "18.160.10.1")
INTERNET_CLIENT = Endpoint("client on the internet", "198.51.100.7")
PRIVATE_HOST = Endpoint("a VM in the VPC", "10.0.5.5")
POD_IDENTITY = Endpoint("EKS Pod Identity agent", "169.254.170.23")
GKE_METADATA = Endpoint("GKE metadata server", "169.254.169.254")
API_SERVER = Endpoint("Kubernetes API (EKS private endpoint ENI)", "10.0.12.34")
GKE_PROXY = Endpoint("GKE regional load balancer proxy", "10.9.0.17")
GKE_HEALTH_CHECK = Endpoint("Google health checker", "35.191.4.4")
PROMETHEUS = Endpoint("prometheus", "10.4.9.9", contract.MONITORING_NAMESPACE, {"app.kubernetes.io/name": "prometheus"})
COREDNS = Endpoint("coredns", "10.4.8.8", "kube-system", dict(DNS_POD_LABELS))
OTHER_NS_POD = Endpoint("a pod of another team", "10.4.7.7", "team-a", {"app": "x"})
SOLVER = Endpoint("cert-manager http01 solver", "10.4.6.6", NS, dict(ACME_SOLVER_LABELS))
PROXY_POD = Endpoint("agentgateway proxy", "10.4.5.5", NS, {GATEWAY_NAME_LABEL: GATEWAY_NAME})
VERIFIER = Endpoint("verification Job", "10.4.4.4", NS, {contract.LABEL_COMPONENT: verification_job.COMPONENT})


@pytest.fixture(scope="module")
def stacks():
    return {"dev": committed_stack("dev"), "prod": committed_stack("prod")}


def policies_of(evaluation) -> list[dict]:
    return [o for o in evaluation.kubernetes_objects if o["kind"] == "NetworkPolicy"]


def pods_of(evaluation) -> dict[str, list[Endpoint]]:
    """The serving namespace's pods by role, from the emitted workloads (one endpoint per template)."""
    out: dict[str, list[Endpoint]] = {"server": [], "worker": [], "mirror": []}
    n = 0
    for obj in evaluation.kubernetes_objects:
        w = workload(obj)
        if w is None or (obj["metadata"].get("namespace") or "default") != NS:
            continue
        for pod in w.pods:
            n += 1
            component = pod.labels.get(contract.LABEL_COMPONENT)
            role = {vllm.COMPONENT_SERVER: "server", vllm.COMPONENT_WORKER: "worker", "model-mirror": "mirror"}.get(
                component
            )
            if role:
                out[role].append(
                    Endpoint(
                        f"{obj['kind']}/{obj['metadata']['name']} {pod.where}",
                        f"10.4.{n}.{len(out[role]) + 1}",
                        NS,
                        dict(pod.labels),
                    )
                )
    return out


def pickers_of(evaluation) -> list[Endpoint]:
    """A picker pod per chart release, labelled as the chart labels it (common.contract.picker_name)."""
    releases = [
        r
        for r in evaluation.resources
        if r.type == "kubernetes:helm.sh/v3:Release"
        and str(r.inputs.get("chart", "")).endswith("/" + contract.PICKER_CHART)
    ]
    return [
        Endpoint(
            f"picker {r.inputs['name']}",
            f"10.4.200.{i + 1}",
            NS,
            {contract.PICKER_POD_LABEL: contract.picker_name(r.inputs["name"])},
        )
        for i, r in enumerate(releases)
    ]


def test_both_committed_stacks_deny_by_default(stacks):
    for name, evaluation in stacks.items():
        policies = policies_of(evaluation)
        deny = [p for p in policies if p["metadata"]["name"] == DEFAULT_DENY]
        assert deny, name
        assert deny[0]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}
        assert all(p["metadata"]["namespace"] == NS for p in policies)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_needed_hop_is_open(stacks, stack):
    evaluation = stacks[stack]
    cluster = Cluster(policies_of(evaluation))
    pods = pods_of(evaluation)
    pickers = pickers_of(evaluation)
    assert pods["server"] and pods["mirror"] and pickers
    gateway = [PROXY_POD] if stack == "prod" else [GKE_PROXY, GKE_HEALTH_CHECK]
    for pod in [*pods["server"], *pods["mirror"], *pickers]:
        assert cluster.can_reach(pod, COREDNS, 53, "UDP") and cluster.can_reach(pod, COREDNS, 53, "TCP"), pod.name
    for server in pods["server"]:
        for g in gateway:
            assert cluster.can_reach(g, server, contract.SERVER_PORT), (g.name, server.name)
        assert cluster.can_reach(PROMETHEUS, server, contract.SERVER_PORT), server.name
        for picker in pickers:
            # Each picker reaches its own model's servers only (its release is the served name).
            own = picker.labels[contract.PICKER_POD_LABEL] == contract.picker_name(server.labels[contract.LABEL_MODEL])
            assert cluster.can_reach(picker, server, contract.SERVER_PORT) == own, (picker.name, server.name)
    for picker in pickers:
        for g in gateway:
            assert cluster.can_reach(g, picker, 9002), (g.name, picker.name)
        assert cluster.can_reach(PROMETHEUS, picker, 9090)
        assert cluster.can_reach(picker, API_SERVER, 443)
    for mirror in pods["mirror"]:
        assert cluster.can_reach(mirror, HUB, 443), mirror.name
        identity = POD_IDENTITY if stack == "prod" else GKE_METADATA
        assert cluster.can_reach(mirror, identity, 80), mirror.name
    if stack == "prod":
        assert cluster.can_reach(INTERNET_CLIENT, PROXY_POD, 443)
        assert cluster.can_reach(PROXY_POD, SOLVER, ACME_SOLVER_PORT)
    else:
        # dev's certificate is Google-managed (no ACME challenge), so nothing opens the solver's port.
        assert not cluster.can_reach(GKE_PROXY, SOLVER, ACME_SOLVER_PORT)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_other_hop_is_closed(stacks, stack):
    evaluation = stacks[stack]
    cluster = Cluster(policies_of(evaluation))
    pods = pods_of(evaluation)
    pickers = pickers_of(evaluation)
    servers, mirrors = pods["server"], pods["mirror"]
    for server in servers:
        for mirror in mirrors:
            assert not cluster.can_reach(mirror, server, contract.SERVER_PORT), (mirror.name, server.name)
        assert not cluster.can_reach(server, HUB, 443), server.name
        assert not cluster.can_reach(server, API_SERVER, 443), server.name
        assert not cluster.can_reach(INTERNET_CLIENT, server, contract.SERVER_PORT), server.name
        assert not cluster.can_reach(OTHER_NS_POD, server, contract.SERVER_PORT), server.name
        assert not cluster.can_reach(PROMETHEUS, server, 22), server.name
        for picker in pickers:
            assert not cluster.can_reach(server, picker, 9002)
    # One model's servers never reach another's.
    models = {s.labels[contract.LABEL_MODEL] for s in servers}
    for a in servers:
        for b in servers:
            if a.labels[contract.LABEL_MODEL] != b.labels[contract.LABEL_MODEL]:
                assert not cluster.can_reach(a, b, contract.SERVER_PORT)
                assert not cluster.can_reach(a, b, 6379)
    assert len(models) == (2 if stack == "prod" else 1)
    for mirror in mirrors:
        assert not cluster.can_reach(mirror, PRIVATE_HOST, 443), mirror.name
        assert not cluster.can_reach(mirror, HUB, 80), mirror.name
        assert not cluster.can_reach(INTERNET_CLIENT, mirror, 443)
    for picker in pickers:
        assert not cluster.can_reach(picker, HUB, 80)
        assert not cluster.can_reach(INTERNET_CLIENT, picker, 9002)
        assert not cluster.can_reach(OTHER_NS_POD, picker, 9002)


def test_one_multi_node_replica_talks_to_itself_only():
    evaluation = variant(MULTI_NODE)
    cluster = Cluster(policies_of(evaluation))
    pods = pods_of(evaluation)
    (leader,), (worker,) = pods["server"], pods["worker"]
    for port in (6379, 29500, 40000):  # Ray's head, an NCCL bootstrap port, a socket port
        assert cluster.can_reach(worker, leader, port) and cluster.can_reach(leader, worker, port)
    stranger = Endpoint(
        "another model's server",
        "10.4.99.1",
        NS,
        {contract.LABEL_MODEL: "other", contract.LABEL_COMPONENT: vllm.COMPONENT_SERVER},
    )
    assert not cluster.can_reach(stranger, worker, 6379) and not cluster.can_reach(worker, stranger, 6379)
    for mirror in pods["mirror"]:
        assert not cluster.can_reach(mirror, worker, 6379)
    assert not cluster.can_reach(worker, HUB, 443)


def test_network_policies_can_be_turned_off():
    evaluation = evaluate_stack("dev", overrides={"security": {"networkPolicies": False}})
    assert policies_of(evaluation) == []


def test_allowed_client_namespaces_reach_the_api_port_only():
    spec = NetworkPolicySpec(
        namespace=NS,
        cloud="aws",
        client_namespaces=("team-a",),
        servers=(ServerGroup("m", (vllm.COMPONENT_SERVER,), contract.SERVER_PORT),),
    )
    cluster = Cluster(network_policies(spec))
    server = Endpoint(
        "server", "10.4.1.1", NS, {contract.LABEL_MODEL: "m", contract.LABEL_COMPONENT: vllm.COMPONENT_SERVER}
    )
    assert cluster.can_reach(OTHER_NS_POD, server, contract.SERVER_PORT)
    assert not cluster.can_reach(OTHER_NS_POD, server, 6379)
    outsider = Endpoint("team-b pod", "10.4.7.8", "team-b", {})
    assert not cluster.can_reach(outsider, server, contract.SERVER_PORT)


def test_a_server_reading_the_bucket_may_download_but_not_reach_private_addresses():
    spec = NetworkPolicySpec(
        namespace=NS,
        cloud="gcp",
        servers=(ServerGroup("m", (vllm.COMPONENT_SERVER,), contract.SERVER_PORT, downloads=True),),
    )
    cluster = Cluster(network_policies(spec))
    server = Endpoint(
        "server", "10.4.1.1", NS, {contract.LABEL_MODEL: "m", contract.LABEL_COMPONENT: vllm.COMPONENT_SERVER}
    )
    assert cluster.can_reach(server, Endpoint("storage.googleapis.com", "142.250.1.1"), 443)
    assert cluster.can_reach(server, GKE_METADATA, 80)
    assert not cluster.can_reach(server, PRIVATE_HOST, 443)


# The evaluator itself: it must be able to say "closed" (a permissive evaluator would pass every test above).


def _policy(name, selector, types, ingress=None, egress=None, namespace=NS):
    spec = {"podSelector": selector, "policyTypes": types}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_evaluator_semantics():
    a = Endpoint("a", "10.4.0.1", NS, {"role": "a"})
    b = Endpoint("b", "10.4.0.2", NS, {"role": "b"})
    assert Cluster([]).can_reach(a, b, 80)  # no policy: open
    deny = _policy("deny", {}, ["Ingress", "Egress"], [], [])
    assert not Cluster([deny]).can_reach(a, b, 80)
    # Egress opened but b's ingress still isolated: closed; both opened: open (additive).
    a_out = _policy(
        "a-out",
        {"matchLabels": {"role": "a"}},
        ["Egress"],
        egress=[{"to": [{"podSelector": {"matchLabels": {"role": "b"}}}]}],
    )
    assert not Cluster([deny, a_out]).can_reach(a, b, 80)
    b_in = _policy(
        "b-in",
        {"matchLabels": {"role": "b"}},
        ["Ingress"],
        ingress=[
            {"from": [{"podSelector": {"matchLabels": {"role": "a"}}}], "ports": [{"protocol": "TCP", "port": 80}]}
        ],
    )
    assert Cluster([deny, a_out, b_in]).can_reach(a, b, 80)
    assert not Cluster([deny, a_out, b_in]).can_reach(a, b, 81)
    assert not Cluster([deny, a_out, b_in]).can_reach(a, b, 80, "UDP")
    # A podSelector peer means the policy's own namespace only.
    a_elsewhere = Endpoint("a", "10.4.0.3", "other", {"role": "a"})
    assert not Cluster([deny, b_in]).can_reach(a_elsewhere, b, 80)
    # ipBlock with except.
    out = _policy(
        "out", {}, ["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}]
    )
    assert Cluster([out]).can_reach(a, HUB, 443)
    assert not Cluster([out]).can_reach(a, PRIVATE_HOST, 443)


def test_kserve_predictors_are_scraped_and_download_while_vllm_servers_do_not():
    from components.serving import kserve
    from tests.support.stack_variants import KSERVE

    evaluation = variant(KSERVE)
    cluster = Cluster(policies_of(evaluation))
    predictors = []
    for obj in evaluation.kubernetes_objects:
        w = workload(obj)
        if w is None or obj["kind"] != "InferenceService":
            continue
        for pod in w.pods:
            predictors.append(
                Endpoint(
                    f"{obj['metadata']['name']} {pod.where}", f"10.4.150.{len(predictors) + 1}", NS, dict(pod.labels)
                )
            )
    assert predictors and all(p.labels.get(contract.LABEL_COMPONENT) == kserve.COMPONENT for p in predictors)
    pods = pods_of(evaluation)
    for p in predictors:
        assert cluster.can_reach(PROMETHEUS, p, kserve.HTTP_PORT), p.name
        assert cluster.can_reach(p, HUB, 443), p.name  # the storage initializer copies hf:// or the bucket
        assert not cluster.can_reach(p, PRIVATE_HOST, 443)
        for mirror in pods["mirror"]:
            assert not cluster.can_reach(mirror, p, kserve.HTTP_PORT)
    for server in pods["server"]:
        assert not cluster.can_reach(server, HUB, 443), server.name


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_verification_job_reaches_the_servers_and_nothing_else(stacks, stack):
    """The Job checks every vLLM server through its API port (its pods carry the label the policy
    names); it needs nothing else, so the Hub, the pickers and other ports stay closed to it."""
    evaluation = stacks[stack]
    jobs = [
        o
        for o in evaluation.kubernetes_objects
        if o["kind"] == "Job" and o["metadata"]["name"] == verification_job.JOB_NAME
    ]
    assert (
        jobs
        and jobs[0]["spec"]["template"]["metadata"]["labels"][contract.LABEL_COMPONENT] == verification_job.COMPONENT
    )
    cluster = Cluster(policies_of(evaluation))
    servers = pods_of(evaluation)["server"]
    assert servers
    for server in servers:
        assert cluster.can_reach(VERIFIER, server, contract.SERVER_PORT), server.name
        assert not cluster.can_reach(VERIFIER, server, 22), server.name
    assert cluster.can_reach(VERIFIER, COREDNS, 53, "UDP")
    assert not cluster.can_reach(VERIFIER, HUB, 443)
    for picker in pickers_of(evaluation):
        assert not cluster.can_reach(VERIFIER, picker, 9002)


def test_without_the_verification_policy_the_job_is_cut_off(stacks):
    """The evaluator sees the difference: drop the verification policy and the Job reaches nothing."""
    evaluation = stacks["dev"]
    kept = [p for p in policies_of(evaluation) if p["metadata"]["name"] != "verification"]
    assert len(kept) == len(policies_of(evaluation)) - 1
    server = pods_of(evaluation)["server"][0]
    assert not Cluster(kept).can_reach(VERIFIER, server, contract.SERVER_PORT)
