"""An existing Kubernetes cluster (`cloud: existing`): no cloud resources, only a provider.

The provider is built from the kubeconfig path (and context) named in config, never from the
ambient `KUBECONFIG`/`~/.kube/config`, so a stack cannot deploy to whatever cluster the shell
happens to point at. The GPU pools are described, not created: their nodes must already carry the
pool labels and the GPU taint (`node_setup_commands` prints the kubectl lines), so the workloads'
node selectors and tolerations match them exactly as on EKS and GKE.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

import stack_config as cfg
from components.cluster.common import placement_for
from components.cluster.interface import GpuPlacement, ModelBucket, RdmaAttachment


@dataclass(frozen=True)
class ExistingClusterArgs:
    kubeconfig_path: str
    context: str | None
    placements: list[GpuPlacement]
    rwx_storage_class: str = ""


class ExistingCluster(pulumi.ComponentResource):
    """A cluster reached through a kubeconfig; meets `components.cluster.interface.Cluster`."""

    provider: k8s.Provider
    placements: dict[str, GpuPlacement]
    bucket: ModelBucket | None = None
    rwx_storage_class: str
    cloud: str = "existing"

    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:existing:Cluster", name, None, opts)
        # The provider reads the file when it connects; only its path (not the credentials in
        # it) goes into the state.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=os.path.expanduser(args.kubeconfig_path),
            context=args.context,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.placements = {p.pool: p for p in args.placements}
        self.bucket = None
        self.rwx_storage_class = args.rwx_storage_class
        self.staging_storage_class: str | None = None
        self.rdma_attachments: dict[str, RdmaAttachment] = {}
        # images.pullThrough is refused on an existing cluster (stack_config/stack.py): no cloud account.
        self.image_mirrors: dict[str, str] = {}
        self.platform = {
            "cloud": "existing",
            "vpc": "the cluster's own",
            "nat": "the cluster's own",
            # The stack describes the cluster's nodes; whatever grows them is the cluster's.
            "autoscaler": "the cluster's own, if any (the plan counts pools at maxNodes as the stack declares them)",
            "pools": [
                {"pool": p.pool, "maxNodes": p.max_nodes, "nodeSetup": "; ".join(node_setup_commands(p))}
                for p in args.placements
            ],
        }
        self.register_outputs({})


def node_setup_commands(placement: GpuPlacement) -> list[str]:
    """kubectl lines that make an existing node match a described pool (for docs and plan output)."""
    labels = " ".join(f"{k}={v}" for k, v in sorted(placement.node_labels.items()))
    return [
        f"kubectl label node <node> {labels}",
        f"kubectl taint node <node> {placement.taint_key}={placement.taint_value}:{placement.taint_effect}",
    ]


def create_existing(stack: cfg.StackConfig, stack_name: str) -> ExistingCluster:
    """ExistingCluster from the validated stack config (config guarantees `cluster.kubeconfig`)."""
    assert stack.cluster.kubeconfig, "config validation requires cluster.kubeconfig for cloud: existing"
    return ExistingCluster(
        stack.cluster.name,
        ExistingClusterArgs(
            kubeconfig_path=stack.cluster.kubeconfig,
            context=stack.cluster.context,
            placements=[placement_for(pool) for pool in stack.pools],
            rwx_storage_class=stack.cluster.rwxStorageClass or "",
        ),
    )
