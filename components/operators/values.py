"""Helm values of NVIDIA's GPU Operator and Network Operator, decided in one place.

Pure Python (no Pulumi import): the components, the tests, the offline plan and the policy pack
call the same functions, so what a test asserts is exactly what `pulumi up` would send to Helm.
Every key set here must exist in the pinned chart's values.yaml; tests/support/helm_values.py walks these
dicts against the upstream files and fails on a key the chart does not know (Helm would silently
ignore it).

Chart facts below were read from the charts at the pinned tags (provenance in
tests/fixtures/SOURCES.md): NVIDIA/gpu-operator v26.7.0 `deployments/gpu-operator/` and
Mellanox/network-operator v26.4.1 `deployment/network-operator/`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from common import contract, images
from common.gpu_driver import (
    TIME_SLICING_KEY,
    GpuOperatorOptions,
    OperatorValuesError,
    gpu_operator_problems,
    resolve_driver_plan,
)

# NVIDIA publishes both charts to one Helm repository. The gpu-operator chart is versioned with
# the release tag, leading "v" included (its release workflow runs `helm package --version
# "${RELEASE_TAG}"`, e.g. v26.7.0); the network-operator chart's Chart.yaml at tag v26.4.1 says
# `version: 26.4.1`, without the "v". Helm matches versions exactly, so each pin keeps its form.
NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
NETWORK_OPERATOR_CHART = "network-operator"


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


class Placement(Protocol):
    """The fields of `components.cluster.interface.GpuPlacement` the values depend on."""

    # Read-only members: GpuPlacement is a frozen dataclass, and the values only read it.
    @property
    def pool(self) -> str: ...
    @property
    def node_labels(self) -> dict[str, str]: ...
    @property
    def taint_key(self) -> str: ...
    @property
    def taint_effect(self) -> str: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def max_nodes(self) -> int: ...
    @property
    def toleration(self) -> dict[str, str]: ...


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

# The operands whose images come from the one image table (common/images.py): values key -> table
# key. The chart copies `repository`/`image`/`version` of each into the ClusterPolicy, and the
# operator joins them as `repository/image@version` when `version` starts with "sha256:", else
# `repository/image:version` (imagePath / ImagePath in NVIDIA/gpu-operator's ClusterPolicy types:
# api/nvidia/v1/clusterpolicy_types.go, and internal/image/image.go in later trees: "use @ if image
# digest is specified instead of tag"). So a resolved digest pins the operand; the tag it came from
# stays in the table.
# Not here: the driver (its version gets the node's OS appended, "-ubuntu22.04", so one digest cannot
# name it; docs/security.md). The operator's own image, its validator and Node Feature Discovery:
# GPU_OPERATOR_OWN_IMAGES below.
# The table's tags are this chart version's defaults; under another `gpuOperator.chartVersion` the
# chart's own operand images are left alone (by tag; docs/security.md) rather than pinned to the
# operands of another release.
GPU_OPERATOR_IMAGES_CHART = "v26.7.0"
GPU_OPERATOR_IMAGES = {
    "toolkit": "gpu-operator-toolkit",
    "devicePlugin": "gpu-operator-device-plugin",
    "gfd": "gpu-operator-device-plugin",
    "dcgmExporter": "gpu-operator-dcgm-exporter",
    "migManager": "gpu-operator-mig-manager",
}


# The operator's own image: its pod and hook Jobs render "{operator.repository}/{operator.image}:
# {operator.version | default appVersion}" (templates/_helpers.tpl:71-73, gpu-operator.fullimage), so
# `version` takes `v26.7.0@sha256:...`; the validator is an operand of the ClusterPolicy (the operator's
# `@`-for-a-digest rule above); Node Feature Discovery, a subchart, renders "{image.repository}:{image.tag |
# default appVersion}" (charts/node-feature-discovery/templates/master.yaml:60, worker.yaml, nfd-gc.yaml).
GPU_OPERATOR_OWN_IMAGE = "gpu-operator"
NFD_IMAGE = "node-feature-discovery"


def operator_image(image_mirrors: Mapping[str, str] | None = None) -> dict[str, str]:
    entry = images.chart_image(GPU_OPERATOR_OWN_IMAGE, dict(image_mirrors or {}))
    repository, _, image = entry.name.rpartition("/")
    return {"repository": repository, "image": image, "version": entry.pinned_tag}


def nfd_image(image_mirrors: Mapping[str, str] | None = None) -> dict[str, str]:
    entry = images.chart_image(NFD_IMAGE, dict(image_mirrors or {}))
    return {"repository": entry.name, "tag": entry.pinned_tag}


# The toolkit's environment on GKE (see gpu_operator_values).
GKE_TOOLKIT_ENV = ({"name": "RUNTIME_CONFIG_SOURCE", "value": "file"},)


def operand_image(key: str, image_mirrors: Mapping[str, str] | None = None) -> dict[str, str]:
    """`repository`/`image`/`version` of a GPU Operator operand from the image table: the digest as
    `version` when it is known (the operator then pulls `repository/image@sha256:...`), else the tag;
    through the stack's pull-through cache where it has one for the registry (common/images.py)."""
    entry = images.chart_image(key, dict(image_mirrors or {}))
    repository, _, image = entry.name.rpartition("/")
    return {"repository": repository, "image": image, "version": entry.digest or entry.tag}


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
    dcgm_metrics_config_map: str | None = None,
    image_mirrors: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Values for the gpu-operator chart.

    `driver_mode` is `gpuOperator.driver` (auto|operator|preinstalled); `time_slicing_config_map`
    names the ConfigMap holding `device_plugin_time_slicing_config` (required when time-slicing);
    `dcgm_metrics_config_map` the ConfigMap holding the DCGM exporter's counters file
    (common/gpu_metrics.metrics_csv under key `dcgm-metrics.csv`), in the release's namespace.
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
            "serviceMonitor": {
                # Needs the Prometheus Operator's CRDs; off for clusters without them.
                "enabled": bool(options.dcgmServiceMonitor),
                # Keep the exporter's namespace/pod labels (the pod using each GPU) instead of
                # renaming them exported_namespace/exported_pod on the clash with the scrape
                # target's own: each model's dashboard selects its GPUs by them (common/gpu_metrics.py).
                # The operator copies it into the ServiceMonitor (controllers/object_controls.go
                # lines 5002-5003 at v26.7.0).
                "honorLabels": True,
            },
        },
        "mig": {"strategy": options.migStrategy},
        # Where GKE partitions the GPUs, a MIG manager would reset them to its default layout
        # (migManager.config.default: all-disabled) under GKE's device plugin; keep it off there.
        "migManager": {"enabled": plan.mig_by == "mig-manager"},
        "daemonsets": {"tolerations": tolerations},
        "nfd": {"enabled": nfd_owner == "gpu-operator"},
    }
    own_images = options.chartVersion == GPU_OPERATOR_IMAGES_CHART
    if own_images:
        for component, key in GPU_OPERATOR_IMAGES.items():
            values[component].update(operand_image(key, image_mirrors))
        values["operator"] = operator_image(image_mirrors)
        values["validator"] = operand_image(GPU_OPERATOR_OWN_IMAGE, image_mirrors)
    if nfd_owner == "gpu-operator":
        values["node-feature-discovery"] = {
            "worker": {"tolerations": [*map(dict, _GPU_OPERATOR_NFD_TOLERATIONS), *tolerations]}
        }
        if own_images:
            values["node-feature-discovery"]["image"] = nfd_image(image_mirrors)
    if plan.driver_root is not None:
        # NVIDIA's GKE guide: driver root and toolkit install dir under /home/kubernetes/bin/nvidia,
        # CDI on. (The guide's `cdi.default=true` no longer exists in the v26.7.0 chart: CDI is
        # the only injection mode once `cdi.enabled` is true.)
        # https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html
        values["hostPaths"] = {"driverInstallDir": plan.driver_root}
        values["toolkit"]["installDir"] = plan.driver_root
        values["cdi"] = {"enabled": True}
    if cloud == "gcp" and plan.toolkit == "operator":
        # Known issue on GKE 1.33+: the container toolkit misconfigures containerd's config.toml
        # and the operator's containers do not start; NVIDIA's fix is RUNTIME_CONFIG_SOURCE=file in
        # the toolkit container (the toolkit reads containerd's config from the file instead of
        # asking containerd for it). NVIDIA/cloud-native-docs@52dcb7b gpu-operator/google-gke.rst
        # ("Prerequisites", note) and release-notes.rst (25.10.0 "Known Issues"); still the guide's
        # advice at v26.7.0, whose release notes list no fix. Both GKE modes run the operator's
        # toolkit; the env is set on every GKE stack (cluster.kubernetesVersion defaults to 1.33,
        # and an existing cluster's version is not known here); the toolkit reading the file does
        # not depend on the GKE version (the toolkit image is the chart's, v1.20.0).
        values["toolkit"]["env"] = [dict(e) for e in GKE_TOOLKIT_ENV]
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
    if dcgm_metrics_config_map:
        # The chart writes it into the ClusterPolicy (templates/clusterpolicy.yaml lines 561-564 at
        # v26.7.0); the operator then mounts the ConfigMap's `dcgm-metrics.csv` and points
        # DCGM_EXPORTER_COLLECTORS at it instead of the image's default file.
        values["dcgmExporter"]["config"] = {"name": dcgm_metrics_config_map}
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


# The Network Operator's own image: "{operator.repository}/{operator.image}:{operator.tag | default
# appVersion}" (templates/operator.yaml:55, keep-ncp-hook.yaml:80, upgrade-crd-hook.yaml:81 at 26.4.1),
# so `tag` takes `v26.4.1@sha256:...`; only at the chart version whose default the table's tag is.
NETWORK_OPERATOR_IMAGE = "network-operator"
NETWORK_OPERATOR_IMAGES_CHART = "26.4.1"


def network_operator_values(
    placements: Sequence[Placement],
    nfd_owner: NfdOwner | None,
    *,
    chart_version: str | None = None,
    image_mirrors: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Values for the network-operator chart: NFD ownership and its worker's tolerations, and the
    operator's own image from the table at the pinned chart version.

    Everything the operator deploys on the nodes is declared in the NicClusterPolicy, which the
    chart does not create (components/operators/nic_cluster_policy.py).
    """
    values: dict[str, Any] = {"nfd": {"enabled": nfd_owner == "network-operator"}}
    if chart_version == NETWORK_OPERATOR_IMAGES_CHART:
        entry = images.chart_image(NETWORK_OPERATOR_IMAGE, dict(image_mirrors or {}))
        repository, _, image = entry.name.rpartition("/")
        values["operator"] = {"repository": repository, "image": image, "tag": entry.pinned_tag}
    if nfd_owner == "network-operator":
        values["node-feature-discovery"] = {
            "worker": {"tolerations": [*map(dict, _NETWORK_OPERATOR_NFD_TOLERATIONS), *pool_tolerations(placements)]}
        }
    return values
