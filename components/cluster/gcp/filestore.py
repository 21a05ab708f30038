"""The ReadWriteMany StorageClass of a GKE cluster on the stack's own network.

The Filestore CSI driver creates one Filestore instance per volume, on the VPC network its
StorageClass names, and on the project's `default` network when the class names none (driver
README, "Supported CreateVolume parameters": network, default "default";
kubernetes-sigs/gcp-filestore-csi-driver@2edb466bc7a0e5224a65967a4cc3ec9a52368619 README.md and
pkg/csi_driver/controller.go `paramNetwork = "network"`). GKE's own Filestore classes
(`standard-rwx` and the others the add-on installs) name none (GKE docs, "Access Filestore
instances with the Filestore CSI driver", https://cloud.google.com/filestore/docs/csi-driver), so on
a stack whose nodes live in a network it creates, the model volume's instance would be created
where no node can mount it. This class names the stack's network instead.

Parameter names and values are the driver's: `tier` standard (the tier of GKE's `standard-rwx`),
`network` the VPC's name, `connect-mode` DIRECT_PEERING (the driver's default; a Shared VPC from a
service project needs PRIVATE_SERVICE_ACCESS, which this stack's own VPC is not).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

import stack_config as cfg

PROVISIONER = "filestore.csi.storage.gke.io"
# The class this program creates on a stack's own network (cluster.rwxStorageClass unset).
STACK_NETWORK_CLASS = "llm-serving-filestore"
# GKE's default ReadWriteMany class, and every Filestore class GKE installs: on the `default` network.
GKE_DEFAULT_CLASS = cfg.GKE_DEFAULT_RWX_CLASS
GKE_FILESTORE_CLASSES = cfg.GKE_FILESTORE_CLASSES
TIER = "standard"
CONNECT_MODE = "DIRECT_PEERING"


def storage_class_parameters(network_name: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    return {"tier": TIER, "network": network_name, "connect-mode": CONNECT_MODE}


def stack_network_storage_class(
    name: str, network_name: pulumi.Input[str], provider: k8s.Provider, parent: pulumi.Resource
) -> k8s.storage.v1.StorageClass:
    return k8s.storage.v1.StorageClass(
        name,
        metadata={"name": STACK_NETWORK_CLASS, "labels": {"app.kubernetes.io/managed-by": "llm-serving"}},
        provisioner=PROVISIONER,
        parameters=storage_class_parameters(network_name),
        # Delete: the weights are reproducible from the bucket and the Hub at the pinned revision; a
        # released Filestore instance left behind would keep billing (docs/model-store.md).
        reclaim_policy="Delete",
        # A standard-tier instance is zonal: created in the zone of the first pod that mounts it, as
        # GKE's own classes do. `pulumi up` counts a claim of such a class as ready while Pending
        # (pulumi-kubernetes provider/pkg/await/awaiters.go, untilCoreV1PersistentVolumeClaimReady).
        volume_binding_mode="WaitForFirstConsumer",
        allow_volume_expansion=True,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider),
    )
