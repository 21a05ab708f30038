"""The driver each driver plan yields, the CUDA each engine image needs, and what is not established."""

from __future__ import annotations

import pytest

from common import driver_versions as dv
from common import engine
from common.facts import Fact


def test_every_pinned_release_version_belongs_to_the_pinned_ami_release():
    assert dv.EKS_AMI_RELEASE == "v20260714"
    for minor, release in dv.EKS_RELEASE_VERSIONS.items():
        assert release.startswith(f"{minor}.") and dv.eks_ami_release_of(release) == dv.EKS_AMI_RELEASE
    assert dv.eks_ami_release_of(dv.KARPENTER_AMI_ALIAS) == dv.EKS_AMI_RELEASE
    assert dv.eks_ami_release_of("al2023@latest") is None and dv.eks_ami_release_of(None) is None


@pytest.mark.parametrize(
    "driver,cuda,runs",
    [
        ("580.159.03", "13.0", True),
        ("580.82.07", "13.0", False),  # 13.0 GA runs there, 13.0 Update 2 does not: the update is unknown
        ("580.159.03", "13.2", False),
        ("595.91.07", "13.2", True),
        ("570.86.10", "12.8", True),
        ("570.86.10", "13.0", False),
    ],
)
def test_a_driver_runs_a_cuda_version_from_its_minimum(driver, cuda, runs):
    assert dv.driver_runs(driver, cuda) is runs


def test_an_unknown_cuda_version_is_not_judged():
    assert dv.driver_runs("580.159.03", "11.8") is None


@pytest.mark.parametrize(
    "cloud,driver,gke,expected",
    [
        ("aws", "auto", None, dv.EKS_AMI_DRIVER),
        ("gcp", "auto", "LATEST", dv.GKE_DRIVERS["LATEST"]),
        ("gcp", "operator", "INSTALLATION_DISABLED", dv.GPU_OPERATOR_DRIVER),
        ("existing", "operator", None, dv.GPU_OPERATOR_DRIVER),
        ("existing", "preinstalled", None, dv.PREINSTALLED_DRIVER),
    ],
)
def test_each_driver_plan_yields_one_recorded_driver(cloud, driver, gke, expected):
    assert dv.driver_fact(cloud, driver, gke) == expected


def test_what_is_not_established_says_so_and_how_to_settle_it():
    assert dv.EKS_AMI_DRIVER.established and dv.GPU_OPERATOR_DRIVER.established
    for fact in (*dv.GKE_DRIVERS.values(), dv.PREINSTALLED_DRIVER, engine.VLLM_IMAGE_CUDA):
        assert not fact.established and fact.resolve_with and fact.describe().endswith("(unresolved)")
    assert engine.VLLM_IMAGE_CUDA.value == "13.0"
    assert engine.VLLM_IMAGE_CUDA.resolve_with == (
        'docker run --rm --entrypoint python3 vllm/vllm-openai:v0.32.0 -c "import torch; print(torch.version.cuda)"'
    )
    with pytest.raises(ValueError, match="needs the command"):
        Fact(subject="x", value=None, source="y", established=False)
