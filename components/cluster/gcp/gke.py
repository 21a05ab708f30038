"""GKE: the cluster (created, or an existing one by name), its GPU node pools, the CPU system node
pool of a created cluster, the model bucket's Workload Identity accounts, and the Kubernetes
provider every Kubernetes resource of the stack uses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

import stack_config as cfg
from common import contract, gpu_driver, gpus
from components.cluster.common import (
    MODEL_READER_SERVICE_ACCOUNT,
    MODEL_WRITER_SERVICE_ACCOUNT,
    bucket_resource_name,
    cloud_taint_effect,
    endpoint_summary,
    exec_kubeconfig,
    https,
    placement_for,
)
from components.cluster.gcp import apis, filestore, iam, registry_cache
from components.cluster.gcp import network as gke_network
from components.cluster.gcp.bucket import GcsModelBucket, GcsModelBucketArgs
from components.cluster.gcp.secrets_key import secrets_key
from components.cluster.interface import GpuPlacement, ModelBucket, RdmaAttachment
from stack_config.images import UPSTREAMS

RELEASE_CHANNEL = "REGULAR"
# Dataplane V2 (pulumi-gcp 10.2.0 Cluster datapath_provider: "Set to `ADVANCED_DATAPATH` to enable
# Dataplane v2"); the GKE API's DatapathProvider enum
# (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/DatapathProvider).
DATAPATH_PROVIDER = "ADVANCED_DATAPATH"
# The cluster's Gateway API channel when the entrance runs on the GKE Gateway controller.
GATEWAY_API_CHANNEL = "CHANNEL_STANDARD"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Every GCP local SSD is 375 GiB; the catalog records each machine's total.
LOCAL_SSD_GIB = 375
# A3 Ultra and A4 boot only from Hyperdisk; the other GPU series boot from Persistent Disk.
_HYPERDISK_ONLY_PREFIXES = ("a3-ultragpu-", "a4-")
# The system node pool: untainted CPU nodes for CoreDNS and GKE's own system pods, the operators'
# controllers, KEDA and the mirror Jobs. 8 vCPU / 32 GiB; `cluster.systemPool.machineType` overrides it.
DEFAULT_SYSTEM_MACHINE_TYPE = "e2-standard-8"
# Value of contract.LABEL_POOL on the system nodes.
SYSTEM_POOL = contract.SYSTEM_POOL
# Zone of a pool without `zones`: the region's "-a" zone. A pool left to span every zone of a
# regional cluster would ask for its GPU in zones that do not offer it, and GKE's per-zone initial
# count would multiply. Not every GPU is offered in "-a" (nor every region has one): set
# `pools[].zones` to zones that offer the pool's GPU (`gcloud compute accelerator-types list
# --filter="zone~^<region>"`).
DEFAULT_ZONE_SUFFIX = "-a"


# A zone name is its region plus "-<letter>"; an existing zonal cluster is looked up by its zone.
_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")


def default_zones(location: str) -> list[str]:
    """`<region>-a`, or the location itself when it already is a zone (a zonal existing cluster)."""
    return [location] if _ZONE_RE.match(location) else [f"{location}{DEFAULT_ZONE_SUFFIX}"]


def initial_per_zone(total: int, zones: list[str]) -> int:
    """GKE's initial node count is per zone of the pool; spread the wanted total over the zones.

    Rounded up, so the pool starts with at least the wanted total; stack_config/ refuses a
    total the zones cannot start within maxNodes.
    """
    return math.ceil(total / len(zones))


def boot_disk_type(machine_type: str) -> str:
    return "hyperdisk-balanced" if machine_type.startswith(_HYPERDISK_ONLY_PREFIXES) else "pd-balanced"


def shared_node_config(node_service_account: pulumi.Input[str]) -> dict:
    """node_config settings every node pool of this program has, GPU or system."""
    return {
        # gVNIC: the higher-bandwidth virtual NIC (needed for the per-VM bandwidth tiers).
        "gvnic": {"enabled": True},
        # Pods see the GKE metadata server (Workload Identity), never the node's credentials.
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "service_account": node_service_account,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
    }


def node_pool(
    name: str,
    parent: pulumi.Resource,
    cluster: pulumi.Input[str],
    location: str,
    project: pulumi.Input[str],
    node_config: dict,
    min_nodes: int,
    max_nodes: int,
    zones: list[str],
    initial_nodes_per_zone: int,
    location_policy: str,
    private_nodes: bool = False,
) -> gcp.container.NodePool:
    """A GKE node pool as this program makes every pool: autoscaled on totals, auto-repaired and
    auto-upgraded one node at a time, its size left to the autoscaler after creation."""
    return gcp.container.NodePool(
        name,
        cluster=cluster,
        location=location,
        project=project,
        # The zones the pool's nodes live in; without it a pool of a regional cluster spans every
        # zone of the region.
        node_locations=zones,
        # Totals across all the pool's zones (not per zone), so minNodes/maxNodes mean on GKE
        # what they mean on EKS.
        autoscaling={
            "total_min_node_count": min_nodes,
            "total_max_node_count": max_nodes,
            "location_policy": location_policy,
        },
        # GKE's initial count is per zone of the pool.
        initial_node_count=initial_nodes_per_zone,
        management={"auto_repair": True, "auto_upgrade": True},
        # One node at a time during upgrades: a GPU node is expensive and slow to fill, and the
        # system pool keeps serving while one of its nodes is replaced.
        upgrade_settings={"max_surge": 1, "max_unavailable": 0},
        node_config=node_config,
        # Internal addresses only; egress through the network's Cloud NAT (NodePool
        # network_config.enable_private_nodes: "Whether nodes have internal IP addresses only").
        network_config={"enable_private_nodes": True} if private_nodes else None,
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["initialNodeCount"]),
    )


def local_ssd_count(machine: gpus.CloudMachine, wanted: bool) -> int:
    """Local SSDs to back ephemeral storage (image layers, emptyDirs): all the machine has, or none."""
    return machine.local_ssd_gib // LOCAL_SSD_GIB if wanted else 0


@dataclass(frozen=True)
class NodePoolSpec:
    pool: cfg.PoolConfig
    machine: gpus.CloudMachine
    accelerator: str  # GKE accelerator type, e.g. nvidia-l4
    placement: GpuPlacement
    # node_locations: `pools[].zones`, or `default_zones` of the region.
    zones: list[str]
    # Who provides driver, device plugin and MIG partitions on these nodes (decided once, in
    # components/operators/values.py); it sets the node image and labels here.
    driver_plan: gpu_driver.DriverPlan
    # Where the pool is in the stack file, for errors ("Pulumi.dev.yaml: pools[1]").
    config_key: str = "pools"


@dataclass(frozen=True)
class GpuNodePoolArgs:
    spec: NodePoolSpec
    cluster: pulumi.Input[str]
    location: str
    project: pulumi.Input[str]
    node_service_account: pulumi.Input[str]
    private_nodes: bool = False


class GpuNodePool(pulumi.ComponentResource):
    """A GKE node pool of one GPU machine type, tainted so only GPU work lands on it."""

    node_pool_name: pulumi.Output[str]
    placement: GpuPlacement

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:GpuNodePool", name, None, opts)
        spec, pool, machine, placement = args.spec, args.spec.pool, args.spec.machine, args.spec.placement

        image_type = spec.driver_plan.gke_image_type
        labels = {
            **placement.node_labels,
            **dict(spec.driver_plan.gke_node_labels),
            **gpu_driver.mig_node_labels(pool, spec.driver_plan),
        }
        accelerator = {
            "type": spec.accelerator,
            # GPU machine types come with a fixed number of GPUs; the accelerator count must match.
            "count": machine.gpus,
            "gpu_driver_installation_config": {"gpu_driver_version": pool.gkeDriverVersion},
        }
        partition = gpu_driver.gke_gpu_partition_size(pool, spec.driver_plan)
        if partition:
            accelerator["gpu_partition_size"] = partition
        node_config: dict = {
            "machine_type": machine.name,
            "image_type": image_type,
            "disk_size_gb": pool.diskGib,
            "disk_type": boot_disk_type(machine.name),
            "guest_accelerators": [accelerator],
            "labels": labels,
            "taints": [
                {
                    "key": placement.taint_key,
                    "value": placement.taint_value,
                    "effect": cloud_taint_effect(placement.taint_effect),
                }
            ],
            "spot": pool.capacityType == "spot",
            # Image streaming: containers start before the 10-20 GB engine image is fully pulled.
            # It requires the Container-Optimized OS with containerd node image (GKE docs, "Use
            # Image streaming to pull container images", Requirements), so Ubuntu pools go without.
            "gcfs_config": {"enabled": image_type == gpu_driver.GKE_IMAGE_COS},
            **shared_node_config(args.node_service_account),
        }
        ssds = local_ssd_count(machine, pool.localSsd)
        if ssds:
            node_config["ephemeral_storage_local_ssd_config"] = {"local_ssd_count": ssds}

        pool_resource = node_pool(
            f"{name}-np",
            self,
            args.cluster,
            args.location,
            args.project,
            node_config,
            pool.minNodes,
            pool.maxNodes,
            spec.zones,
            initial_per_zone(pool.desiredNodes if pool.desiredNodes is not None else pool.minNodes, spec.zones),
            # ANY lets the autoscaler take GPUs from whichever of the pool's zones has them.
            location_policy="ANY",
            private_nodes=args.private_nodes,
        )
        self.node_pool_name = pool_resource.name
        self.placement = placement
        self.register_outputs({"nodePoolName": self.node_pool_name})


@dataclass(frozen=True)
class SystemNodePoolArgs:
    pool: cfg.SystemPoolConfig
    cluster: pulumi.Input[str]
    location: str
    project: pulumi.Input[str]
    node_service_account: pulumi.Input[str]
    # node_locations: `cluster.systemPool.zones`, or `default_zones` of the region.
    zones: list[str]
    config_key: str = "cluster.systemPool"
    private_nodes: bool = False


def system_machine_type(pool: cfg.SystemPoolConfig) -> str:
    return pool.machineType or DEFAULT_SYSTEM_MACHINE_TYPE


class SystemNodePool(pulumi.ComponentResource):
    """Untainted CPU nodes of a created cluster, for everything that is not a GPU server.

    A created cluster's default pool is removed and the GPU pools carry the GPU taint, so without
    this pool CoreDNS, the operators' controllers, KEDA and the mirror Jobs would have nowhere to run.
    """

    node_pool_name: pulumi.Output[str]

    def __init__(self, name: str, args: SystemNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:SystemNodePool", name, None, opts)
        pool = args.pool
        machine_type = system_machine_type(pool)
        node_config = {
            "machine_type": machine_type,
            "image_type": gpu_driver.GKE_IMAGE_COS,
            "disk_size_gb": pool.diskGib,
            "disk_type": boot_disk_type(machine_type),
            "labels": {contract.LABEL_POOL: SYSTEM_POOL},
            # No taints: this is where every pod without a GPU toleration lands.
            **shared_node_config(args.node_service_account),
        }
        pool_resource = node_pool(
            f"{name}-np",
            self,
            args.cluster,
            args.location,
            args.project,
            node_config,
            pool.minNodes,
            pool.maxNodes,
            args.zones,
            # minNodes at creation, spread over the zones; then the autoscaler keeps the total
            # within minNodes..maxNodes.
            initial_per_zone(pool.minNodes, args.zones),
            # Spread over the zones (when several are listed), so the system pods survive a zone outage.
            location_policy="BALANCED",
            private_nodes=args.private_nodes,
        )
        self.node_pool_name = pool_resource.name
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
    # cluster.rwxStorageClass; None: a Filestore class on the stack's own network when it creates
    # one (components/cluster/gcp/filestore.py), else GKE's standard-rwx (the default network).
    rwx_storage_class: str | None = None
    # The CPU system node pool; only on a created cluster (an existing one has its own CPU nodes).
    system_pool: cfg.SystemPoolConfig | None = None
    # Prefix of config errors found here ("Pulumi.dev.yaml: ").
    config_source: str = ""
    network: cfg.NetworkConfig = field(default_factory=cfg.NetworkConfig)
    # The entrance runs on the GKE Gateway controller: the cluster's Gateway API on (standard
    # channel) and, in a network the stack creates, a proxy-only subnet for the regional Gateway.
    gateway_api: bool = False
    # images.pullThrough: the upstream registries to cache, and the project id as a plain string
    # (image references are written before any resource exists); None pulls upstream.
    pull_through: list[str] | None = None
    pull_through_project: str | None = None
    # Who may reach the API server of a created cluster (security.clusterEndpoint).
    endpoint_access: cfg.ClusterEndpointConfig = field(default_factory=cfg.ClusterEndpointConfig)
    # The DNS-based control-plane endpoint takes user traffic, and the Kubernetes provider uses it
    # (security.clusterEndpoint.dnsEndpoint; only on a created cluster).
    dns_endpoint: bool = True
    # Application-layer secrets encryption; `secrets_key` names the user's Cloud KMS key, else one is created.
    encrypt_secrets: bool = False
    secrets_key: str | None = None
    # Resource labels of the cluster: the security profile the policy pack reads.
    cluster_labels: dict[str, str] = field(default_factory=dict)


def private_cluster_config(private_nodes: bool, access: cfg.ClusterEndpointConfig) -> dict | None:
    """privateClusterConfig of a created cluster: private nodes, and the endpoint private only when
    publicAccess is false. None without private nodes: the provider cannot check the block then and
    recommends leaving it out (pulumi_gcp ClusterPrivateClusterConfigArgs)."""
    if not private_nodes:
        return None
    return {
        "enable_private_nodes": True,
        "enable_private_endpoint": not access.publicAccess,
        "master_ipv4_cidr_block": gke_network.MASTER_RANGE,
    }


def control_plane_endpoints_config(dns_endpoint: bool) -> dict:
    """GKE's DNS-based endpoint: a per-cluster name reachable from anywhere, where Google checks the
    caller's IAM permission (`container.clusters.connect`) before the request reaches the API server;
    authorized networks apply to the IP endpoints only (GKE docs, "About network isolation",
    DNS-based endpoint). `allow_external_traffic` is whether user traffic may use it (pulumi-gcp
    10.2.0 ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs); written out either way, so
    turning it off is explicit. The IP endpoints keep private_cluster_config and the authorized
    networks below."""
    return {"dns_endpoint_config": {"allow_external_traffic": dns_endpoint}}


def dns_endpoint_of(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """The cluster's DNS endpoint (output only: `<uid>.<region>.gke.goog`)."""

    def pick(config) -> str:
        dns = getattr(config, "dns_endpoint_config", None) if config is not None else None
        endpoint = getattr(dns, "endpoint", None) if dns is not None else None
        if not endpoint:
            raise ValueError("the cluster reports no DNS endpoint (controlPlaneEndpointsConfig.dnsEndpointConfig)")
        return str(endpoint)

    return cluster.control_plane_endpoints_config.apply(pick)


def master_authorized_networks(access: cfg.ClusterEndpointConfig) -> dict | None:
    """Only these addresses reach the public endpoint; not Google Cloud's public IPs either
    (gcpPublicCidrsAccessEnabled false: another project's VM is not the operator). None: open."""
    if access.publicAccess and not access.publicCidrs:
        return None
    return {
        "cidr_blocks": [
            {"cidr_block": c, "display_name": f"security.clusterEndpoint.publicCidrs[{i}]"}
            for i, c in enumerate(access.publicCidrs)
        ],
        "gcp_public_cidrs_access_enabled": False,
    }


class GkeCluster(pulumi.ComponentResource):
    """A GKE cluster with GPU pools; meets `components.cluster.interface.Cluster`."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    placements: dict[str, GpuPlacement]
    bucket: ModelBucket | None
    rwx_storage_class: str
    # The Filestore StorageClass on the stack's own network, when this layer creates it.
    rwx_storage: k8s.storage.v1.StorageClass | None
    # No RDMA fabric is set up by the GKE layer (config refuses EFA on gcp).
    rdma_attachments: dict[str, RdmaAttachment]
    cloud: str = "gcp"

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        # Every API the resources below use, enabled first (a fresh project has them off).
        image_streaming = any(spec.driver_plan.gke_image_type == gpu_driver.GKE_IMAGE_COS for spec in args.pools)
        self.apis = apis.ProjectApis(
            f"{name}-apis",
            apis.ProjectApisArgs(project=args.project, apis=project_apis(args, image_streaming)),
            opts=child,
        )
        needs = self.apis.needs

        node_sa = gcp.serviceaccount.Account(
            f"{name}-nodes",
            account_id=iam.account_id(args.name, "gpu-nodes"),
            display_name="GKE nodes of the llm-serving cluster",
            project=args.project,
            opts=pulumi.ResourceOptions(parent=self, depends_on=needs(apis.IAM)),
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

        net = None
        private_nodes = False
        # The pool of Workload Identity exists once a WI-enabled cluster does; bindings wait for it.
        identity_pool: list[pulumi.Resource] = []
        if args.create:
            net = self._network(name, args)
            private_nodes = net.private_nodes
            key_waits: list[pulumi.Resource] = []
            encryption = None
            if args.encrypt_secrets:
                # The GKE service agent exists once the container API is on; its role on the key
                # must be in place before the cluster is created.
                key = secrets_key(
                    name,
                    args.name,
                    args.location,
                    args.project,
                    args.secrets_key,
                    needs(apis.CONTAINER, apis.CLOUD_KMS),
                    self,
                )
                key_waits = key.ready
                encryption = {"state": "ENCRYPTED", "key_name": key.key_name}
            cluster = gcp.container.Cluster(
                name,
                name=args.name,
                location=args.location,
                project=args.project,
                min_master_version=args.kubernetes_version,
                release_channel={"channel": RELEASE_CHANNEL},
                # VPC-native: pod and Service addresses from the subnet's secondary ranges, routable
                # in the VPC (and needed by private nodes, Filestore and container-native LBs).
                networking_mode="VPC_NATIVE",
                network=net.network,
                subnetwork=net.subnetwork,
                ip_allocation_policy=net.ip_allocation_policy,
                # GPU pools and the system pool are separate node pools; the default pool exists only
                # because the API wants one at creation, and goes away right after.
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config={"service_account": node_sa.email, "oauth_scopes": [CLOUD_PLATFORM_SCOPE]},
                workload_identity_config={
                    "workload_pool": pulumi.Output.from_input(args.project).apply(lambda p: f"{p}.svc.id.goog"),
                },
                # GKE Dataplane V2 (eBPF, Cilium-based), which enforces Kubernetes NetworkPolicy: the
                # serving namespace's default-deny is an API object only without it (GKE docs,
                # "GKE Dataplane V2", https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2:
                # "Both of these technologies manage Kubernetes NetworkPolicy"; how-to:
                # https://cloud.google.com/kubernetes-engine/docs/how-to/dataplane-v2). Set at creation
                # only: the provider marks datapath_provider ForceNew (hashicorp/terraform-provider-google
                # resource_container_cluster.go, "datapath_provider": ForceNew: true), so turning it on
                # for a cluster created without it replaces the cluster.
                datapath_provider=DATAPATH_PROVIDER,
                # Filestore CSI provides the `standard-rwx` StorageClass of the model volume.
                addons_config={"gcp_filestore_csi_driver_config": {"enabled": True}},
                # The GKE Gateway controller and its GatewayClasses, for the entrance (pulumi-gcp
                # ClusterGatewayApiConfigArgs: CHANNEL_DISABLED | CHANNEL_EXPERIMENTAL | CHANNEL_STANDARD).
                gateway_api_config={"channel": GATEWAY_API_CHANNEL} if args.gateway_api else None,
                # Who reaches the API server (security.clusterEndpoint), and Secrets encrypted with
                # a Cloud KMS key (security.secretsEncryption).
                private_cluster_config=private_cluster_config(private_nodes, args.endpoint_access),
                master_authorized_networks_config=master_authorized_networks(args.endpoint_access),
                control_plane_endpoints_config=control_plane_endpoints_config(args.dns_endpoint),
                database_encryption=encryption,
                resource_labels=args.cluster_labels or None,
                # `pulumi destroy` should be able to remove what `pulumi up` made; protect the
                # stack (`pulumi state protect`) where that is not wanted.
                deletion_protection=False,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[*node_roles, *key_waits, *needs(apis.CONTAINER, apis.COMPUTE, apis.FILESTORE)],
                ),
            )
            cluster_name = cluster.name
            endpoint = cluster.endpoint
            ca_data: pulumi.Output[str] | None = cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
            if args.dns_endpoint:
                # The provider connects through the DNS endpoint: it answers a GitHub-hosted runner
                # even when the IP endpoint is private. It presents a certificate the system's
                # roots verify, not one of the cluster CA: gcloud writes no certificate-authority-data
                # for it (Google Cloud SDK googlecloudsdk/api_lib/container/kubeconfig.py, Cluster():
                # the CA only `if ... not has_dns_endpoint`).
                endpoint = dns_endpoint_of(cluster)
                ca_data = None
            identity_pool.append(cluster)
        else:
            found = gcp.container.get_cluster_output(
                name=args.name, location=args.location, project=args.project, opts=pulumi.InvokeOptions(parent=self)
            )
            cluster_name = found.name
            endpoint = found.endpoint
            ca_data = found.master_auths.apply(lambda auths: auths[0].cluster_ca_certificate)

        pool_waits = [*node_roles, *needs(apis.CONTAINER, apis.COMPUTE), *(net.egress_ready if net else [])]
        self.placements = {}
        self.rdma_attachments = {}
        for spec in args.pools:
            streams = spec.driver_plan.gke_image_type == gpu_driver.GKE_IMAGE_COS
            GpuNodePool(
                f"{name}-{spec.pool.name}",
                GpuNodePoolArgs(
                    spec=spec,
                    cluster=cluster_name,
                    location=args.location,
                    project=args.project,
                    node_service_account=node_sa.email,
                    private_nodes=private_nodes,
                ),
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[*pool_waits, *(needs(apis.CONTAINER_FILESYSTEM) if streams else [])]
                ),
            )
            self.placements[spec.pool.name] = spec.placement

        if args.create and args.system_pool is not None:
            SystemNodePool(
                f"{name}-system",
                SystemNodePoolArgs(
                    pool=args.system_pool,
                    cluster=cluster_name,
                    location=args.location,
                    project=args.project,
                    node_service_account=node_sa.email,
                    zones=list(args.system_pool.zones or default_zones(args.location)),
                    config_key=args.config_source + "cluster.systemPool",
                    private_nodes=private_nodes,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=pool_waits),
            )

        self.bucket = None
        if args.bucket is not None:
            bucket_args = replace(
                args.bucket,
                project=args.project,
                apis_ready=needs(apis.STORAGE, apis.IAM, apis.IAM_CREDENTIALS),
                identity_pool_ready=identity_pool,
            )
            self.bucket = GcsModelBucket(f"{name}-models", bucket_args, opts=child).model_bucket

        # images.pullThrough: a remote repository per upstream, readable by the nodes.
        self.image_mirrors: dict[str, str] = {}
        if args.pull_through:
            assert args.pull_through_project, "pull_through needs the project id as a plain string"
            cache = registry_cache.ArtifactRegistryCache(
                f"{name}-image-cache",
                registry_cache.ArtifactRegistryCacheArgs(
                    cluster_name=args.name,
                    location=args.location,
                    project=args.pull_through_project,
                    upstreams=list(args.pull_through),
                    node_service_account=node_sa.email,
                    apis_ready=needs(apis.ARTIFACT_REGISTRY),
                ),
                opts=child,
            )
            self.image_mirrors = dict(cache.mirrors)

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
        self.rwx_storage_class = args.rwx_storage_class or filestore.GKE_DEFAULT_CLASS
        self.rwx_storage = None
        if args.rwx_storage_class is None and net is not None and net.network_name is not None:
            # The model volume's Filestore instance on the network the nodes are in.
            self.rwx_storage = filestore.stack_network_storage_class(
                f"{name}-filestore-class", net.network_name, self.provider, self
            )
            self.rwx_storage_class = filestore.STACK_NETWORK_CLASS
        # GKE's default class (standard-rwo, Persistent Disk) fits a staging volume.
        self.staging_storage_class: str | None = None
        self.platform = platform_summary(args)
        self.register_outputs({"clusterName": self.cluster_name, "endpoint": self.endpoint})

    def _network(self, name: str, args: GkeClusterArgs) -> gke_network.GkeNetwork:
        if args.network.vpc == "default":
            return gke_network.default_network()
        vpc = gke_network.GkeVpc(
            f"{name}-network",
            gke_network.GkeNetworkArgs(
                name=args.name,
                project=args.project,
                region=args.location,
                private_nodes=args.network.privateNodes,
                proxy_only_subnet=args.gateway_api,
                depends_on=self.apis.needs(apis.COMPUTE),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return vpc.network


def api_endpoint_summary(access: cfg.ClusterEndpointConfig, dns_endpoint: bool) -> str:
    """Who reaches a created cluster's API: the IP endpoint as security.clusterEndpoint asks, and
    the DNS-based endpoint the Kubernetes provider connects through."""
    if not dns_endpoint:
        return (
            endpoint_summary(access, "the control plane's internal address")
            + "; the DNS-based endpoint takes no user traffic (security.clusterEndpoint.dnsEndpoint false)"
        )
    ip = (
        "IP endpoint private only (the control plane's internal address)"
        if not access.publicAccess
        else "IP endpoint " + endpoint_summary(access, "")
    )
    return (
        f"{ip}; DNS-based endpoint on (IAM `container.clusters.connect`, reachable from anywhere): `pulumi up`, "
        "kubectl and CI connect through it"
    )


def controller_kinds(args: GkeClusterArgs) -> list[str]:
    """The kinds of Kubernetes object whose GKE controllers call Google APIs for this stack."""
    kinds = []
    if args.gateway_api:
        # The entrance on GKE: a Gateway of a gke-l7 class with InferencePool backends.
        kinds += [apis.GATEWAY_GKE, apis.INFERENCE_POOL_GKE]
    if args.rwx_storage_class is None or args.rwx_storage_class in filestore.GKE_FILESTORE_CLASSES:
        kinds.append(apis.FILESTORE_CLAIM)
    return kinds


def project_apis(args: GkeClusterArgs, image_streaming: bool) -> list[str]:
    """The APIs the stack's cloud resources use, then those its objects' controllers use."""
    own = apis.needed_apis(
        filestore=args.create,
        image_streaming=image_streaming,
        image_cache=bool(args.pull_through),
        kms=args.create and args.encrypt_secrets,
    )
    return own + [api for api in apis.controller_apis(controller_kinds(args)) if api not in own]


def rwx_summary(args: GkeClusterArgs) -> str:
    """Which class the model volume uses, and on which network its Filestore instances go."""
    if args.rwx_storage_class is not None:
        return f"{args.rwx_storage_class} (cluster.rwxStorageClass; its parameters.network must be the cluster's)"
    if args.create and args.network.vpc == "create":
        return (
            f"{filestore.STACK_NETWORK_CLASS}, created: Filestore tier {filestore.TIER} on the stack's network "
            f"{args.name} ({filestore.CONNECT_MODE})"
        )
    return f"{filestore.GKE_DEFAULT_CLASS} (GKE's): Filestore on the project's default network"


def platform_summary(args: GkeClusterArgs) -> dict:
    """What the offline plan shows about the network, the APIs, the autoscaler and the pools."""
    if not args.create:
        vpc, nat = "the existing cluster's", "the existing cluster's"
    elif args.network.vpc == "default":
        vpc, nat = "the project's default network (VPC-native, ranges picked by GKE)", "none (nodes have public IPs)"
    else:
        vpc = (
            f"created, VPC-native: nodes {gke_network.NODE_RANGE}, pods {gke_network.PODS_RANGE}, "
            f"services {gke_network.SERVICES_RANGE}, Private Google Access"
        )
        nat = (
            "Cloud Router + Cloud NAT (private nodes)"
            if args.network.privateNodes
            else "none (nodes have public IPs; cluster.network.privateNodes puts them behind Cloud NAT)"
        )
    image_streaming = any(spec.driver_plan.gke_image_type == gpu_driver.GKE_IMAGE_COS for spec in args.pools)
    gateway = "off (no entrance)"
    if args.gateway_api and args.create:
        subnet = (
            f"proxy-only subnet {gke_network.PROXY_ONLY_RANGE} created"
            if args.network.vpc != "default"
            else "the default network must already have a proxy-only subnet in the region (not created: one "
            "per region and network may be ACTIVE; docs/routing.md)"
        )
        gateway = f"Gateway API {GATEWAY_API_CHANNEL} (GKE Gateway controller); {subnet}"
    elif args.gateway_api:
        gateway = "the existing cluster's Gateway API and proxy-only subnet (docs/routing.md)"
    return {
        "cloud": "gcp",
        "vpc": vpc,
        "nat": nat,
        "gatewayApi": gateway,
        "apis": ", ".join(project_apis(args, image_streaming)),
        "controllerApis": "; ".join(
            f"{kind}: {', '.join(apis.CONTROLLER_APIS[kind])}" for kind in controller_kinds(args)
        ),
        "apisByHand": apis.BOOTSTRAP_COMMAND,
        "rwxStorage": rwx_summary(args),
        "autoscaler": "GKE cluster autoscaler (on every node pool)",
        **(
            {
                "apiEndpoint": api_endpoint_summary(args.endpoint_access, args.dns_endpoint),
                "secretsEncryption": (
                    "application-layer encryption, Cloud KMS key "
                    + (args.secrets_key or "created by this stack (rotation 90 days)")
                )
                if args.encrypt_secrets
                else "off (Google's default encryption at rest only)",
            }
            if args.create
            else {
                "apiEndpoint": (
                    "the existing cluster's own (security.clusterEndpoint and secretsEncryption are not applied)"
                )
            }
        ),
        "pools": [
            {
                "pool": spec.pool.name,
                "machineType": spec.machine.name,
                "zones": ", ".join(spec.zones),
                "minNodes": spec.pool.minNodes,
                "maxNodes": spec.pool.maxNodes,
                "gpuDriverVersion": spec.pool.gkeDriverVersion,
            }
            for spec in args.pools
        ],
    }


def create_gke(stack: cfg.StackConfig, stack_name: str) -> GkeCluster:
    """GkeCluster from the validated stack config."""
    location = stack.region
    assert location is not None  # None only for an existing cluster
    project: pulumi.Input[str] = stack.cluster.gcpProject or gcp.organizations.get_client_config_output().project
    source = f"Pulumi.{stack_name}.yaml: "
    specs = []
    for i, pool in enumerate(stack.pools):
        machine = cfg.pool_machine(stack.cloud, pool)
        accelerator = gpus.CATALOG[pool.gpu].gcp_accelerator
        assert machine is not None and accelerator, f"pool {pool.name} passed config validation without a GKE machine"
        gpu_operator = stack.operators.gpuOperator
        driver_plan = gpu_driver.resolve_driver_plan(
            "gcp", gpu_operator.driver if gpu_operator.enabled else "auto", pool.gkeDriverVersion
        )
        specs.append(
            NodePoolSpec(
                pool=pool,
                machine=machine,
                accelerator=accelerator,
                placement=placement_for(pool),
                zones=list(pool.zones or default_zones(location)),
                config_key=f"{source}pools[{i}]",
                driver_plan=driver_plan,
            )
        )
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
        on_destroy=store.onDestroy,
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
            rwx_storage_class=stack.cluster.rwxStorageClass,
            system_pool=stack.cluster.systemPool if stack.cluster.create else None,
            config_source=source,
            network=stack.cluster.network,
            gateway_api=stack.exposure.entrance is not None,
            pull_through=list(UPSTREAMS) if stack.images.pullThrough else None,
            # Image references are plain strings written before any resource exists, so the project
            # is looked up directly (not as an Output) when the stack file leaves it out.
            pull_through_project=(stack.cluster.gcpProject or gcp.organizations.get_client_config().project)
            if stack.images.pullThrough
            else None,
            endpoint_access=stack.security.clusterEndpoint,
            dns_endpoint=stack.security.clusterEndpoint.dnsEndpoint is not False,
            encrypt_secrets=stack.security.encrypt_secrets,
            secrets_key=stack.security.secretsEncryption.kmsKey,
            cluster_labels=stack.security.cluster_labels,
        ),
    )
