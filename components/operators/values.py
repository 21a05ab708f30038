"""Helm values of NVIDIA's GPU Operator and Network Operator, decided in one place.

Pure Python (no Pulumi import): the components, the tests, the offline plan and the policy pack
call the same functions, so what a test asserts is exactly what `pulumi up` would send to Helm.
Every key set here must exist in the pinned chart's values.yaml; tests/helm_values.py walks these
dicts against the upstream files and fails on a key the chart does not know (Helm would silently
ignore it).

Chart facts below were read from the charts at the pinned tags (provenance in
tests/fixtures/SOURCES.md): NVIDIA/gpu-operator v26.7.0 `deployments/gpu-operator/` and
Mellanox/network-operator v26.4.1 `deployment/network-operator/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Protocol, Sequence

from components import contract

# NVIDIA publishes both charts to one Helm repository. The gpu-operator chart is versioned with
# the release tag, leading "v" included (its release workflow runs `helm package --version
# "${RELEASE_TAG}"`, e.g. v26.7.0); the network-operator chart's Chart.yaml at tag v26.4.1 says
# `version: 26.4.1`, without the "v". Helm matches versions exactly, so each pin keeps its form.
NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
NETWORK_OPERATOR_CHART = "network-operator"

# GKE node images keep NVIDIA's user-space in this writable, persistent directory; NVIDIA's GKE
# guide sets both the driver root and the toolkit install dir to it.
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"

# The one key of the device-plugin ConfigMap; `devicePlugin.config.default` names it so every
# node uses it without a per-node label.
TIME_SLICING_CONFIG_KEY = "time-slicing"

# NFD worker tolerations each chart ships besides nvidia.com/gpu: NFD must also label control-plane
# nodes. Setting the list replaces the chart's, so these entries are carried over as each chart's
# values.yaml has them (node-feature-discovery.worker.tolerations).
_GPU_OPERATOR_NFD_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
)
_NETWORK_OPERATOR_NFD_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)

Cloud = Literal["aws", "gcp", "existing"]
NfdOwner = Literal["gpu-operator", "network-operator"]


class GpuOperatorOptions(Protocol):
    """The fields of `config.GpuOperatorConfig` the values depend on."""

    migStrategy: str
    timeSlicingReplicas: int | None
    dcgmServiceMonitor: bool


class Placement(Protocol):
    """The fields of `platform.GpuPlacement` the values depend on."""

    pool: str
    node_labels: dict[str, str]
    taint_key: str
    taint_effect: str
    gpus_per_node: int
    max_nodes: int

    @property
    def toleration(self) -> dict[str, str]: ...


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
        problems.append(OperatorValuesError(
            MIG_STRATEGY_KEY,
            "mixed advertises nvidia.com/mig-<profile> resources but the servers request nvidia.com/gpu; "
            "use single (with pools[].migProfile) or none",
        ))
    if options.timeSlicingReplicas and plan.device_plugin != "operator":
        problems.append(OperatorValuesError(
            TIME_SLICING_KEY,
            "on GKE with GKE-managed drivers GKE's own device plugin advertises the GPUs; "
            "use GKE GPU time-sharing on the node pool instead",
        ))
    return problems


def node_image_for(cloud: str, driver: str, gke_driver_version: str | None) -> str | None:
    """GKE node_config.image_type of the GPU pools (None off GKE); raises like resolve_driver_plan."""
    return resolve_driver_plan(cloud, driver, gke_driver_version).gke_image_type


class MigPool(Protocol):
    """The fields of `config.PoolConfig` MIG placement depends on."""

    migProfile: str | None


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


def nfd_owner(gpu_operator: bool, network_operator: bool) -> NfdOwner | None:
    """Exactly one Node Feature Discovery per cluster: two NFD masters fight over the same labels.

    The GPU Operator's NFD is kept when both are installed: its worker config whitelists PCI
    classes 02/0200/0207 (network controllers) next to 03xx (GPUs) and labels by vendor, so it
    also publishes the `pci-15b3.present` label the Network Operator selects Mellanox NICs by.
    """
    if gpu_operator:
        return "gpu-operator"
    if network_operator:
        return "network-operator"
    return None


def pool_tolerations(placements: Iterable[Placement]) -> list[dict[str, str]]:
    """One toleration per distinct pool taint, in a stable order.

    The chart's own default already tolerates nvidia.com/gpu:NoSchedule; it is kept explicit here
    because setting the list replaces the chart's, and a pool with another taint key must not
    lose its operands.
    """
    default = {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": contract.GPU_TAINT_EFFECT}
    seen: list[dict[str, str]] = [default]
    for placement in placements:
        toleration = dict(placement.toleration)
        if toleration not in seen:
            seen.append(toleration)
    return seen


# ---------------------------------------------------------------------------------------------
# GPU Operator


def device_plugin_time_slicing_config(replicas: int, mig_strategy: str) -> str:
    """The NVIDIA device plugin's config file (version v1) that shares each GPU N ways.

    `failRequestsGreaterThanOne`: a pod asking for 2 time-sliced "GPUs" may get two slices of
    one physical GPU; for tensor parallelism that is a silent 2x slowdown, so refuse it instead.
    """
    return (
        "version: v1\n"
        "flags:\n"
        f"  migStrategy: {mig_strategy}\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    failRequestsGreaterThanOne: true\n"
        "    resources:\n"
        f"    - name: {contract.GPU_RESOURCE}\n"
        f"      replicas: {replicas}\n"
    )


def gpu_operator_values(
    cloud: str,
    driver_mode: str,
    options: GpuOperatorOptions,
    placements: Sequence[Placement],
    nfd_owner: NfdOwner | None,
    *,
    gke_driver_version: str | None = None,
    network_operator: bool = False,
    time_slicing_config_map: str | None = None,
) -> dict[str, Any]:
    """Values for the gpu-operator chart.

    `driver_mode` is `gpuOperator.driver` (auto|operator|preinstalled); `time_slicing_config_map`
    names the ConfigMap holding `device_plugin_time_slicing_config` (required when time-slicing).
    """
    problems = gpu_operator_problems(cloud, driver_mode, options, gke_driver_version)
    if problems:
        raise problems[0]
    plan = resolve_driver_plan(cloud, driver_mode, gke_driver_version)
    tolerations = pool_tolerations(placements)
    values: dict[str, Any] = {
        "driver": {"enabled": plan.driver == "operator"},
        "toolkit": {"enabled": plan.toolkit == "operator"},
        "devicePlugin": {"enabled": plan.device_plugin == "operator"},
        "gfd": {"enabled": True},
        "dcgmExporter": {
            "enabled": True,
            # Needs the Prometheus Operator's CRDs; off for clusters without them.
            "serviceMonitor": {"enabled": bool(options.dcgmServiceMonitor)},
        },
        "mig": {"strategy": options.migStrategy},
        # Where GKE partitions the GPUs, a MIG manager would reset them to its default layout
        # (migManager.config.default: all-disabled) under GKE's device plugin; keep it off there.
        "migManager": {"enabled": plan.mig_by == "mig-manager"},
        "daemonsets": {"tolerations": tolerations},
        "nfd": {"enabled": nfd_owner == "gpu-operator"},
    }
    if nfd_owner == "gpu-operator":
        values["node-feature-discovery"] = {
            "worker": {"tolerations": [*map(dict, _GPU_OPERATOR_NFD_TOLERATIONS), *tolerations]}
        }
    if plan.driver_root is not None:
        # NVIDIA's GKE guide: driver root and toolkit install dir under /home/kubernetes/bin/nvidia,
        # CDI on. (The guide's `cdi.default=true` no longer exists in the v26.7.0 chart: CDI is
        # the only injection mode once `cdi.enabled` is true.)
        # https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
        values["hostPaths"] = {"driverInstallDir": plan.driver_root}
        values["toolkit"]["installDir"] = plan.driver_root
        values["cdi"] = {"enabled": True}
    if plan.driver == "operator":
        # GPUDirect RDMA through nvidia-peermem needs MOFED symbols. The Network Operator here
        # leaves the NIC driver to the host (its NicClusterPolicy deploys no ofedDriver), so the
        # GPU driver container builds peermem against the host's MOFED. Without the Network
        # Operator (e.g. AWS EFA) there is no MOFED and peermem would fail driver validation.
        values["driver"]["rdma"] = {"enabled": network_operator, "useHostMofed": network_operator}
    if plan.mig_by == "mig-manager" and plan.gke_image_type is not None and options.migStrategy == "single":
        # Google Cloud VMs need a reboot to switch MIG mode (NVIDIA's GKE and MIG guides:
        # migManager.env WITH_REBOOT=true in a CSP environment such as Google Cloud).
        values["migManager"]["env"] = [{"name": "WITH_REBOOT", "value": "true"}]
    replicas = options.timeSlicingReplicas
    if replicas:
        if not time_slicing_config_map:
            raise OperatorValuesError(TIME_SLICING_KEY, "time-slicing needs the name of the device-plugin ConfigMap")
        values["devicePlugin"]["config"] = {
            "name": time_slicing_config_map,
            "default": TIME_SLICING_CONFIG_KEY,
        }
    return values


def gke_critical_pods_quota_spec(pods: int = 100) -> dict[str, Any]:
    """ResourceQuota spec GKE needs before system-*-critical pods may run outside kube-system.

    GKE ships a quota scoped to those priority classes, and Kubernetes then admits such pods only
    in namespaces with a matching quota; the operators' pods use system-node-critical. Shape and
    limit from NVIDIA's GKE guide (manifests/input/google-gke-gpu-operator-quota.yaml).
    https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
    """
    return {
        "hard": {"pods": str(pods)},
        "scopeSelector": {
            "matchExpressions": [
                {
                    "operator": "In",
                    "scopeName": "PriorityClass",
                    "values": ["system-node-critical", "system-cluster-critical"],
                }
            ]
        },
    }


# ---------------------------------------------------------------------------------------------
# Network Operator


def network_operator_values(placements: Sequence[Placement], nfd_owner: NfdOwner | None) -> dict[str, Any]:
    """Values for the network-operator chart: only NFD ownership and its worker's tolerations.

    Everything the operator deploys on the nodes is declared in the NicClusterPolicy, which the
    chart does not create (components/operators/nic_cluster_policy.py).
    """
    values: dict[str, Any] = {"nfd": {"enabled": nfd_owner == "network-operator"}}
    if nfd_owner == "network-operator":
        values["node-feature-discovery"] = {
            "worker": {"tolerations": [*map(dict, _NETWORK_OPERATOR_NFD_TOLERATIONS), *pool_tolerations(placements)]}
        }
    return values
