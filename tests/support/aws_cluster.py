"""The EKS cluster layer's test arrangements: a stack config of given pools, the pools the EKS tests share,
the created VPC's private subnets, and look-ups of what the layer created."""

from __future__ import annotations

import stack_config as cfg
from components.cluster.aws import karpenter
from offline_plan.mock_runtime import mock_id
from tests.support.cloud_mocks import one

REVISION = "0123456789abcdef0123456789abcdef01234567"


def stack(pools, cluster=None, model_store=None) -> cfg.StackConfig:
    raw = {
        "cloud": "aws",
        "pools": pools,
        "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": pools[0]["name"]}],
    }
    if cluster:
        raw["cluster"] = cluster
        if cluster.get("create") is False:
            # A cluster this program does not create declares what enforces NetworkPolicy.
            raw["security"] = {"networkPolicyEnforcement": "eks-vpc-cni"}
    if model_store:
        raw["modelStore"] = model_store
    return cfg.parse_stack_config(raw, "Pulumi.test.yaml")


# l4 starts empty (Karpenter only); h100 has one always-on node and Karpenter may add one more.
POOLS = [
    {"name": "l4", "gpu": "L4", "minNodes": 0, "maxNodes": 3, "diskGib": 300},
    {
        "name": "h100",
        "gpu": "H100-80GB",
        "gpusPerNode": 8,
        "efa": True,
        "capacityType": "spot",
        "minNodes": 1,
        "maxNodes": 2,
    },
]


# The created VPC's private subnets, by zone (mock ids of aws:ec2/subnet:Subnet).
PRIVATE = {z: mock_id("aws:ec2/subnet:Subnet", f"llm-serving-network-private-us-east-1{z}") for z in "abcd"}


def node_group(evaluation, pool):
    return one(evaluation, "aws:eks/nodeGroup:NodeGroup", f"-{pool}-ng")


def custom(evaluation, kind, pool):
    found = [
        r.inputs
        for r in evaluation.resources
        if r.is_kubernetes_object
        and r.inputs["kind"] == kind
        and r.inputs["metadata"]["name"] == karpenter.object_name(pool)
    ]
    assert len(found) == 1, f"expected one {kind} for pool {pool}"
    return found[0]
