"""The Network Operator's custom resources: what it deploys on the GPU nodes, and NCCL's network.

The network-operator chart installs only the operator; the node-side components (RDMA shared
device plugin, Multus, CNI plugins, NVIDIA IPAM) come from a NicClusterPolicy, and the secondary
network pods attach to from an IPPool plus a MacvlanNetwork. Pure Python, no Pulumi: the component
wraps these dicts in CustomResources and the tests validate them against the upstream CRDs.

Shapes follow the CRDs and examples of Mellanox/network-operator at v26.4.1
(config/crd/bases/mellanox.com_nicclusterpolicies.yaml, example/crs/
mellanox.com_v1alpha1_nicclusterpolicy_cr-nvidia-ipam.yaml, example/crs/
nvidia.com_v1alpha1_nv_ipam_ippool_cr.yaml, config/samples/mellanox.com_v1alpha1_macvlannetwork.yaml).
At that version the NicClusterPolicy has no whereabouts `ipamPlugin` any more; NVIDIA IPAM
(`nvIpam` + IPPool) is the IPAM the operator deploys.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from typing import Any

from common import images
from common.gpu_driver import OperatorValuesError
from components.operators.values import Placement, pool_tolerations

# The operator reconciles only the NicClusterPolicy with this name (pkg/consts/consts.go,
# NicClusterPolicyResourceName) and ignores any other.
NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy"
NIC_CLUSTER_POLICY_API_VERSION = "mellanox.com/v1alpha1"
IPPOOL_API_VERSION = "nv-ipam.nvidia.com/v1alpha1"

# Resource the RDMA shared device plugin advertises: prefix "rdma" + this resource name. A server
# that runs NCCL across nodes requests one of it next to its GPUs.
RDMA_RESOURCE_NAME = "rdma_shared_device_a"
RDMA_RESOURCE = f"rdma/{RDMA_RESOURCE_NAME}"
# How many containers per node may share one RDMA device (the upstream example's value).
RDMA_HCA_MAX = 63

# Every node-side image of a Network Operator release lives in one registry and is tagged after
# the release ("network-operator-v26.4.1"), so the tags follow the pinned chart version.
IMAGE_REPOSITORY = "nvcr.io/nvidia/mellanox"
# The release whose node-side images are in common/images.py ("network-operator-<name>"); another
# `networkOperator.chartVersion` gets its own release's tags, by tag.
IMAGES_CHART = "26.4.1"

# Readiness both kinds report in .status.state ("ready" is StateReady; api/v1alpha1/
# nicclusterpolicy_types.go and macvlannetwork_types.go at v26.4.1), as a `pulumi.com/waitFor`.
READY = "jsonpath={.status.state}=ready"

# Where the kinds this component creates come from. The chart ships NicClusterPolicy and
# MacvlanNetwork in its crds/ folder (deployment/network-operator/crds/ at v26.4.1); the IPPool CRD
# is not in the chart: the operator applies it while it reconciles the policy's nvIpam state
# (manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml, pkg/state/factory.go), so an
# IPPool must wait for the policy to be ready.
CHART_KINDS = (("mellanox.com", "NicClusterPolicy"), ("mellanox.com", "MacvlanNetwork"))
RUNTIME_KINDS = (("nv-ipam.nvidia.com", "IPPool"),)

SECONDARY_NETWORK_NAME = "rdma-net"
IPPOOL_NAME = "rdma-pool"


def image_tag(chart_version: str) -> str:
    return f"network-operator-v{chart_version.removeprefix('v')}"


def gpu_pool_node_affinity(placements: Sequence[Placement]) -> dict[str, Any]:
    """Node affinity that matches any GPU pool (one selector term per pool; terms are ORed)."""
    terms = [
        {
            "matchExpressions": [
                {"key": key, "operator": "In", "values": [value]}
                for key, value in sorted(placement.node_labels.items())
            ]
        }
        for placement in placements
        if placement.node_labels
    ]
    if not terms:
        raise OperatorValuesError("pools", "the Network Operator needs at least one GPU pool to run on")
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def rdma_shared_device_config(kernel_drivers: Sequence[str]) -> str:
    """k8s-rdma-shared-dev-plugin config: one shared resource over the NICs bound to these drivers."""
    return json.dumps(
        {
            "configList": [
                {
                    "resourceName": RDMA_RESOURCE_NAME,
                    "rdmaHcaMax": RDMA_HCA_MAX,
                    "selectors": {"drivers": list(kernel_drivers)},
                }
            ]
        },
        indent=2,
    )


def nic_cluster_policy_spec(
    chart_version: str, placements: Sequence[Placement], rdma_kernel_drivers: Sequence[str]
) -> dict[str, Any]:
    """The NicClusterPolicy spec: RDMA shared device plugin, Multus + CNI plugins, NVIDIA IPAM.

    No `ofedDriver`: the NIC driver stays the host's (the node image's inbox driver or MOFED), so
    the operator never reloads kernel modules under a running server.
    """
    tag = image_tag(chart_version)

    def image(name: str) -> dict[str, str]:
        key = f"network-operator-{name}"
        if chart_version.removeprefix("v") == IMAGES_CHART and key in images.IMAGES:
            # From the one table: a resolved digest goes in `version`, which the operator joins as
            # `repository/image@sha256:...` (imagePath in pkg/render/render.go:106-112 at v26.4.1).
            entry = images.IMAGES[key]
            digest = entry.digest.value  # None while unresolved
            return {
                "image": name,
                "repository": entry.repository.rpartition("/")[0],
                "version": digest if digest is not None else entry.tag,
            }
        return {"image": name, "repository": IMAGE_REPOSITORY, "version": tag}

    return {
        # Daemonsets land only on GPU pools and tolerate their taints; CPU nodes need no RDMA.
        "nodeAffinity": gpu_pool_node_affinity(placements),
        "tolerations": pool_tolerations(placements),
        "rdmaSharedDevicePlugin": {
            **image("k8s-rdma-shared-dev-plugin"),
            "config": rdma_shared_device_config(rdma_kernel_drivers),
        },
        "secondaryNetwork": {
            "multus": image("multus-cni"),
            "cniPlugins": image("plugins"),
        },
        "nvIpam": {**image("nvidia-k8s-ipam"), "enableWebhook": False},
    }


def ip_pool_spec(ip_range: str, placements: Sequence[Placement]) -> dict[str, Any]:
    """nv-ipam IPPool over `networkOperator.ipRange`, split evenly across the GPU pools' nodes."""
    try:
        network = ipaddress.ip_network(ip_range, strict=True)
    except ValueError as err:
        raise OperatorValuesError(
            "operators.networkOperator.ipRange", f"{ip_range!r} is not a network in CIDR form ({err})"
        ) from None
    nodes = max(1, sum(p.max_nodes for p in placements))
    usable = network.num_addresses - 2  # network and broadcast addresses
    # A node hands out at most one address per pod; cap the block so IPv6 ranges stay readable.
    block = min(usable // nodes, 2**16)
    needed = max((p.gpus_per_node for p in placements), default=1)
    if block < needed:
        raise OperatorValuesError(
            "operators.networkOperator.ipRange",
            f"{ip_range} has {usable} addresses for {nodes} GPU nodes "
            f"({block} each) but a node can run {needed} NCCL pods; use a larger range",
        )
    return {
        "subnet": str(network),
        "perNodeBlockSize": block,
        "nodeSelector": {
            "nodeSelectorTerms": gpu_pool_node_affinity(placements)["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"
            ]
        },
    }


def macvlan_network_spec(
    master_interface: str, workload_namespace: str, pool_name: str = IPPOOL_NAME
) -> dict[str, Any]:
    """The secondary network pods attach to (`k8s.v1.cni.cncf.io/networks: rdma-net`).

    `master` is the RDMA-capable host NIC; left empty the CNI would pick the default-route
    interface, which is the management NIC on GPU servers, so the caller must name it.
    """
    return {
        "networkNamespace": workload_namespace,
        "master": master_interface,
        "mode": "bridge",
        "mtu": 0,  # the master's MTU (jumbo frames on RDMA fabrics)
        "ipam": json.dumps({"type": "nv-ipam", "poolName": pool_name}),
    }
