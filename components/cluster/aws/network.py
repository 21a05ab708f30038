"""Where EKS nodes live: a VPC of the stack's own, the default VPC, an existing VPC, or an existing
cluster's subnets, and which subnet each GPU pool may use.

A created VPC has, in each of its zones, a private subnet for the control plane's interfaces, every
node and the EFS mount targets, and a public subnet for internet-facing load balancers and the NAT
gateway(s). Private subnets reach the internet (ECR, Docker Hub, the Hugging Face Hub, the EKS and
STS endpoints) through NAT; S3 through a gateway endpoint, which costs nothing and keeps weights
and image layers (ECR serves layers from S3) off NAT's per-GB charge.

Nodes with EFA carry one interface per network card, and EC2 gives a public IPv4 address only to an
instance launched with a single interface (EC2 API `AssociatePublicIpAddress`; Karpenter v1.14
docs, concepts/nodeclasses.md "associatePublicIPAddress"), so an EFA pool must be in a private
subnet behind NAT, in a zone that offers its instance type (looked up, never guessed).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

import stack_config as cfg

# Availability Zones (by zone id, which is the same in every account) where EKS refuses cluster
# subnets. Source: Amazon EKS User Guide, "View Amazon EKS networking requirements for VPC and
# subnets" (subnet requirements).
EKS_UNSUPPORTED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

# Subnet tags the load balancers and Karpenter look for. AWS Load Balancer Controller subnet
# discovery: internet-facing load balancers in subnets tagged kubernetes.io/role/elb, internal ones
# in kubernetes.io/role/internal-elb, value "1" or empty
# (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery).
# karpenter.sh/discovery=<cluster> is Karpenter's convention (getting-started step02); this program
# selects subnets by id, and tags them so a NodePool of the cluster's owner can find them too.
ELB_ROLE_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_ROLE_TAG = "kubernetes.io/role/internal-elb"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
ANYWHERE = "0.0.0.0/0"
# What a deployer stack (Pulumi.<stack>-deployer.yaml, docs/deployer.md) tags, with the name of the
# cluster it serves, so that stack's `cluster.network.vpc: deployer` finds them at preview: the VPC
# and its subnets, and the security group of the CodeBuild runner that runs `pulumi up`.
DEPLOYER_TAG = "llm-serving/deployer"
DEPLOYER_RUNNER_TAG = "llm-serving/deployer-runner"


@dataclass(frozen=True)
class Subnet:
    """A subnet a node or an interface of the control plane may be placed in."""

    id: pulumi.Input[str]
    zone: str
    # Stable key for names derived from the subnet: its id when looked up, its zone when created.
    key: str
    private: bool


@dataclass
class EksNetwork:
    """The subnets the cluster layer places things in, and what nodes must wait for."""

    # "create", "default", "existing" (an existing VPC), or "cluster" (an existing cluster's own).
    mode: str
    vpc_id: pulumi.Input[str]
    # The control plane's interfaces (a created cluster).
    cluster_subnets: list[Subnet]
    # Where node groups and Karpenter's nodes go: private subnets when there are any.
    node_subnets: list[Subnet]
    public_subnets: list[Subnet] = field(default_factory=list)
    # Routes that give the private subnets their egress: nodes created before them never join.
    egress_ready: list[pulumi.Resource] = field(default_factory=list)
    nat_gateways: int = 0
    # vpc deployer: the security group of the runner that runs `pulumi up`; the cluster's security
    # group admits it on 443, since a private-only endpoint answers only what that group allows.
    runner_security_group_id: str | None = None

    @property
    def zones(self) -> list[str]:
        return sorted({s.zone for s in self.node_subnets})

    def node_subnets_in(self, zones: set[str] | list[str]) -> list[Subnet]:
        return [s for s in self.node_subnets if s.zone in set(zones)]

    def one_per_zone(self) -> list[Subnet]:
        """One node subnet per zone (EFS takes one mount target per zone)."""
        chosen: dict[str, Subnet] = {}
        for subnet in sorted(self.node_subnets, key=lambda s: (s.zone, s.key)):
            chosen.setdefault(subnet.zone, subnet)
        return list(chosen.values())


# ---------------------------------------------------------------------------------------------
# Look-ups


def offering_zones(instance_type: str, region: str, opts: pulumi.InvokeOptions | None = None) -> list[str]:
    """The Availability Zones of `region` that offer `instance_type` (EC2 DescribeInstanceTypeOfferings)."""
    found = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone",
        filters=[{"name": "instance-type", "values": [instance_type]}],
        region=region,
        opts=opts,
    )
    return sorted(set(found.locations or []))


def supported_zones(region: str, opts: pulumi.InvokeOptions | None = None) -> list[str]:
    """The region's available Availability Zones (no Local or Wavelength Zones) where EKS accepts
    cluster subnets, by name."""
    found = aws.get_availability_zones(
        state="available",
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
        region=region,
        opts=opts,
    )
    zone_ids = list(found.zone_ids or [None] * len(found.names))
    return sorted(
        name for name, zone_id in zip(found.names, zone_ids, strict=True) if zone_id not in EKS_UNSUPPORTED_ZONE_IDS
    )


def routes_to_internet_gateway(
    subnet_id: str, vpc_id: str | None, region: str, opts: pulumi.InvokeOptions | None = None
) -> bool:
    """Is `subnet_id` public: does its route table (its own, or the VPC's main one) send traffic
    to an internet gateway?"""
    own = aws.ec2.get_route_tables(
        filters=[{"name": "association.subnet-id", "values": [subnet_id]}], region=region, opts=opts
    )
    table_ids = list(own.ids or [])
    if not table_ids and vpc_id:
        main = aws.ec2.get_route_tables(
            vpc_id=vpc_id, filters=[{"name": "association.main", "values": ["true"]}], region=region, opts=opts
        )
        table_ids = list(main.ids or [])
    for table_id in table_ids:
        table = aws.ec2.get_route_table(route_table_id=table_id, region=region, opts=opts)
        for route in table.routes or []:
            if (route.gateway_id or "").startswith("igw-"):
                return True
    return False


def looked_up_subnets(
    subnet_ids: list[str],
    region: str,
    opts: pulumi.InvokeOptions | None = None,
) -> tuple[list[Subnet], set[str]]:
    """Each subnet's zone and whether it is private; also the VPC ids they belong to."""
    subnets, vpcs = [], set()
    for subnet_id in sorted(set(subnet_ids)):
        found = aws.ec2.get_subnet(id=subnet_id, region=region, opts=opts)
        if found.availability_zone_id in EKS_UNSUPPORTED_ZONE_IDS:
            continue
        if found.vpc_id:
            vpcs.add(found.vpc_id)
        public = routes_to_internet_gateway(subnet_id, found.vpc_id, region, opts)
        # A real subnet always has a zone; only an offline evaluation may leave it unknown, and then
        # the subnet stands for a zone of its own rather than hiding its neighbours.
        zone = found.availability_zone or subnet_id
        subnets.append(Subnet(id=subnet_id, zone=zone, key=subnet_id, private=not public))
    return subnets, vpcs


def default_vpc(region: str, opts: pulumi.InvokeOptions | None = None) -> EksNetwork:
    """The account's default VPC and its default subnets (one per zone, all public)."""
    vpc = aws.ec2.get_vpc(default=True, region=region, opts=opts)
    found = aws.ec2.get_subnets(
        filters=[{"name": "vpc-id", "values": [vpc.id]}, {"name": "default-for-az", "values": ["true"]}],
        region=region,
        opts=opts,
    )
    subnets = []
    for subnet_id in sorted(found.ids):
        subnet = aws.ec2.get_subnet(id=subnet_id, region=region, opts=opts)
        if subnet.availability_zone_id in EKS_UNSUPPORTED_ZONE_IDS:
            continue
        # Default subnets route to the internet gateway and map public IPs on launch, by definition.
        subnets.append(Subnet(id=subnet_id, zone=subnet.availability_zone or subnet_id, key=subnet_id, private=False))
    return EksNetwork(
        mode="default", vpc_id=vpc.id, cluster_subnets=subnets, node_subnets=subnets, public_subnets=subnets
    )


def existing_vpc(
    private_subnet_ids: list[str], region: str, where: str, opts: pulumi.InvokeOptions | None = None
) -> EksNetwork:
    """The subnets of `cluster.network.privateSubnetIds`, checked to be private and in one VPC."""
    subnets, vpcs = looked_up_subnets(private_subnet_ids, region, opts)
    problems = []
    public = [s.key for s in subnets if not s.private]
    if public:
        problems.append(
            f"{where}.privateSubnetIds: {', '.join(public)} route(s) to an internet gateway; "
            "list subnets whose default route goes through NAT"
        )
    if len(vpcs) > 1:
        problems.append(
            f"{where}.privateSubnetIds: the subnets are in different VPCs ({', '.join(sorted(vpcs))}); "
            "list subnets of one VPC"
        )
    if len({s.zone for s in subnets}) < 2:
        problems.append(
            f"{where}.privateSubnetIds: EKS needs subnets in at least two Availability Zones it "
            "supports; list subnets of another zone"
        )
    if problems:
        raise cfg.ConfigError(problems)
    vpc_id = next(iter(vpcs)) if vpcs else ""
    return EksNetwork(mode="existing", vpc_id=vpc_id, cluster_subnets=subnets, node_subnets=subnets)


def deployer_vpc(
    cluster_name: str, region: str, where: str, deployer_stack: str, opts: pulumi.InvokeOptions | None = None
) -> EksNetwork:
    """The VPC, subnets and runner security group the deployer stack `deployer_stack` created for
    `cluster_name`, found by their tags (plain look-ups, as for an existing VPC: a missing deployer
    stack is a config error at preview, not a failure halfway through `up`)."""
    run_first = f"run `pulumi up -s {deployer_stack}` first (docs/deployer.md)"
    tag = f"{DEPLOYER_TAG}={cluster_name}"
    vpcs = sorted(aws.ec2.get_vpcs(tags={DEPLOYER_TAG: cluster_name}, region=region, opts=opts).ids or [])
    if not vpcs:
        raise cfg.ConfigError([f"{where}.vpc: deployer: no VPC tagged {tag} in {region}; {run_first}"])
    if len(vpcs) > 1:
        raise cfg.ConfigError(
            [f"{where}.vpc: deployer: {len(vpcs)} VPCs tagged {tag} in {region} ({', '.join(vpcs)}); keep one"]
        )
    vpc_id = vpcs[0]

    def tagged_subnets(role_tag: str) -> list[str]:
        found = aws.ec2.get_subnets(
            filters=[{"name": "vpc-id", "values": [vpc_id]}, {"name": f"tag:{role_tag}", "values": ["1"]}],
            tags={DEPLOYER_TAG: cluster_name},
            region=region,
            opts=opts,
        )
        return sorted(found.ids or [])

    private, _ = looked_up_subnets(tagged_subnets(INTERNAL_ELB_ROLE_TAG), region, opts)
    public, _ = looked_up_subnets(tagged_subnets(ELB_ROLE_TAG), region, opts)
    runner = sorted(
        aws.ec2.get_security_groups(
            filters=[{"name": "vpc-id", "values": [vpc_id]}],
            tags={DEPLOYER_RUNNER_TAG: cluster_name},
            region=region,
            opts=opts,
        ).ids
        or []
    )
    problems = []
    if len({s.zone for s in private if s.private}) < 2:
        problems.append(
            f"{where}.vpc: deployer: VPC {vpc_id} has private subnets (tagged {INTERNAL_ELB_ROLE_TAG}, behind NAT) "
            f"in fewer than two Availability Zones EKS supports; {run_first}"
        )
    if len(runner) != 1:
        problems.append(
            f"{where}.vpc: deployer: VPC {vpc_id} has {len(runner)} security groups tagged "
            f"{DEPLOYER_RUNNER_TAG}={cluster_name} (the CodeBuild runner's); expected one; {run_first}"
        )
    if problems:
        raise cfg.ConfigError(problems)
    nodes = [s for s in private if s.private]
    return EksNetwork(
        mode="deployer",
        vpc_id=vpc_id,
        cluster_subnets=nodes,
        node_subnets=nodes,
        public_subnets=public,
        runner_security_group_id=runner[0],
    )


def cluster_subnets(
    subnet_ids: list[str], vpc_id: str, region: str, opts: pulumi.InvokeOptions | None = None
) -> EksNetwork:
    """An existing cluster's subnets: nodes go in its private ones, or in all of them if it has none."""
    subnets, _ = looked_up_subnets(subnet_ids, region, opts)
    private = [s for s in subnets if s.private]
    return EksNetwork(
        mode="cluster",
        vpc_id=vpc_id,
        cluster_subnets=subnets,
        node_subnets=private or subnets,
        public_subnets=[s for s in subnets if not s.private],
    )


# ---------------------------------------------------------------------------------------------
# A VPC of the stack's own


def subnet_ranges(cidr: str, zones: int) -> tuple[list[str], list[str]]:
    """(private, public) CIDRs: each zone's private subnet is 1/8 of the VPC (pods take their IPs
    from it, so it is the big one); the public subnets, which hold only load balancers and NAT
    gateways, share the last 1/8."""
    eighths = list(ipaddress.IPv4Network(cidr).subnets(prefixlen_diff=3))
    public = list(eighths[-1].subnets(prefixlen_diff=3))
    return [str(n) for n in eighths[:zones]], [str(n) for n in public[:zones]]


@dataclass(frozen=True)
class VpcArgs:
    cluster_name: str
    region: str
    cidr: str
    zones: list[str]
    nat_gateways: str  # "single" | "per-zone"
    tags: dict[str, str] = field(default_factory=dict)


class EksVpc(pulumi.ComponentResource):
    """A VPC with a private and a public subnet per zone, an internet gateway, NAT, and an S3
    gateway endpoint."""

    network: EksNetwork

    def __init__(self, name: str, args: VpcArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:Vpc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        region, cluster = args.region, args.cluster_name
        base_tags = {**args.tags, "llm-serving/cluster": cluster}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr,
            # EKS needs both for nodes to resolve the private API endpoint and each other.
            enable_dns_hostnames=True,
            enable_dns_support=True,
            region=region,
            tags={**base_tags, "Name": cluster},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, region=region, tags={**base_tags, "Name": cluster}, opts=child
        )
        public_table = aws.ec2.RouteTable(
            f"{name}-public", vpc_id=vpc.id, region=region, tags={**base_tags, "Name": f"{cluster}-public"}, opts=child
        )
        public_route = aws.ec2.Route(
            f"{name}-public-internet",
            route_table_id=public_table.id,
            destination_cidr_block=ANYWHERE,
            gateway_id=gateway.id,
            region=region,
            opts=child,
        )

        private_cidrs, public_cidrs = subnet_ranges(args.cidr, len(args.zones))
        public_subnets: list[Subnet] = []
        private_subnets: list[Subnet] = []
        nat_ids: dict[str, pulumi.Output[str]] = {}
        egress: list[pulumi.Resource] = []
        private_tables = []
        for index, zone in enumerate(args.zones):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                cidr_block=public_cidrs[index],
                availability_zone=zone,
                # Only load balancers and NAT gateways live here; nothing launched here needs an
                # address of its own.
                map_public_ip_on_launch=False,
                region=region,
                tags={**base_tags, "Name": f"{cluster}-public-{zone}", ELB_ROLE_TAG: "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_table.id, region=region, opts=child
            )
            public_subnets.append(Subnet(id=public.id, zone=zone, key=zone, private=False))
            if args.nat_gateways == "per-zone" or index == 0:
                # A NAT gateway's address must exist before it; the IGW before the address is used.
                address = aws.ec2.Eip(
                    f"{name}-nat-{zone}",
                    domain="vpc",
                    region=region,
                    tags={**base_tags, "Name": f"{cluster}-nat-{zone}"},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
                )
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{zone}",
                    allocation_id=address.id,
                    subnet_id=public.id,
                    region=region,
                    tags={**base_tags, "Name": f"{cluster}-nat-{zone}"},
                    # Its traffic leaves through the public subnet's route to the internet gateway.
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[public_route]),
                )
                nat_ids[zone] = nat.id
            nat_id = nat_ids.get(zone) or nat_ids[args.zones[0]]

            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=private_cidrs[index],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                region=region,
                tags={
                    **base_tags,
                    "Name": f"{cluster}-private-{zone}",
                    INTERNAL_ELB_ROLE_TAG: "1",
                    KARPENTER_DISCOVERY_TAG: cluster,
                },
                opts=child,
            )
            table = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                region=region,
                tags={**base_tags, "Name": f"{cluster}-private-{zone}"},
                opts=child,
            )
            route = aws.ec2.Route(
                f"{name}-private-{zone}-nat",
                route_table_id=table.id,
                destination_cidr_block=ANYWHERE,
                nat_gateway_id=nat_id,
                region=region,
                opts=child,
            )
            association = aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=table.id, region=region, opts=child
            )
            egress += [route, association]
            private_tables.append(table)
            private_subnets.append(Subnet(id=private.id, zone=zone, key=zone, private=True))

        # Free, and S3 traffic (bucket weights, ECR image layers) then bypasses NAT's per-GB charge.
        s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[t.id for t in private_tables],
            region=region,
            tags={**base_tags, "Name": f"{cluster}-s3"},
            opts=child,
        )
        egress.append(s3_endpoint)

        self.network = EksNetwork(
            mode="create",
            vpc_id=vpc.id,
            cluster_subnets=private_subnets,
            node_subnets=private_subnets,
            public_subnets=public_subnets,
            egress_ready=egress,
            nat_gateways=len(nat_ids),
        )
        self.register_outputs({"vpcId": vpc.id})


def choose_zones(candidates: list[str], needed: list[tuple[str, list[str]]], count: int, where: str) -> list[str]:
    """`count` zones of `candidates` (sorted), starting with one zone for each need.

    `needed` holds (key, zones that would do) per pool: a pool's instance type is offered only in
    some zones, a Capacity Block is in one. Each need takes the first zone that does, preferring
    one already taken; then the remaining zones fill up to `count`, in name order.
    """
    chosen: list[str] = []
    problems = []
    for key, acceptable in needed:
        usable = [z for z in candidates if z in set(acceptable)]
        if not usable:
            problems.append(
                f"{key}: the pool's nodes can only go in {', '.join(acceptable) or 'no zone'} (zones offering "
                f"its instance type, or its Capacity Block's), none of which takes EKS subnets in this "
                f"region ({', '.join(candidates)}); choose another instance type, block or region"
            )
            continue
        if not any(z in chosen for z in usable):
            chosen.append(usable[0])
    if problems:
        raise cfg.ConfigError(problems)
    for zone in candidates:
        if len(chosen) >= count:
            break
        if zone not in chosen:
            chosen.append(zone)
    if len(chosen) < 2:
        raise cfg.ConfigError(
            [f"{where}.zoneCount: the region has {len(chosen)} zone(s) where EKS accepts subnets; EKS needs two"]
        )
    return sorted(chosen)
