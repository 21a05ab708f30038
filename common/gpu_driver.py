"""Who installs the NVIDIA driver, toolkit and device plugin on each cloud, decided once.

Pure Python. The stack config refuses what no driver setup would serve, the cluster layer picks the
node images and labels of the GPU pools from the plan, and the operators' Helm values follow it, so
the three can never disagree. Facts from NVIDIA's GPU Operator guides (the GKE and MIG pages cited
below) and the pinned charts (tests/fixtures/SOURCES.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# GKE node images keep NVIDIA's user-space in this writable, persistent directory; NVIDIA's GKE
# guide sets both the driver root and the toolkit install dir to it.
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"


class GpuOperatorOptions(Protocol):
    """The fields of `config.GpuOperatorConfig` the values depend on."""

    # Read-only members: the config model is frozen, and the values only read it.
    @property
    def chartVersion(self) -> str: ...
    @property
    def migStrategy(self) -> str: ...
    @property
    def timeSlicingReplicas(self) -> int | None: ...
    @property
    def dcgmServiceMonitor(self) -> bool: ...


class OperatorValuesError(ValueError):
    """A combination of options the charts cannot serve.

    `key` is the stack-config path the fix belongs to (config reports it as is; a `pools[]` key is
    narrowed to the first offending pool there); str() is the one-line `key: message`.
    """

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


DRIVER_KEY = "operators.gpuOperator.driver"
MIG_STRATEGY_KEY = "operators.gpuOperator.migStrategy"
TIME_SLICING_KEY = "operators.gpuOperator.timeSlicingReplicas"
# Narrowed by config to pools[<i>].gkeDriverVersion of the first pool that has it.
GKE_DRIVER_VERSION_KEY = "pools[].gkeDriverVersion"

# GKE node pool settings that follow from who installs the driver (container.NodePool
# node_config.image_type, and the label that turns GKE's own device plugin off; NVIDIA's GKE guide).
GKE_IMAGE_COS = "COS_CONTAINERD"
GKE_IMAGE_UBUNTU = "UBUNTU_CONTAINERD"
GKE_NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
GKE_INSTALLATION_DISABLED = "INSTALLATION_DISABLED"
# The label NVIDIA's MIG manager reconciles a node's MIG layout to; `all-<profile>` cuts every GPU
# of the node into that profile (GPU Operator MIG guide; the manager generates these configs from
# the hardware it finds). https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


# ---------------------------------------------------------------------------------------------
# Who does what on each cloud


@dataclass(frozen=True)
class DriverPlan:
    """Who provides each layer under the GPU Operator's operands on the GPU nodes.

    The one decision: the chart values, the config checks and the GKE node pools all read it.
    """

    # "operator": the GPU Operator's driver container; "host": already on the node image or
    # installed by the cloud.
    driver: Literal["operator", "host"]
    # The NVIDIA container toolkit (runtime hook, CDI specs): the operator's, or the image's.
    toolkit: Literal["operator", "host"]
    # Who advertises nvidia.com/gpu to the kubelet. Exactly one plugin may: two plugins that
    # register the same resource name make the kubelet flip between them.
    device_plugin: Literal["operator", "gke"]
    # Host directory of the driver's user-space files, if not the operator's /run/nvidia/driver.
    driver_root: str | None = None
    # GKE only: the node image the pools must run (node_config.image_type); None off GKE.
    gke_image_type: str | None = None
    # GKE only: labels the GPU pools must carry for this plan.
    gke_node_labels: tuple[tuple[str, str], ...] = ()
    # Who cuts GPUs into MIG slices: NVIDIA's MIG manager (node label nvidia.com/mig.config), or
    # GKE itself (guest_accelerators[].gpu_partition_size), whose device plugin then advertises
    # each slice as nvidia.com/gpu and whose layout a MIG manager must not undo.
    mig_by: Literal["mig-manager", "gke"] = "mig-manager"


def resolve_driver_plan(cloud: str, driver: str, gke_driver_version: str | None = None) -> DriverPlan:
    """Decide driver, toolkit, device plugin, GKE node image and MIG ownership.

    Raises OperatorValuesError (with the key to fix) for combinations nothing would serve:
    - aws: the EKS AL2023 NVIDIA AMI ships the driver and the container toolkit (with containerd
      already configured), so the operator adds only device plugin, GFD and DCGM exporter;
      `operator` (a second driver) is refused.
    - gcp, gkeDriverVersion LATEST/DEFAULT (`auto`/`preinstalled`): GKE installs the driver into
      /home/kubernetes/bin/nvidia and runs its own device plugin on COS nodes; the operator's
      toolkit points there (NVIDIA's GKE guide) and its device plugin stays off.
    - gcp, INSTALLATION_DISABLED with `operator`: NVIDIA's "driver manager" mode: Ubuntu nodes,
      the operator's driver container, and the label that turns GKE's device plugin off.
    - gcp, INSTALLATION_DISABLED without `operator`: refused. NVIDIA's other GKE mode needs
      Google's driver-installer DaemonSet, which this program does not apply, so no driver.
    - gcp, `operator` with GKE-installed drivers: refused (two drivers on one node).
    - existing: the stack says; `auto` cannot be guessed for an unknown node image.
    """
    if cloud == "existing":
        if driver == "auto":
            raise OperatorValuesError(
                DRIVER_KEY,
                "cloud is existing, so say who installs the GPU driver: `operator` (the GPU Operator's "
                "driver container) or `preinstalled` (already on the nodes)",
            )
        if driver == "operator":
            return DriverPlan(driver="operator", toolkit="operator", device_plugin="operator")
        return DriverPlan(driver="host", toolkit="operator", device_plugin="operator")
    if cloud == "aws":
        if driver == "operator":
            # The node groups this program creates run the AL2023 NVIDIA AMI, driver included; a
            # second driver from the operator's container would fight the one on the host.
            raise OperatorValuesError(
                DRIVER_KEY,
                "on EKS the GPU node groups run the AL2023 NVIDIA AMI, which has the driver; use auto or preinstalled",
            )
        return DriverPlan(driver="host", toolkit="host", device_plugin="operator")
    if cloud == "gcp":
        gke_installs = gke_driver_version != GKE_INSTALLATION_DISABLED
        if driver == "operator":
            if gke_installs:
                raise OperatorValuesError(
                    DRIVER_KEY,
                    "`operator` on GKE needs pools with gkeDriverVersion INSTALLATION_DISABLED; "
                    "otherwise GKE installs its own driver",
                )
            return DriverPlan(
                driver="operator",
                toolkit="operator",
                device_plugin="operator",
                gke_image_type=GKE_IMAGE_UBUNTU,
                gke_node_labels=((GKE_NO_DEVICE_PLUGIN_LABEL, "true"),),
            )
        if not gke_installs:
            raise OperatorValuesError(
                GKE_DRIVER_VERSION_KEY,
                "INSTALLATION_DISABLED leaves the nodes without a driver unless "
                "operators.gpuOperator.driver is `operator`; use LATEST or DEFAULT",
            )
        return DriverPlan(
            driver="host",
            toolkit="operator",
            device_plugin="gke",
            driver_root=GKE_NVIDIA_DIR,
            gke_image_type=GKE_IMAGE_COS,
            mig_by="gke",
        )
    raise OperatorValuesError("cloud", f"{cloud!r} is not one of aws, gcp, existing")


def gpu_operator_problems(
    cloud: str, driver: str, options: GpuOperatorOptions, gke_driver_version: str | None = None
) -> list[OperatorValuesError]:
    """Every reason the GPU Operator options cannot work here; [] when they can.

    The config check reports all of them; `gpu_operator_values` raises the first.
    """
    try:
        plan = resolve_driver_plan(cloud, driver, gke_driver_version)
    except OperatorValuesError as err:
        return [err]
    problems: list[OperatorValuesError] = []
    if options.migStrategy == "mixed":
        # Mixed advertises nvidia.com/mig-<profile> per slice and no nvidia.com/gpu on MIG GPUs.
        problems.append(
            OperatorValuesError(
                MIG_STRATEGY_KEY,
                "mixed advertises nvidia.com/mig-<profile> resources but the servers request nvidia.com/gpu; "
                "use single (with pools[].migProfile) or none",
            )
        )
    if options.timeSlicingReplicas and plan.device_plugin != "operator":
        problems.append(
            OperatorValuesError(
                TIME_SLICING_KEY,
                "on GKE with GKE-managed drivers GKE's own device plugin advertises the GPUs; "
                "use GKE GPU time-sharing on the node pool instead",
            )
        )
    return problems


def node_image_for(cloud: str, driver: str, gke_driver_version: str | None) -> str | None:
    """GKE node_config.image_type of the GPU pools (None off GKE); raises like resolve_driver_plan."""
    return resolve_driver_plan(cloud, driver, gke_driver_version).gke_image_type


class MigPool(Protocol):
    """The fields of `config.PoolConfig` MIG placement depends on."""

    @property
    def migProfile(self) -> str | None: ...  # read-only: the config model is frozen


def mig_node_labels(pool: MigPool, plan: DriverPlan) -> dict[str, str]:
    """Labels a pool's nodes need so NVIDIA's MIG manager cuts every GPU into `pool.migProfile`.

    Empty when the pool has no profile or when GKE cuts the GPUs (see `gke_gpu_partition_size`).
    """
    if not pool.migProfile or plan.mig_by != "mig-manager":
        return {}
    return {MIG_CONFIG_LABEL: f"all-{pool.migProfile}"}


def gke_gpu_partition_size(pool: MigPool, plan: DriverPlan) -> str | None:
    """guest_accelerators[].gpu_partition_size for a GKE pool whose GPUs GKE itself partitions."""
    if not pool.migProfile or plan.mig_by != "gke":
        return None
    return pool.migProfile
