"""Choose the cluster layer for the stack's cloud: EKS, GKE, or an existing cluster.

`create_cluster` is what `__main__.py` calls; whatever the cloud, it returns an object that meets
`components.cluster.interface.Cluster` (a Kubernetes provider, one placement per GPU pool, the
model bucket).
"""

from __future__ import annotations

import stack_config as cfg
from components.cluster.aws.eks import create_eks
from components.cluster.existing import create_existing
from components.cluster.gcp.gke import create_gke
from components.cluster.interface import Cluster


def create_cluster(stack: cfg.StackConfig, stack_name: str) -> Cluster:
    """Build the cluster layer the stack's `cloud` names."""
    if stack.cloud == cfg.Cloud.aws:
        return create_eks(stack, stack_name)
    if stack.cloud == cfg.Cloud.gcp:
        return create_gke(stack, stack_name)
    return create_existing(stack, stack_name)
