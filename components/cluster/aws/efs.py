"""EFS for the ReadWriteMany model volume on EKS: file system, mount targets, CSI driver, StorageClass.

The model store asks for a ReadWriteMany claim of class `cluster.rwxStorageClass` (default
`efs-sc`). When this program manages that class (the default one, or any name with
`cluster.manageRwxStorage: true`), this module makes it real: an encrypted EFS file
system with Elastic throughput, one mount target per Availability Zone of the node subnets behind a
security group that admits NFS only from the cluster security group, the `aws-efs-csi-driver` EKS
add-on with an EKS Pod Identity role for its controller, and the StorageClass itself.

When the stack names another class, or sets `manageRwxStorage: false`, the user manages that class
(and whatever backs it), and nothing here is created: see `manages_rwx_storage`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from common import contract
from components.cluster.aws import policies

# The class this program creates and manages; also the name the AWS EFS CSI docs use.
DEFAULT_STORAGE_CLASS = "efs-sc"

EFS_CSI_ADDON = "aws-efs-csi-driver"
EFS_CSI_PROVISIONER = "efs.csi.aws.com"
# The add-on's controller (it creates and deletes access points) runs as this ServiceAccount.
CONTROLLER_NAMESPACE = "kube-system"
CONTROLLER_SERVICE_ACCOUNT = "efs-csi-controller-sa"
# AWS managed policy for the controller. Source:
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonEFSCSIDriverPolicy.html
EFS_CSI_DRIVER_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"

NFS_PORT = 2049
# Every access point this class provisions gets its directory under here, so the file system's
# root shows at a glance what belongs to llm-serving.
BASE_PATH = "/llm-serving"
# The access point enforces its own POSIX owner on every NFS request made through it, so "700"
# keeps each claim's directory private without constraining the uid the pods run as.
DIRECTORY_PERMS = "700"


def manages_storage_class(configured: str | None) -> bool:
    """Does this program create the RWX StorageClass (and EFS behind it)?

    Yes when `cluster.rwxStorageClass` is unset or is the default `efs-sc`; a different name means
    the user runs that class themselves, so creating an EFS file system for it would be waste.
    """
    return configured in (None, "", DEFAULT_STORAGE_CLASS)


def manages_rwx_storage(configured_class: str | None, manage: bool | None) -> bool:
    """`cluster.manageRwxStorage` when set, else the class-name rule of `manages_storage_class`.

    True with a custom class name creates EFS behind a StorageClass of that name; false with the
    default name leaves an `efs-sc` class the cluster already has to its owner.
    """
    return manage if manage is not None else manages_storage_class(configured_class)


@dataclass(frozen=True)
class EfsStorageArgs:
    cluster_name: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    # (stable key, subnet id), one per Availability Zone (`EksNetwork.one_per_zone`): EFS takes one
    # mount target per zone, and a mount target serves every subnet of its zone. The key (the
    # subnet id when looked up, the zone for a created VPC) names the mount target, so a change
    # in the list never renames (replaces) the rest.
    mount_subnets: list[tuple[str, pulumi.Input[str]]]
    # Every node of the cluster is in this group (EKS attaches it to managed node groups, and EFA
    # launch templates list it explicitly), so NFS from it means NFS from the nodes.
    cluster_security_group_id: pulumi.Input[str]
    region: str
    provider: k8s.Provider
    storage_class_name: str = DEFAULT_STORAGE_CLASS
    # Resources the add-on must wait for (the Pod Identity agent add-on on a created cluster).
    addon_depends_on: list[pulumi.Resource] = field(default_factory=list)


class EfsStorage(pulumi.ComponentResource):
    """An EFS file system the EKS nodes can mount, and the StorageClass that provisions from it."""

    file_system_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    controller_role_arn: pulumi.Output[str]
    storage_class_name: str

    def __init__(self, name: str, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:EfsStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        region = args.region

        file_system = aws.efs.FileSystem(
            f"{name}-fs",
            # At rest with the AWS-managed key (aws/elasticfilesystem): the weights are public
            # artefacts, and a customer key would add a key policy to manage for no gain.
            encrypted=True,
            # Elastic, not the default Bursting: Bursting gives 50 KiB/s per GiB stored (a 150 GiB
            # model volume: ~7.5 MiB/s baseline) and bursts to 100 MiB/s only while credits last,
            # so a 70B model's 140 GB would take over 20 minutes to load at best. Elastic scales
            # with demand (GiB/s of reads per file system, up to 1500 MiB/s per client) and is
            # billed per byte moved, which suits weights read in bursts at start-up. Sources:
            # https://docs.aws.amazon.com/efs/latest/ug/performance.html#throughput-modes and
            # https://repost.aws/knowledge-center/efs-choosing-correct-throughput-mode
            throughput_mode="elastic",
            # Elastic throughput requires General Purpose mode (also the lower-latency mode).
            performance_mode="generalPurpose",
            # No lifecycle policy: weights are read only when a server starts, so an Infrequent
            # Access transition would move them to the tier with per-read charges and slower first
            # bytes exactly when a scale-up needs them fast.
            region=region,
            tags={"Name": f"{name}-models", "llm-serving/purpose": "model-weights"},
            opts=child,
        )

        # Mount targets only answer NFS; security groups are stateful, so no egress rule is needed
        # (Pulumi's AWS provider removes the default allow-all egress of a new group).
        security_group = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            description="NFS to the llm-serving model file system from the EKS cluster's nodes",
            vpc_id=args.vpc_id,
            ingress=[
                {
                    "description": "NFS from the cluster security group",
                    "protocol": "tcp",
                    "from_port": NFS_PORT,
                    "to_port": NFS_PORT,
                    "security_groups": [args.cluster_security_group_id],
                }
            ],
            region=region,
            opts=child,
        )

        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mount-{key}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[security_group.id],
                region=region,
                opts=child,
            )
            for key, subnet_id in args.mount_subnets
        ]

        controller_role = aws.iam.Role(
            f"{name}-csi-controller",
            description=f"{CONTROLLER_NAMESPACE}/{CONTROLLER_SERVICE_ACCOUNT}: EFS CSI controller (access points)",
            assume_role_policy=pulumi.Output.json_dumps(
                policies.pod_identity_trust_policy(args.cluster_name, CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT)
            ),
            opts=child,
        )
        policy = aws.iam.RolePolicyAttachment(
            f"{name}-csi-controller-efs",
            role=controller_role.name,
            policy_arn=EFS_CSI_DRIVER_POLICY_ARN,
            opts=child,
        )

        addon = aws.eks.Addon(
            f"{name}-csi-driver",
            cluster_name=args.cluster_name,
            addon_name=EFS_CSI_ADDON,
            # Version left to EKS, as for the Pod Identity agent: it installs the default build for
            # the cluster's Kubernetes version, and a pinned build would need re-pinning per upgrade.
            # The add-on makes and removes its own association (EFS CSI supports Pod Identity since
            # kubernetes-sigs/aws-efs-csi-driver#1254); only the controller calls AWS APIs: the node
            # daemonset mounts over plain NFS, the file system having no IAM-enforcing policy.
            pod_identity_associations=[
                {"role_arn": controller_role.arn, "service_account": CONTROLLER_SERVICE_ACCOUNT}
            ],
            configuration_values=json.dumps(controller_configuration()),
            region=region,
            # A controller started before its role has the policy, or before the agent hands out
            # credentials, fails its first provisioning calls.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, *args.addon_depends_on]),
        )

        # Through the cluster's provider (never the ambient kubeconfig); created once the driver is
        # installed and the file system is mountable in every zone, so a claim of this class binds
        # and mounts as soon as the class exists.
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-storage-class",
            metadata={"name": args.storage_class_name, "labels": {"app.kubernetes.io/managed-by": "llm-serving"}},
            provisioner=EFS_CSI_PROVISIONER,
            parameters=storage_class_parameters(file_system.id),
            # Delete: each claim gets its own access point, and a released volume can never be
            # re-bound by a new claim (it would get a new access point), so Retain would only
            # accumulate orphans. The weights are reproducible from the bucket and the Hub at the
            # pinned revision. The driver deletes the access point, not its directory, unless its
            # controller runs with deleteAccessPointRootDir.
            reclaim_policy="Delete",
            # Immediate: EFS is regional (a mount target in every node zone), so there is no zone
            # to wait for, and the claim binds during `pulumi up`, which surfaces a broken EFS
            # set-up at the claim instead of at a pod on a freshly scaled GPU node.
            volume_binding_mode="Immediate",
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[addon, *mount_targets],
            ),
        )

        self.file_system_id = file_system.id
        self.security_group_id = security_group.id
        self.controller_role_arn = controller_role.arn
        self.storage_class_name = args.storage_class_name
        self.storage_class = storage_class
        self.register_outputs(
            {
                "fileSystemId": self.file_system_id,
                "securityGroupId": self.security_group_id,
                "controllerRoleArn": self.controller_role_arn,
            }
        )


def storage_class_parameters(file_system_id: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """Dynamic provisioning with one EFS access point per claim.

    EFS is elastic: the driver ignores the claim's requested size (the claim still states the size
    the weights need, which is what the model store sizes from). Parameters:
    https://github.com/kubernetes-sigs/aws-efs-csi-driver/blob/master/docs/parameters.md
    (in-transit TLS is the driver's default and still uses NFS's port 2049).
    """
    return {
        "provisioningMode": "efs-ap",
        "fileSystemId": file_system_id,
        "directoryPerms": DIRECTORY_PERMS,
        "basePath": BASE_PATH,
    }


def controller_configuration() -> dict:
    """Add-on configuration: the controller tolerates the GPU taint.

    The EKS add-on's controller tolerates only `CriticalAddonsOnly` and the driver's own start-up
    taint (chart values.yaml), so on a cluster whose only nodes are tainted GPU nodes it would stay
    Pending and no claim would ever bind. Setting `controller.tolerations` replaces the defaults, so
    they are listed again. `controller.tolerations` is part of the add-on's configuration schema
    (kubernetes-sigs/aws-efs-csi-driver#1181, `aws eks describe-addon-configuration`).
    """
    return {
        "controller": {
            "tolerations": [
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"key": "efs.csi.aws.com/agent-not-ready", "operator": "Exists"},
                {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": contract.GPU_TAINT_EFFECT},
            ],
        },
    }
