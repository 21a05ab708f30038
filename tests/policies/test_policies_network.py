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


def namespace_object(name: str, enforcer: str | None = "calico") -> dict:
    """A Namespace, declaring (as the program does from security.networkPolicyEnforcement) what
    enforces its NetworkPolicies on a cluster the stack does not create."""
    metadata: dict = {"name": name}
    if enforcer:
        metadata["annotations"] = {contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION: enforcer}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


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
    # A namespace created elsewhere carries no declaration the pack can see: a cluster resource must show enforcement.
    (v,) = analyze_stack([*stack, k8s_stack_entry(deny(NS))], config=config).of("network-policy-present")
    assert "nothing in the stack shows that the cluster enforces NetworkPolicy" in v.message
    enforcing = (GKE, "dev", {"datapathProvider": "ADVANCED_DATAPATH"})
    assert (
        analyze_stack([*stack, k8s_stack_entry(deny(NS)), enforcing], config=config).of("network-policy-present") == []
    )


# network-policy-present: the cluster enforces the policies ------------------------------------------

VPC_CNI = "aws:eks/addon:Addon"


def _with_deny(*cloud, enforcer=None) -> list:
    return [
        k8s_stack_entry(namespace_object(NS, enforcer)),
        k8s_stack_entry(server()),
        k8s_stack_entry(deny(NS)),
        *cloud,
    ]


@pytest.mark.parametrize(
    "cloud",
    [
        [(GKE, "dev", {"datapathProvider": "ADVANCED_DATAPATH"})],
        [(GKE, "dev", {"networkPolicy": {"enabled": True, "provider": "CALICO"}})],
        [
            (EKS, "prod", {}),
            (VPC_CNI, "cni", {"addonName": "vpc-cni", "configurationValues": '{"enableNetworkPolicy": "true"}'}),
        ],
        [
            (EKS, "prod", {}),
            (
                VPC_CNI,
                "cni",
                {
                    "addonName": "vpc-cni",
                    "addonVersion": "v1.14.0-eksbuild.3",
                    "configurationValues": '{"enableNetworkPolicy": "true"}',
                },
            ),
        ],
        [(GKE, "dev", {"datapathProvider": UNKNOWN_STRING})],  # judged at `pulumi up`
    ],
)
def test_a_cluster_that_enforces_network_policy_passes(cloud):
    assert analyze_stack(_with_deny(*cloud)).of("network-policy-present") == []


@pytest.mark.parametrize(
    "cloud,says",
    [
        ([(GKE, "dev", {})], "datapathProvider unset (LEGACY_DATAPATH)"),
        ([(GKE, "dev", {"datapathProvider": "LEGACY_DATAPATH"})], "datapathProvider LEGACY_DATAPATH"),
        ([(EKS, "prod", {})], "network policy agent is off"),
        ([(EKS, "prod", {}), (VPC_CNI, "cni", {"addonName": "vpc-cni"})], "network policy agent is off"),
        (
            [
                (EKS, "prod", {}),
                (VPC_CNI, "cni", {"addonName": "vpc-cni", "configurationValues": '{"enableNetworkPolicy": "false"}'}),
            ],
            "network policy agent is off",
        ),
        (
            [
                (EKS, "prod", {}),
                (
                    VPC_CNI,
                    "cni",
                    {
                        "addonName": "vpc-cni",
                        "addonVersion": "v1.13.4-eksbuild.1",
                        "configurationValues": '{"enableNetworkPolicy": "true"}',
                    },
                ),
            ],
            "v1.14.0 or later",
        ),
    ],
)
def test_a_cluster_that_does_not_enforce_network_policy_fails(cloud, says):
    # The Namespace's declaration does not count where the stack has a cluster resource to judge.
    (v,) = analyze_stack(_with_deny(*cloud, enforcer="calico")).of("network-policy-present")
    assert v.level == "mandatory" and says in v.message and "has a default-deny NetworkPolicy, but" in v.message


@pytest.mark.parametrize("enforcer", [None, "something-else"])
def test_an_existing_cluster_without_a_declared_enforcer_fails(enforcer):
    (v,) = analyze_stack(_with_deny(enforcer=enforcer)).of("network-policy-present")
    assert (
        contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION in v.message and "security.networkPolicyEnforcement" in v.message
    )


def test_every_declared_enforcer_of_the_config_is_one_the_pack_accepts():
    from typing import get_args

    from stack_config.security import Enforcer

    assert set(get_args(Enforcer)) == set(contract.NETWORK_POLICY_ENFORCERS)
    for enforcer in contract.NETWORK_POLICY_ENFORCERS:
        assert analyze_stack(_with_deny(enforcer=enforcer)).of("network-policy-present") == []


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


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_committed_stack_whose_cluster_does_not_enforce_its_policies_is_caught(stacks, stack):
    objects = _objects(stacks[stack])
    assert "network-policy-present" not in _mandatory(objects)
    for o in objects:
        if o.get("type") == GKE:
            o["props"].pop("datapathProvider")
    objects = [
        o for o in objects if not (o.get("type") == "aws:eks/addon:Addon" and o["props"]["addonName"] == "vpc-cni")
    ]
    assert "network-policy-present" in _mandatory(objects)


def test_an_existing_cluster_passes_on_what_its_stack_file_declares():
    from tests.support.stack_variants import EXISTING, variant

    evaluation = variant(EXISTING)
    assert not [v for v in policy_verdicts(evaluation) if v.policy == "network-policy-present"]
    objects = _objects(evaluation)
    for o in objects:
        if o.get("kind") == "Namespace":
            o["metadata"].get("annotations", {}).pop(contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION, None)
    assert "network-policy-present" in _mandatory(objects)
