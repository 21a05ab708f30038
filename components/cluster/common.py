"""What every cloud's cluster layer shares, written once.

The model-store identities' names, the kubeconfig shape, the taint spelling of the cloud APIs, a
pool's placement and the bucket's logical name. The per-cloud modules import this; it imports none
of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

import stack_config as cfg
from components.cluster.interface import GpuPlacement, pool_node_labels

# The Kubernetes ServiceAccounts of the model store: the mirror Job writes the bucket, the servers
# read it. The cloud identities are bound to exactly these names; the model store creates the
# ServiceAccounts from the `ServiceAccountBinding`s on `Cluster.bucket`, so it never spells them.
MODEL_WRITER_SERVICE_ACCOUNT = "model-writer"
MODEL_READER_SERVICE_ACCOUNT = "model-reader"

# EKS and GKE APIs spell taint effects in upper snake case; Kubernetes in camel case.
_CLOUD_TAINT_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}


def cloud_taint_effect(kubernetes_effect: str) -> str:
    """`NoSchedule` -> `NO_SCHEDULE`, as the EKS node group and GKE node pool APIs want it."""
    return _CLOUD_TAINT_EFFECTS[kubernetes_effect]


def kubernetes_taint_effect(cloud_effect: str) -> str:
    """The inverse of cloud_taint_effect (what a pool's API answer means to the scheduler); an effect
    neither table knows is returned as given."""
    return {v: k for k, v in _CLOUD_TAINT_EFFECTS.items()}.get(cloud_effect, cloud_effect)


def placement_for(pool: cfg.PoolConfig, rdma: bool = False) -> GpuPlacement:
    """The one place a pool's labels and taint are decided; node pools and workloads both read it."""
    return GpuPlacement(
        pool=pool.name,
        gpu=pool.gpu,
        gpus_per_node=pool.gpusPerNode,
        max_nodes=pool.maxNodes,
        node_labels=pool_node_labels(pool.name, pool.gpu),
        rdma=rdma,
    )


def exec_kubeconfig(
    name: str,
    server: pulumi.Input[str],
    ca_data: pulumi.Input[str] | None,
    command: str,
    args: Sequence[pulumi.Input[str]],
    provide_cluster_info: bool = False,
) -> pulumi.Output[str]:
    """A kubeconfig for one cluster whose credentials come from an exec plugin at use time.

    No token is stored in state: `aws eks get-token` / `gke-gcloud-auth-plugin` mint a short-lived
    one from the caller's cloud credentials each time the provider connects. `ca_data` None: the
    server's certificate is checked against the system's trusted roots (GKE's DNS-based endpoint).
    """
    cluster: dict[str, Any] = {"server": server}
    if ca_data is not None:
        cluster["certificate-authority-data"] = ca_data
    exec_spec: dict[str, Any] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": command,
        "args": list(args),
        "interactiveMode": "Never",
    }
    if provide_cluster_info:
        exec_spec["provideClusterInfo"] = True
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": exec_spec}}],
        "preferences": {},
    }
    return pulumi.Output.json_dumps(doc)


def https(endpoint: pulumi.Input[str]) -> pulumi.Output[str]:
    """EKS returns `https://...`, GKE a bare IP; the kubeconfig wants a URL."""
    return pulumi.Output.from_input(endpoint).apply(lambda e: e if e.startswith("https://") else f"https://{e}")


def retains_bucket(on_destroy: str) -> bool:
    """`modelStore.onDestroy: retain`: the bucket is kept out of `pulumi destroy`.

    Pulumi's `retainOnDelete` removes the resource from the stack's state without calling the
    provider's Delete (https://www.pulumi.com/docs/iac/concepts/resources/options/retainondelete/);
    `empty` sets the provider's `force_destroy` instead, so destroy deletes every object first.
    """
    if on_destroy not in ("retain", "empty"):
        raise ValueError(f"modelStore.onDestroy: {on_destroy!r} is neither retain nor empty")
    return on_destroy == "retain"


def bucket_resource_name(stack_name: str) -> str:
    """Logical name of the model bucket; Pulumi appends a random suffix to it for the real name.

    S3 and GCS bucket names are global, so the default name must not collide across accounts:
    Pulumi's auto-naming (`<logical name>-<7 random hex>`) gives that suffix without pulumi-random.
    Kept to 55 characters so the suffixed name fits the 63-character bucket name limit.
    """
    base = f"{cfg.PROJECT}-{stack_name}".lower()
    base = "".join(c if c.isalnum() or c == "-" else "-" for c in base).strip("-")
    return f"{base[:48].rstrip('-')}-models"


def endpoint_summary(access: cfg.ClusterEndpointConfig, private_endpoint_label: str) -> str:
    """How the plan describes who may reach a created cluster's API server, and what that means for
    whoever runs `pulumi up` (the Kubernetes provider talks to that endpoint)."""
    if not access.publicAccess:
        return (
            f"private only ({private_endpoint_label}): `pulumi up`, kubectl and CI must run from inside the "
            "VPC or a network connected to it"
        )
    if access.is_world_open:
        return "public, open to every address (no security.clusterEndpoint.publicCidrs)" + (
            "; allowed knowingly (allowWorldOpen)" if access.allowWorldOpen else ""
        )
    return (
        f"public, only from {', '.join(access.publicCidrs)} (keep the address `pulumi up` runs from in the "
        "list, or it loses the cluster)"
    )
