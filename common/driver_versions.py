"""Which NVIDIA driver each driver plan puts on the GPU nodes, and which CUDA it can run.

`gpu_driver.py` decides WHO installs the driver (the node image, GKE, or the GPU Operator); this
module records WHICH driver that yields, with its source, so the engine image's CUDA can be
checked against it (tests/support/first_apply_cloud.py) and the offline plan can say what is not known.

- EKS: the node images are pinned to one EKS AMI release (managed node groups' `release_version`,
  Karpenter's `al2023@<release>` alias), so the driver is whatever that release ships.
- GPU Operator (`driver: operator`): the chart's default `driver.version` of the pinned chart.
- GKE (`gkeDriverVersion` DEFAULT or LATEST): GKE picks the driver per GKE version; not
  established here (see the Facts' `resolve_with`).
- An existing cluster's preinstalled driver: the cluster's; not knowable from config.

Standard library only.
"""

from __future__ import annotations

import re

from common.facts import Fact
from common.gpu_driver import resolve_driver_plan

# ---------------------------------------------------------------------------------------------
# The EKS AMI release every node image of a created or looked-up EKS cluster is pinned to.

# Newest release whose notes were read (awslabs/amazon-eks-ami at commit
# 81fec2e895854f599974fe4d3d72f61c0a9aaffa, CHANGELOG.md:5 "AMI Release v20260714").
EKS_AMI_RELEASE = "v20260714"
_EKS_CHANGELOG = "awslabs/amazon-eks-ami@81fec2e895854f599974fe4d3d72f61c0a9aaffa:CHANGELOG.md"

# Managed node group `release_version` of that release per Kubernetes minor version: the
# "Release version" cell of each Kubernetes table of the release (CHANGELOG.md lines 67, 148, 229,
# 310, 391, 480, 569). A managed node group without it takes the newest AMI when it is created,
# which would make the driver below a guess.
EKS_RELEASE_VERSIONS = {
    "1.36": "1.36.2-20260714",
    "1.35": "1.35.6-20260714",
    "1.34": "1.34.9-20260714",
    "1.33": "1.33.13-20260714",
    "1.32": "1.32.13-20260714",
    "1.31": "1.31.14-20260714",
    "1.30": "1.30.14-20260714",
}

# Karpenter resolves this alias to the release's AMI for the control plane's Kubernetes version,
# and to its NVIDIA variant for GPU instance types (EC2NodeClass CRD, amiSelectorTerms.alias:
# "family@version", pinned e.g. "al2023@v20240625"; aws/karpenter-provider-aws@v1.14.1
# pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml, and pkg/providers/amifamily/al2023.go).
KARPENTER_AMI_ALIAS = f"al2023@{EKS_AMI_RELEASE}"

# `kmod-nvidia-latest-dkms 580.159.03-1.amzn2023` on AL2023_x86_64_NVIDIA, the same for every
# Kubernetes version of the release (CHANGELOG.md:119-120 for 1.36, :362-363 for 1.33, ...).
EKS_AMI_DRIVER = Fact(
    subject=f"NVIDIA driver of the EKS AL2023 NVIDIA AMI {EKS_AMI_RELEASE}",
    value="580.159.03",
    source=f"{_EKS_CHANGELOG}:119-120 (1.36), :362-363 (1.33); same row for 1.30-1.35",
)


def eks_release_version(kubernetes_version: str) -> str | None:
    """The pinned managed-node-group release version for a Kubernetes minor version, if known."""
    return EKS_RELEASE_VERSIONS.get(kubernetes_version)


def eks_ami_release_of(release_version: str | None) -> str | None:
    """`1.33.13-20260714` or `al2023@v20260714` -> `v20260714` (None when not pinned)."""
    if not release_version:
        return None
    match = re.search(r"(?:-|@v)(\d{8})$", release_version)
    return f"v{match.group(1)}" if match else None


# Drivers of the EKS AMI releases whose notes were read, by release.
EKS_AMI_DRIVERS = {EKS_AMI_RELEASE: EKS_AMI_DRIVER}

# ---------------------------------------------------------------------------------------------
# The GPU Operator's own driver container (driver: operator).

# The chart the program pins (components/operators/values.py) installs this driver unless told
# otherwise; the program never sets driver.version, so this is the driver.
GPU_OPERATOR_DRIVER = Fact(
    subject="driver.version of the GPU Operator chart v26.7.0",
    value="595.91.07",
    source="NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/values.yaml:154 "
    "(copy: tests/fixtures/helm/gpu-operator-values.yaml:154)",
)

# ---------------------------------------------------------------------------------------------
# GKE-installed drivers. GKE maps DEFAULT and LATEST to a driver per GKE version and node image;
# the table (GKE docs, "Install NVIDIA GPU drivers" / "About GPU drivers") was not readable here.

_GKE_RESOLVE = (
    "GKE docs table https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#installing_drivers for the "
    "cluster's GKE version, or on a GPU node: kubectl debug node/<node> -it --image=ubuntu -- "
    "chroot /host /home/kubernetes/bin/nvidia/bin/nvidia-smi --query-gpu=driver_version --format=csv,noheader"
)
GKE_DRIVERS = {
    version: Fact(
        subject=f"NVIDIA driver GKE installs for gpu_driver_version {version}",
        value=None,
        source="https://cloud.google.com/ruby/docs/reference/google-cloud-container-v1/latest/"
        "Google-Cloud-Container-V1-GPUDriverInstallationConfig-GPUDriverVersion (API semantics only)",
        established=False,
        resolve_with=_GKE_RESOLVE,
    )
    for version in ("DEFAULT", "LATEST")
}

PREINSTALLED_DRIVER = Fact(
    subject="NVIDIA driver preinstalled on an existing cluster's GPU nodes",
    value=None,
    source="the cluster's own node image",
    established=False,
    resolve_with="on a GPU node: nvidia-smi --query-gpu=driver_version --format=csv,noheader",
)

# ---------------------------------------------------------------------------------------------
# CUDA -> the oldest Linux driver that runs it natively ("CUDA Toolkit and Corresponding Driver
# Versions", table 3 of https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html; rows
# transcribed from public copies of the table, research notes /work/notes/issue14-cloud.md §5).
# A minor version whose update is unknown needs the driver of its newest listed update, so the
# check never passes a driver some update of that minor would refuse.
CUDA_MINIMUM_DRIVER = {
    "13.2": "595.71.05",  # 13.2 Update 2 (13.2 GA: 595.45.04)
    "13.1": "590.44.01",  # 13.1 GA
    "13.0": "580.95.05",  # 13.0 Update 2 (GA: 580.65.06, Update 1: 580.82.07)
    "12.9": "575.57.08",  # 12.9 Update 1
    "12.8": "570.26",  # 12.8 GA
    "12.0": "525.60.13",  # 12.0 GA
}
CUDA_DRIVER_SOURCE = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (table 3)"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def minimum_driver(cuda: str) -> str | None:
    """The oldest driver that runs CUDA `cuda` (major.minor) natively; None if not in the table."""
    major_minor = ".".join(cuda.split(".")[:2])
    return CUDA_MINIMUM_DRIVER.get(major_minor)


def driver_runs(driver: str, cuda: str) -> bool | None:
    """Does `driver` run CUDA `cuda` natively? None when the CUDA version is not in the table."""
    needed = minimum_driver(cuda)
    if needed is None:
        return None
    return _version_tuple(driver) >= _version_tuple(needed)


def driver_fact(cloud: str, driver: str, gke_driver_version: str | None = None) -> Fact:
    """The driver on a cloud's GPU nodes for `gpuOperator.driver` (`auto`, `operator`,
    `preinstalled`; `auto` when the GPU Operator is off), as `gpu_driver.resolve_driver_plan`
    decides who installs it."""
    plan = resolve_driver_plan(cloud, driver, gke_driver_version)
    if plan.driver == "operator":
        return GPU_OPERATOR_DRIVER
    if cloud == "aws":
        return EKS_AMI_DRIVER
    if cloud == "gcp":
        return GKE_DRIVERS[gke_driver_version or "DEFAULT"]
    return PREINSTALLED_DRIVER
