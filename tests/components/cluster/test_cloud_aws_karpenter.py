"""Karpenter v1.14.1 under mocks: the controller's chart values against the chart's own values.yaml,
its IAM, Pod Identity and interruption queue, the order things are created in, and the per-pool
NodePool's disruption policy."""

from __future__ import annotations

import json

import pytest

from common import contract, images
from components.cluster.aws import karpenter, karpenter_iam
from components.cluster.select import create_cluster
from offline_plan.mock_runtime import evaluate_stack
from tests.support.aws_cluster import POOLS, custom, stack
from tests.support.cloud_mocks import one, run_cloud
from tests.support.committed import committed_stack
from tests.support.first_apply import ApplyGraph
from tests.support.helm_values import check_chart_values
from tests.support.iam_eval import aws_allows


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


def release(evaluation):
    return one(evaluation, "kubernetes:helm.sh/v3:Release", "karpenter-release")


def test_the_release_is_the_published_oci_chart_at_exactly_1_14_1_in_kube_system(created):
    inputs = release(created).inputs
    assert inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert inputs["version"] == karpenter.VERSION == "1.14.1"
    assert inputs["namespace"] == "kube-system" and inputs["name"] == "karpenter"
    # The tag's values.yaml names the 1.13.0 image; the published chart (charts/karpenter-1.14.1) carries
    # 1.14.1 and its digest, which the image table records: the values pass exactly that
    # (tests/offline_plan/test_rendered_chart_images.py checks what the chart renders from them).
    entry = images.IMAGES["karpenter-controller"]
    assert inputs["values"]["controller"]["image"] == {
        "repository": entry.repository,
        "tag": "1.14.1",
        "digest": "sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
    }


def test_every_values_key_is_a_key_of_the_charts_values_yaml(created):
    values = release(created).inputs["values"]
    assert check_chart_values("karpenter", values) == []
    assert values["settings"]["clusterName"] == "llm-serving"
    queue = one(created, "aws:sqs/queue:Queue")
    assert values["settings"]["interruptionQueue"] == queue.name
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux", contract.LABEL_POOL: contract.SYSTEM_POOL}
    # The chart's required hostname anti-affinity: no more replicas than system nodes.
    assert values["replicas"] == 2


def test_a_misspelled_values_key_is_caught():
    bad = {**karpenter.helm_values("c", "e", "q", 2), "setings": {"clusterName": "c"}}
    bad["controller"] = {"resource": {}}
    assert sorted(check_chart_values("karpenter", bad)) == [
        "karpenter: controller.resource: not a key of the chart's values.yaml",
        "karpenter: setings: not a key of the chart's values.yaml",
    ]


def test_replicas_follow_a_one_node_system_pool():
    assert karpenter.helm_values("c", "e", "q", 1)["replicas"] == 1


def test_the_controller_gets_its_credentials_through_pod_identity_for_the_charts_service_account(created):
    association = one(created, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-controller").inputs
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "karpenter")
    assert release(created).inputs["values"]["serviceAccount"]["name"] == association["serviceAccount"]
    role = one(created, "aws:iam/role:Role", "karpenter-controller")
    assert association["roleArn"] == f"arn:aws:mock:::{role.name}"
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "karpenter"


def controller_policy(evaluation, key):
    return json.loads(one(evaluation, "aws:iam/rolePolicy:RolePolicy", f"karpenter-controller-{key}").inputs["policy"])


def test_the_controller_holds_the_six_v1_14_policies_scoped_to_this_cluster(created):
    policies = {
        p.name.rsplit("controller-", 1)[1]
        for p in created.of_type("aws:iam/rolePolicy:RolePolicy")
        if "karpenter-controller" in p.name
    }
    assert policies == {
        "node-lifecycle",
        "iam-integration",
        "eks-integration",
        "interruption",
        "zonal-shift",
        "resource-discovery",
    }
    sids = {s["Sid"] for key in policies for s in controller_policy(created, key)["Statement"]}
    assert {
        "AllowScopedEC2InstanceAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowPassingInstanceRole",
        "AllowScopedInstanceProfileCreationActions",
        "AllowAPIServerEndpointDiscovery",
        "AllowInterruptionQueueActions",
        "AllowRegionalReadActions",
        "AllowScopedDeletion",
    } <= sids
    lifecycle = controller_policy(created, "node-lifecycle")
    tagged = {
        "aws:RequestTag/kubernetes.io/cluster/llm-serving": "owned",
        "aws:RequestTag/eks:eks-cluster-name": "llm-serving",
        "aws:RequestTag/karpenter.sh/nodepool": "p",
    }
    instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-1"
    assert aws_allows(lifecycle, "ec2:RunInstances", instance, tagged)
    # Another cluster's tag, or none: refused.
    assert not aws_allows(
        lifecycle, "ec2:RunInstances", instance, {**tagged, "aws:RequestTag/eks:eks-cluster-name": "other"}
    )
    assert not aws_allows(lifecycle, "ec2:TerminateInstances", instance)
    # Placement groups may be launched into (EFA pools).
    assert aws_allows(lifecycle, "ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:placement-group/pg")


def test_the_controller_may_pass_only_its_node_role(created):
    policy = controller_policy(created, "iam-integration")
    node_role = one(created, "aws:iam/role:Role", "karpenter-node")
    (statement,) = [s for s in policy["Statement"] if s["Sid"] == "AllowPassingInstanceRole"]
    assert statement["Resource"] == f"arn:aws:mock:::{node_role.name}"
    assert not aws_allows(
        policy,
        "iam:PassRole",
        "arn:aws:iam::123456789012:role/llm-serving-gpu-node",
        {"iam:PassedToService": "ec2.amazonaws.com"},
    )


def test_karpenters_nodes_join_with_their_own_role_through_an_ec2_linux_access_entry(created):
    node_role = one(created, "aws:iam/role:Role", "karpenter-node")
    entry = one(created, "aws:eks/accessEntry:AccessEntry", "karpenter-node").inputs
    assert entry["type"] == "EC2_LINUX" and entry["principalArn"] == f"arn:aws:mock:::{node_role.name}"
    attached = sorted(
        a.inputs["policyArn"].rsplit("/", 1)[1]
        for a in created.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == node_role.name
    )
    assert attached == ["AmazonEC2ContainerRegistryReadOnly", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy"]
    assert custom(created, "EC2NodeClass", "l4")["spec"]["role"] == node_role.name


def test_interruptions_reach_the_queue_from_five_eventbridge_rules(created):
    queue = one(created, "aws:sqs/queue:Queue").inputs
    assert queue["messageRetentionSeconds"] == 300 and queue["sqsManagedSseEnabled"] is True
    rules = {
        r.name: json.loads(r.inputs["eventPattern"]) for r in created.of_type("aws:cloudwatch/eventRule:EventRule")
    }
    assert sorted((p["source"][0], p["detail-type"][0]) for p in rules.values()) == sorted(
        (source, detail) for _, source, detail in karpenter_iam.INTERRUPTION_EVENTS
    )
    targets = created.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5 and {t.inputs["arn"] for t in targets} == {
        "arn:aws:mock:::llm-serving-karpenter-interruptions"
    }
    policy = json.loads(one(created, "aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    queue_arn = "arn:aws:mock:::llm-serving-karpenter-interruptions"
    assert policy["Statement"][0]["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert aws_allows(policy, "sqs:SendMessage", queue_arn, {"aws:SecureTransport": "true"})
    assert not aws_allows(policy, "sqs:SendMessage", queue_arn, {"aws:SecureTransport": "false"})
    assert policy["Statement"][1]["Effect"] == "Deny" and policy["Statement"][1]["Condition"] == {
        "Bool": {"aws:SecureTransport": "false"}
    }


def test_the_controller_starts_after_its_nodes_credentials_and_queue_and_pools_after_it(created):
    graph = ApplyGraph(created)
    controller = release(created)
    for needed in (
        one(created, "aws:eks/nodeGroup:NodeGroup", "system-ng"),
        one(created, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-controller"),
        one(created, "aws:eks/addon:Addon", "pod-identity-agent"),
        *created.of_type("aws:cloudwatch/eventTarget:EventTarget"),
    ):
        assert graph.waits_for(controller, needed), needed.name
    # NodePool and EC2NodeClass CRDs come with the chart: the objects wait for the release.
    for resource in created.resources:
        if resource.is_kubernetes_object and resource.inputs["kind"] in ("NodePool", "EC2NodeClass"):
            assert graph.waits_for(resource, controller), resource.name
            assert graph.waits_for(resource, one(created, "aws:eks/accessEntry:AccessEntry", "karpenter-node"))


def test_node_pools_only_ever_remove_empty_nodes_and_never_expire_them(created):
    for pool in ("l4", "h100"):
        spec = custom(created, "NodePool", pool)["spec"]
        assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"}
        # Expiration is forceful and ignores do-not-disrupt (disruption.md:444-447).
        assert spec["template"]["spec"]["expireAfter"] == "Never"
        assert "replicas" not in spec  # dynamic: minNodes are the always-on managed node group


def test_every_server_pod_tells_karpenter_not_to_disrupt_its_node():
    prod = committed_stack("prod")
    servers = [
        o
        for o in prod.kubernetes_objects
        if o["kind"] == "Deployment" and o["metadata"]["labels"].get(contract.LABEL_COMPONENT) == "vllm-server"
    ]
    assert servers
    for deployment in servers:
        assert deployment["spec"]["template"]["metadata"]["annotations"][contract.ANNOTATION_DO_NOT_DISRUPT] == "true"
    kserve = evaluate_stack(
        "dev",
        overrides={
            "exposure": {},
            "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 2}],
            "models": [
                {
                    "repo": "meta-llama/Llama-3.1-8B-Instruct",
                    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
                    "engine": "kserve",
                    "pool": "l4",
                    "maxModelLen": 8192,
                }
            ],
        },
    )
    (isvc,) = [o for o in kserve.kubernetes_objects if o["kind"] == "InferenceService"]
    assert isvc["spec"]["predictor"]["annotations"][contract.ANNOTATION_DO_NOT_DISRUPT] == "true"


def test_no_karpenter_when_no_pool_can_grow():
    fixed = [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "minNodes": 1, "maxNodes": 1}]
    evaluation = run_cloud(lambda: create_cluster(stack(fixed), "test"))
    assert not [r for r in evaluation.of_type("kubernetes:helm.sh/v3:Release") if "karpenter" in r.inputs["chart"]]
    assert evaluation.result.karpenter is None
    assert evaluation.result.platform["autoscaler"] == "none needed (no pool grows)"
