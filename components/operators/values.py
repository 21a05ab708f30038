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
    """A combination of options the charts cannot serve; the message names the key and the fix."""


# ---------------------------------------------------------------------------------------------
# Who does what on each cloud


@dataclass(frozen=True)
class DriverPlan:
    """Who provides each layer under the GPU Operator's operands on the GPU nodes."""

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


def resolve_driver_plan(cloud: str, driver: str, gke_driver_version: str | None = None) -> DriverPlan:
    """Decide driver, toolkit and device-plugin ownership from the cloud and `gpuOperator.driver`.

    - aws: the EKS AL2023 NVIDIA AMI ships the driver and the container toolkit (with containerd
      already configured), so the operator adds only device plugin, GFD and DCGM exporter.
    - gcp: GKE installs the driver into /home/kubernetes/bin/nvidia. With GKE-managed drivers
      (gpu-driver-version latest/default) GKE also runs its own device plugin, so the operator's
      stays off. With INSTALLATION_DISABLED the pools follow NVIDIA's documented GKE mode: Google's
      driver installer DaemonSet plus the node label gke-no-default-nvidia-gpu-device-plugin=true,
      and the operator's device plugin is the one advertiser.
    - existing: the stack says; `auto` cannot be guessed for an unknown node image.
    """
    if cloud == "existing":
        if driver == "auto":
            raise OperatorValuesError(
                "operators.gpuOperator.driver: cloud is existing, so say who installs the GPU driver: "
                "`operator` (the GPU Operator's driver container) or `preinstalled` (already on the nodes)"
            )
        if driver == "operator":
            return DriverPlan(driver="operator", toolkit="operator", device_plugin="operator")
        return DriverPlan(driver="host", toolkit="operator", device_plugin="operator")
    if cloud == "aws":
        if driver == "operator":
            # A driverless node image (e.g. EKS-optimised Ubuntu) is the user's responsibility.
            return DriverPlan(driver="operator", toolkit="operator", device_plugin="operator")
        return DriverPlan(driver="host", toolkit="host", device_plugin="operator")
    if cloud == "gcp":
        gke_installs = gke_driver_version not in ("INSTALLATION_DISABLED",)
        if driver == "operator":
            if gke_installs:
                raise OperatorValuesError(
                    "operators.gpuOperator.driver: `operator` on GKE needs pools with gkeDriverVersion "
                    "INSTALLATION_DISABLED (and an Ubuntu node image); otherwise GKE installs its own driver"
                )
            return DriverPlan(driver="operator", toolkit="operator", device_plugin="operator")
        return DriverPlan(
            driver="host",
            toolkit="operator",
            device_plugin="gke" if gke_installs else "operator",
            driver_root=GKE_NVIDIA_DIR,
        )
    raise OperatorValuesError(f"cloud: {cloud!r} is not one of aws, gcp, existing")


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
    replicas = options.timeSlicingReplicas
    if replicas:
        if plan.device_plugin != "operator":
            raise OperatorValuesError(
                "operators.gpuOperator.timeSlicingReplicas: on GKE with GKE-managed drivers GKE's own "
                "device plugin advertises the GPUs; use GKE GPU time-sharing on the node pool instead"
            )
        if not time_slicing_config_map:
            raise OperatorValuesError("time-slicing needs the name of the device-plugin ConfigMap")
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
