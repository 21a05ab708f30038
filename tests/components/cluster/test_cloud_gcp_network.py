"""GKE's network and APIs under mocks: a VPC-native cluster on a network of its own, private nodes
behind Cloud NAT, every API enabled before what needs it, Workload Identity bindings after the pool."""

from __future__ import annotations

import pytest

from components.cluster.gcp import apis
from components.cluster.gcp import network as gke_network
from components.cluster.select import create_cluster
from tests.support.cloud_mocks import one, run_cloud
from tests.support.first_apply import ApplyGraph
from tests.support.gcp_cluster import POOLS, stack


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1]), "test"))


@pytest.fixture(scope="module")
def private():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"network": {"privateNodes": True}}), "test"))


@pytest.fixture(scope="module")
def existing():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test"))


def test_the_cluster_is_vpc_native_on_a_subnet_of_its_own(created):
    network = one(created, "gcp:compute/network:Network").inputs
    assert network["autoCreateSubnetworks"] is False
    subnet = one(created, "gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["ipCidrRange"] == gke_network.NODE_RANGE and subnet["region"] == "us-central1"
    assert subnet["secondaryIpRanges"] == [
        {"rangeName": "pods", "ipCidrRange": gke_network.PODS_RANGE},
        {"rangeName": "services", "ipCidrRange": gke_network.SERVICES_RANGE},
    ]
    assert subnet["privateIpGoogleAccess"] is True
    cluster = one(created, "gcp:container/cluster:Cluster").inputs
    assert cluster["networkingMode"] == "VPC_NATIVE"
    assert cluster["network"] == "llm-serving-network-network-id"
    assert cluster["subnetwork"] == "llm-serving-network-subnet-id"
    assert cluster["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }
    # Public nodes by default: no router, no NAT.
    assert not created.of_type("gcp:compute/routerNat:RouterNat")


def test_private_nodes_get_cloud_nat_on_their_subnet_and_wait_for_it(private):
    nat = one(private, "gcp:compute/routerNat:RouterNat")
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat.inputs["subnetworks"] == [
        {"name": "llm-serving-network-subnet-id", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}
    ]
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    graph = ApplyGraph(private)
    pools = private.of_type("gcp:container/nodePool:NodePool")
    assert len(pools) == 2
    for pool in pools:
        assert pool.inputs["networkConfig"] == {"enablePrivateNodes": True}
        assert graph.waits_for(pool, nat), pool.name


def test_the_default_network_is_still_vpc_native():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"network": {"vpc": "default"}}), "test"))
    assert not evaluation.of_type("gcp:compute/network:Network")
    cluster = one(evaluation, "gcp:container/cluster:Cluster").inputs
    assert cluster["networkingMode"] == "VPC_NATIVE" and "network" not in cluster
    assert cluster["ipAllocationPolicy"] == {"stackType": "IPV4"}


def services(evaluation):
    return {s.inputs["service"]: s for s in evaluation.of_type("gcp:projects/service:Service")}


def test_every_api_is_enabled_and_left_enabled_on_destroy(created):
    found = services(created)
    assert sorted(found) == sorted(apis.needed_apis(filestore=True, image_streaming=True))
    assert all(s.inputs["disableOnDestroy"] is False and s.inputs["project"] == "mock-project" for s in found.values())


@pytest.mark.parametrize(
    "resource_type,name_part,needed",
    [
        ("gcp:container/cluster:Cluster", "", ("container", "compute", "file")),
        ("gcp:container/nodePool:NodePool", "-l4-", ("container", "compute", "containerfilesystem")),
        ("gcp:compute/subnetwork:Subnetwork", "", ("compute",)),
        ("gcp:serviceaccount/account:Account", "-nodes", ("iam",)),
        ("gcp:storage/bucket:Bucket", "", ("storage",)),
    ],
)
def test_each_resource_waits_for_the_apis_it_needs(created, resource_type, name_part, needed):
    graph = ApplyGraph(created)
    resource = one(created, resource_type, name_part)
    found = services(created)
    for api in needed:
        assert graph.waits_for(resource, found[f"{api}.googleapis.com"]), (resource.name, api)


def test_workload_identity_bindings_wait_for_the_wi_enabled_cluster(created):
    graph = ApplyGraph(created)
    cluster = one(created, "gcp:container/cluster:Cluster")
    bindings = created.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    assert len(bindings) == 2
    for binding in bindings:
        assert ".svc.id.goog[" in binding.inputs["member"]
        assert graph.waits_for(binding, cluster), binding.name


def test_an_existing_cluster_enables_only_the_filestore_api_its_claims_need_and_its_bindings_no_cluster(existing):
    # No Filestore add-on is switched on here (the cluster is its owner's), but the model volume's
    # standard-rwx claim makes the Filestore CSI driver call file.googleapis.com (components/cluster/gcp/apis.py
    # CONTROLLER_APIS), so the API is enabled all the same.
    assert "file.googleapis.com" in services(existing)
    assert not existing.of_type("gcp:container/cluster:Cluster")
    assert not existing.of_type("gcp:compute/network:Network")
    assert existing.result.platform["vpc"] == "the existing cluster's"
