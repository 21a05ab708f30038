"""EFA on EKS: how many interfaces each instance type carries, the node label EFA pools wear, and
AWS's device plugin that advertises the interfaces to pods as `vpc.amazonaws.com/efa`.

Without the device plugin an EFA node has the interfaces but no pod can ask for them, and a pod
that does not ask gets no /dev/infiniband devices: NCCL then falls back to TCP sockets.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from common import images
from components.cluster.interface import GpuPlacement, RdmaAttachment

# EFA interfaces an instance type carries = its network cards (one EFA per card).
# Source: AWS EC2 User Guide, "Elastic Fabric Adapter - supported instance types" and the
# accelerated-computing network specifications (p4d/p4de: 4 cards, p5: 32, p5en: 16, p6-b200: 8).
# The launch template makes one interface per card from this table, and pods request the same
# number, so the two cannot disagree.
EFA_INTERFACES = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
}

# Extended resource the device plugin advertises, one unit per EFA interface.
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# Label on the nodes of every EFA pool; the device plugin's DaemonSet selects on it, so it runs on
# EFA nodes of any pool and nowhere else. The key is the one AWS's own EKS patterns put on EFA
# node groups (aws-ia/terraform-aws-eks-blueprints, patterns/targeted-odcr/helm.tf, nodeSelector
# of the same chart).
EFA_NODE_LABEL = "vpc.amazonaws.com/efa.present"
EFA_NODE_LABEL_VALUE = "true"

# AWS's chart, pinned exactly. Version from the published index of https://aws.github.io/eks-charts
# (aws/eks-charts, branch gh-pages, commit c7f9ea56017831aa11ea7e81112f8cd6cc0fd2db, 2026-08-03):
# chart v0.5.30, app (image) v0.5.20. The chart's version string carries the leading "v".
EFA_CHART = "aws-efa-k8s-device-plugin"
EFA_CHART_VERSION = "v0.5.30"
EFA_CHART_REPO = "https://aws.github.io/eks-charts"
# The chart's README installs it into kube-system; its pods run at system-node-critical priority.
EFA_NAMESPACE = "kube-system"
EFA_RELEASE_NAME = "aws-efa-k8s-device-plugin"
HELM_TIMEOUT_SECONDS = 600


def interfaces(instance_type: str) -> int:
    """EFA interfaces of `instance_type`; config admits EFA only on types in this table."""
    return EFA_INTERFACES[instance_type]


def rdma_attachment(instance_type: str) -> RdmaAttachment:
    """What a pod on an EFA node requests to get every interface of its node.

    One server pod per node takes all the node's GPUs, so it takes all its EFA interfaces too.
    """
    # FI_PROVIDER makes libfabric (under NCCL's aws-ofi-nccl plugin) use EFA, not TCP sockets.
    return RdmaAttachment(resource=EFA_RESOURCE, count=interfaces(instance_type), env=(("FI_PROVIDER", "efa"),))


def device_plugin_values(placements: Sequence[GpuPlacement]) -> dict:
    """Helm values: run on EFA nodes only, tolerating the GPU taint those nodes carry.

    `nodeSelector` and `tolerations` are keys of the chart's values.yaml at v0.5.30 (both default
    empty); the chart adds its own toleration of CriticalAddonsOnly and an affinity to EFA instance
    types. Tolerations come from the placements, so they follow the contract's taint.
    """
    tolerations: list[dict[str, str]] = []
    for placement in placements:
        for toleration in placement.tolerations:
            if toleration not in tolerations:
                tolerations.append(toleration)
    # The image from the one table (common/images.py "efa-device-plugin"); the template writes
    # "{image.repository}:{image.tag}" (templates/daemonset.yaml), so a tag of `v0.5.20@sha256:...` pins it.
    image = images.chart_image("efa-device-plugin")
    return {
        "nodeSelector": {EFA_NODE_LABEL: EFA_NODE_LABEL_VALUE},
        "tolerations": tolerations,
        "image": {"repository": image.name, "tag": image.pinned_tag},
    }


class EfaDevicePlugin(pulumi.ComponentResource):
    """AWS's EFA device plugin DaemonSet, installed with its Helm chart into kube-system."""

    values: dict

    def __init__(
        self,
        name: str,
        placements: Sequence[GpuPlacement],
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-serving:aws:EfaDevicePlugin", name, None, opts)
        self.values = device_plugin_values(placements)
        release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=EFA_RELEASE_NAME,
                chart=EFA_CHART,
                version=EFA_CHART_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=EFA_CHART_REPO),
                namespace=EFA_NAMESPACE,
                create_namespace=False,
                values=self.values,
                # A failed install is rolled back, so the next `pulumi up` starts clean.
                atomic=True,
                cleanup_on_fail=True,
                timeout=HELM_TIMEOUT_SECONDS,
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.status = release.status
        self.register_outputs({"releaseStatus": self.status})
