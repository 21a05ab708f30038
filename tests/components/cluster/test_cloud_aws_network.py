"""The EKS network under mocks: a VPC of the stack's own (private node subnets behind NAT, public
subnets for load balancers), an existing VPC, and the zone each pool may use."""

from __future__ import annotations

import ipaddress

import pytest

import stack_config as cfg
from components.cluster.aws import network
from components.cluster.select import create_cluster
from offline_plan.mock_runtime import MOCK_PRIVATE_SUBNETS, RecordingMocks, mock_id
from tests.support.aws_cluster import POOLS, PRIVATE, custom, node_group, stack
from tests.support.cloud_mocks import one, run_cloud
from tests.support.first_apply import ApplyGraph


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


def subnets(evaluation, kind):
    return sorted(
        (s for s in evaluation.of_type("aws:ec2/subnet:Subnet") if f"-{kind}-" in s.name),
        key=lambda s: s.inputs["availabilityZone"],
    )


def test_each_zone_has_a_private_node_subnet_and_a_public_load_balancer_subnet(created):
    private, public = subnets(created, "private"), subnets(created, "public")
    assert (
        [s.inputs["availabilityZone"] for s in private]
        == [s.inputs["availabilityZone"] for s in public]
        == ["us-east-1a", "us-east-1b", "us-east-1c"]
    )
    vpc = one(created, "aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True and vpc.inputs["enableDnsSupport"] is True
    ranges = [ipaddress.IPv4Network(s.inputs["cidrBlock"]) for s in private + public]
    assert all(r.subnet_of(ipaddress.IPv4Network("10.0.0.0/16")) for r in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert {r.prefixlen for r in ranges[:3]} == {19} and {r.prefixlen for r in ranges[3:]} == {22}
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in private + public)


def test_subnets_carry_the_tags_load_balancers_and_karpenter_look_for(created):
    for subnet in subnets(created, "public"):
        assert subnet.inputs["tags"][network.ELB_ROLE_TAG] == "1"
        assert network.INTERNAL_ELB_ROLE_TAG not in subnet.inputs["tags"]
    for subnet in subnets(created, "private"):
        assert subnet.inputs["tags"][network.INTERNAL_ELB_ROLE_TAG] == "1"
        assert subnet.inputs["tags"][network.KARPENTER_DISCOVERY_TAG] == "llm-serving"


def routes(evaluation):
    return {r.name: r.inputs for r in evaluation.of_type("aws:ec2/route:Route")}


def test_private_subnets_route_out_through_one_nat_gateway_by_default(created):
    (nat,) = created.of_type("aws:ec2/natGateway:NatGateway")
    assert nat.inputs["subnetId"] == mock_id("aws:ec2/subnet:Subnet", "llm-serving-network-public-us-east-1a")
    (address,) = created.of_type("aws:ec2/eip:Eip")
    assert address.inputs["domain"] == "vpc" and nat.inputs["allocationId"] == mock_id(address.type, address.name)
    nat_id = mock_id(nat.type, nat.name)
    by_name = routes(created)
    for zone in "abc":
        route = by_name[f"llm-serving-network-private-us-east-1{zone}-nat"]
        assert route["destinationCidrBlock"] == "0.0.0.0/0" and route["natGatewayId"] == nat_id
    gateway = one(created, "aws:ec2/internetGateway:InternetGateway")
    assert by_name["llm-serving-network-public-internet"]["gatewayId"] == mock_id(gateway.type, gateway.name)
    # The address and the gateway need the internet gateway first (pulumi_aws eip.py, nat_gateway.py).
    graph = ApplyGraph(created)
    assert graph.waits_for(address, gateway) and graph.waits_for(nat, gateway)


def test_per_zone_nat_gives_each_zone_its_own_gateway():
    evaluation = run_cloud(
        lambda: create_cluster(stack(POOLS, cluster={"network": {"natGateways": "per-zone"}}), "test")
    )
    nats = {n.inputs["subnetId"]: mock_id(n.type, n.name) for n in evaluation.of_type("aws:ec2/natGateway:NatGateway")}
    assert len(nats) == 3
    by_name = routes(evaluation)
    for zone in "abc":
        public = mock_id("aws:ec2/subnet:Subnet", f"llm-serving-network-public-us-east-1{zone}")
        assert by_name[f"llm-serving-network-private-us-east-1{zone}-nat"]["natGatewayId"] == nats[public]


def test_s3_traffic_bypasses_nat_through_a_gateway_endpoint_on_every_private_route_table(created):
    endpoint = one(created, "aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["serviceName"] == "com.amazonaws.us-east-1.s3" and endpoint["vpcEndpointType"] == "Gateway"
    tables = [mock_id(t.type, t.name) for t in created.of_type("aws:ec2/routeTable:RouteTable") if "private" in t.name]
    assert sorted(endpoint["routeTableIds"]) == sorted(tables) and len(tables) == 3


def test_every_node_and_the_control_plane_are_in_private_subnets(created):
    private_ids = {mock_id(s.type, s.name) for s in subnets(created, "private")}
    for group in created.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert set(group.inputs["subnetIds"]) <= private_ids, group.name
    for pool in ("l4", "h100"):
        assert {t["id"] for t in custom(created, "EC2NodeClass", pool)["spec"]["subnetSelectorTerms"]} <= private_ids
    assert set(one(created, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"]) == private_ids


def test_the_vpc_takes_a_zone_offering_each_pools_instance_type_first():
    # zoneCount 2 and p5 offered only in b and d: b, then a.
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS, cluster={"network": {"zoneCount": 2}}), "test"))
    assert [s.inputs["availabilityZone"] for s in subnets(evaluation, "private")] == ["us-east-1a", "us-east-1b"]
    assert node_group(evaluation, "h100").inputs["subnetIds"] == [PRIVATE["b"]]


@pytest.mark.parametrize(
    "cidr,zones,private,public",
    [
        (
            "10.0.0.0/16",
            3,
            ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19"],
            ["10.0.224.0/22", "10.0.228.0/22", "10.0.232.0/22"],
        ),
        ("10.20.0.0/20", 2, ["10.20.0.0/23", "10.20.2.0/23"], ["10.20.14.0/26", "10.20.14.64/26"]),
    ],
)
def test_subnet_ranges_split_the_vpc_into_eighths(cidr, zones, private, public):
    assert network.subnet_ranges(cidr, zones) == (private, public)


def test_choose_zones_fails_naming_the_pool_when_no_supported_zone_offers_its_type():
    with pytest.raises(cfg.ConfigError) as err:
        network.choose_zones(
            ["us-east-1a", "us-east-1b"],
            [("Pulumi.x.yaml: pools[0].machineType", ["us-east-1e"])],
            3,
            "Pulumi.x.yaml: cluster.network",
        )
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.x.yaml: pools[0].machineType: ") and "us-east-1e" in problem


# --- an existing VPC -----------------------------------------------------------------------------


def existing_vpc(subnet_ids):
    return stack(POOLS, cluster={"network": {"vpc": "existing", "privateSubnetIds": subnet_ids}})


def test_an_existing_vpcs_private_subnets_hold_the_control_plane_and_every_node():
    evaluation = run_cloud(lambda: create_cluster(existing_vpc(MOCK_PRIVATE_SUBNETS), "test"))
    assert not evaluation.of_type("aws:ec2/vpc:Vpc") and not evaluation.of_type("aws:ec2/natGateway:NatGateway")
    assert one(evaluation, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"] == MOCK_PRIVATE_SUBNETS
    # The EFA pool: the private subnet of zone b (p5 is offered in b and d).
    assert node_group(evaluation, "h100").inputs["subnetIds"] == [MOCK_PRIVATE_SUBNETS[1]]
    assert one(evaluation, "aws:ec2/securityGroup:SecurityGroup", "efs-nfs").inputs["vpcId"] == "vpc-mock-existing"


def test_a_public_subnet_listed_as_private_is_refused_naming_the_key(monkeypatch):
    # The first subnet has no route table of its own: the VPC's main one routes to the internet gateway.
    original = RecordingMocks.call

    def call(self, args):
        result = original(self, args)
        filters = {f["name"]: f["values"] for f in args.args.get("filters", [])}
        if args.token == "aws:ec2/getRouteTables:getRouteTables" and filters.get("association.subnet-id") == [
            MOCK_PRIVATE_SUBNETS[0]
        ]:
            result["ids"] = []
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(existing_vpc(MOCK_PRIVATE_SUBNETS), "test"))
    assert any(
        p.startswith(f"Pulumi.test.yaml: cluster.network.privateSubnetIds: {MOCK_PRIVATE_SUBNETS[0]} ")
        and "internet gateway" in p
        for p in err.value.problems
    ), err.value.problems


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("availabilityZone", "us-east-1a", "at least two Availability Zones"),
        ("vpcId", "vpc-mock-other", "different VPCs"),
    ],
)
def test_subnets_of_one_zone_or_of_two_vpcs_are_refused(monkeypatch, field, value, message):
    original = RecordingMocks.call

    def call(self, args):
        result = original(self, args)
        if args.token == "aws:ec2/getSubnet:getSubnet" and args.args["id"] == MOCK_PRIVATE_SUBNETS[1]:
            result[field] = value
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(existing_vpc(MOCK_PRIVATE_SUBNETS[:2]), "test"))
    assert any(
        p.startswith("Pulumi.test.yaml: cluster.network.privateSubnetIds: ") and message in p
        for p in err.value.problems
    ), err.value.problems


def test_an_efa_pool_on_an_existing_cluster_without_a_private_subnet_in_its_zones_is_refused(monkeypatch):
    original = RecordingMocks.call

    def call(self, args):
        result = original(self, args)
        if args.token == "aws:eks/getCluster:getCluster":
            # Only the public default subnets (and a private one in zone a, where p5 is not offered).
            result["vpcConfig"] = {
                **result["vpcConfig"],
                "subnetIds": ["subnet-mock-a", "subnet-mock-b", MOCK_PRIVATE_SUBNETS[0]],
            }
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack(POOLS[1:], cluster={"create": False, "name": "shared"}), "test"))
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: pools[0].efa: p5.48xlarge is offered in us-east-1b, us-east-1d")
    assert "subnet-mock-b (us-east-1b, public)" in problem and "single interface" in problem
