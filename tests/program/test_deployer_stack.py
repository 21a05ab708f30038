"""The deployer stack (Pulumi.prod-deployer.yaml): the VPC and the CodeBuild-hosted GitHub Actions
runner that `pulumi up -s prod` runs on, evaluated offline; and what prod finds of it."""

from __future__ import annotations

import functools
import json

import pytest

from components.cluster.aws import network
from offline_plan import mock_runtime, waits
from offline_plan.mock_runtime import evaluate_stack
from stack_config.deployer_stack import CODEBUILD_MAX_TIMEOUT_MINUTES, CODEBUILD_MIN_TIMEOUT_MINUTES
from tests.support import rules_deployer
from tests.support.committed import committed_stack

PROJECT = "aws:codebuild/project:Project"
WEBHOOK = "aws:codebuild/webhook:Webhook"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


@functools.cache
def _deployer():
    return evaluate_stack("prod-deployer")


def only(evaluation, type_token):
    found = evaluation.of_type(type_token)
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def test_the_deployer_stack_evaluates_offline_and_builds_no_cluster():
    evaluation = _deployer()
    assert evaluation.error is None
    assert not evaluation.of_type("aws:eks/cluster:Cluster")
    assert not [r for r in evaluation.resources if r.type.startswith("kubernetes:")]
    assert evaluation.assumed_secrets == []


def test_it_exports_the_runner_label_prods_workflow_job_runs_on():
    outputs = _deployer().outputs
    label = "codebuild-llm-serving-prod-deployer-${{ github.run_id }}-${{ github.run_attempt }}"
    assert outputs["runnerLabel"] == label
    assert rules_deployer.workflow_runners()["prod"].runs_on == label
    assert committed_stack("prod").outputs["deployer"]["runsOn"] == label
    assert outputs["codebuildProject"] == only(_deployer(), PROJECT).inputs["name"]
    for key in ("runnerSecurityGroupId", "vpcId", "privateSubnetIds", "publicSubnetIds", "runnerRoleArn"):
        assert outputs[key], key


def test_the_webhook_starts_a_build_for_every_queued_workflow_job():
    webhook = only(_deployer(), WEBHOOK)
    assert webhook.inputs["filterGroups"] == [{"filters": [{"type": "EVENT", "pattern": "WORKFLOW_JOB_QUEUED"}]}]
    assert webhook.inputs["buildType"] == "BUILD"


def test_the_build_timeout_outlasts_prods_longest_wait_within_codebuilds_limits():
    timeout = only(_deployer(), PROJECT).inputs["buildTimeout"]
    chain_seconds, _ = waits.longest_chain(committed_stack("prod").resources)
    assert CODEBUILD_MIN_TIMEOUT_MINUTES <= timeout <= CODEBUILD_MAX_TIMEOUT_MINUTES
    assert timeout >= waits.required_job_minutes(chain_seconds), (timeout, chain_seconds)


def test_the_runner_is_in_the_private_subnets_with_an_egress_only_group():
    evaluation = _deployer()
    project = only(evaluation, PROJECT)
    private = {f"subnet-mock-{r.name}" for r in evaluation.of_type(SUBNET) if "-private-" in r.name}
    assert set(project.inputs["vpcConfig"]["subnets"]) == private and len(private) == 3
    group = only(evaluation, SECURITY_GROUP)
    assert project.inputs["vpcConfig"]["securityGroupIds"] == [f"sg-mock-{group.name}"]
    assert not group.inputs.get("ingress")
    assert group.inputs["tags"][network.DEPLOYER_RUNNER_TAG] == "llm-serving-prod"
    assert project.inputs["source"]["auth"]["type"] == "CODECONNECTIONS"
    assert project.inputs["source"]["auth"]["resource"].startswith("arn:aws:codeconnections:")


def test_prods_gpu_zone_has_a_private_subnet():
    # p5.48xlarge is offered in two zones only (the mock account): the VPC must include one.
    zones = {r.inputs["availabilityZone"] for r in _deployer().of_type(SUBNET) if "-private-" in r.name}
    offered = {f"us-east-1{z}" for z in mock_runtime.MOCK_SCARCE_ZONES}
    assert zones & offered, zones


def test_the_vpc_and_subnets_carry_the_tag_prod_looks_them_up_by():
    evaluation = _deployer()
    assert only(evaluation, VPC).inputs["tags"][network.DEPLOYER_TAG] == "llm-serving-prod"
    for subnet in evaluation.of_type(SUBNET):
        assert subnet.inputs["tags"][network.DEPLOYER_TAG] == "llm-serving-prod", subnet.name
    prod = committed_stack("prod")
    looked_up = [args for token, args in prod.calls if token == "aws:ec2/getVpcs:getVpcs"]
    assert looked_up == [{"tags": {network.DEPLOYER_TAG: "llm-serving-prod"}, "region": "us-east-1"}]


def test_the_service_role_is_codebuilds_with_the_configured_policies():
    evaluation = _deployer()
    role = only(evaluation, ROLE)
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert [a.inputs["policyArn"] for a in evaluation.of_type(ATTACHMENT)] == [
        "arn:aws:iam::aws:policy/AdministratorAccess"
    ]


def test_prod_admits_the_runner_group_on_443_before_its_first_kubernetes_call():
    prod = committed_stack("prod")
    ingress = only(prod, rules_deployer.INGRESS_RULE)
    assert ingress.inputs["referencedSecurityGroupId"] == mock_runtime.MOCK_DEPLOYER_RUNNER_SG
    assert (ingress.inputs["fromPort"], ingress.inputs["toPort"], ingress.inputs["ipProtocol"]) == (443, 443, "tcp")
    cluster = only(prod, rules_deployer.EKS_CLUSTER)
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert set(cluster.inputs["vpcConfig"]["subnetIds"]) == set(mock_runtime.MOCK_DEPLOYER_PRIVATE_SUBNETS)
    assert cluster.inputs["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is True
    # prod creates no VPC of its own: the deployer stack's is the one.
    assert not prod.of_type(VPC)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"runner": {"repository": "example-org/llm-serving"}}, "runner.connectionArn"),
        (
            {"runner": {"connectionArn": "arn:aws:iam::123456789012:role/x", "repository": "o/r"}},
            "is not a CodeConnections connection ARN",
        ),
        ({"runner": {"connectionArn": "x", "repository": "o/r", "buildTimeoutMinutes": 3000}}, "buildTimeoutMinutes"),
        ({"servesCluster": "Not_A_Cluster"}, "servesCluster"),
        ({"network": {"zonesOffering": ["gpu"]}}, "network.zonesOffering"),
    ],
)
def test_a_broken_deployer_stack_file_names_the_key(overrides, expected):
    evaluation = evaluate_stack("prod-deployer", overrides=overrides, raise_errors=False)
    assert evaluation.error is not None and expected in str(evaluation.error), evaluation.error
    assert "Pulumi.prod-deployer.yaml" in str(evaluation.error)


def test_prod_without_its_deployer_stack_says_which_stack_to_run_first(monkeypatch):
    monkeypatch.setitem(mock_runtime._CALL_RESULTS, "aws:ec2/getVpcs:getVpcs", {"ids": []})
    evaluation = evaluate_stack("prod", raise_errors=False)
    assert str(evaluation.error) == (
        "Pulumi.prod.yaml: cluster.network.vpc: deployer: no VPC tagged llm-serving/deployer=llm-serving-prod in "
        "us-east-1; run `pulumi up -s prod-deployer` first (docs/deployer.md)"
    )


def test_prod_without_the_runner_group_says_so(monkeypatch):
    monkeypatch.setitem(mock_runtime._CALL_RESULTS, "aws:ec2/getSecurityGroups:getSecurityGroups", {"ids": []})
    evaluation = evaluate_stack("prod", raise_errors=False)
    assert "0 security groups tagged llm-serving/deployer-runner=llm-serving-prod" in str(evaluation.error)
    assert "run `pulumi up -s prod-deployer` first" in str(evaluation.error)


def test_vpc_deployer_is_refused_on_gke():
    evaluation = evaluate_stack(
        "dev", overrides={"cluster": {"name": "llm-serving-dev", "network": {"vpc": "deployer"}}}, raise_errors=False
    )
    assert "cluster.network.vpc: deployer is supported on EKS only" in str(evaluation.error), evaluation.error


def test_the_deployer_stack_is_not_deployed_on_the_runner_it_builds(monkeypatch):
    from tests.support.first_apply import check

    assert check(_deployer(), only=[rules_deployer.NAME]) == []
    real = rules_deployer.workflow_runners()
    label = _deployer().outputs["runnerLabel"]
    own = rules_deployer.WorkflowRunner("prod-deployer", "up-prod-deployer", "codebuild", label)
    monkeypatch.setattr(rules_deployer, "RUNNERS_FOR", [lambda: {**real, "prod-deployer": own}])
    found = [str(v) for v in check(_deployer(), only=[rules_deployer.NAME])]
    assert len(found) == 1 and "on the runner prod-deployer itself builds" in found[0], found
