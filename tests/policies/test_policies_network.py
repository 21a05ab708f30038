"""network-policy-present and cluster-endpoint-restricted: good and bad fixtures through the engine's
analyzer, and each committed stack with the control removed, caught by the right rule."""

from __future__ import annotations

import copy

import pytest

from common import contract
from offline_plan.mock_runtime import evaluate_stack
from offline_plan.write import policy_verdicts
from policies.check import check_objects
from tests.support.committed import committed_stack
from tests.support.policy_engine import GOOD_SERVER, UNKNOWN_STRING, analyze, analyze_stack, k8s_stack_entry

EKS = "aws:eks/cluster:Cluster"
GKE = "gcp:container/cluster:Cluster"
PROD = {contract.CLUSTER_PROFILE_TAG: contract.PRODUCTION_PROFILE}
DEV = {contract.CLUSTER_PROFILE_TAG: "development"}
ALLOWED = {**PROD, contract.WORLD_OPEN_ENDPOINT_TAG: contract.WORLD_OPEN_ALLOWED}


def deny(namespace: str = "default", **spec_changes) -> dict:
    spec = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": [], **spec_changes}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": namespace},
        "spec": spec,
    }


def namespace_object(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def server(namespace: str | None = None) -> dict:
    d = copy.deepcopy(GOOD_SERVER)
    if namespace:
        d["metadata"]["namespace"] = namespace
    return d


# network-policy-present ---------------------------------------------------------------------------

NS = GOOD_SERVER["metadata"].get("namespace") or "default"


def test_servers_beside_a_default_deny_pass():
    result = analyze_stack(
        [k8s_stack_entry(namespace_object(NS)), k8s_stack_entry(server()), k8s_stack_entry(deny(NS))]
    )
    assert result.of("network-policy-present") == []


@pytest.mark.parametrize(
    "policy",
    [
        None,  # no policy at all
        deny("elsewhere"),  # in another namespace
        deny(policyTypes=["Ingress"]),  # egress left open
        deny(podSelector={"matchLabels": {"app": "web"}}),  # not every pod
        deny(ingress=[{}]),  # allows everything in
    ],
)
def test_servers_without_a_default_deny_fail(policy):
    if policy is not None and policy["metadata"]["namespace"] == "default":
        policy["metadata"]["namespace"] = NS
    stack = [k8s_stack_entry(namespace_object(NS)), k8s_stack_entry(server())] + (
        [k8s_stack_entry(policy)] if policy else []
    )
    (v,) = analyze_stack(stack).of("network-policy-present")
    assert v.level == "mandatory" and "default-deny NetworkPolicy" in v.message and NS in v.message


def test_a_namespace_created_elsewhere_is_judged_with_every_namespace_only():
    stack = [k8s_stack_entry(server())]
    assert analyze_stack(stack).of("network-policy-present") == []
    config = {"network-policy-present": {"everyNamespace": True}}
    (v,) = analyze_stack(stack, config=config).of("network-policy-present")
    assert NS in v.message
    assert analyze_stack([*stack, k8s_stack_entry(deny(NS))], config=config).of("network-policy-present") == []


def test_a_stack_without_gpu_servers_is_not_applicable():
    web = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }
    result = analyze_stack([k8s_stack_entry(web)])
    assert "network-policy-present" in result.not_applicable


# cluster-endpoint-restricted ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "props",
    [
        {"tags": PROD, "vpcConfig": {"endpointPublicAccess": False, "endpointPrivateAccess": True}},
        {"tags": PROD, "vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}},
        {"tags": ALLOWED, "vpcConfig": {"endpointPublicAccess": True}},
        {"tags": DEV, "vpcConfig": {"endpointPublicAccess": True}},  # not production
        {"tags": PROD, "vpcConfig": {"endpointPublicAccess": UNKNOWN_STRING}},  # judged at `pulumi up`
    ],
)
def test_eks_good(props):
    assert analyze(EKS, props).of("cluster-endpoint-restricted") == []


@pytest.mark.parametrize(
    "props",
    [
        {"tags": PROD, "vpcConfig": {"endpointPublicAccess": True}},
        {"tags": PROD, "vpcConfig": {}},  # EKS's default: public
        {"tags": PROD, "vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}},
        {"tags": PROD, "vpcConfig": {"publicAccessCidrs": ["203.0.113.0/24", "0.0.0.0/0"]}},
    ],
)
def test_eks_bad(props):
    (v,) = analyze(EKS, props).of("cluster-endpoint-restricted")
    assert v.level == "mandatory" and "publicAccessCidrs" in v.message


def test_every_cluster_with_require_restricted():
    config = {"cluster-endpoint-restricted": {"requireRestricted": True}}
    assert analyze(EKS, {"tags": DEV, "vpcConfig": {}}, config=config).of("cluster-endpoint-restricted")
    assert analyze(EKS, {"vpcConfig": {}}).of("cluster-endpoint-restricted") == []


@pytest.mark.parametrize(
    "props",
    [
        {"resourceLabels": PROD, "privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": True}},
        {
            "resourceLabels": PROD,
            "masterAuthorizedNetworksConfig": {
                "cidrBlocks": [{"cidrBlock": "198.51.100.0/24"}],
                "gcpPublicCidrsAccessEnabled": False,
            },
        },
        {"resourceLabels": DEV},
        {"resourceLabels": ALLOWED},
        {"resourceLabels": PROD, "masterAuthorizedNetworksConfig": {}},  # on, with no outside address admitted
    ],
)
def test_gke_good(props):
    assert analyze(GKE, props).of("cluster-endpoint-restricted") == []


@pytest.mark.parametrize(
    "props",
    [
        {"resourceLabels": PROD},
        {"resourceLabels": PROD, "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "0.0.0.0/0"}]}},
        {
            "resourceLabels": PROD,
            "masterAuthorizedNetworksConfig": {
                "cidrBlocks": [{"cidrBlock": "198.51.100.0/24"}],
                "gcpPublicCidrsAccessEnabled": True,
            },
        },
        {"resourceLabels": PROD, "privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": False}},
    ],
)
def test_gke_bad(props):
    (v,) = analyze(GKE, props).of("cluster-endpoint-restricted")
    assert v.level == "mandatory" and "masterAuthorizedNetworksConfig" in v.message


# The committed stacks, and copies with one control removed ----------------------------------------


@pytest.fixture(scope="module")
def stacks():
    return {"dev": committed_stack("dev"), "prod": committed_stack("prod")}


def _objects(evaluation) -> list[dict]:
    cloud = [
        {"type": r.type, "name": r.name, "props": copy.deepcopy(r.inputs)}
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
    return copy.deepcopy(evaluation.kubernetes_objects) + cloud


def _mandatory(objects) -> set[str]:
    return {v.policy for v in check_objects(objects) if v.level == "mandatory"}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_stacks_pass_both_rules(stacks, stack):
    verdicts = policy_verdicts(stacks[stack])
    assert not [v for v in verdicts if v.policy in ("network-policy-present", "cluster-endpoint-restricted")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_stack_without_its_default_deny_is_caught(stacks, stack):
    objects = [
        o
        for o in _objects(stacks[stack])
        if not (o.get("kind") == "NetworkPolicy" and o["metadata"]["name"] == "default-deny")
    ]
    assert "network-policy-present" in _mandatory(objects)


def test_committed_stack_with_network_policies_turned_off_is_caught():
    evaluation = evaluate_stack("dev", overrides={"security": {"networkPolicies": False}})
    verdicts = [v for v in policy_verdicts(evaluation) if v.level == "mandatory"]
    assert {v.policy for v in verdicts} == {"network-policy-present"}


def test_prod_with_a_world_open_endpoint_is_caught(stacks):
    objects = _objects(stacks["prod"])
    (cluster,) = [o for o in objects if o.get("type") == EKS]
    assert cluster["props"]["vpcConfig"]["endpointPublicAccess"] is False
    assert "cluster-endpoint-restricted" not in _mandatory(objects)
    cluster["props"]["vpcConfig"]["endpointPublicAccess"] = True
    assert "cluster-endpoint-restricted" in _mandatory(objects)


def test_dev_as_production_with_an_open_endpoint_is_caught(stacks):
    objects = _objects(stacks["dev"])
    (cluster,) = [o for o in objects if o.get("type") == GKE]
    assert "cluster-endpoint-restricted" not in _mandatory(objects)  # development
    cluster["props"]["resourceLabels"][contract.CLUSTER_PROFILE_TAG] = contract.PRODUCTION_PROFILE
    assert "cluster-endpoint-restricted" in _mandatory(objects)
