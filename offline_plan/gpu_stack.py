"""plan.md's "GPU software on the nodes": what the GPU Operator runs on this stack's GPU nodes, what the
cloud's node image or GKE runs instead, and why (docs/operators.md).

Read from the gpu-operator release the program sends to Helm (its `values`), so the section says
what `pulumi up` would install, not what a table of intentions says.
"""

from __future__ import annotations

from typing import Any

from offline_plan.mock_runtime import Evaluation

RELEASE = "kubernetes:helm.sh/v3:Release"

# component -> (values key, what it does)
COMPONENTS = {
    "driver": ("driver", "NVIDIA kernel driver and user-space libraries"),
    "container toolkit": ("toolkit", "lets the operator's own pods (DCGM exporter, GFD, validator) reach the GPUs"),
    "device plugin": ("devicePlugin", "advertises nvidia.com/gpu to the kubelet"),
    "GPU feature discovery": ("gfd", "labels nodes with GPU model, memory, MIG state"),
    "DCGM exporter": ("dcgmExporter", "GPU metrics the dashboards and GPU alerts read"),
    "MIG manager": ("migManager", "switches MIG layouts from node labels"),
}

# Who runs a component the operator does not, per cloud (and why), for the offline reader.
INSTEAD = {
    ("aws", "driver"): "the EKS AL2023 NVIDIA AMI (pinned release): driver on the host",
    ("aws", "toolkit"): "the EKS AL2023 NVIDIA AMI: toolkit installed and containerd configured",
    ("gcp", "driver"): (
        "GKE (node pool gpu_driver_installation_config), into /home/kubernetes/bin/nvidia; the operator's "
        "hostPaths.driverInstallDir and toolkit.installDir point there (NVIDIA's GKE guide)"
    ),
    ("gcp", "devicePlugin"): (
        "GKE's own device plugin, which also partitions MIG (gpu_partition_size) and time-shares; NVIDIA's "
        "GKE guide turns it off with the node label gke-no-default-nvidia-gpu-device-plugin when the "
        "operator's plugin runs, and this program keeps GKE's instead (one advertiser per node)"
    ),
    ("gcp", "migManager"): "GKE partitions the GPUs itself (guest_accelerators gpu_partition_size)",
}


def _release_values(evaluation: Evaluation) -> dict[str, Any] | None:
    for r in evaluation.of_type(RELEASE):
        if r.inputs.get("chart") == "gpu-operator":
            return r.inputs.get("values") or {}
    return None


def gpu_stack_section(evaluation: Evaluation) -> list[str]:
    values = _release_values(evaluation)
    if values is None:
        return []
    cloud = (evaluation.outputs.get("platform") or {}).get("cloud", "")
    rows = []
    for title, (key, purpose) in COMPONENTS.items():
        on = bool((values.get(key) or {}).get("enabled"))
        runs = "GPU Operator" if on else INSTEAD.get((cloud, key), "not run (not needed on this stack)")
        rows.append(f"| {title} | {purpose} | {runs} |")
    out = [
        "## GPU software on the nodes",
        "",
        "What the NVIDIA GPU Operator runs on the GPU nodes, and what runs there instead (docs/operators.md).",
        "",
        "| component | what it does | run by |",
        "|---|---|---|",
        *rows,
    ]
    toolkit = values.get("toolkit") or {}
    env = {e.get("name"): e.get("value") for e in toolkit.get("env") or []}
    if env.get("RUNTIME_CONFIG_SOURCE"):
        out += [
            "",
            (
                f"The container toolkit reads containerd's config from the file (`RUNTIME_CONFIG_SOURCE="
                f"{env['RUNTIME_CONFIG_SOURCE']}`): NVIDIA's fix for the known issue on GKE 1.33+, where the toolkit "
                "misconfigures containerd's config.toml and the operator's containers do not start."
            ),
        ]
    if cloud == "gcp" and not (values.get("devicePlugin") or {}).get("enabled"):
        out += [
            "",
            (
                "Not established here: the operator's toolkit, GFD and DCGM exporter next to GKE's own device plugin "
                "(NVIDIA's guide turns that plugin off). Settle on a GPU node: `kubectl get pods -n gpu-operator` "
                "(all Running, validator Completed) and `kubectl get node <gpu-node> -o "
                "jsonpath='{.status.allocatable.nvidia\\.com/gpu}'`."
            ),
        ]
    return [*out, ""]
