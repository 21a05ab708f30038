"""cluster.network and the EKS-only pool rules: each bad setting gets one line naming the key and why."""

from __future__ import annotations

import pytest

from stack_config import parse_stack_config
from tests.support.config_edits import SOURCE, base, edit, problems_of

SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]


def with_network(cloud, network, **cluster):
    return edit(base(cloud), "cluster", {**cluster, "network": network})


def test_defaults_create_a_vpc_with_one_nat_gateway_over_three_zones():
    network = parse_stack_config(base("aws"), SOURCE).cluster.network
    assert (network.vpc, network.cidr, network.zoneCount, network.natGateways, network.privateNodes) == (
        "create",
        "10.0.0.0/16",
        3,
        "single",
        False,
    )


@pytest.mark.parametrize(
    "cloud,network,cluster,expected",
    [
        (
            "aws",
            {"vpc": "default", "natGateways": "per-zone"},
            {},
            "cluster.network.natGateways: applies only with vpc: create (vpc is default)",
        ),
        (
            "aws",
            {"vpc": "existing"},
            {},
            (
                "cluster.network.privateSubnetIds: vpc is existing: list the private subnets (at least two zones) "
                "the cluster and its nodes use"
            ),
        ),
        ("aws", {"privateSubnetIds": SUBNETS}, {}, "cluster.network.privateSubnetIds: applies only with vpc: existing"),
        ("aws", {"privateNodes": True}, {}, "cluster.network.privateNodes: applies to GKE only"),
        (
            "aws",
            {"vpc": "default"},
            {"create": False},
            (
                "cluster.network: cluster.create is false: node pools join the "
                "cluster's own network; remove cluster.network"
            ),
        ),
        ("gcp", {"zoneCount": 2}, {}, "cluster.network.zoneCount: applies to EKS only"),
        ("gcp", {"vpc": "existing"}, {}, "cluster.network.vpc: existing is supported on EKS only"),
        (
            "gcp",
            {"vpc": "default", "privateNodes": True},
            {},
            "cluster.network.privateNodes: private nodes need the Cloud NAT of a network this stack creates",
        ),
    ],
)
def test_network_keys_that_do_not_apply_name_the_key(cloud, network, cluster, expected):
    found = problems_of(with_network(cloud, network, **cluster))
    assert any(p.startswith(f"{SOURCE}: {expected}") for p in found), found


def test_network_on_an_existing_cluster_is_refused():
    raw = base("existing")
    raw["cluster"]["network"] = {"vpc": "default"}
    (problem,) = problems_of(raw)
    assert problem == f"{SOURCE}: cluster.network: cloud is existing: nothing is created; remove cluster.network"


@pytest.mark.parametrize(
    "value,message",
    [
        ("10.0.0.0/8", "use a /16 to /20"),
        ("10.0.0.1/16", "not an IPv4 network"),
        ("vpc", "not an IPv4 network"),
    ],
)
def test_cidr_must_be_a_network_of_16_to_20(value, message):
    (problem,) = problems_of(with_network("aws", {"cidr": value}))
    assert problem.startswith(f"{SOURCE}: cluster.network.cidr: ") and message in problem


def test_subnet_ids_are_checked_for_form_and_repeats():
    (problem,) = problems_of(with_network("aws", {"vpc": "existing", "privateSubnetIds": ["subnet-1", SUBNETS[0]]}))
    assert "'subnet-1' is not a subnet id" in problem
    (problem,) = problems_of(with_network("aws", {"vpc": "existing", "privateSubnetIds": [SUBNETS[0], SUBNETS[0]]}))
    assert "listed twice" in problem


def test_efa_on_the_default_vpc_is_refused_with_the_reason():
    raw = edit(with_network("aws", {"vpc": "default"}), "pools[0].efa", True)
    (problem,) = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: pools[0].efa: cluster.network.vpc is default, whose subnets are public")
    assert "public IPv4 address only to instances with a single interface" in problem


def test_efa_is_fine_in_a_created_or_existing_vpc():
    for network in ({}, {"vpc": "existing", "privateSubnetIds": SUBNETS}):
        parse_stack_config(edit(with_network("aws", network), "pools[0].efa", True), SOURCE)


def test_desired_nodes_on_a_created_eks_cluster_is_refused_and_allowed_elsewhere():
    raw = edit(edit(base("aws"), "pools[0].maxNodes", 3), "pools[0].desiredNodes", 2)
    (problem,) = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: pools[0].desiredNodes: on a created EKS cluster minNodes nodes are always on")
    existing = edit(edit(raw, "cluster", {"create": False}), "security", {"networkPolicyEnforcement": "eks-vpc-cni"})
    parse_stack_config(existing, SOURCE)
    parse_stack_config(edit(edit(base("gcp"), "pools[0].maxNodes", 3), "pools[0].desiredNodes", 2), SOURCE)


def test_a_kubernetes_version_without_a_pinned_ami_release_is_refused_on_eks_only():
    raw = edit(base("aws"), "cluster", {"kubernetesVersion": "1.29"})
    (problem,) = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: cluster.kubernetesVersion: 1.29 has no EKS AMI release pinned")
    assert "1.30" in problem and "1.36" in problem
    parse_stack_config(edit(base("gcp"), "cluster", {"kubernetesVersion": "1.29"}), SOURCE)
