"""GKE: the cluster (created, or an existing one by name), its GPU node pools, the model bucket's
Workload Identity accounts, and the Kubernetes provider every Kubernetes resource of the stack uses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import config as cfg
from components import gpus
from components.cluster import (
    MODEL_READER_SERVICE_ACCOUNT,
    MODEL_WRITER_SERVICE_ACCOUNT,
    bucket_resource_name,
    cloud_taint_effect,
    exec_kubeconfig,
    https,
    placement_for,
)
from components.gcp import iam
from components.gcp.bucket import GcsModelBucket, GcsModelBucketArgs
from components.platform import GpuPlacement, ModelBucket

DEFAULT_REGION = "us-central1"
RELEASE_CHANNEL = "REGULAR"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Every GCP local SSD is 375 GiB; the catalog records each machine's total.
LOCAL_SSD_GIB = 375
# A3 Ultra and A4 boot only from Hyperdisk; the other GPU series boot from Persistent Disk.
_HYPERDISK_ONLY_PREFIXES = ("a3-ultragpu-", "a4-")


def boot_disk_type(machine_type: str) -> str:
    return "hyperdisk-balanced" if machine_type.startswith(_HYPERDISK_ONLY_PREFIXES) else "pd-balanced"


def local_ssd_count(machine: gpus.CloudMachine, wanted: bool) -> int:
    """Local SSDs to back ephemeral storage (image layers, emptyDirs): all the machine has, or none."""
    return machine.local_ssd_gib // LOCAL_SSD_GIB if wanted else 0


@dataclass(frozen=True)
class NodePoolSpec:
    pool: cfg.PoolConfig
    machine: gpus.CloudMachine
    accelerator: str  # GKE accelerator type, e.g. nvidia-l4
    placement: GpuPlacement


@dataclass(frozen=True)
class GpuNodePoolArgs:
    spec: NodePoolSpec
    cluster: pulumi.Input[str]
    location: str
    project: pulumi.Input[str]
    node_service_account: pulumi.Input[str]


class GpuNodePool(pulumi.ComponentResource):
    """A GKE node pool of one GPU machine type, tainted so only GPU work lands on it."""

    node_pool_name: pulumi.Output[str]
    placement: GpuPlacement

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:GpuNodePool", name, None, opts)
        spec, pool, machine, placement = args.spec, args.spec.pool, args.spec.machine, args.spec.placement

        operator_driver = pool.gkeDriverVersion == "INSTALLATION_DISABLED"
        labels = dict(placement.node_labels)
        if operator_driver:
            # The GPU Operator installs the driver and runs the device plugin: its driver container
            # needs Ubuntu nodes, and GKE's own device plugin must stay off (one advertiser of
            # nvidia.com/gpu per node). Config allows this only with gpuOperator.driver: operator.
            labels["gke-no-default-nvidia-gpu-device-plugin"] = "true"
        node_config: dict = {
            "machine_type": machine.name,
            "image_type": "UBUNTU_CONTAINERD" if operator_driver else "COS_CONTAINERD",
            "disk_size_gb": pool.diskGib,
            "disk_type": boot_disk_type(machine.name),
            # GPU machine types come with a fixed number of GPUs; the accelerator count must match.
            "guest_accelerators": [{
                "type": spec.accelerator,
                "count": machine.gpus,
                "gpu_driver_installation_config": {"gpu_driver_version": pool.gkeDriverVersion},
            }],
            "labels": labels,
            "taints": [{
                "key": placement.taint_key,
                "value": placement.taint_value,
                "effect": cloud_taint_effect(placement.taint_effect),
            }],
            "spot": pool.capacityType == "spot",
            # Image streaming: containers start before the 10-20 GB engine image is fully pulled.
            "gcfs_config": {"enabled": True},
            # gVNIC: the higher-bandwidth virtual NIC (needed for the per-VM bandwidth tiers).
            "gvnic": {"enabled": True},
            # Pods see the GKE metadata server (Workload Identity), never the node's credentials.
            "workload_metadata_config": {"mode": "GKE_METADATA"},
            "service_account": args.node_service_account,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        }
        ssds = local_ssd_count(machine, pool.localSsd)
        if ssds:
            node_config["ephemeral_storage_local_ssd_config"] = {"local_ssd_count": ssds}

        node_pool = gcp.container.NodePool(
            f"{name}-np",
            cluster=args.cluster,
            location=args.location,
            project=args.project,
            # Totals across all the pool's zones (not per zone), so minNodes/maxNodes mean on GKE
            # what they mean on EKS; ANY lets the autoscaler take GPUs from whichever zone has them.
            autoscaling={
                "total_min_node_count": pool.minNodes,
                "total_max_node_count": pool.maxNodes,
                "location_policy": "ANY",
            },
            # GKE's initial count is per zone of the pool.
            initial_node_count=pool.desiredNodes if pool.desiredNodes is not None else pool.minNodes,
            management={"auto_repair": True, "auto_upgrade": True},
            # One GPU node at a time during upgrades: each is expensive and slow to fill.
            upgrade_settings={"max_surge": 1, "max_unavailable": 0},
            node_config=node_config,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )
        self.node_pool_name = node_pool.name
        self.placement = placement
        self.register_outputs({"nodePoolName": self.node_pool_name})


@dataclass(frozen=True)
class GkeClusterArgs:
    name: str
    create: bool
    kubernetes_version: str
    location: str
    project: pulumi.Input[str]
    pools: list[NodePoolSpec]
    bucket: GcsModelBucketArgs | None = None
    rwx_storage_class: str = "standard-rwx"


class GkeCluster(pulumi.ComponentResource):
    """A GKE cluster with GPU pools; meets `components.platform.Cluster`."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    placements: dict[str, GpuPlacement]
    bucket: ModelBucket | None
    rwx_storage_class: str
    cloud: str = "gcp"

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        node_sa = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=iam.account_id(args.name, "gpu-nodes"),
            display_name="GKE nodes of the llm-serving cluster",
            project=args.project,
            opts=child,
        )
        node_roles = [
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.rsplit('.', 1)[-1]}",
                project=args.project,
                role=role,
                member=node_sa.email.apply(lambda e: f"serviceAccount:{e}"),
                opts=child,
            )
            for role in iam.NODE_ROLES
        ]

        if args.create:
            cluster = gcp.container.Cluster(
                name,
                name=args.name,
                location=args.location,
                project=args.project,
                min_master_version=args.kubernetes_version,
                release_channel={"channel": RELEASE_CHANNEL},
                # GPU pools are separate node pools; the default pool exists only because the API
                # wants one at creation, and goes away right after.
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config={"service_account": node_sa.email, "oauth_scopes": [CLOUD_PLATFORM_SCOPE]},
                workload_identity_config={
                    "workload_pool": pulumi.Output.from_input(args.project).apply(lambda p: f"{p}.svc.id.goog"),
                },
                # Filestore CSI provides the `standard-rwx` StorageClass of the model volume.
                addons_config={"gcp_filestore_csi_driver_config": {"enabled": True}},
                # `pulumi destroy` should be able to remove what `pulumi up` made; protect the
                # stack (`pulumi state protect`) where that is not wanted.
                deletion_protection=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=node_roles),
            )
            cluster_name = cluster.name
            endpoint = cluster.endpoint
            ca_data = cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        else:
            found = gcp.container.get_cluster_output(
                name=args.name, location=args.location, project=args.project, opts=pulumi.InvokeOptions(parent=self)
            )
            cluster_name = found.name
            endpoint = found.endpoint
            ca_data = found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)

        self.placements = {}
        for spec in args.pools:
            GpuNodePool(
                f"{name}-{spec.pool.name}",
                GpuNodePoolArgs(
                    spec=spec,
                    cluster=cluster_name,
                    location=args.location,
                    project=args.project,
                    node_service_account=node_sa.email,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=node_roles),
            )
            self.placements[spec.pool.name] = spec.placement

        self.bucket = None
        if args.bucket is not None:
            self.bucket = GcsModelBucket(f"{name}-models", replace(args.bucket, project=args.project), opts=child).model_bucket

        self.cluster_name = pulumi.Output.from_input(cluster_name)
        self.endpoint = https(endpoint)
        # The auth plugin reads the caller's gcloud credentials at connect time; no token in state.
        self.kubeconfig = exec_kubeconfig(
            args.name, self.endpoint, ca_data, "gke-gcloud-auth-plugin", [], provide_cluster_info=True
        )
        # Every Kubernetes resource of the stack is created through this provider; it is built from
        # the cluster's own endpoint and CA, never from the ambient kubeconfig.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=child,
        )
        self.rwx_storage_class = args.rwx_storage_class
        self.register_outputs({"clusterName": self.cluster_name, "endpoint": self.endpoint})


def create_gke(stack: cfg.StackConfig, stack_name: str) -> GkeCluster:
    """GkeCluster from the validated stack config."""
    location = stack.cluster.region or DEFAULT_REGION
    project: pulumi.Input[str] = stack.cluster.gcpProject or gcp.organizations.get_client_config_output().project
    specs = []
    for pool in stack.pools:
        machine = cfg.pool_machine(stack.cloud, pool)
        accelerator = gpus.CATALOG[pool.gpu].gcp_accelerator
        assert machine is not None and accelerator, f"pool {pool.name} passed config validation without a GKE machine"
        specs.append(NodePoolSpec(pool=pool, machine=machine, accelerator=accelerator, placement=placement_for(pool)))
    store = stack.modelStore
    bucket = GcsModelBucketArgs(
        resource_name=bucket_resource_name(stack_name),
        prefix=store.prefix,
        namespace=store.namespace,
        writer_service_account=MODEL_WRITER_SERVICE_ACCOUNT,
        reader_service_account=MODEL_READER_SERVICE_ACCOUNT,
        project=project,
        location=location.upper(),
        account_base=stack.cluster.name,
        bucket_name=store.bucketName,
    )
    return GkeCluster(
        stack.cluster.name,
        GkeClusterArgs(
            name=stack.cluster.name,
            create=stack.cluster.create,
            kubernetes_version=stack.cluster.kubernetesVersion,
            location=location,
            project=project,
            pools=specs,
            bucket=bucket,
            rwx_storage_class=stack.cluster.rwxStorageClass or "standard-rwx",
        ),
    )
