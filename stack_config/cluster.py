"""The cluster and its node pools: which cloud, which machines, how many, where."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from common import contract, gpus
from common.untrusted import excerpt
from stack_config.base import StrictModel
from stack_config.fields import (
    MAX_NODES,
    FilePath,
    GcpProject,
    GcpZone,
    Location,
    MachineType,
    ObjectName,
    PrintableName,
)
from stack_config.formats import did_you_mean, dns_label

# Where a stack without cluster.region lives.
DEFAULT_REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}


# GKE's Filestore StorageClasses (installed with the Filestore CSI add-on); none names a network, so
# each creates its instances on the project's `default` network (https://cloud.google.com/filestore/docs/csi-driver,
# "StorageClasses"; kubernetes-sigs/gcp-filestore-csi-driver README, `network` default "default").
GKE_DEFAULT_RWX_CLASS = "standard-rwx"
GKE_FILESTORE_CLASSES = ("standard-rwx", "premium-rwx", "enterprise-rwx", "enterprise-multishare-rwx", "zonal-rwx")


class Cloud(StrEnum):
    aws = "aws"
    gcp = "gcp"
    existing = "existing"


class SystemPoolConfig(StrictModel):
    machineType: MachineType | None = Field(None, alias="machineType")
    """CPU machine type. Default: m6i.2xlarge on AWS, e2-standard-8 on GCP."""
    minNodes: int = Field(2, ge=1, le=MAX_NODES, alias="minNodes")
    """At least one node: CoreDNS, the operators' controllers and the mirror Jobs run here."""
    maxNodes: int = Field(4, ge=1, le=MAX_NODES, alias="maxNodes")
    """Upper bound for the autoscaler."""
    diskGib: int = Field(200, ge=50, le=16384, alias="diskGib")
    """Boot disk per node; a mirror Job stages a model's files here when models load from the bucket."""
    zones: list[GcpZone] | None = Field(None, min_length=1, max_length=16)
    """GKE: zones of the system pool; default: the region's `-a` zone (`<region>-a`)."""

    @model_validator(mode="after")
    def _sizes(self) -> SystemPoolConfig:
        if self.minNodes > self.maxNodes:
            raise ValueError(f"minNodes ({self.minNodes}) is greater than maxNodes ({self.maxNodes})")
        return self


VpcMode = Literal["create", "default", "existing", "deployer"]
NatGateways = Literal["single", "per-zone"]


class NetworkConfig(StrictModel):
    vpc: VpcMode = "create"
    """EKS: `create` a VPC (private node subnets behind NAT, public subnets for load balancers), use the account's
    `default` VPC (public subnets only, no NAT, no EFA), an `existing` one (privateSubnetIds), or the `deployer` stack's
    (the VPC, subnets and runner security group that `pulumi up -s <stack>-deployer` created, found by their tags;
    docs/deployer.md). GKE: `create` a VPC network and subnet, or the project's `default` network."""
    cidr: str = "10.0.0.0/16"
    """EKS, vpc create: the VPC's IPv4 range, /16 to /20; each zone gets a private subnet of 1/8 of it, the public
    subnets share the last 1/8."""
    zoneCount: int = Field(3, ge=2, le=6, alias="zoneCount")
    """EKS, vpc create: Availability Zones the VPC spans (EKS needs two); a zone offering each pool's instance type is
    included first."""
    natGateways: NatGateways = Field("single", alias="natGateways")
    """EKS, vpc create: `single` NAT gateway for every private subnet (cheapest; egress stops if its zone fails) or one
    `per-zone`."""
    privateSubnetIds: list[str] | None = Field(None, alias="privateSubnetIds", min_length=2, max_length=64)
    """EKS, vpc existing: the private subnets (behind NAT) for the cluster and its nodes, in at least two zones; looked
    up at preview, and refused if one routes to an internet gateway."""
    privateNodes: bool = Field(False, alias="privateNodes")
    """GKE: nodes get internal IP addresses only, and a Cloud Router with Cloud NAT gives them egress (image pulls from
    Docker Hub, the Hub)."""

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            network = ipaddress.IPv4Network(v, strict=True)
        except ValueError as err:
            raise ValueError(f"{v!r} is not an IPv4 network in CIDR form such as 10.0.0.0/16 ({err})") from None
        if not 16 <= network.prefixlen <= 20:
            raise ValueError(f"{v!r} is a /{network.prefixlen}; use a /16 to /20 (EKS needs room for pod IPs)")
        return v

    @field_validator("privateSubnetIds")
    @classmethod
    def _subnets(cls, v: list[str] | None) -> list[str] | None:
        for subnet in v or []:
            if not re.fullmatch(r"subnet-[0-9a-f]{8,17}", subnet):
                raise ValueError(f"{subnet!r} is not a subnet id (subnet-...)")
        if v and len(set(v)) != len(v):
            raise ValueError("a subnet is listed twice")
        return v


class ClusterConfig(StrictModel):
    create: bool = True
    """Create the cluster (true) or reuse an existing one by name (false). Ignored for `cloud: existing`."""
    name: str = "llm-serving"
    """Cluster name: created with this name, or looked up by it when `create` is false."""
    kubernetesVersion: str = Field("1.33", alias="kubernetesVersion", pattern=r"^1\.\d{2}$")
    """Kubernetes minor version of a created cluster (EKS `version`, GKE `min_master_version`)."""
    region: Location | None = None
    """Cloud region (AWS region, GCP region). Defaults: us-east-1 on AWS, us-central1 on GCP."""
    gcpProject: GcpProject | None = Field(None, alias="gcpProject")
    """GCP project id. Required on GCP unless `gcp:project` is set for the provider (or GOOGLE_PROJECT in the
    environment); a GKE stack with none is refused at plan time."""
    kubeconfig: FilePath | None = Field(None, max_length=4096)
    """For `cloud: existing`: path to the kubeconfig to use. Never falls back to the ambient one."""
    context: PrintableName | None = None
    """For `cloud: existing`: kubeconfig context to use (default: the file's current context)."""
    rwxStorageClass: ObjectName | None = Field(None, alias="rwxStorageClass")
    """StorageClass for the ReadWriteMany model volume. Default: `efs-sc` on EKS, created with an EFS file system and
    the EFS CSI add-on when unset or `efs-sc` (another name: a class you manage). GKE (Filestore CSI): unset on a
    cluster with its own network (network.vpc create) creates `llm-serving-filestore`, a Filestore class on that
    network; otherwise `standard-rwx`, whose instances go on the project's `default` network (GKE's own Filestore
    classes are refused with a network the stack creates; name a class of yours whose parameters.network is the
    cluster's). Required for `cloud: existing` unless models load from the bucket or an existing claim."""
    manageRwxStorage: bool | None = Field(None, alias="manageRwxStorage")
    """EKS: create EFS, the EFS CSI add-on and the StorageClass. Default: true when rwxStorageClass is unset or efs-sc;
    set false when the cluster already has them."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """Where a created cluster's nodes live: VPC, subnets, NAT (docs/config-cloud.md, "Networking")."""
    systemPool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, alias="systemPool")
    """Untainted CPU nodes of a created cluster (create: true) for everything that is not a GPU server; GPU pools are
    tainted, so a cluster with only GPU nodes cannot run CoreDNS or the mirror Jobs."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return dns_label(v)


CapacityType = Literal["on-demand", "spot", "capacity-block"]


class PoolConfig(StrictModel):
    name: str
    """Pool name (DNS label). Models name the pool they run on."""
    gpu: str
    """GPU model from the catalog (common/gpus.py): A10G, L4, L40S, RTX-PRO-6000, A100-40GB, A100-80GB, H100-80GB, H200,
    B200, GB10."""
    gpusPerNode: int = Field(1, ge=1, le=16, alias="gpusPerNode")
    """GPUs per node. With no `machineType`, the smallest machine with exactly this many GPUs is used."""
    machineType: MachineType | None = Field(None, alias="machineType")
    """EC2 instance type or GCE machine type; must carry this pool's GPU. Default: derived from `gpu` and
    `gpusPerNode`."""
    minNodes: int = Field(0, ge=0, le=MAX_NODES, alias="minNodes")
    """Nodes that are always on; 0 lets an idle pool scale to nothing. On a created EKS cluster these are a fixed-size
    managed node group and Karpenter adds the rest; on an EKS cluster this program did not create nothing adds nodes
    (docs/config-cloud.md). Unset (and no desiredNodes) on a pool the program grows, with a model's predicted `load`:
    the GPUs at trough over gpusPerNode."""
    maxNodes: int = Field(1, ge=1, le=MAX_NODES, alias="maxNodes")
    """The most nodes the pool may have: the GKE autoscaler's total, or minNodes plus what Karpenter may add on a
    created EKS cluster (its NodePool's limits.nodes). Unset on a pool the program grows, with a model's predicted
    `load`: the GPUs at peak plus one surge replica over gpusPerNode."""
    desiredNodes: int | None = Field(None, ge=0, le=MAX_NODES, alias="desiredNodes")
    """Initial node count: GKE's initial count, the desired size of a node group on an existing EKS cluster. Default:
    `minNodes`. Not used on a created EKS cluster (Karpenter launches nodes for pending pods)."""
    capacityType: CapacityType = Field("on-demand", alias="capacityType")
    """on-demand, spot, or capacity-block (AWS EC2 Capacity Blocks for ML, with capacityReservationId)."""
    capacityReservationId: str | None = Field(None, alias="capacityReservationId", pattern=r"^cr-[0-9a-f]{17}$")
    """AWS: the Capacity Block's reservation id (cr-...); required with capacityType capacity-block."""
    zones: list[GcpZone] | None = Field(None, min_length=1, max_length=16)
    """GKE: zones of the pool (node_locations); default: the region's `-a` zone (`<region>-a`), which not every region
    has. GPUs are not offered in every zone."""
    diskGib: int = Field(200, ge=50, le=16384, alias="diskGib")
    """Root/boot disk per node in GiB; engine images are 10-20 GB and are unpacked there."""
    efa: bool = False
    """AWS: attach Elastic Fabric Adapter interfaces (p4d/p5 families) for multi-node NCCL."""
    gkeDriverVersion: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = Field("LATEST", alias="gkeDriverVersion")
    """GKE: GPU driver version GKE installs on the nodes. INSTALLATION_DISABLED only with operators.gpuOperator.driver
    `operator` (the pools then run Ubuntu node images)."""
    localSsd: bool = Field(True, alias="localSsd")
    """GKE: use the machine's local SSDs for ephemeral storage (image layers, emptyDirs) where it has them."""
    migProfile: PrintableName | None = Field(None, alias="migProfile")
    """MIG profile every GPU of this pool is cut into (e.g. 1g.10gb on H100-80GB), each slice one nvidia.com/gpu; needs
    operators.gpuOperator.migStrategy single. Profiles per GPU: common/gpus.py MIG_PROFILES."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v == contract.SYSTEM_POOL:
            raise ValueError(
                f"{excerpt(v)} is reserved for the CPU system pool of a created cluster; choose another name"
            )
        return dns_label(v)

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str) -> str:
        if v not in gpus.CATALOG:
            same_but_case = [name for name in gpus.CATALOG if name.lower() == v.lower()]
            hint = f" (did you mean {same_but_case[0]!r}?)" if same_but_case else did_you_mean(v, gpus.CATALOG)
            raise ValueError(f"unknown GPU {excerpt(v)}{hint}; known GPUs: {', '.join(gpus.CATALOG)}")
        return v

    @model_validator(mode="after")
    def _sizes(self) -> PoolConfig:
        if self.minNodes > self.maxNodes:
            raise ValueError(f"minNodes ({self.minNodes}) is greater than maxNodes ({self.maxNodes})")
        if self.desiredNodes is not None and not self.minNodes <= self.desiredNodes <= self.maxNodes:
            raise ValueError(
                f"desiredNodes ({self.desiredNodes}) must lie between minNodes ({self.minNodes}) "
                f"and maxNodes ({self.maxNodes})"
            )
        return self


# ---------------------------------------------------------------------------------------------
# A pool against the cloud's catalog (StackConfig runs this for every pool).


def pool_problems(cloud: Cloud, pool: PoolConfig) -> list[tuple[str, str]]:
    """Checks that need the cloud: machine types, GPU counts and EFA against the catalog."""
    gpu = gpus.CATALOG[pool.gpu]
    if cloud == Cloud.existing:
        # Nothing is created on an existing cluster, so options that shape cloud nodes do nothing.
        cloud_only = {
            "efa": pool.efa,
            "capacityReservationId": pool.capacityReservationId,
            "machineType": pool.machineType,
            "zones": pool.zones,
        }
        return [
            (key, "applies to pools this program creates on aws or gcp; remove it for cloud existing")
            for key, value in cloud_only.items()
            if value
        ]
    cloud_name = cloud.value
    offered = gpu.machines(cloud_name)
    if not offered:
        clouds = [c for c in ("aws", "gcp") if gpu.machines(c)]
        others = [g.name for g in gpus.CATALOG.values() if g.machines(cloud_name)]
        where = (
            f"only on {', '.join(clouds)}"
            if clouds
            else "the catalog lists no cloud machine for it; use cloud: existing"
        )
        return [
            ("gpu", f"{pool.gpu} is not offered on {cloud_name} ({where}); GPUs on {cloud_name}: {', '.join(others)}")
        ]
    problems = []
    machine: gpus.CloudMachine | None
    if pool.machineType is not None:
        found = gpus.find_machine(cloud_name, pool.machineType)
        if found is None:
            problems.append(
                (
                    "machineType",
                    (
                        f"{excerpt(pool.machineType)} is not a GPU machine type on {cloud_name}; "
                        f"{pool.gpu} machines: {', '.join(m.name for m in offered)}"
                    ),
                )
            )
            return problems
        machine_gpu, machine = found
        if machine_gpu.name != pool.gpu:
            problems.append(("machineType", f"{pool.machineType} carries {machine_gpu.name}, not {pool.gpu}"))
        elif pool.gpusPerNode != machine.gpus:
            # The cloud attaches all of a machine's GPUs; planning for fewer would leave GPUs idle
            # and every capacity number wrong.
            problems.append(
                (
                    "gpusPerNode",
                    (
                        f"{pool.machineType} has {machine.gpus} GPU(s); set gpusPerNode to "
                        f"{machine.gpus} or drop machineType"
                    ),
                )
            )
    else:
        machine = gpus.default_machine(gpu, cloud_name, pool.gpusPerNode)
        if machine is None:
            counts = sorted({m.gpus for m in offered})
            problems.append(
                ("gpusPerNode", f"no {cloud_name} machine has {pool.gpusPerNode} x {pool.gpu}; choose one of {counts}")
            )
    if pool.capacityType == "capacity-block":
        if cloud != Cloud.aws:
            problems.append(
                ("capacityType", "capacity-block is an AWS EC2 Capacity Block; on gcp use on-demand or spot")
            )
        elif not pool.capacityReservationId:
            problems.append(
                (
                    "capacityReservationId",
                    (
                        "capacityType is capacity-block: give the Capacity Block's "
                        "reservation id (cr-...) from the EC2 console"
                    ),
                )
            )
    elif pool.capacityReservationId:
        problems.append(("capacityReservationId", "only used with capacityType capacity-block"))
    if pool.zones and cloud != Cloud.gcp:
        problems.append(("zones", "zones are set per pool on GKE only; on EKS node groups use the cluster's subnets"))
    if pool.efa:
        if cloud != Cloud.aws:
            problems.append(("efa", "EFA is an AWS feature; remove it on gcp"))
        elif machine is not None and not machine.efa:
            efa_types = [m.name for g in gpus.CATALOG.values() for m in g.aws if m.efa]
            problems.append(("efa", f"{machine.name} does not support EFA; EFA instance types: {', '.join(efa_types)}"))
    return problems


def pool_machine(cloud: Cloud, pool: PoolConfig) -> gpus.CloudMachine | None:
    """The machine a validated pool runs on (None on an existing cluster)."""
    if cloud == Cloud.existing:
        return None
    if pool.machineType:
        found = gpus.find_machine(cloud.value, pool.machineType)
        return found[1] if found else None
    return gpus.default_machine(gpus.CATALOG[pool.gpu], cloud.value, pool.gpusPerNode)
