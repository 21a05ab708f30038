"""The GKE cluster's network: a VPC network and subnet of the stack's own (VPC-native: pods and
Services on the subnet's secondary ranges), and, for private nodes, a Cloud Router with Cloud NAT.

Private nodes have internal addresses only; Google APIs (Artifact Registry, GCS) stay reachable
through Private Google Access on the subnet, and everything else (Docker Hub's vLLM image, the
Hugging Face Hub) through Cloud NAT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

# The subnet's ranges. Nodes: a /20 (4094 addresses). Pods: a /14, which GKE cuts into a /24 per
# node (110 pods each) by default, so up to 1024 nodes. Services: a /20.
NODE_RANGE = "10.0.0.0/20"
PODS_RANGE_NAME = "pods"
PODS_RANGE = "10.4.0.0/14"
SERVICES_RANGE_NAME = "services"
SERVICES_RANGE = "10.8.0.0/20"
# The proxy-only subnet GKE's regional external Application Load Balancer (the entrance's
# GatewayClass gke-l7-regional-external-managed) runs its Envoy proxies in: purpose
# REGIONAL_MANAGED_PROXY, role ACTIVE, one per region and network. Google recommends a /23
# ("Proxy-only subnets for Envoy-based load balancers",
# https://cloud.google.com/load-balancing/docs/proxy-only-subnets: at least /26, /23 recommended).
# Outside the node, pod and service ranges above.
PROXY_ONLY_RANGE = "10.9.0.0/23"
# The control plane's range of a private cluster (privateClusterConfig.masterIpv4CidrBlock: "must be
# a /28 subnet", not overlapping any range of the network; pulumi_gcp container
# ClusterPrivateClusterConfigArgs). Outside every range above.
MASTER_RANGE = "172.16.0.0/28"
# Where Google's health checks of a load balancer's backends come from ("Health checks overview",
# https://cloud.google.com/load-balancing/docs/health-check-concepts, "Probe IP ranges and firewall
# rules": 35.191.0.0/16 and 130.211.0.0/22 for the Application Load Balancers). The entrance's
# server pods must admit them on the serving port.
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")


@dataclass
class GkeNetwork:
    # None: the project's `default` network (GKE picks the secondary ranges itself).
    network: pulumi.Input[str] | None
    subnetwork: pulumi.Input[str] | None
    ip_allocation_policy: dict
    private_nodes: bool = False
    # The network's name, for the Filestore StorageClass (components/cluster/gcp/filestore.py);
    # None on the default network.
    network_name: pulumi.Input[str] | None = None
    # The NAT that private nodes reach the internet through; node pools wait for it.
    egress_ready: list[pulumi.Resource] = field(default_factory=list)


@dataclass(frozen=True)
class GkeNetworkArgs:
    name: str
    project: pulumi.Input[str]
    region: str
    private_nodes: bool
    # The entrance's regional Gateway needs a proxy-only subnet in the region.
    proxy_only_subnet: bool = False
    # Compute API enabled first.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class GkeVpc(pulumi.ComponentResource):
    network: GkeNetwork

    def __init__(self, name: str, args: GkeNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        vpc = gcp.compute.Network(
            f"{name}-network",
            name=args.name,
            project=args.project,
            # One subnet in the cluster's region, sized here, instead of one per region.
            auto_create_subnetworks=False,
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=args.name,
            project=args.project,
            region=args.region,
            network=vpc.id,
            ip_cidr_range=NODE_RANGE,
            secondary_ip_ranges=[
                {"range_name": PODS_RANGE_NAME, "ip_cidr_range": PODS_RANGE},
                {"range_name": SERVICES_RANGE_NAME, "ip_cidr_range": SERVICES_RANGE},
            ],
            # Google APIs (GCS weights, Artifact Registry) without a public address or NAT.
            private_ip_google_access=True,
            opts=child,
        )
        if args.proxy_only_subnet:
            gcp.compute.Subnetwork(
                f"{name}-proxy-only",
                name=f"{args.name}-proxy-only",
                project=args.project,
                region=args.region,
                network=vpc.id,
                ip_cidr_range=PROXY_ONLY_RANGE,
                purpose="REGIONAL_MANAGED_PROXY",
                role="ACTIVE",
                opts=child,
            )
        egress: list[pulumi.Resource] = []
        if args.private_nodes:
            router = gcp.compute.Router(
                f"{name}-router", name=args.name, project=args.project, region=args.region, network=vpc.id, opts=child
            )
            nat = gcp.compute.RouterNat(
                f"{name}-nat",
                name=args.name,
                project=args.project,
                region=args.region,
                router=router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                # Only this subnet (nodes and pods), so another NAT of the network is not disturbed.
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[{"name": subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
                opts=child,
            )
            egress.append(nat)
        self.network = GkeNetwork(
            network=vpc.id,
            subnetwork=subnet.id,
            ip_allocation_policy={
                "cluster_secondary_range_name": PODS_RANGE_NAME,
                "services_secondary_range_name": SERVICES_RANGE_NAME,
            },
            private_nodes=args.private_nodes,
            network_name=vpc.name,
            egress_ready=egress,
        )
        self.register_outputs({"network": vpc.id})


def default_network() -> GkeNetwork:
    """The project's default network; VPC-native with ranges GKE picks (an empty policy block)."""
    return GkeNetwork(network=None, subnetwork=None, ip_allocation_policy={"stack_type": "IPV4"})
