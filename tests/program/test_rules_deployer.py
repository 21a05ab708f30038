"""Where `pulumi up` runs from (issue 25, point 1): the runner each workflow job uses reaches the
cluster API of the stack it deploys, and the rule that says so fires on each way of breaking it."""

from __future__ import annotations

import dataclasses

import pytest

from components.cluster.aws import network
from offline_plan.mock_runtime import MOCK_DEPLOYER_RUNNER_SG, MOCK_PRIVATE_SUBNETS, evaluate_stack
from stack_config.deployer import GITHUB_HOSTED_LABEL
from tests.support import rules_deployer
from tests.support.committed import committed_stack
from tests.support.first_apply import RULE_INFO, check
from tests.support.stack_variants import (
    EXISTING,
    EXISTING_ENTRANCE,
    EXISTING_RDMA,
    PROD_GITHUB_HOSTED,
    VARIANTS,
    variant,
)

RULE = rules_deployer.NAME
PROD_CLUSTER = {"name": "llm-serving-prod", "region": "us-east-1"}


def fired(evaluation) -> list[str]:
    return [str(v) for v in check(evaluation, only=[RULE])]


def workflow_says(monkeypatch, stack: str, runner: str, runs_on: str) -> None:
    """deploy.yml as if its job for `stack` ran on `runner` / `runs_on` (the committed file otherwise)."""
    real = rules_deployer.workflow_runners()
    job = real[stack].job
    edited = {**real, stack: rules_deployer.WorkflowRunner(stack, job, runner, runs_on)}
    monkeypatch.setattr(rules_deployer, "RUNNERS_FOR", [lambda: edited])


def test_the_rule_is_an_environment_rule():
    assert RULE_INFO[RULE].kind == "environment" and not RULE_INFO[RULE].self_consistency


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_committed_stack_is_reachable_from_the_runner_its_workflow_job_uses(stack):
    evaluation = committed_stack(stack)
    assert fired(evaluation) == []
    job = rules_deployer.workflow_runners()[stack]
    assert job.runner == evaluation.outputs["deployer"]["runner"]
    assert job.runs_on == evaluation.outputs["deployer"]["runsOn"]


def test_prod_runs_on_the_codebuild_runner_dev_on_a_github_hosted_one():
    runners = rules_deployer.workflow_runners()
    assert runners["prod"].runner == "codebuild"
    assert runners["prod"].runs_on.startswith("codebuild-llm-serving-prod-deployer-${{ github.run_id }}")
    assert runners["dev"].runner == "github-hosted" and runners["dev"].runs_on == GITHUB_HOSTED_LABEL
    # The deployer stack itself needs only AWS APIs: a GitHub-hosted runner deploys it.
    assert runners["prod-deployer"].runner == "github-hosted"


# prod-github-hosted stands for another team's workflow (prod on a GitHub-hosted runner behind a
# restricted public endpoint, for the credentials rule); against the committed deploy.yml, which
# runs prod on CodeBuild, and with GitHub's unlistable runner addresses, this rule must fire on it.
@pytest.mark.parametrize("name", sorted(set(VARIANTS) - {PROD_GITHUB_HOSTED}))
def test_the_rule_holds_for_every_stack_variant(name):
    assert fired(variant(name)) == [], name


def test_the_github_hosted_prod_variant_cannot_reach_its_restricted_endpoint():
    found = fired(variant(PROD_GITHUB_HOSTED))
    assert any("github-hosted" in v for v in found), found


@pytest.mark.parametrize("name", [EXISTING, EXISTING_RDMA, EXISTING_ENTRANCE])
def test_an_existing_cluster_is_the_runners_business(name):
    evaluation = variant(name)
    assert not evaluation.of_type(rules_deployer.EKS_CLUSTER) and not evaluation.of_type(rules_deployer.GKE_CLUSTER)
    assert fired(evaluation) == []


# --- broken variants -------------------------------------------------------------------------------


def test_fires_for_a_private_endpoint_deployed_from_a_github_hosted_runner(monkeypatch):
    # What prod was before issue 25: a private-only endpoint, `pulumi up` on ubuntu-24.04.
    workflow_says(monkeypatch, "prod", "github-hosted", GITHUB_HOSTED_LABEL)
    evaluation = evaluate_stack(
        "prod",
        overrides={"cluster": {**PROD_CLUSTER, "network": {"vpc": "create"}}, "deployer": {"runner": "github-hosted"}},
    )
    found = fired(evaluation)
    assert len(found) == 1 and "private only" in found[0] and "GitHub-hosted" in found[0], found


def test_fires_for_a_restricted_public_endpoint_and_a_github_hosted_runner(monkeypatch):
    workflow_says(monkeypatch, "prod", "github-hosted", GITHUB_HOSTED_LABEL)
    evaluation = evaluate_stack(
        "prod",
        overrides={
            "cluster": {**PROD_CLUSTER, "network": {"vpc": "create"}},
            "deployer": {"runner": "github-hosted"},
            "security": {
                "profile": "production",
                "clusterEndpoint": {"publicAccess": True, "publicCidrs": ["52.94.0.0/24"]},
                "secretsEncryption": {"enabled": True},
            },
        },
    )
    found = fired(evaluation)
    assert len(found) == 1 and "admits only 52.94.0.0/24" in found[0], found


def test_fires_for_codebuild_without_the_ingress_rule(monkeypatch):
    real = network.deployer_vpc

    def without_runner_group(*args, **kwargs):
        # The look-ups happen; the cluster layer just never learns the runner's group.
        return dataclasses.replace(real(*args, **kwargs), runner_security_group_id=None)

    monkeypatch.setattr(network, "deployer_vpc", without_runner_group)
    found = fired(evaluate_stack("prod"))
    assert len(found) == 1 and f"admits the runner's group {MOCK_DEPLOYER_RUNNER_SG} on TCP 443" in found[0], found


def test_fires_for_codebuild_with_the_cluster_in_a_vpc_of_its_own():
    evaluation = evaluate_stack("prod", overrides={"cluster": {**PROD_CLUSTER, "network": {"vpc": "create"}}})
    found = fired(evaluation)
    assert len(found) == 1 and "does not use its VPC" in found[0], found


def test_fires_for_codebuild_with_the_cluster_in_another_vpc_than_the_runners(monkeypatch):
    real = network.deployer_vpc

    def elsewhere(cluster_name, region, where, deployer_stack, opts=None):
        found = real(cluster_name, region, where, deployer_stack, opts)
        other, _ = network.looked_up_subnets(MOCK_PRIVATE_SUBNETS, region, opts)
        return dataclasses.replace(found, cluster_subnets=other, node_subnets=other, vpc_id="vpc-mock-existing")

    monkeypatch.setattr(network, "deployer_vpc", elsewhere)
    found = fired(evaluate_stack("prod"))
    assert len(found) == 1 and "vpc-mock-existing" in found[0] and "vpc-mock-deployer" in found[0], found


def test_fires_when_the_workflow_and_the_stack_file_disagree(monkeypatch):
    workflow_says(monkeypatch, "prod", "github-hosted", GITHUB_HOSTED_LABEL)
    found = fired(committed_stack("prod"))
    assert any("on a github-hosted runner" in v and "deployer.runner codebuild" in v for v in found), found


def test_fires_for_a_codebuild_label_of_another_project(monkeypatch):
    label = "codebuild-someone-else-${{ github.run_id }}-${{ github.run_attempt }}"
    workflow_says(monkeypatch, "prod", "codebuild", label)
    found = fired(committed_stack("prod"))
    assert len(found) == 1 and "codebuild-llm-serving-prod-deployer-" in found[0], found


def test_fires_for_a_stack_no_workflow_job_deploys(monkeypatch):
    real = rules_deployer.workflow_runners()
    monkeypatch.setattr(rules_deployer, "RUNNERS_FOR", [lambda: {k: v for k, v in real.items() if k != "dev"}])
    assert any("no job of .github/workflows/deploy.yml" in v for v in fired(committed_stack("dev")))


def test_the_workflow_parser_reads_pulumi_ups_runs_on(tmp_path):
    # A literal runs-on in pulumi-up.yml overrides whatever the caller passes.
    for name in ("deploy.yml", "pulumi-up.yml"):
        text = (rules_deployer.WORKFLOWS / name).read_text()
        if name == "pulumi-up.yml":
            text = text.replace("runs-on: ${{ inputs.runs_on }}", "runs-on: ubuntu-24.04")
        (tmp_path / name).write_text(text)
    assert rules_deployer.workflow_runners(tmp_path)["prod"].runs_on == "ubuntu-24.04"
