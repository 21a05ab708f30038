"""`cloud: existing`: a provider from the configured kubeconfig, pools described, no cloud resources."""

from __future__ import annotations

import os

import pytest

import stack_config as cfg
from common import contract
from components.cluster.existing import node_setup_commands
from components.cluster.select import create_cluster
from tests.support.cloud_mocks import run_cloud

REVISION = "0123456789abcdef0123456789abcdef01234567"


def raw_stack(cluster=None, pools=None, model_store=None) -> dict:
    raw = {
        "cloud": "existing",
        "cluster": cluster
        if cluster is not None
        else {"kubeconfig": "~/.kube/gpu-lab.yaml", "context": "gpu-lab", "rwxStorageClass": "nfs-rwx"},
        "pools": pools or [{"name": "lab", "gpu": "A10G", "gpusPerNode": 4, "minNodes": 0, "maxNodes": 2}],
        "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": "lab"}],
        # On an existing cluster the stack must say who installs the GPU driver.
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        # ... and what enforces its NetworkPolicies.
        "security": {"networkPolicyEnforcement": "calico"},
    }
    if model_store:
        raw["modelStore"] = model_store
    return raw


@pytest.fixture(scope="module")
def evaluation():
    return run_cloud(lambda: create_cluster(cfg.parse_stack_config(raw_stack(), "Pulumi.test.yaml"), "test"))


def test_no_cloud_resources_only_a_kubernetes_provider(evaluation):
    assert {r.type for r in evaluation.resources} == {"llm-serving:existing:Cluster", "pulumi:providers:kubernetes"}
    assert evaluation.calls_made == []


def test_provider_uses_the_configured_kubeconfig_and_context_never_the_ambient_one(evaluation):
    (provider,) = evaluation.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == os.path.expanduser("~/.kube/gpu-lab.yaml")
    assert provider.inputs["context"] == "gpu-lab"


def test_pools_are_described_with_the_same_labels_and_taint_as_on_the_clouds(evaluation):
    cluster = evaluation.result
    assert cluster.cloud == "existing" and cluster.bucket is None
    assert cluster.rwx_storage_class == "nfs-rwx"
    placement = cluster.placements["lab"]
    assert placement.node_selector == {contract.LABEL_POOL: "lab", contract.LABEL_ACCELERATOR: "a10g"}
    assert (placement.taint_key, placement.taint_effect) == (contract.GPU_TAINT_KEY, contract.GPU_TAINT_EFFECT)
    assert (placement.gpus_per_node, placement.max_nodes) == (4, 2)


def test_node_setup_commands_make_a_node_match_its_pool(evaluation):
    label, taint = node_setup_commands(evaluation.result.placements["lab"])
    assert label == f"kubectl label node <node> {contract.LABEL_ACCELERATOR}=a10g {contract.LABEL_POOL}=lab"
    assert taint == f"kubectl taint node <node> {contract.GPU_TAINT_KEY}=present:NoSchedule"


def test_pool_with_min_zero_is_accepted():
    stack = cfg.parse_stack_config(raw_stack(), "Pulumi.test.yaml")
    assert stack.pools[0].minNodes == 0


def test_missing_kubeconfig_fails_naming_the_key():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw_stack(cluster={"rwxStorageClass": "nfs-rwx"}), "Pulumi.test.yaml")
    assert any("cluster.kubeconfig" in p and "ambient kubeconfig" in p for p in err.value.problems)


def test_bucket_loading_needs_a_cloud_bucket():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw_stack(model_store={"loadFrom": "bucket"}), "Pulumi.test.yaml")
    assert any("modelStore.loadFrom" in p for p in err.value.problems)


def test_volume_loading_needs_a_storage_class():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw_stack(cluster={"kubeconfig": "/k"}), "Pulumi.test.yaml")
    assert any("cluster.rwxStorageClass" in p for p in err.value.problems)
