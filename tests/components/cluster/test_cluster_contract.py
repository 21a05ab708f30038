"""The one contract every cloud meets: placements decided once, bindings named once, and every
Kubernetes resource created through the cluster's own provider.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

import stack_config as cfg
from common import contract
from components.cluster.common import MODEL_READER_SERVICE_ACCOUNT, MODEL_WRITER_SERVICE_ACCOUNT
from components.cluster.interface import Cluster
from components.cluster.select import create_cluster
from tests.support.cloud_mocks import run_cloud
from tests.support.schemas import validate_all

REVISION = "0123456789abcdef0123456789abcdef01234567"

SCENARIOS = {
    "aws": {"cloud": "aws", "pools": [{"name": "gpu", "gpu": "L4"}]},
    "aws-existing": {
        "cloud": "aws",
        "cluster": {"create": False},
        "pools": [{"name": "gpu", "gpu": "L4"}],
        "security": {"networkPolicyEnforcement": "eks-vpc-cni"},
    },
    "gcp": {"cloud": "gcp", "cluster": {"gcpProject": "mock-project"}, "pools": [{"name": "gpu", "gpu": "L4"}]},
    "gcp-existing": {
        "cloud": "gcp",
        "cluster": {"create": False, "gcpProject": "mock-project"},
        "pools": [{"name": "gpu", "gpu": "L4"}],
        "security": {"networkPolicyEnforcement": "gke-dataplane-v2"},
    },
    "existing": {
        "cloud": "existing",
        "cluster": {"kubeconfig": "/etc/llm/kubeconfig", "rwxStorageClass": "nfs-rwx"},
        "pools": [{"name": "gpu", "gpu": "L4"}],
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        "security": {"networkPolicyEnforcement": "calico"},
    },
}


def stack(name: str) -> cfg.StackConfig:
    raw = {**SCENARIOS[name], "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": "gpu"}]}
    return cfg.parse_stack_config(raw, "Pulumi.test.yaml")


def deploy_like_the_stack(cluster: Cluster, box: dict) -> None:
    """What downstream components do with a cluster: service accounts from the bindings, a GPU
    workload placed by the placement, all through `cluster.provider`."""
    opts = pulumi.ResourceOptions(provider=cluster.provider)
    cluster.provider.urn.apply(lambda urn: box.setdefault("provider_urn", urn))
    namespace = "llm-serving"
    k8s.core.v1.Namespace("ns", metadata={"name": namespace}, opts=opts)
    if cluster.bucket is not None:
        for binding in (cluster.bucket.writer, cluster.bucket.reader):
            k8s.core.v1.ServiceAccount(
                binding.name,
                metadata={"name": binding.name, "namespace": binding.namespace, "annotations": binding.annotations},
                opts=opts,
            )
    placement = cluster.placements["gpu"]
    k8s.apps.v1.Deployment(
        "server",
        metadata={"name": "server", "namespace": namespace},
        spec={
            "selector": {"matchLabels": {"app": "server"}},
            "template": {
                "metadata": {"labels": {"app": "server"}},
                "spec": {
                    "nodeSelector": placement.node_selector,
                    "tolerations": placement.tolerations,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.32.0",
                            "resources": {"limits": {contract.GPU_RESOURCE: str(placement.gpus_per_node)}},
                        }
                    ],
                },
            },
        },
        opts=opts,
    )


@pytest.fixture(scope="module", params=list(SCENARIOS))
def scenario(request):
    box: dict = {}

    def program():
        cluster = create_cluster(stack(request.param), "test")
        deploy_like_the_stack(cluster, box)
        return cluster

    evaluation = run_cloud(program)
    return request.param, evaluation, box


def test_cluster_meets_the_platform_contract(scenario):
    name, evaluation, _ = scenario
    cluster = evaluation.result
    assert isinstance(cluster.provider, k8s.Provider)
    assert cluster.cloud == name.split("-")[0]
    # The class a model volume binds to: EFS managed by the EKS layer, Filestore on GKE (on the
    # stack's own network when it creates one), the configured class on an existing cluster.
    expected = {"aws": "efs-sc", "gcp": "llm-serving-filestore", "gcp-existing": "standard-rwx", "existing": "nfs-rwx"}
    assert cluster.rwx_storage_class == expected.get(name, expected[cluster.cloud])
    created_classes = [r for r in evaluation.resources if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    if name in ("aws", "aws-existing", "gcp"):
        [storage_class] = created_classes
        assert storage_class.inputs["metadata"]["name"] == cluster.rwx_storage_class
    assert list(cluster.placements) == ["gpu"]
    # No pool of these scenarios has EFA: no RDMA devices to request.
    assert cluster.rdma_attachments == {}


def test_placement_taint_and_toleration_come_from_the_contract(scenario):
    _, evaluation, _ = scenario
    placement = evaluation.result.placements["gpu"]
    assert placement.taint_key == contract.GPU_TAINT_KEY
    assert placement.taint_effect == contract.GPU_TAINT_EFFECT
    assert placement.toleration == {
        "key": contract.GPU_TAINT_KEY,
        "operator": "Exists",
        "effect": contract.GPU_TAINT_EFFECT,
    }
    assert placement.node_selector == {contract.LABEL_POOL: "gpu", contract.LABEL_ACCELERATOR: "l4"}


def test_every_kubernetes_resource_uses_the_cluster_provider(scenario):
    _, evaluation, box = scenario
    kubernetes = [r for r in evaluation.resources if r.type.startswith("kubernetes:")]
    assert len(kubernetes) >= 2
    urn = box["provider_urn"]
    assert "pulumi:providers:kubernetes" in urn
    for resource in kubernetes:
        # A provider reference is "<provider urn>::<provider id>"; a default provider would name
        # `pulumi:providers:kubernetes::default...` instead.
        assert resource.provider and resource.provider.split("::")[:-1] == urn.split("::"), (
            resource.name,
            resource.provider,
        )
    assert not [p for p in evaluation.of_type("pulumi:providers:kubernetes") if p.name.startswith("default")]


def test_emitted_objects_are_valid_kubernetes(scenario):
    _, evaluation, _ = scenario
    validate_all(evaluation.kubernetes_objects)


def test_model_store_bindings_are_named_once_for_every_cloud(scenario):
    name, evaluation, _ = scenario
    bucket = evaluation.result.bucket
    if name == "existing":
        assert bucket is None
        return
    assert (bucket.writer.name, bucket.reader.name) == (MODEL_WRITER_SERVICE_ACCOUNT, MODEL_READER_SERVICE_ACCOUNT)
    assert bucket.writer.namespace == bucket.reader.namespace == "llm-serving"
    accounts = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]
        for r in evaluation.of_type("kubernetes:core/v1:ServiceAccount")
    }
    assert set(accounts) == {MODEL_WRITER_SERVICE_ACCOUNT, MODEL_READER_SERVICE_ACCOUNT}
    if name.startswith("gcp"):
        assert accounts[MODEL_WRITER_SERVICE_ACCOUNT]["annotations"]["iam.gke.io/gcp-service-account"].startswith(
            "llm-serving-model-writer@"
        )
    else:
        assert not accounts[MODEL_WRITER_SERVICE_ACCOUNT].get("annotations")


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_the_committed_stack_files_build_their_cluster_layer(stack_name):
    from offline_plan.mock_runtime import ROOT, stack_file_config

    if not (ROOT / f"Pulumi.{stack_name}.yaml").exists():
        pytest.skip(f"no Pulumi.{stack_name}.yaml")
    values, secret_keys = stack_file_config(stack_name)
    raw, problems = cfg.decode_config_values(values, set(secret_keys))
    assert problems == []
    stack_config = cfg.parse_stack_config(raw, f"Pulumi.{stack_name}.yaml")
    evaluation = run_cloud(lambda: create_cluster(stack_config, stack_name), stack=stack_name)
    cluster = evaluation.result
    assert set(cluster.placements) == {p.name for p in stack_config.pools}
    pools = evaluation.of_type("aws:eks/nodeGroup:NodeGroup") + evaluation.of_type("gcp:container/nodePool:NodePool")
    # A created EKS/GKE cluster also gets the untainted CPU system pool.
    system = 1 if stack_config.cluster.create and stack_config.cloud != cfg.Cloud.existing else 0
    assert len(pools) == len(stack_config.pools) + system
    assert len(evaluation.of_type("pulumi:providers:kubernetes")) == 1
