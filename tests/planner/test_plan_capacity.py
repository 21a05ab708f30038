"""The planner counts only the nodes an autoscaler can deliver, and every deadline on a pool that may
have to grow includes a node's provisioning (issue 14)."""

from __future__ import annotations

import pytest

from components.serving import vllm
from planner import plan
from stack_config import Autoscaler, parse_stack_config, pool_scaling
from tests.support.committed import committed_stack

LLAMA_8B = {
    "repo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
    "maxModelLen": 8192,
}
H100 = {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8}


def config(cloud, pool, cluster=None, replicas=1):
    raw = {"cloud": cloud, "pools": [pool], "models": [{**LLAMA_8B, "pool": pool["name"], "replicas": replicas}]}
    if cluster:
        raw["cluster"] = cluster
    if cloud == "existing":
        raw["cluster"] = {"kubeconfig": "~/.kube/config", "rwxStorageClass": "nfs"}
        raw["operators"] = {"gpuOperator": {"driver": "preinstalled"}}
    if cloud == "existing" or (cluster or {}).get("create") is False:
        # A cluster this program does not create declares what enforces NetworkPolicy.
        raw["security"] = {"networkPolicyEnforcement": "calico"}
    return parse_stack_config(raw, "Pulumi.test.yaml")


def plans(stack):
    return plan.build_plans(stack, plan.default_metadata_loader(None), source="Pulumi.test.yaml")


@pytest.mark.parametrize(
    "cloud,cluster,autoscaler,start,reachable",
    [
        ("aws", None, Autoscaler.karpenter, 1, 3),
        ("aws", {"create": False}, Autoscaler.none, 1, 1),
        ("gcp", None, Autoscaler.gke, 1, 3),
        ("existing", None, Autoscaler.declared, 1, 3),
    ],
)
def test_each_cloud_says_who_grows_a_pool_and_how_far(cloud, cluster, autoscaler, start, reachable):
    pool = {
        **(H100 if cloud != "gcp" else {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8}),
        "minNodes": 1,
        "maxNodes": 3,
    }
    stack = config(cloud, pool, cluster)
    scaling = pool_scaling(stack, stack.pools[0])
    assert (scaling.autoscaler, scaling.start_nodes, scaling.reachable_nodes) == (autoscaler, start, reachable)
    (p,) = plans(stack)
    assert p.pool_capacity == 8 * reachable


def test_regression_an_existing_eks_cluster_without_an_autoscaler_counts_only_its_node_groups_size():
    # Issue 14: the planner counted maxNodes on EKS where nothing grows the node groups.
    stack = config("aws", {**H100, "minNodes": 0, "maxNodes": 2}, {"create": False})
    with pytest.raises(plan.PlanError) as err:
        plans(stack)
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: pools[0].minNodes: the models on pool h100 need 1 GPUs")
    assert "no autoscaler is installed" in problem and "raise minNodes (or desiredNodes) to 1" in problem


def test_a_pool_that_starts_empty_gives_every_deadline_the_provisioning_allowance():
    (p,) = plans(config("aws", {**H100, "minNodes": 0, "maxNodes": 1}))
    assert p.pool_starts_empty and p.pool_waits_for_nodes
    assert p.node_provisioning_seconds == plan.NODE_PROVISIONING_ALLOWANCE_SECONDS == 900
    assert p.rollout_deadline_seconds == max(600, p.startup_budget_seconds * 2) + 900
    assert vllm.rollout_deadline_seconds(p) == p.rollout_deadline_seconds


def test_a_pool_whose_always_on_nodes_hold_every_replica_and_a_surge_adds_nothing():
    (p,) = plans(config("aws", {**H100, "minNodes": 1, "maxNodes": 2}, replicas=2))
    # 2 replicas + 1 surge = 3 GPUs on one always-on node of 8.
    assert not p.pool_starts_empty and not p.pool_waits_for_nodes
    assert p.node_provisioning_seconds == 0
    assert p.rollout_deadline_seconds == max(600, p.startup_budget_seconds * 2)


def test_a_pool_that_cannot_grow_never_waits_for_a_node():
    (p,) = plans(config("gcp", {"name": "l4", "gpu": "L4", "minNodes": 2, "maxNodes": 2}))
    assert not p.pool_waits_for_nodes and p.node_provisioning_seconds == 0


def test_prod_rollouts_may_wait_for_karpenters_second_p5_and_dev_for_its_first_l4():
    # prod: 1 always-on p5 (8 GPUs); at their maxima the models need 4 x 1 + 1 x 4 GPUs, plus a surge.
    for stack in ("prod", "dev"):
        evaluation = committed_stack(stack)
        for row in evaluation.outputs["sizing"]:
            assert row["nodeProvisioningSeconds"] == 900, (stack, row["model"])
        for deployment in (
            o
            for o in evaluation.kubernetes_objects
            if o["kind"] == "Deployment" and o["metadata"]["labels"].get("llm-serving.io/model")
        ):
            row = next(r for r in evaluation.outputs["sizing"] if r["model"] == deployment["metadata"]["name"])
            # Issue 14: the progress deadline left nothing for a node to be provisioned.
            assert deployment["spec"]["progressDeadlineSeconds"] == row["rolloutDeadlineSeconds"]
            assert row["rolloutDeadlineSeconds"] == max(600, row["startupBudgetSeconds"] * 2) + 900
