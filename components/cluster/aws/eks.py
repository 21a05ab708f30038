"""EKS: the cluster (created, or an existing one by name), its network, its GPU pools (an always-on
managed node group and, on a created cluster, Karpenter for the rest), the CPU system node group of
a created cluster, the model bucket's identities, and the Kubernetes provider every Kubernetes
resource of the stack uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

import stack_config as cfg
from common import contract, driver_versions, gpu_driver, gpus
from components.cluster.aws import efa, efs, karpenter, karpenter_iam, network, policies, registry_cache
from components.cluster.aws.bucket import S3ModelBucket, S3ModelBucketArgs

# By name too: inside EksCluster, `karpenter` is the attribute, so annotations there cannot reach the module.
from components.cluster.aws.karpenter import Karpenter
from components.cluster.aws.network import EksNetwork, Subnet
from components.cluster.aws.secrets_key import ENCRYPTED_RESOURCES, secrets_key
from components.cluster.common import (
    MODEL_READER_SERVICE_ACCOUNT,
    MODEL_WRITER_SERVICE_ACCOUNT,
    bucket_resource_name,
    cloud_taint_effect,
    endpoint_summary,
    exec_kubeconfig,
    placement_for,
)
from components.cluster.interface import GpuPlacement, ModelBucket, RdmaAttachment

# EKS-optimized Amazon Linux 2023 with the NVIDIA driver and container toolkit preinstalled, so the
# GPU Operator runs with driver/toolkit disabled on EKS.
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
# Root device of the AL2023 EKS AMIs.
ROOT_DEVICE = karpenter.ROOT_DEVICE
# gp3 defaults to 125 MB/s; unpacking a 10-20 GB engine image is bound by disk writes, so pay for
# 500 MB/s (of gp3's 1000 MB/s maximum) on GPU nodes whose hourly price dwarfs the disk's.
ROOT_DISK_THROUGHPUT_MBPS = 500
ROOT_DISK_IOPS = 6000

# The system node group: untainted CPU nodes for CoreDNS, the operators' controllers, Karpenter,
# the EFS CSI controller, KEDA and the mirror Jobs. Standard EKS-optimized AL2023 (no GPU driver).
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# 8 vCPU / 32 GiB: room for the controllers plus a mirror Job hashing and uploading a model's
# files. `cluster.systemPool.machineType` overrides it.
DEFAULT_SYSTEM_INSTANCE_TYPE = "m6i.2xlarge"
# Value of contract.LABEL_POOL on the system nodes.
SYSTEM_POOL = contract.SYSTEM_POOL

CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "capacity-block": "CAPACITY_BLOCK"}
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"
# The VPC CNI as a managed add-on, for its network policy agent: off unless the add-on's configuration
# sets enableNetworkPolicy, and available from v1.14.0-eksbuild.3 on clusters of Kubernetes 1.25+
# (EKS User Guide, "Restrict Pod network traffic with Kubernetes network policies",
# https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html; awsdocs/amazon-eks-user-guide
# latest/ug/networking/cni-network-policy-configure.adoc, "Step 4"). The configuration value is the
# string "true", as that page writes it.
VPC_CNI_ADDON = "vpc-cni"
VPC_CNI_NETWORK_POLICY_MIN_VERSION = (1, 14, 0)
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
EKS_UNSUPPORTED_ZONE_IDS = network.EKS_UNSUPPORTED_ZONE_IDS


def root_disk_launch_template(disk_gib: int, region: str) -> dict:
    """Launch template arguments every node group of this program shares: root disk and IMDSv2.

    A node group with a launch template may not set `disk_size`, so the root disk is sized here:
    encrypted gp3, large enough for engine images and their unpacked layers (GPU nodes) or for a
    model's files staged by a mirror Job (system nodes). The throughput is paid for on both: the
    system nodes' disk is where a mirror Job writes tens of GB before uploading them.
    """
    return {
        "update_default_version": True,
        "region": region,
        "block_device_mappings": [
            {
                "device_name": ROOT_DEVICE,
                "ebs": {
                    "volume_size": disk_gib,
                    "volume_type": "gp3",
                    "throughput": ROOT_DISK_THROUGHPUT_MBPS,
                    "iops": ROOT_DISK_IOPS,
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        # IMDSv2 only. Hop limit 2 (the EKS default) keeps add-ons that read the region from
        # IMDS working; pods get their AWS credentials from Pod Identity, and the node role
        # holds only the three node policies.
        "metadata_options": {"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 2},
    }


def launch_template_ref(lt: aws.ec2.LaunchTemplate) -> dict:
    """A node group's pointer at its launch template's current version (rolls nodes on change)."""
    return {"id": lt.id, "version": lt.latest_version.apply(str)}


@dataclass(frozen=True)
class NodePoolSpec:
    """One GPU pool as the cloud layer needs it: the validated config, its machine and placement."""

    pool: cfg.PoolConfig
    machine: gpus.CloudMachine
    placement: GpuPlacement
    # How the pool gets its nodes (stack_config.pool_scaling): the planner counts the same.
    scaling: cfg.PoolScaling
    # EC2 Capacity Block reservation id (cr-...), set when capacityType is capacity-block.
    capacity_reservation_id: str | None = None
    # Node labels beyond the placement's, e.g. the MIG manager's partition label.
    extra_labels: tuple[tuple[str, str], ...] = ()
    # Where the pool is in the stack file, for errors found at look-up time ("Pulumi.dev.yaml: pools[1]").
    config_key: str = "pools"

    @property
    def node_labels(self) -> dict[str, str]:
        labels = {**self.placement.node_labels, **dict(self.extra_labels)}
        if self.pool.efa:
            # The EFA device plugin's DaemonSet selects EFA nodes of every pool by this label.
            labels[efa.EFA_NODE_LABEL] = efa.EFA_NODE_LABEL_VALUE
        return labels

    @property
    def managed_nodes(self) -> bool:
        """Does the pool have a managed node group: its always-on nodes, or on a cluster this stack did
        not create, the whole pool."""
        return self.scaling.autoscaler != cfg.Autoscaler.karpenter or self.scaling.start_nodes > 0

    @property
    def karpenter_nodes(self) -> int:
        """Nodes Karpenter may add on top of the managed node group (0: no NodePool)."""
        if self.scaling.autoscaler != cfg.Autoscaler.karpenter:
            return 0
        return self.scaling.reachable_nodes - self.scaling.start_nodes


@dataclass(frozen=True)
class EfaPlacement:
    """What every node of an EFA pool shares, whoever launches it."""

    # Allows all traffic within itself (the EFA requirement); on every EFA interface.
    security_group_id: pulumi.Input[str]
    # The pool's cluster placement group; None with a Capacity Block, which is placed already.
    placement_group_name: pulumi.Input[str] | None


def efa_placement(
    name: str, vpc_id: pulumi.Input[str], region: str, capacity_block: bool, opts: pulumi.ResourceOptions
) -> EfaPlacement:
    # EFA traffic must be allowed to and from the security group itself (AWS EFA setup guide).
    efa_sg = aws.ec2.SecurityGroup(
        f"{name}-efa",
        description="EFA traffic between the GPU nodes of one pool",
        vpc_id=vpc_id,
        ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True}],
        egress=[
            {"protocol": "-1", "from_port": 0, "to_port": 0, "self": True},
            {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"]},
        ],
        region=region,
        opts=opts,
    )
    group = None
    if not capacity_block:
        # A Capacity Block is already one UltraCluster placement; a cluster placement group of our
        # own would not contain the reservation and its launches would fail.
        group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", region=region, opts=opts).name
    return EfaPlacement(security_group_id=efa_sg.id, placement_group_name=group)


@dataclass(frozen=True)
class GpuNodePoolArgs:
    spec: NodePoolSpec
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    # The subnets this pool may use (`pool_subnets`: in zones offering the instance type; the one
    # private subnet of an EFA pool; the Capacity Block's zone).
    subnet_ids: list[pulumi.Input[str]]
    region: str
    # Managed node group AMI release (`1.33.13-20260714`): pins the NVIDIA driver.
    release_version: str
    efa: EfaPlacement | None = None
    cluster_security_group_id: pulumi.Input[str] | None = None


class GpuNodePool(pulumi.ComponentResource):
    """A managed node group of one GPU instance type, tainted so only GPU work lands on it.

    On a created cluster it holds the pool's always-on nodes (exactly minNodes; Karpenter adds
    the rest); on a cluster this stack did not create, the whole pool at its desired size.
    """

    node_group_name: pulumi.Output[str]
    placement: GpuPlacement

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:GpuNodePool", name, None, opts)
        spec, pool, machine, placement = args.spec, args.spec.pool, args.spec.machine, args.spec.placement
        capacity_block = pool.capacityType == "capacity-block"

        launch_template = root_disk_launch_template(pool.diskGib, args.region)
        if args.efa is not None:
            launch_template.update(self._efa(args, machine))
        instance_types: list[str] | None = [machine.name]
        if capacity_block:
            # Capacity Blocks are consumed only through a launch template that targets the block and
            # names the instance type (EKS User Guide, "Create a managed node group with Capacity
            # Blocks for ML"); EKS refuses an instance type in both the template and the node group.
            launch_template["instance_market_options"] = {"market_type": "capacity-block"}
            launch_template["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": spec.capacity_reservation_id},
            }
            launch_template["instance_type"] = machine.name
            instance_types = None
        lt = aws.ec2.LaunchTemplate(f"{name}-lt", **launch_template, opts=pulumi.ResourceOptions(parent=self))

        if spec.scaling.autoscaler == cfg.Autoscaler.karpenter:
            # Fixed at minNodes: Karpenter, not this group, adds nodes for pending pods.
            size = spec.scaling.start_nodes
            scaling = {"min_size": size, "max_size": size, "desired_size": size}
            ignore: list[str] = []
        else:
            # A cluster this stack did not create: its owner's autoscaler (if any) may resize it
            # within min..max; Pulumi leaves the current size alone after creation.
            scaling = {"min_size": pool.minNodes, "max_size": pool.maxNodes, "desired_size": cfg.initial_nodes(pool)}
            ignore = ["scalingConfig.desiredSize"]
        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=args.subnet_ids,
            instance_types=instance_types,
            ami_type=GPU_AMI_TYPE,
            release_version=args.release_version,
            capacity_type=CAPACITY_TYPES[pool.capacityType],
            scaling_config=scaling,
            labels=spec.node_labels,
            taints=[
                {
                    "key": placement.taint_key,
                    "value": placement.taint_value,
                    "effect": cloud_taint_effect(placement.taint_effect),
                }
            ],
            launch_template=launch_template_ref(lt),
            # One GPU node at a time during AMI/version rollouts: each is expensive and slow to fill.
            update_config={"max_unavailable": 1},
            region=args.region,
            tags={"llm-serving/pool": pool.name},
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=ignore or None),
        )
        self.node_group_name = node_group.node_group_name
        self.placement = placement
        self.register_outputs({"nodeGroupName": self.node_group_name})

    @staticmethod
    def _efa(args: GpuNodePoolArgs, machine: gpus.CloudMachine) -> dict:
        """EFA interfaces (one per network card) in the launch template, and the placement group.

        No subnet in the interfaces: a launch template of a managed node group may not name one
        (EKS API, LaunchTemplateSpecification); the node group's single private subnet applies.
        """
        assert args.efa is not None
        # Interfaces in a launch template replace the node's default ENI and its security groups,
        # so the cluster security group is listed again next to the EFA one.
        security_groups = [sg for sg in (args.cluster_security_group_id, args.efa.security_group_id) if sg is not None]
        interfaces = [
            {
                "device_index": 0 if card == 0 else 1,
                "network_card_index": card,
                "interface_type": "efa",
                "delete_on_termination": "true",
                "security_groups": security_groups,
            }
            for card in range(efa.interfaces(machine.name))
        ]
        template: dict = {"network_interfaces": interfaces}
        if args.efa.placement_group_name is not None:
            template["placement"] = {"group_name": args.efa.placement_group_name}
        return template


# ---------------------------------------------------------------------------------------------
# Which subnets a pool may use


def capacity_block_zone(spec: NodePoolSpec, region: str, opts: pulumi.InvokeOptions | None = None) -> str | None:
    """The zone of the pool's Capacity Block, after checking the block reserves the pool's type.

    A Capacity Block exists in one zone; a node group with subnets elsewhere launches there at
    random and fails ("The following supplied instance types do not exist").
    """
    if not spec.capacity_reservation_id:
        return None
    block = aws.ec2.get_capacity_block_reservation(id=spec.capacity_reservation_id, region=region, opts=opts)
    if block.instance_type and block.instance_type != spec.machine.name:
        raise cfg.ConfigError(
            [
                (
                    f"{spec.config_key}.capacityReservationId: {spec.capacity_reservation_id} reserves "
                    f"{block.instance_type}, but the pool runs {spec.machine.name}; set machineType to "
                    f"{block.instance_type} or use the matching block"
                )
            ]
        )
    return block.availability_zone


@dataclass(frozen=True)
class PoolZones:
    """Where one pool's nodes may go, known before the network is built."""

    # Zones offering the pool's instance type (EC2 DescribeInstanceTypeOfferings).
    offered: list[str]
    # The Capacity Block's zone, when the pool consumes one.
    block_zone: str | None = None

    @property
    def acceptable(self) -> list[str]:
        return [self.block_zone] if self.block_zone else self.offered


def pool_zones(spec: NodePoolSpec, region: str, opts: pulumi.InvokeOptions | None = None) -> PoolZones:
    return PoolZones(
        offered=network.offering_zones(spec.machine.name, region, opts),
        block_zone=capacity_block_zone(spec, region, opts),
    )


def pool_subnets(spec: NodePoolSpec, zones: PoolZones, net: EksNetwork) -> list[Subnet]:
    """The node subnets one pool may use.

    Only zones that offer its instance type (or the Capacity Block's zone). An EFA pool takes one
    private subnet: a cluster placement group lives in one zone, and its nodes, with one interface
    per network card, get no public address.
    """
    where = spec.config_key
    acceptable = set(zones.acceptable)
    candidates = sorted(net.node_subnets_in(acceptable), key=lambda s: (s.zone, s.key))
    if spec.pool.efa:
        candidates = [s for s in candidates if s.private]
    if candidates:
        return candidates[:1] if spec.pool.efa else candidates
    if zones.block_zone:
        raise cfg.ConfigError(
            [
                (
                    f"{where}.capacityReservationId: {spec.capacity_reservation_id} is in "
                    f"{zones.block_zone}, where the cluster has no {'private ' if spec.pool.efa else ''}"
                    "node subnet; buy the block in a zone of the cluster's subnets"
                )
            ]
        )
    known = {s.key: s for s in [*net.cluster_subnets, *net.node_subnets]}.values()
    have = ", ".join(f"{s.key} ({s.zone}, {'private' if s.private else 'public'})" for s in known)
    if spec.pool.efa:
        raise cfg.ConfigError(
            [
                (
                    f"{where}.efa: {spec.machine.name} is offered in {', '.join(zones.offered) or 'no zone'}, "
                    f"and the cluster has no private subnet there (its subnets: {have}); "
                    f"{cfg.EFA_NEEDS_PRIVATE_SUBNETS}"
                )
            ]
        )
    raise cfg.ConfigError(
        [
            (
                f"{where}.machineType: {spec.machine.name} is offered in {', '.join(zones.offered) or 'no zone'} "
                f"of the region, where the cluster has no node subnet (its subnets: {have}); choose "
                "another instance type"
            )
        ]
    )


# ---------------------------------------------------------------------------------------------
# The system node group


@dataclass(frozen=True)
class SystemNodeGroupArgs:
    pool: cfg.SystemPoolConfig
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: list[pulumi.Input[str]]
    region: str
    release_version: str


def system_instance_type(pool: cfg.SystemPoolConfig) -> str:
    return pool.machineType or DEFAULT_SYSTEM_INSTANCE_TYPE


class SystemNodeGroup(pulumi.ComponentResource):
    """Untainted CPU nodes of a created cluster, for everything that is not a GPU server.

    The GPU pools carry the GPU taint, so without these nodes CoreDNS, the operators' controllers,
    Karpenter, the EFS CSI controller, KEDA and the mirror Jobs would have nowhere to run.
    """

    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: SystemNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:SystemNodeGroup", name, None, opts)
        pool = args.pool
        lt = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            **root_disk_launch_template(pool.diskGib, args.region),
            opts=pulumi.ResourceOptions(parent=self),
        )
        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            # Every node subnet of the cluster, so the system pods (two CoreDNS replicas) can spread over zones.
            subnet_ids=args.subnet_ids,
            instance_types=[system_instance_type(pool)],
            ami_type=SYSTEM_AMI_TYPE,
            release_version=args.release_version,
            # On-demand: losing CoreDNS or a controller to a spot reclaim stalls the whole cluster.
            capacity_type="ON_DEMAND",
            scaling_config={"min_size": pool.minNodes, "max_size": pool.maxNodes, "desired_size": pool.minNodes},
            labels={contract.LABEL_POOL: SYSTEM_POOL},
            # No taints: this is where every pod without a GPU toleration lands.
            launch_template=launch_template_ref(lt),
            update_config={"max_unavailable": 1},
            region=args.region,
            tags={"llm-serving/pool": SYSTEM_POOL},
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.node_group_name = node_group.node_group_name
        self.register_outputs({"nodeGroupName": self.node_group_name})


# ---------------------------------------------------------------------------------------------
# The cluster


@dataclass(frozen=True)
class EksClusterArgs:
    name: str
    create: bool
    kubernetes_version: str
    region: str
    pools: list[NodePoolSpec]
    network: cfg.NetworkConfig = field(default_factory=cfg.NetworkConfig)
    bucket: S3ModelBucketArgs | None = None
    rwx_storage_class: str = efs.DEFAULT_STORAGE_CLASS
    # Create EFS, its CSI driver and the `rwx_storage_class` StorageClass (see efs.manages_rwx_storage).
    manage_rwx_storage: bool = True
    # The CPU system node group; only on a created cluster (an existing one has its own CPU nodes).
    system_pool: cfg.SystemPoolConfig | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # Prefix of config errors found at look-up time ("Pulumi.prod.yaml: ").
    config_source: str = ""
    # images.pullThrough: upstream registry -> ARN of its credentials secret; None pulls upstream.
    pull_through: dict[str, str] | None = None
    # Who may reach the API server of a created cluster (security.clusterEndpoint).
    endpoint_access: cfg.ClusterEndpointConfig = field(default_factory=cfg.ClusterEndpointConfig)
    # Envelope-encrypt Secrets with KMS; `secrets_key_arn` names the user's key, else one is created.
    encrypt_secrets: bool = False
    secrets_key_arn: str | None = None
    # Tags of the cluster resource only: the security profile the policy pack reads.
    cluster_labels: dict[str, str] = field(default_factory=dict)
    # The stack that builds this stack's runner and VPC (cluster.network.vpc deployer).
    deployer_stack: str = ""


def endpoint_vpc_config(access: cfg.ClusterEndpointConfig) -> dict:
    """The API endpoint part of the cluster's vpcConfig.

    publicAccessCidrs only with public access on: EKS ignores the list otherwise, and the provider
    checks its drift only when present (pulumi_aws eks ClusterVpcConfigArgs.public_access_cidrs).
    No list means EKS's default, 0.0.0.0/0 ("If you specify no blocks, then the public API server
    endpoint receives requests from all IP addresses", EKS User Guide, "Configure network access to
    cluster API server endpoint").
    """
    vpc: dict = {"endpoint_public_access": access.publicAccess, "endpoint_private_access": access.privateAccess}
    if access.publicAccess and access.publicCidrs:
        vpc["public_access_cidrs"] = list(access.publicCidrs)
    return vpc


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with GPU pools; meets `components.cluster.interface.Cluster`."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    placements: dict[str, GpuPlacement]
    bucket: ModelBucket | None
    rwx_storage_class: str
    # The EFS behind `rwx_storage_class` when this stack manages it; None when the user does.
    rwx_storage: efs.EfsStorage | None
    # Per EFA pool (by pool name): the `vpc.amazonaws.com/efa` devices a server pod requests.
    rdma_attachments: dict[str, RdmaAttachment]
    # AWS's EFA device plugin, installed when any pool has EFA.
    efa_device_plugin: efa.EfaDevicePlugin | None
    # Karpenter, on a created cluster with a pool that can grow.
    karpenter: karpenter.Karpenter | None
    network: EksNetwork
    # The deployer's path to the API endpoint (the runner's 443 ingress rule), before the provider.
    api_reachable: list[pulumi.Resource]
    # What the plan shows about the network, the autoscaler and each pool's nodes.
    platform: dict
    cloud: str = "aws"

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        region = args.region

        # Look-ups are direct (not `_output`) so zones and subnet ids are plain values: the VPC has
        # one subnet per zone, EFS one mount target per zone, and resources are never created
        # inside `apply`.
        invoke = pulumi.InvokeOptions(parent=self)
        zones = {spec.pool.name: pool_zones(spec, region, invoke) for spec in args.pools}
        addons_ready: list[pulumi.Resource] = []
        # What the deployer's path to the API endpoint needs before the first Kubernetes call.
        self.api_reachable: list[pulumi.Resource] = []
        if args.create:
            self.network = self._network(name, args, zones, invoke)
            cluster_name, endpoint, ca_data, cluster_sg, agent, vpc_cni = self._create(name, args)
            addons_ready.append(agent)
            kubernetes_version = args.kubernetes_version
        else:
            found = aws.eks.get_cluster(name=args.name, region=region, opts=invoke)
            cluster_name = found.name
            endpoint = found.endpoint
            ca_data = found.certificate_authorities[0].data
            cluster_sg = found.vpc_config.cluster_security_group_id
            kubernetes_version = found.version or args.kubernetes_version
            self.network = network.cluster_subnets(
                list(found.vpc_config.subnet_ids), found.vpc_config.vpc_id, region, invoke
            )
        release_version = driver_versions.eks_release_version(kubernetes_version)
        if release_version is None:
            raise cfg.ConfigError(
                [
                    (
                        f"{args.config_source}cluster.name: EKS cluster {args.name} runs Kubernetes "
                        f"{kubernetes_version}, for which this program pins no EKS AMI release "
                        f"({driver_versions.EKS_AMI_RELEASE} covers "
                        f"{', '.join(sorted(driver_versions.EKS_RELEASE_VERSIONS))}); upgrade the cluster or add the "
                        "release"
                    )
                ]
            )
        net = self.network
        # Nodes in private subnets join only once their route out (NAT) exists; on a created cluster,
        # once the VPC CNI add-on enforces NetworkPolicy, so no node starts without the agent.
        node_opts = list(net.egress_ready)
        if args.create:
            node_opts.append(vpc_cni)

        # One role for every managed node group (GPU pools and the system pool): they need the same
        # three node policies. The logical name predates the system pool; renaming it would replace
        # the role and with it every node group.
        node_role = aws.iam.Role(
            f"{name}-gpu-node",
            description="Nodes of the llm-serving EKS cluster",
            assume_role_policy=pulumi.Output.json_dumps(policies.service_trust_policy("ec2.amazonaws.com")),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-gpu-node-{key}", role=node_role.name, policy_arn=arn, opts=child)
            for key, arn in policies.NODE_MANAGED_POLICIES.items()
        ]

        self.placements = {}
        # Per EFA pool: the device resource its pods request to reach the fabric.
        self.rdma_attachments = {}
        subnets_of: dict[str, list[Subnet]] = {}
        efa_of: dict[str, EfaPlacement] = {}
        for spec in args.pools:
            pool = spec.pool
            subnets = pool_subnets(spec, zones[pool.name], net)
            subnets_of[pool.name] = subnets
            if pool.efa:
                efa_of[pool.name] = efa_placement(
                    f"{name}-{pool.name}",
                    net.vpc_id,
                    region,
                    capacity_block=pool.capacityType == "capacity-block",
                    opts=child,
                )
            if spec.managed_nodes:
                GpuNodePool(
                    f"{name}-{pool.name}",
                    GpuNodePoolArgs(
                        spec=spec,
                        cluster_name=cluster_name,
                        node_role_arn=node_role.arn,
                        subnet_ids=[s.id for s in subnets],
                        region=region,
                        release_version=release_version,
                        efa=efa_of.get(pool.name),
                        cluster_security_group_id=cluster_sg,
                    ),
                    # Nodes that join before their role can pull images or assign IPs never get Ready.
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, *node_opts]),
                )
            self.placements[pool.name] = spec.placement
            if pool.efa:
                self.rdma_attachments[pool.name] = efa.rdma_attachment(spec.machine.name)

        system = None
        if args.create and args.system_pool is not None:
            system = SystemNodeGroup(
                f"{name}-system",
                SystemNodeGroupArgs(
                    pool=args.system_pool,
                    cluster_name=cluster_name,
                    node_role_arn=node_role.arn,
                    subnet_ids=[s.id for s in net.node_subnets],
                    region=region,
                    release_version=release_version,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, *node_opts]),
            )
            # The EFS CSI add-on turns ACTIVE only once its controller runs, and that needs these nodes.
            addons_ready.append(system)

        self.bucket = None
        if args.bucket is not None:
            bucket_args = replace(args.bucket, cluster_name=cluster_name)
            self.bucket = S3ModelBucket(f"{name}-models", bucket_args, opts=child).model_bucket

        self.cluster_name = pulumi.Output.from_input(cluster_name)
        self.endpoint = pulumi.Output.from_input(endpoint)
        self.kubeconfig = exec_kubeconfig(
            args.name,
            endpoint,
            ca_data,
            "aws",
            ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
        )
        # Every Kubernetes resource of the stack is created through this provider; it is built from
        # the cluster's own endpoint and CA, never from the ambient kubeconfig.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.api_reachable or None),
        )

        self.karpenter = None
        growing = [spec for spec in args.pools if spec.karpenter_nodes > 0]
        if growing:
            assert system is not None and args.system_pool is not None, (
                "Karpenter runs on a created cluster's system pool"
            )
            self.karpenter = self._karpenter(name, args, cluster_name, endpoint, system, addons_ready, node_opts)
            for spec in growing:
                subnets = subnets_of[spec.pool.name]
                placement = efa_of.get(spec.pool.name)
                karpenter.KarpenterPool(
                    f"{name}-{spec.pool.name}-karpenter",
                    karpenter.KarpenterPoolSpec(
                        pool=spec.pool.name,
                        placement=spec.placement,
                        instance_type=spec.machine.name,
                        capacity_type=spec.pool.capacityType,
                        nodes=spec.karpenter_nodes,
                        disk_gib=spec.pool.diskGib,
                        labels=spec.node_labels,
                        subnet_ids=[s.id for s in subnets],
                        zones=sorted({s.zone for s in subnets}),
                        security_group_ids=[sg for sg in (cluster_sg, placement and placement.security_group_id) if sg],
                        node_role=self.karpenter.node_role_name,
                        placement_group=placement.placement_group_name if placement else None,
                        capacity_reservation_id=spec.capacity_reservation_id,
                        efa=spec.pool.efa,
                    ),
                    self.provider,
                    wait_for=[self.karpenter.release, *self.karpenter.nodes_may_join, *node_opts],
                    opts=child,
                )

        # images.pullThrough: an ECR cache per upstream; the nodes this stack manages may fill it.
        self.image_mirrors: dict[str, str] = {}
        if args.pull_through:
            node_roles: dict[str, pulumi.Input[str]] = {"gpu-node": node_role.name}
            if self.karpenter is not None:
                node_roles["karpenter-node"] = self.karpenter.node_role_name
            cache = registry_cache.EcrPullThroughCache(
                f"{name}-image-cache",
                registry_cache.EcrPullThroughCacheArgs(
                    cluster_name=args.name, region=region, credentials=dict(args.pull_through), node_roles=node_roles
                ),
                opts=child,
            )
            self.image_mirrors = dict(cache.mirrors)

        # EFA interfaces reach pods only through AWS's device plugin; install it when a pool has EFA.
        self.efa_device_plugin = None
        efa_placements = [spec.placement for spec in args.pools if spec.pool.efa]
        if efa_placements:
            self.efa_device_plugin = efa.EfaDevicePlugin(f"{name}-efa", efa_placements, self.provider, opts=child)
        self.rwx_storage_class = args.rwx_storage_class
        # EKS has no default StorageClass a mirror's staging volume could use (no EBS CSI driver is
        # installed); the EFS class this layer manages serves ReadWriteOnce claims too.
        self.staging_storage_class: str | None = args.rwx_storage_class
        self.rwx_storage = None
        if args.manage_rwx_storage:
            self.rwx_storage = efs.EfsStorage(
                f"{name}-efs",
                efs.EfsStorageArgs(
                    cluster_name=cluster_name,
                    vpc_id=net.vpc_id,
                    mount_subnets=[(s.key, s.id) for s in net.one_per_zone()],
                    cluster_security_group_id=cluster_sg,
                    region=region,
                    provider=self.provider,
                    storage_class_name=args.rwx_storage_class,
                    addon_depends_on=addons_ready,
                ),
                opts=child,
            )
        self.platform = platform_summary(args, net, zones, subnets_of, release_version)
        self.register_outputs({"clusterName": self.cluster_name, "endpoint": self.endpoint})

    def _network(
        self, name: str, args: EksClusterArgs, zones: dict[str, PoolZones], invoke: pulumi.InvokeOptions
    ) -> EksNetwork:
        config = args.network
        where = f"{args.config_source}cluster.network"
        if config.vpc == "default":
            return network.default_vpc(args.region, invoke)
        if config.vpc == "existing":
            assert config.privateSubnetIds, "config requires privateSubnetIds with vpc existing"
            return network.existing_vpc(list(config.privateSubnetIds), args.region, where, invoke)
        if config.vpc == "deployer":
            return network.deployer_vpc(args.name, args.region, where, args.deployer_stack, invoke)
        # Each pool needs a zone offering its instance type (a Capacity Block: its own zone).
        needs = [
            (
                f"{spec.config_key}.capacityReservationId"
                if spec.capacity_reservation_id
                else f"{spec.config_key}.machineType",
                zones[spec.pool.name].acceptable,
            )
            for spec in args.pools
        ]
        chosen = network.choose_zones(network.supported_zones(args.region, invoke), needs, config.zoneCount, where)
        vpc = network.EksVpc(
            f"{name}-network",
            network.VpcArgs(
                cluster_name=args.name,
                region=args.region,
                cidr=config.cidr,
                zones=chosen,
                nat_gateways=config.natGateways,
                tags=args.tags,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return vpc.network

    def _create(self, name: str, args: EksClusterArgs):
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-cluster",
            description="EKS control plane of the llm-serving cluster",
            assume_role_policy=pulumi.Output.json_dumps(policies.service_trust_policy("eks.amazonaws.com")),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-cluster-{key}", role=role.name, policy_arn=arn, opts=child)
            for key, arn in policies.CLUSTER_MANAGED_POLICIES.items()
        ]
        encryption = None
        if args.encrypt_secrets:
            key = secrets_key(name, args.name, args.region, role, args.secrets_key_arn, args.tags, self)
            attachments += key.ready
            encryption = {"provider": {"key_arn": key.key_arn}, "resources": ENCRYPTED_RESOURCES}
        cluster = aws.eks.Cluster(
            name,
            name=args.name,
            role_arn=role.arn,
            version=args.kubernetes_version,
            vpc_config={
                # The control plane's interfaces go in the node subnets (private, with a created VPC).
                "subnet_ids": [s.id for s in self.network.cluster_subnets],
                # Private access keeps nodes' and pods' API calls inside the VPC; public access and
                # its allowed addresses follow security.clusterEndpoint.
                **endpoint_vpc_config(args.endpoint_access),
            },
            encryption_config=encryption,
            # Access entries (API mode) instead of the aws-auth ConfigMap. The identity that runs
            # `pulumi up` creates the cluster, and EKS gives "the cluster creator IAM principal" a
            # cluster admin access entry at creation ("Specifies whether or not the cluster creator IAM
            # principal was set as a cluster admin access entry during cluster creation time",
            # https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessConfigRequest.html;
            # https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html), so the Kubernetes
            # provider, running as that same identity, is admin without an entry of ours. With
            # deployer.runner codebuild that identity is the CodeBuild project's service role (the
            # deployer stack's output `runnerRoleArn`); an AccessEntry of our own for the same principal
            # would collide with the bootstrap one. Another identity (a person's role) needs its own
            # access entry (docs/deployer.md).
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            region=args.region,
            tags={**args.tags, **args.cluster_labels},
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        # Pod Identity (the model bucket's writer and reader, Karpenter) needs this agent on every
        # node. Version left to EKS: it installs the default build for the cluster's Kubernetes version.
        agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=cluster.name,
            addon_name=POD_IDENTITY_AGENT_ADDON,
            region=args.region,
            opts=child,
        )
        # vpc deployer: the endpoint is reached from the CodeBuild runner's security group. With the
        # private endpoint, requests from inside the VPC go to the control plane's interfaces, which
        # carry the cluster security group, so that group must admit the caller on 443 ("you must
        # ensure that your Amazon EKS control plane security group contains rules to allow ingress
        # traffic on port 443 from your connected network", EKS User Guide, "Cluster API server
        # endpoint", https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html). The
        # Kubernetes provider waits for this rule: before it, every call times out.
        runner_sg = self.network.runner_security_group_id
        if runner_sg:
            self.api_reachable.append(
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-api-from-runner",
                    security_group_id=cluster.vpc_config.apply(lambda v: v.cluster_security_group_id),
                    referenced_security_group_id=runner_sg,
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    description="Kubernetes API from the CodeBuild runner that runs pulumi up",
                    region=args.region,
                    opts=child,
                )
            )
        # The VPC CNI as a managed add-on with its network policy agent on, so the serving namespace's
        # NetworkPolicies are enforced (docs/security.md). EKS installs a self-managed VPC CNI at creation
        # (bootstrap_self_managed_addons defaults to true); OVERWRITE lets the managed add-on take it
        # over (pulumi_aws eks Addon resolve_conflicts_on_create: "How to resolve field value conflicts
        # when migrating a self-managed add-on to an Amazon EKS add-on"). Version left to EKS: its
        # default build for the cluster's Kubernetes version. That this default is v1.14.0 or later
        # for every version this program pins is unresolved here; settle it with `aws eks
        # describe-addon-versions --addon-name vpc-cni --kubernetes-version <version> --query
        # "addons[].addonVersions[?compatibilities[?defaultVersion]].addonVersion"`. Created
        # before the node groups, as terraform-aws-modules/terraform-aws-eks does for vpc-cni
        # (`before_compute`), so every node starts with the agent.
        vpc_cni = aws.eks.Addon(
            f"{name}-vpc-cni",
            cluster_name=cluster.name,
            addon_name=VPC_CNI_ADDON,
            configuration_values=json.dumps(VPC_CNI_CONFIGURATION),
            resolve_conflicts_on_create="OVERWRITE",
            region=args.region,
            opts=child,
        )
        return (
            cluster.name,
            cluster.endpoint,
            cluster.certificate_authority.apply(lambda ca: ca.data),
            cluster.vpc_config.apply(lambda v: v.cluster_security_group_id),
            agent,
            vpc_cni,
        )

    def _karpenter(
        self,
        name: str,
        args: EksClusterArgs,
        cluster_name,
        endpoint,
        system: SystemNodeGroup,
        addons_ready: list[pulumi.Resource],
        node_opts: list[pulumi.Resource],
    ) -> Karpenter:
        invoke = pulumi.InvokeOptions(parent=self)
        scope = karpenter_iam.Scope(
            cluster=args.name,
            region=args.region,
            account=aws.get_caller_identity(opts=invoke).account_id,
            partition=aws.get_partition(opts=invoke).partition,
        )
        assert args.system_pool is not None
        return karpenter.Karpenter(
            f"{name}-karpenter",
            karpenter.KarpenterArgs(
                cluster_name=cluster_name,
                cluster_endpoint=endpoint,
                scope=scope,
                system_nodes=args.system_pool.minNodes,
                provider=self.provider,
                # The controller runs on the system nodes and takes its credentials from Pod Identity.
                depends_on=[system, *addons_ready, *node_opts],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )


def platform_summary(
    args: EksClusterArgs,
    net: EksNetwork,
    zones: dict[str, PoolZones],
    subnets_of: dict[str, list[Subnet]],
    release_version: str,
) -> dict:
    """What the offline plan shows about the network, the autoscaler and each pool's nodes."""
    pools = []
    for spec in args.pools:
        subnets = subnets_of[spec.pool.name]
        pools.append(
            {
                "pool": spec.pool.name,
                "instanceType": spec.machine.name,
                "zonesOffering": ", ".join(zones[spec.pool.name].offered) or "(none found)",
                "nodeZones": ", ".join(sorted({s.zone for s in subnets})),
                "subnets": "private" if all(s.private for s in subnets) else "public",
                "alwaysOnNodes": spec.scaling.start_nodes if spec.managed_nodes else 0,
                "karpenterNodes": spec.karpenter_nodes,
                "efa": "placement group"
                if spec.pool.efa and spec.pool.capacityType != "capacity-block"
                else ("Capacity Block" if spec.pool.efa else "no"),
            }
        )
    nat = {
        "create": f"{net.nat_gateways} NAT gateway(s) ({args.network.natGateways})",
        "default": "none (default VPC: public subnets)",
        "existing": "the VPC's own (private subnets checked)",
        "deployer": "the deployer stack's (private subnets checked)",
        "cluster": "the cluster's own",
    }[net.mode]
    return {
        "cloud": "aws",
        "vpc": {
            "create": f"created, {args.network.cidr}",
            "default": "the account's default VPC",
            "existing": "existing (cluster.network.privateSubnetIds)",
            "deployer": f"the deployer stack's ({args.deployer_stack}), found by tag {network.DEPLOYER_TAG}",
            "cluster": "the existing cluster's",
        }[net.mode],
        "zones": ", ".join(net.zones),
        "nodeSubnets": "private" if all(s.private for s in net.node_subnets) else "public",
        "nat": nat,
        "autoscaler": f"Karpenter {karpenter.VERSION}"
        if any(s.karpenter_nodes for s in args.pools)
        else ("none (fixed-size node groups)" if not args.create else "none needed (no pool grows)"),
        "nodeImage": f"EKS AL2023 AMI {driver_versions.EKS_AMI_RELEASE} "
        f"(managed node groups: release {release_version}; Karpenter: {driver_versions.KARPENTER_AMI_ALIAS})",
        "pools": pools,
        **(
            {
                "apiEndpoint": endpoint_summary(args.endpoint_access, "the VPC's private endpoint"),
                "secretsEncryption": (
                    "KMS envelope encryption, key " + (args.secrets_key_arn or "created by this stack (rotation on)")
                )
                if args.encrypt_secrets
                else "off (etcd's own encryption only)",
            }
            if args.create
            else {
                "apiEndpoint": (
                    "the existing cluster's own (security.clusterEndpoint and secretsEncryption are not applied)"
                )
            }
        ),
    }


def create_eks(stack: cfg.StackConfig, stack_name: str) -> EksCluster:
    """EksCluster from the validated stack config."""
    region = stack.region
    assert region is not None  # None only for an existing cluster
    specs = []
    gpu_operator = stack.operators.gpuOperator
    driver_plan = gpu_driver.resolve_driver_plan("aws", gpu_operator.driver if gpu_operator.enabled else "auto")
    source = f"Pulumi.{stack_name}.yaml: "
    for i, pool in enumerate(stack.pools):
        machine = cfg.pool_machine(stack.cloud, pool)
        assert machine is not None, f"pool {pool.name} passed config validation without a machine"
        specs.append(
            NodePoolSpec(
                extra_labels=tuple(gpu_driver.mig_node_labels(pool, driver_plan).items()),
                pool=pool,
                machine=machine,
                placement=placement_for(pool, rdma=pool.efa),
                scaling=cfg.pool_scaling(stack, pool),
                # Config requires the id exactly when capacityType is capacity-block.
                capacity_reservation_id=pool.capacityReservationId,
                config_key=f"{source}pools[{i}]",
            )
        )
    store = stack.modelStore
    bucket = S3ModelBucketArgs(
        resource_name=bucket_resource_name(stack_name),
        prefix=store.prefix,
        namespace=store.namespace,
        writer_service_account=MODEL_WRITER_SERVICE_ACCOUNT,
        reader_service_account=MODEL_READER_SERVICE_ACCOUNT,
        cluster_name=stack.cluster.name,
        region=region,
        bucket_name=store.bucketName,
        on_destroy=store.onDestroy,
    )
    return EksCluster(
        stack.cluster.name,
        EksClusterArgs(
            name=stack.cluster.name,
            create=stack.cluster.create,
            kubernetes_version=stack.cluster.kubernetesVersion,
            region=region,
            pools=specs,
            network=stack.cluster.network,
            bucket=bucket,
            rwx_storage_class=stack.cluster.rwxStorageClass or efs.DEFAULT_STORAGE_CLASS,
            manage_rwx_storage=efs.manages_rwx_storage(stack.cluster.rwxStorageClass, stack.cluster.manageRwxStorage),
            system_pool=stack.cluster.systemPool if stack.cluster.create else None,
            config_source=source,
            pull_through=dict(stack.images.upstreamCredentials.items()) if stack.images.pullThrough else None,
            endpoint_access=stack.security.clusterEndpoint,
            encrypt_secrets=stack.security.encrypt_secrets,
            secrets_key_arn=stack.security.secretsEncryption.kmsKey,
            cluster_labels=stack.security.cluster_labels,
            deployer_stack=f"{stack_name}-deployer",
        ),
    )
