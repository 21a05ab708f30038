"""The node pools an evaluated stack creates, as their nodes will be labelled and tainted.

Read from what the program asks the cloud for (the mock runtime's records): EKS managed node
groups, Karpenter NodePools and GKE node pools. Beside the labels and taints the program sets, a
node carries the labels its kubelet, its cloud and its autoscaler add; those the add-on charts'
selectors and affinities use are modelled here, each from its documentation. A label whose value
differs per node (zone, host name) is known only to be present.

An existing cluster's nodes (`cloud: existing`, or `cluster.create: false`) are not in the plan:
`pools` then finds no system pool, and the plan says the nodes are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common import contract
from components.cluster.common import kubernetes_taint_effect
from offline_plan.helm import machines
from offline_plan.mock_runtime import Evaluation

EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"

# Every node's kubelet and cloud controller set these
# (https://kubernetes.io/docs/reference/labels-annotations-taints/: kubernetes.io/os,
# kubernetes.io/arch, node.kubernetes.io/instance-type, topology.kubernetes.io/region and /zone,
# kubernetes.io/hostname). Zone and host name differ per node.
PER_NODE_LABELS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
# EKS managed node groups: eks.amazonaws.com/capacityType (ON_DEMAND or SPOT) and
# eks.amazonaws.com/nodegroup (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html,
# "Managed node group capacity types"; "Amazon EKS adds Kubernetes labels").
EKS_CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
# Karpenter labels its nodes with the NodePool's name and with each requirement it resolved
# (https://karpenter.sh/docs/concepts/scheduling/#well-known-labels; karpenter.sh/nodepool).
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
# GKE: cloud.google.com/gke-nodepool on every node, cloud.google.com/gke-spot on Spot VMs, and
# cloud.google.com/gke-accelerator on GPU nodes
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create-gpu-pool-auto-drivers,
# https://cloud.google.com/kubernetes-engine/docs/how-to/spot-vms#scheduling-workloads).
# A GPU node pool in a cluster with other pools is tainted nvidia.com/gpu=present:NoSchedule by
# GKE itself (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GPU node taints").
GKE_NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass
class Pool:
    pool: str
    """Its llm-serving.io/pool label (the stack's pool name, or `system`)."""
    source: str
    """What makes its nodes: `EKS managed node group <name>`, `Karpenter NodePool <name>`, ..."""
    cloud: str
    machine_type: str
    min_nodes: int
    max_nodes: int
    labels: dict[str, str]
    taints: list[Taint]
    varying: set[str] = field(default_factory=set)
    """Label keys every node has, with a value that differs per node (or is not known here)."""
    gpu: bool = False

    @property
    def is_system(self) -> bool:
        return self.labels.get(contract.LABEL_POOL) == contract.SYSTEM_POOL

    @property
    def name(self) -> str:
        return f"{self.pool} ({self.source})"

    @property
    def short(self) -> str:
        """How the placement table names it: the pool and, where a pool has nodes from two
        sources (a managed node group and Karpenter), which."""
        return f"`{self.pool}` {self.kind}"

    @property
    def kind(self) -> str:
        return self.source.split(" `", 1)[0].replace("EKS managed node group", "node group")


def _number(value: Any, default: int = 0) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


def _taints(raw: Any) -> list[Taint]:
    return [
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), kubernetes_taint_effect(str(t.get("effect"))))
        for t in raw or []
        if isinstance(t, dict)
    ]


def _kubelet_labels(cloud: str, machine_type: str, region: str) -> dict[str, str]:
    m = machines.machine(cloud, machine_type)
    labels = {"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": machine_type}
    if m is not None:
        labels["kubernetes.io/arch"] = m.arch
    if region:
        labels["topology.kubernetes.io/region"] = region
    return labels


def _varying(labels: dict[str, str], *extra: str) -> set[str]:
    keys = set(PER_NODE_LABELS) | set(extra)
    if "kubernetes.io/arch" not in labels:
        keys.add("kubernetes.io/arch")  # a GPU machine (not in the CPU table) of either architecture
    return keys - set(labels)


def _eks(r: Any, region: str) -> Pool:
    inputs = r.inputs
    machine_type = str((inputs.get("instanceTypes") or [""])[0])
    scaling = inputs.get("scalingConfig") or {}
    labels = {
        **_kubelet_labels("aws", machine_type, str(inputs.get("region") or region)),
        **(inputs.get("labels") or {}),
    }
    capacity = str(inputs.get("capacityType") or "ON_DEMAND")
    labels[EKS_CAPACITY_LABEL] = capacity
    taints = _taints(inputs.get("taints"))
    return Pool(
        pool=str(labels.get(contract.LABEL_POOL, r.name)),
        source=f"EKS managed node group `{r.name}`",
        cloud="aws",
        machine_type=machine_type,
        min_nodes=_number(scaling.get("minSize")),
        max_nodes=_number(scaling.get("maxSize")),
        labels=labels,
        taints=taints,
        varying=_varying(labels, EKS_NODEGROUP_LABEL),
        gpu=any(t.key == contract.GPU_TAINT_KEY for t in taints) or "NVIDIA" in str(inputs.get("amiType")),
    )


def _karpenter(obj: dict[str, Any], region: str) -> Pool:
    name = str((obj.get("metadata") or {}).get("name"))
    template = (obj.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    resolved = {
        str(req.get("key")): str(req["values"][0])
        for req in spec.get("requirements") or []
        if req.get("operator") == "In" and len(req.get("values") or []) == 1
    }
    machine_type = resolved.get("node.kubernetes.io/instance-type", "")
    labels = {
        **_kubelet_labels("aws", machine_type, region),
        **resolved,
        **((template.get("metadata") or {}).get("labels") or {}),
        KARPENTER_NODEPOOL_LABEL: name,
    }
    taints = _taints(spec.get("taints"))
    return Pool(
        pool=str(labels.get(contract.LABEL_POOL, name)),
        source=f"Karpenter NodePool `{name}`",
        cloud="aws",
        machine_type=machine_type,
        min_nodes=0,
        max_nodes=_number(((obj.get("spec") or {}).get("limits") or {}).get("nodes")),
        labels=labels,
        taints=taints,
        varying=_varying(labels),
        gpu=any(t.key == contract.GPU_TAINT_KEY for t in taints),
    )


def _gke(r: Any) -> Pool:
    inputs = r.inputs
    node = inputs.get("nodeConfig") or {}
    machine_type = str(node.get("machineType") or "")
    labels = {**_kubelet_labels("gcp", machine_type, str(inputs.get("location") or "")), **(node.get("labels") or {})}
    accelerators = [a for a in node.get("guestAccelerators") or [] if isinstance(a, dict)]
    if node.get("spot"):
        labels[GKE_SPOT_LABEL] = "true"
    taints = _taints(node.get("taints"))
    if accelerators:
        labels[GKE_ACCELERATOR_LABEL] = str(accelerators[0].get("type"))
        gpu_taint = Taint(contract.GPU_TAINT_KEY, "present", contract.GPU_TAINT_EFFECT)
        if not any(t.key == gpu_taint.key and t.effect == gpu_taint.effect for t in taints):
            taints.append(gpu_taint)
    scaling = inputs.get("autoscaling") or {}
    zones = len(inputs.get("nodeLocations") or []) or 1
    max_nodes = _number(scaling.get("totalMaxNodeCount")) or _number(scaling.get("maxNodeCount")) * zones
    min_nodes = _number(scaling.get("totalMinNodeCount")) or _number(scaling.get("minNodeCount")) * zones
    return Pool(
        pool=str(labels.get(contract.LABEL_POOL, r.name)),
        source=f"GKE node pool `{r.name}`",
        cloud="gcp",
        machine_type=machine_type,
        min_nodes=min_nodes,
        max_nodes=max_nodes or _number(inputs.get("nodeCount")),
        labels=labels,
        taints=taints,
        varying=_varying(labels, GKE_NODEPOOL_LABEL),
        gpu=bool(accelerators),
    )


def pools(evaluation: Evaluation) -> list[Pool]:
    """Every pool the stack creates, the system pool first, then by pool name and source."""
    groups = evaluation.of_type(EKS_NODE_GROUP)
    # Karpenter's nodes are in the cluster's region, the one its managed node groups name.
    region = next((str(r.inputs["region"]) for r in groups if r.inputs.get("region")), "")
    found = [_eks(r, region) for r in groups]
    found += [_gke(r) for r in evaluation.of_type(GKE_NODE_POOL)]
    found += [_karpenter(r.inputs, region) for r in evaluation.of_type(KARPENTER_NODE_POOL)]
    return sorted(found, key=lambda p: (not p.is_system, p.pool, p.source))


def system_pool(found: list[Pool]) -> Pool | None:
    return next((p for p in found if p.is_system), None)
