"""What one node of a CPU pool offers pods: the machine's size, less what the cloud's node image
keeps for the kubelet and for eviction (Node Allocatable,
https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable:
allocatable = capacity - kube-reserved - system-reserved - hard eviction threshold).

Machine sizes: EC2 general purpose and compute optimized specifications
(https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html, .../co.html: vCPUs, memory in GiB);
Compute Engine general-purpose machine types (https://cloud.google.com/compute/docs/general-purpose-machines,
E2 and N2 standard: 4 GB per vCPU, and `gcloud compute machine-types describe e2-standard-8
--zone us-central1-a` reports `memoryMb: 32768`, i.e. GB there are GiB).

The figures are the nominal machine; the kubelet's capacity is the kernel's MemTotal, a few
hundred MiB lower, so the true allocatable memory is somewhat below what is computed here
(`UNRESOLVED_CAPACITY` says how to read it off a node). On EKS the memory reserve follows maxPods;
the figure here is nodeadm's own (ENIs x (IPv4 per ENI - 1) + 2). Whether a managed node group's
generated NodeConfig sets another maxPods is not established here; the same command settles it
(`.status.allocatable.pods`).
"""

from __future__ import annotations

from dataclasses import dataclass

from common.facts import Fact

MIB = 2**20

EKS_AMI = "awslabs/amazon-eks-ami@v20260714 (b4fffb70f5c1e025d3956cd50b961f0168ea0194)"
# AL2023's nodeadm, nodeadm/internal/kubelet/config.go: evictionHard memory.available 100Mi;
# withDefaultReservedResources: kubeReserved cpu from getCPUMillicoresToReserve, memory
# 11 * maxPods + 255 Mi (getMemoryMebibytesToReserve); maxPods from eni_max_pods.go
# calculateStandardMaxPods: ENIs * (IPv4 addresses per ENI - 1) + 2, the per-type figures in
# nodeadm/internal/kubelet/instance-info.jsonl.
EKS_EVICTION_MIB = 100
# GKE's "Memory and CPU reservations" table
# (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations):
# memory 255 MiB below 1 GiB, else 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8,
# 6% of the next 112 and 2% above 128 GiB; eviction threshold 100 MiB; CPU as below.
GKE_SOURCE = "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations"
GKE_EVICTION_MIB = 100
GKE_MEMORY_TIERS_GIB = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06))
GKE_MEMORY_ABOVE = 0.02
# Standard clusters default to 110 pods per node
# (https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr, "default maximum").
GKE_MAX_PODS = 110
# Both clouds reserve CPU alike: 6% of the first core, 1% of the second, 0.5% of the third and
# fourth, 0.25% of every core above four (nodeadm getCPUMillicoresToReserve: ranges 0/1000/2000/4000
# millicores, 600/100/50/25 ten-thousandths; GKE's table above).
CPU_TIERS = ((1000, 600), (1000, 100), (2000, 50))
CPU_ABOVE = 25

UNRESOLVED_CAPACITY = Fact(
    subject="a system node's allocatable CPU, memory and pods",
    value=None,
    source=f"{EKS_AMI} nodeadm; {GKE_SOURCE}",
    established=False,
    resolve_with=(
        "kubectl get nodes -l llm-serving.io/pool=system -o custom-columns="
        "NAME:.metadata.name,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,PODS:.status.allocatable.pods"
    ),
)


@dataclass(frozen=True)
class Machine:
    name: str
    vcpus: int
    memory_mib: int
    arch: str = "amd64"
    # EKS: the instance type's ENIs on the default network card and IPv4 addresses per ENI
    # (instance-info.jsonl), which set maxPods and so the memory nodeadm reserves.
    enis: int = 0
    ips_per_eni: int = 0


@dataclass(frozen=True)
class Allocatable:
    cpu: float
    """Cores."""
    memory: float
    """Bytes."""
    pods: int
    how: str
    """The reservations, in words, for the plan."""


def _aws(name: str, vcpus: int, memory_gib: int, enis: int, ips: int) -> Machine:
    return Machine(name, vcpus, memory_gib * 1024, enis=enis, ips_per_eni=ips)


def _gcp(name: str, vcpus: int, memory_gib: int) -> Machine:
    return Machine(name, vcpus, memory_gib * 1024)


MACHINES: dict[str, dict[str, Machine]] = {
    "aws": {
        m.name: m
        for m in (
            _aws("m6i.large", 2, 8, 3, 10),
            _aws("m6i.xlarge", 4, 16, 4, 15),
            _aws("m6i.2xlarge", 8, 32, 4, 15),
            _aws("m6i.4xlarge", 16, 64, 8, 30),
            _aws("m6i.8xlarge", 32, 128, 8, 30),
            _aws("m7i.large", 2, 8, 3, 10),
            _aws("m7i.xlarge", 4, 16, 4, 15),
            _aws("m7i.2xlarge", 8, 32, 4, 15),
            _aws("m7i.4xlarge", 16, 64, 8, 30),
            _aws("m5.large", 2, 8, 3, 10),
            _aws("m5.xlarge", 4, 16, 4, 15),
            _aws("m5.2xlarge", 8, 32, 4, 15),
            _aws("m5.4xlarge", 16, 64, 8, 30),
            _aws("c6i.large", 2, 4, 3, 10),
            _aws("c6i.xlarge", 4, 8, 4, 15),
            _aws("c6i.2xlarge", 8, 16, 4, 15),
            _aws("c6i.4xlarge", 16, 32, 8, 30),
            _aws("r6i.large", 2, 16, 3, 10),
            _aws("r6i.xlarge", 4, 32, 4, 15),
            _aws("r6i.2xlarge", 8, 64, 4, 15),
        )
    },
    "gcp": {
        m.name: m
        for m in (
            *(_gcp(f"e2-standard-{n}", n, 4 * n) for n in (2, 4, 8, 16, 32)),
            *(_gcp(f"n2-standard-{n}", n, 4 * n) for n in (2, 4, 8, 16, 32)),
            *(_gcp(f"e2-highmem-{n}", n, 8 * n) for n in (2, 4, 8, 16)),
        )
    },
}


def machine(cloud: str, name: str) -> Machine | None:
    return MACHINES.get(cloud, {}).get(name)


def reserved_cpu_millicores(vcpus: int) -> int:
    total, start, reserved = vcpus * 1000, 0, 0
    for width, share in CPU_TIERS:
        reserved += (min(total, start + width) - start) * share // 10000 if total > start else 0
        start += width
    if total > start:
        reserved += (total - start) * CPU_ABOVE // 10000
    return reserved


def eks_max_pods(m: Machine) -> int:
    return m.enis * (m.ips_per_eni - 1) + 2


def gke_reserved_memory_mib(memory_mib: int) -> float:
    if memory_mib < 1024:
        return 255.0
    left, reserved = memory_mib / 1024, 0.0
    for width, share in GKE_MEMORY_TIERS_GIB:
        part = min(left, width)
        reserved += part * share
        left -= part
    reserved += max(left, 0.0) * GKE_MEMORY_ABOVE
    return reserved * 1024


def allocatable(cloud: str, m: Machine) -> Allocatable:
    cpu_m = reserved_cpu_millicores(m.vcpus)
    cpu = (m.vcpus * 1000 - cpu_m) / 1000
    if cloud == "aws":
        pods = eks_max_pods(m)
        kube_mib = 11 * pods + 255
        return Allocatable(
            cpu,
            (m.memory_mib - kube_mib - EKS_EVICTION_MIB) * MIB,
            pods,
            f"EKS AL2023: kube-reserved {cpu_m}m CPU and 11 x {pods} max pods + 255 = {kube_mib} MiB, "
            f"eviction {EKS_EVICTION_MIB} MiB ({EKS_AMI})",
        )
    kube = gke_reserved_memory_mib(m.memory_mib)
    return Allocatable(
        cpu,
        (m.memory_mib - kube - GKE_EVICTION_MIB) * MIB,
        GKE_MAX_PODS,
        f"GKE: reserved {cpu_m}m CPU and {kube:.0f} MiB, eviction {GKE_EVICTION_MIB} MiB, "
        f"{GKE_MAX_PODS} pods ({GKE_SOURCE})",
    )
