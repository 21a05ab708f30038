"""The GPU Operator on GKE follows NVIDIA's GKE guide and its known issue for GKE 1.33+ (the container
toolkit reads containerd's config from the file), per cloud and driver mode, with every key a key
of the pinned chart; plan.md says what the operator runs on the nodes and what runs instead."""

from __future__ import annotations

import pytest

from components.operators import values as ov
from offline_plan.gpu_stack import gpu_stack_section
from tests.support.committed import committed_stack
from tests.support.helm_values import chart_defaults, check_chart_values, unknown_value_paths
from tests.support.operator_values import SUPPORTED, values_for

CONFIG_SOURCE = {"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}


@pytest.mark.parametrize("cloud,driver,gke", SUPPORTED)
def test_the_toolkit_reads_containerds_config_from_the_file_on_gke_only(cloud, driver, gke):
    v = values_for(cloud, driver, gke)
    env = v["toolkit"].get("env")
    if cloud == "gcp":
        # Both GKE modes run the operator's toolkit, so both meet the 1.33+ known issue.
        assert v["toolkit"]["enabled"] is True and env == [CONFIG_SOURCE]
    else:
        assert env is None
    assert check_chart_values("gpu-operator", v) == []


def test_the_keys_nvidias_gke_guide_names_exist_in_the_pinned_chart():
    defaults = chart_defaults("gpu-operator")
    gke = {
        "toolkit": {"env": [CONFIG_SOURCE], "installDir": "/home/kubernetes/bin/nvidia"},
        "hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"},
        "cdi": {"enabled": True},
        "driver": {"enabled": False},
    }
    assert unknown_value_paths(gke, defaults) == []
    # The chart's own default for the toolkit's environment is empty: nothing to carry over.
    assert defaults["toolkit"]["env"] == []


def test_gke_managed_drivers_leave_driver_device_plugin_and_mig_to_gke():
    v = values_for("gcp", "auto", "LATEST")
    assert (v["driver"]["enabled"], v["devicePlugin"]["enabled"], v["migManager"]["enabled"]) == (False, False, False)
    assert (v["gfd"]["enabled"], v["dcgmExporter"]["enabled"], v["toolkit"]["enabled"]) == (True, True, True)
    assert v["hostPaths"]["driverInstallDir"] == v["toolkit"]["installDir"] == "/home/kubernetes/bin/nvidia"


def test_the_env_is_a_copy_each_time():
    first = values_for("gcp", "auto", "LATEST")
    first["toolkit"]["env"][0]["value"] = "command"
    assert values_for("gcp", "auto", "LATEST")["toolkit"]["env"] == [CONFIG_SOURCE]
    assert ov.GKE_TOOLKIT_ENV == (CONFIG_SOURCE,)


def rows(section: list[str]) -> dict[str, str]:
    table = [line for line in section if line.startswith("| ") and not line.startswith("| component")]
    return {line.split(" | ")[0].strip("| "): line.split(" | ")[2].rstrip(" |") for line in table}


def test_dev_plan_says_what_the_operator_runs_on_gke_and_what_gke_runs():
    section = gpu_stack_section(committed_stack("dev"))
    runs = rows(section)
    assert runs["driver"].startswith("GKE (node pool gpu_driver_installation_config)")
    assert runs["device plugin"].startswith("GKE's own device plugin")
    assert runs["MIG manager"].startswith("GKE partitions")
    assert runs["container toolkit"] == runs["DCGM exporter"] == runs["GPU feature discovery"] == "GPU Operator"
    text = "\n".join(section)
    assert "RUNTIME_CONFIG_SOURCE=file" in text and "GKE 1.33+" in text
    assert "kubectl get pods -n gpu-operator" in text


def test_prod_plan_says_the_ami_keeps_driver_and_toolkit():
    section = gpu_stack_section(committed_stack("prod"))
    runs = rows(section)
    assert runs["driver"].startswith("the EKS AL2023 NVIDIA AMI")
    assert runs["container toolkit"].startswith("the EKS AL2023 NVIDIA AMI")
    assert runs["device plugin"] == "GPU Operator"
    assert "RUNTIME_CONFIG_SOURCE" not in "\n".join(section)


def test_the_section_is_in_the_written_plan():
    from offline_plan.write import render_plan

    assert "## GPU software on the nodes" in render_plan(committed_stack("dev"), [], [])
