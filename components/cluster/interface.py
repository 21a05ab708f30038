"""The contract between the cloud layer and everything that runs on the cluster.

Whichever cloud a stack names (EKS, GKE or an existing cluster), the cluster component hands the
rest of the program the same three things: a Kubernetes provider, one `GpuPlacement` per GPU pool,
and (where the stack has one) a `ModelBucket`. Servers, the mirror Job and the operators' daemonsets
take their node selector and tolerations from the placement, so a pool's taint is decided in one
place and cannot drift from what the workloads tolerate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import pulumi
import pulumi_kubernetes as k8s

from common import contract


@dataclass(frozen=True)
class GpuPlacement:
    """Where GPU work of one pool lands, and what it must tolerate to get there."""

    pool: str
    gpu: str  # catalog name, e.g. "H100-80GB"
    gpus_per_node: int
    max_nodes: int
    # Labels every node of the pool carries; workloads select on exactly these.
    node_labels: dict[str, str]
    taint_key: str = contract.GPU_TAINT_KEY
    taint_value: str = "present"
    taint_effect: str = contract.GPU_TAINT_EFFECT
    # AWS EFA / RDMA-capable interfaces on the nodes (multi-node NCCL).
    rdma: bool = False

    @property
    def node_selector(self) -> dict[str, str]:
        return dict(self.node_labels)

    @property
    def toleration(self) -> dict[str, str]:
        # Exists (not Equal) so a change of the taint's value never strands running servers.
        return {"key": self.taint_key, "operator": "Exists", "effect": self.taint_effect}

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [self.toleration]


def pool_node_labels(pool: str, gpu: str) -> dict[str, str]:
    """The labels that name a pool and its accelerator, the same on every cloud."""
    return {contract.LABEL_POOL: pool, contract.LABEL_ACCELERATOR: gpu.lower()}


@dataclass(frozen=True)
class RdmaAttachment:
    """How a pod of a replica that spans nodes reaches the RDMA fabric NCCL uses between them.

    The Network Operator advertises the RDMA devices as an extended resource and, when a host NIC is
    configured, a Multus secondary network; a pod gets neither unless it asks for them.
    """

    resource: str
    network: str | None = None
    count: int = 1
    # Environment the engine's NCCL needs to use the fabric (e.g. FI_PROVIDER=efa for AWS EFA).
    env: tuple[tuple[str, str], ...] = ()


@dataclass
class ServiceAccountBinding:
    """What a Kubernetes ServiceAccount needs to act as a cloud identity.

    `annotations` go on the ServiceAccount (the GKE Workload Identity GSA email); on EKS
    Pod Identity the association is made by the cloud component itself and annotations stay empty.
    """

    namespace: str
    name: str
    annotations: dict[str, pulumi.Input[str]] = field(default_factory=dict)


@dataclass
class ModelBucket:
    """The bucket that holds the mirrored weights, and who may touch it."""

    # "s3" or "gs": the scheme of storage URIs and of the sync command in the mirror Job.
    scheme: str
    name: pulumi.Input[str]
    # Object prefix under which every model lives: <prefix>/<org>/<name>/<revision>/...
    prefix: str
    writer: ServiceAccountBinding
    reader: ServiceAccountBinding
    region: pulumi.Input[str] | None = None

    def uri(self, repo_id: str, revision: str) -> pulumi.Output[str]:
        return pulumi.Output.concat(self.scheme, "://", self.name, "/", self.prefix, "/", repo_id, "/", revision)


class Cluster(Protocol):
    """What every cloud's cluster component exposes."""

    provider: k8s.Provider
    placements: dict[str, GpuPlacement]
    bucket: ModelBucket | None
    # StorageClass for the ReadWriteMany model volume (EFS on EKS, Filestore on GKE, configured
    # on an existing cluster).
    rwx_storage_class: str
    # Which cloud the node images come from; the operators choose driver/toolkit modes from it.
    cloud: str
    # StorageClass for the mirror Job's ReadWriteOnce staging volume when models load from the
    # bucket; None means the cluster's default class.
    staging_storage_class: str | None
    # Per pool, the RDMA devices a replica spanning nodes requests (AWS EFA); empty elsewhere.
    rdma_attachments: dict[str, RdmaAttachment]
    # Plain values for the offline plan: network, NAT, node autoscaler, APIs, each pool's nodes.
    platform: dict
    # images.pullThrough: upstream registry host (docker.io, ghcr.io) -> the prefix of the cache
    # the cluster layer created for it; empty when nodes pull from the upstreams.
    # Components pass every image reference through common.images.mirrored(ref, image_mirrors).
    image_mirrors: dict[str, str]
