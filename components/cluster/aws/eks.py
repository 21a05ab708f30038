"""EKS: the cluster (created, or an existing one by name), its GPU managed node groups, the CPU
system node group of a created cluster, the model bucket's identities, and the Kubernetes provider
every Kubernetes resource of the stack uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

import stack_config as cfg
from common import contract, gpu_driver, gpus
from components.cluster.aws import efa, efs, policies
from components.cluster.aws.bucket import S3ModelBucket, S3ModelBucketArgs
from components.cluster.common import (
    MODEL_READER_SERVICE_ACCOUNT,
    MODEL_WRITER_SERVICE_ACCOUNT,
    bucket_resource_name,
    cloud_taint_effect,
    exec_kubeconfig,
    placement_for,
)
from components.cluster.interface import GpuPlacement, ModelBucket, RdmaAttachment

# EKS-optimized Amazon Linux 2023 with the NVIDIA driver and container toolkit preinstalled, so the
# GPU Operator runs with driver/toolkit disabled on EKS.
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
# Root device of the AL2023 EKS AMIs.
ROOT_DEVICE = "/dev/xvda"
# gp3 defaults to 125 MB/s; unpacking a 10-20 GB engine image is bound by disk writes, so pay for
# 500 MB/s (of gp3's 1000 MB/s maximum) on GPU nodes whose hourly price dwarfs the disk's.
ROOT_DISK_THROUGHPUT_MBPS = 500
ROOT_DISK_IOPS = 6000

# The system node group: untainted CPU nodes for CoreDNS, the operators' controllers, the EFS CSI
# controller, KEDA and the mirror Jobs. Standard EKS-optimized AL2023 (no GPU driver needed).
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# 8 vCPU / 32 GiB: room for the controllers plus a mirror Job hashing and uploading a model's
# files. `cluster.systemPool.machineType` overrides it.
DEFAULT_SYSTEM_INSTANCE_TYPE = "m6i.2xlarge"
# Value of contract.LABEL_POOL on the system nodes.
SYSTEM_POOL = contract.SYSTEM_POOL

CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "capacity-block": "CAPACITY_BLOCK"}
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"
# Availability Zones (by zone id, which is the same in every account) where EKS refuses cluster
# subnets. The default VPC of us-east-1 has a default subnet in use1-az3 (us-east-1e in most
# accounts), so without this filter a created cluster in the default region fails with
# UnsupportedAvailabilityZoneException. Source: Amazon EKS User Guide, "View Amazon EKS networking
# requirements for VPC and subnets" (subnet requirements).
EKS_UNSUPPORTED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})


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
        "block_device_mappings": [{
            "device_name": ROOT_DEVICE,
            "ebs": {
                "volume_size": disk_gib,
                "volume_type": "gp3",
                "throughput": ROOT_DISK_THROUGHPUT_MBPS,
                "iops": ROOT_DISK_IOPS,
                "encrypted": "true",
                "delete_on_termination": "true",
            },
        }],
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
    # EC2 Capacity Block reservation id (cr-...), set when capacityType is capacity-block.
    capacity_reservation_id: str | None = None
    # Node labels beyond the placement's, e.g. the MIG manager's partition label.
    extra_labels: tuple[tuple[str, str], ...] = ()
    # Where the pool is in the stack file, for errors found at look-up time ("Pulumi.dev.yaml: pools[1]").
    config_key: str = "pools"


@dataclass(frozen=True)
class GpuNodePoolArgs:
    spec: NodePoolSpec
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    # The subnets this pool may use (already narrowed to a Capacity Block's zone, see
    # `reservation_subnets`); an EFA pool takes the first of them.
    subnet_ids: list[str]
    region: str
    vpc_id: pulumi.Input[str] | None = None
    cluster_security_group_id: pulumi.Input[str] | None = None


class GpuNodePool(pulumi.ComponentResource):
    """A managed node group of one GPU instance type, tainted so only GPU work lands on it."""

    node_group_name: pulumi.Output[str]
    placement: GpuPlacement

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:GpuNodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec, pool, machine, placement = args.spec, args.spec.pool, args.spec.machine, args.spec.placement
        capacity_block = pool.capacityType == "capacity-block"

        launch_template = root_disk_launch_template(pool.diskGib, args.region)
        subnet_ids = list(args.subnet_ids)
        labels = {**placement.node_labels, **dict(spec.extra_labels)}
        if pool.efa:
            # A Capacity Block is already one UltraCluster placement; a cluster placement group of
            # our own would not contain the reservation and its launches would fail.
            launch_template.update(self._efa(name, args, machine, placement_group=not capacity_block))
            # A cluster placement group lives in one Availability Zone, so the pool gets one subnet.
            subnet_ids = subnet_ids[:1]
            # The EFA device plugin's DaemonSet selects EFA nodes of every pool by this label.
            labels[efa.EFA_NODE_LABEL] = efa.EFA_NODE_LABEL_VALUE
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
        lt = aws.ec2.LaunchTemplate(f"{name}-lt", **launch_template, opts=child)

        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=subnet_ids,
            instance_types=instance_types,
            ami_type=GPU_AMI_TYPE,
            capacity_type=CAPACITY_TYPES[pool.capacityType],
            scaling_config={
                "min_size": pool.minNodes,
                "max_size": pool.maxNodes,
                "desired_size": pool.desiredNodes if pool.desiredNodes is not None else pool.minNodes,
            },
            labels=labels,
            taints=[{
                "key": placement.taint_key,
                "value": placement.taint_value,
                "effect": cloud_taint_effect(placement.taint_effect),
            }],
            launch_template=launch_template_ref(lt),
            # One GPU node at a time during AMI/version rollouts: each is expensive and slow to fill.
            update_config={"max_unavailable": 1},
            region=args.region,
            tags={"llm-serving/pool": pool.name},
            # The cluster autoscaler owns the current size once the pool exists.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.node_group_name = node_group.node_group_name
        self.placement = placement
        self.register_outputs({"nodeGroupName": self.node_group_name})

    def _efa(self, name: str, args: GpuNodePoolArgs, machine: gpus.CloudMachine, placement_group: bool) -> dict:
        """EFA interfaces (one per network card), their security group, and a placement group."""
        child = pulumi.ResourceOptions(parent=self)
        # EFA traffic must be allowed to and from the security group itself (AWS EFA setup guide).
        efa_sg = aws.ec2.SecurityGroup(
            f"{name}-efa",
            description="EFA traffic between the GPU nodes of one pool",
            vpc_id=args.vpc_id,
            ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True}],
            egress=[
                {"protocol": "-1", "from_port": 0, "to_port": 0, "self": True},
                {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"]},
            ],
            region=args.region,
            opts=child,
        )
        # Interfaces in a launch template replace the node's default ENI and its security groups,
        # so the cluster security group is listed again next to the EFA one.
        security_groups = [sg for sg in (args.cluster_security_group_id, efa_sg.id) if sg is not None]
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
        if placement_group:
            group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", region=args.region, opts=child)
            template["placement"] = {"group_name": group.name}
        return template


def reservation_subnets(
    reservation_id: str,
    instance_type: str,
    subnet_ids: list[str],
    vpc_id: str,
    region: str,
    where: str,
    opts: pulumi.InvokeOptions | None = None,
) -> list[str]:
    """The cluster subnets in the Availability Zone of a Capacity Block.

    A Capacity Block exists in one zone; a node group with subnets elsewhere launches there at
    random and fails ("The following supplied instance types do not exist"). The reservation is
    looked up, so its zone and instance type are checked before anything is created.
    """
    block = aws.ec2.get_capacity_block_reservation(id=reservation_id, region=region, opts=opts)
    problems = []
    if block.instance_type and block.instance_type != instance_type:
        problems.append(
            f"{where}.capacityReservationId: {reservation_id} reserves {block.instance_type}, but the pool runs "
            f"{instance_type}; set machineType to {block.instance_type} or use the matching block"
        )
    zone = block.availability_zone
    if zone is None:
        # Only an offline evaluation answers without a zone: keep every subnet.
        chosen = list(subnet_ids)
    else:
        in_zone = aws.ec2.get_subnets(
            filters=[{"name": "vpc-id", "values": [vpc_id]}, {"name": "availability-zone", "values": [zone]}],
            region=region,
            opts=opts,
        )
        chosen = [s for s in subnet_ids if s in set(in_zone.ids)]
        if not chosen:
            problems.append(
                f"{where}.capacityReservationId: {reservation_id} is in {zone}, where the cluster has no subnet; "
                "buy the block in a zone of the cluster's subnets"
            )
    if problems:
        raise cfg.ConfigError(problems)
    return chosen


def eks_supported_subnets(subnet_ids: list[str], region: str, opts: pulumi.InvokeOptions | None = None) -> list[str]:
    """`subnet_ids` without those in zones where EKS refuses cluster subnets."""
    kept = []
    for subnet_id in subnet_ids:
        zone_id = aws.ec2.get_subnet(id=subnet_id, region=region, opts=opts).availability_zone_id
        if zone_id not in EKS_UNSUPPORTED_ZONE_IDS:
            kept.append(subnet_id)
    return kept


@dataclass(frozen=True)
class SystemNodeGroupArgs:
    pool: cfg.SystemPoolConfig
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: pulumi.Input[list[str]]
    region: str


def system_instance_type(pool: cfg.SystemPoolConfig) -> str:
    return pool.machineType or DEFAULT_SYSTEM_INSTANCE_TYPE


class SystemNodeGroup(pulumi.ComponentResource):
    """Untainted CPU nodes of a created cluster, for everything that is not a GPU server.

    The GPU pools carry the GPU taint, so without these nodes CoreDNS, the operators' controllers,
    the EFS CSI controller, KEDA and the mirror Jobs would have nowhere to run.
    """

    node_group_name: pulumi.Output[str]

    def __init__(self, name: str, args: SystemNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:SystemNodeGroup", name, None, opts)
        pool = args.pool
        lt = aws.ec2.LaunchTemplate(
            f"{name}-lt", **root_disk_launch_template(pool.diskGib, args.region), opts=pulumi.ResourceOptions(parent=self)
        )
        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            # Every subnet of the cluster, so the system pods (two CoreDNS replicas) can spread over zones.
            subnet_ids=args.subnet_ids,
            instance_types=[system_instance_type(pool)],
            ami_type=SYSTEM_AMI_TYPE,
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


@dataclass(frozen=True)
class EksClusterArgs:
    name: str
    create: bool
    kubernetes_version: str
    region: str
    pools: list[NodePoolSpec]
    bucket: S3ModelBucketArgs | None = None
    rwx_storage_class: str = efs.DEFAULT_STORAGE_CLASS
    # Create EFS, its CSI driver and the `rwx_storage_class` StorageClass (see efs.manages_rwx_storage).
    manage_rwx_storage: bool = True
    # The CPU system node group; only on a created cluster (an existing one has its own CPU nodes).
    system_pool: cfg.SystemPoolConfig | None = None
    tags: dict[str, str] = field(default_factory=dict)


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
    cloud: str = "aws"

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        region = args.region

        # Look-ups are direct (not `_output`) so the subnet ids are plain values: EFS needs one
        # mount target resource per zone, and resources are never created inside `apply`.
        invoke = pulumi.InvokeOptions(parent=self)
        addons_ready: list[pulumi.Resource] = []
        if args.create:
            cluster_name, endpoint, ca_data, subnet_ids, vpc_id, cluster_sg, agent = self._create(name, args)
            addons_ready.append(agent)
            # Default subnets are one per Availability Zone by definition: no look-up needed.
            mount_subnet_ids = sorted(subnet_ids)
        else:
            found = aws.eks.get_cluster(name=args.name, region=region, opts=invoke)
            cluster_name = found.name
            endpoint = found.endpoint
            ca_data = found.certificate_authorities[0].data
            subnet_ids = list(found.vpc_config.subnet_ids)
            vpc_id = found.vpc_config.vpc_id
            cluster_sg = found.vpc_config.cluster_security_group_id
            mount_subnet_ids = (
                efs.one_subnet_per_zone(subnet_ids, region, invoke) if args.manage_rwx_storage else []
            )

        # One role for every node group (GPU pools and the system pool): they need the same three
        # node policies. The logical name predates the system pool; renaming it would replace the
        # role and with it every node group.
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
        for spec in args.pools:
            pool_subnets = subnet_ids
            if spec.capacity_reservation_id:
                pool_subnets = reservation_subnets(
                    spec.capacity_reservation_id, spec.machine.name, subnet_ids, vpc_id, region, spec.config_key, invoke
                )
            GpuNodePool(
                f"{name}-{spec.pool.name}",
                GpuNodePoolArgs(
                    spec=spec,
                    cluster_name=cluster_name,
                    node_role_arn=node_role.arn,
                    subnet_ids=pool_subnets,
                    region=region,
                    vpc_id=vpc_id,
                    cluster_security_group_id=cluster_sg,
                ),
                # Nodes that join before their role can pull images or assign IPs never get Ready.
                opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
            )
            self.placements[spec.pool.name] = spec.placement
            if spec.pool.efa:
                self.rdma_attachments[spec.pool.name] = efa.rdma_attachment(spec.machine.name)

        if args.create and args.system_pool is not None:
            system = SystemNodeGroup(
                f"{name}-system",
                SystemNodeGroupArgs(
                    pool=args.system_pool,
                    cluster_name=cluster_name,
                    node_role_arn=node_role.arn,
                    subnet_ids=subnet_ids,
                    region=region,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
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
            opts=child,
        )
        # EFA interfaces reach pods only through AWS's device plugin; install it when a pool has EFA.
        self.efa_device_plugin = None
        efa_placements = [spec.placement for spec in args.pools if spec.pool.efa]
        if efa_placements:
            self.efa_device_plugin = efa.EfaDevicePlugin(f"{name}-efa", efa_placements, self.provider, opts=child)
        self.rwx_storage_class = args.rwx_storage_class
        # EKS has no default StorageClass a mirror's staging volume could use (no EBS CSI driver is
        # installed); the EFS class this layer manages serves ReadWriteOnce claims too.
        self.staging_storage_class = args.rwx_storage_class
        self.rwx_storage = None
        if args.manage_rwx_storage:
            self.rwx_storage = efs.EfsStorage(
                f"{name}-efs",
                efs.EfsStorageArgs(
                    cluster_name=cluster_name,
                    vpc_id=vpc_id,
                    mount_subnet_ids=mount_subnet_ids,
                    cluster_security_group_id=cluster_sg,
                    region=region,
                    provider=self.provider,
                    storage_class_name=args.rwx_storage_class,
                    addon_depends_on=addons_ready,
                ),
                opts=child,
            )
        self.register_outputs({"clusterName": self.cluster_name, "endpoint": self.endpoint})

    def _create(self, name: str, args: EksClusterArgs):
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        # Without subnets in config, a created cluster uses the account's default VPC and its
        # default subnets (one per Availability Zone).
        vpc = aws.ec2.get_vpc(default=True, region=args.region, opts=invoke)
        subnets = aws.ec2.get_subnets(
            filters=[
                {"name": "vpc-id", "values": [vpc.id]},
                {"name": "default-for-az", "values": ["true"]},
            ],
            region=args.region,
            opts=invoke,
        )
        # The node groups and EFS mount targets use the same subnets as the control plane.
        subnet_ids = eks_supported_subnets(sorted(subnets.ids), args.region, invoke)
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
        cluster = aws.eks.Cluster(
            name,
            name=args.name,
            role_arn=role.arn,
            version=args.kubernetes_version,
            vpc_config={
                "subnet_ids": subnet_ids,
                "endpoint_public_access": True,
                "endpoint_private_access": True,
            },
            # Access entries (API mode) instead of the aws-auth ConfigMap; the identity that runs
            # `pulumi up` becomes cluster admin so the Kubernetes provider can act.
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            region=args.region,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        # Pod Identity (the model bucket's writer and reader) needs this agent on every node.
        # Version left to EKS: it installs the default build for the cluster's Kubernetes version.
        agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=cluster.name,
            addon_name=POD_IDENTITY_AGENT_ADDON,
            region=args.region,
            opts=child,
        )
        return (
            cluster.name,
            cluster.endpoint,
            cluster.certificate_authority.apply(lambda ca: ca.data),
            subnet_ids,
            vpc.id,
            cluster.vpc_config.apply(lambda v: v.cluster_security_group_id),
            agent,
        )


def create_eks(stack: cfg.StackConfig, stack_name: str) -> EksCluster:
    """EksCluster from the validated stack config."""
    region = stack.region
    specs = []
    gpu_operator = stack.operators.gpuOperator
    driver_plan = gpu_driver.resolve_driver_plan("aws", gpu_operator.driver if gpu_operator.enabled else "auto")
    for i, pool in enumerate(stack.pools):
        machine = cfg.pool_machine(stack.cloud, pool)
        assert machine is not None, f"pool {pool.name} passed config validation without a machine"
        specs.append(NodePoolSpec(
            extra_labels=tuple(gpu_driver.mig_node_labels(pool, driver_plan).items()),
            pool=pool,
            machine=machine,
            placement=placement_for(pool, rdma=pool.efa),
            # Config requires the id exactly when capacityType is capacity-block.
            capacity_reservation_id=pool.capacityReservationId,
            config_key=f"Pulumi.{stack_name}.yaml: pools[{i}]",
        ))
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
    )
    return EksCluster(
        stack.cluster.name,
        EksClusterArgs(
            name=stack.cluster.name,
            create=stack.cluster.create,
            kubernetes_version=stack.cluster.kubernetesVersion,
            region=region,
            pools=specs,
            bucket=bucket,
            rwx_storage_class=stack.cluster.rwxStorageClass or efs.DEFAULT_STORAGE_CLASS,
            manage_rwx_storage=efs.manages_rwx_storage(stack.cluster.rwxStorageClass, stack.cluster.manageRwxStorage),
            system_pool=stack.cluster.systemPool if stack.cluster.create else None,
        ),
    )
