"""plan.md, "Where `pulumi up` runs from": every stack names its runner, the runs-on label, the path to
the API endpoint and the identity; a deployer stack gets a plan of its own shape."""

from __future__ import annotations

import functools

from offline_plan import deployer_report
from offline_plan.mock_runtime import MOCK_DEPLOYER_RUNNER_SG, evaluate_stack
from offline_plan.write import render_plan
from tests.support.committed import committed_stack
from tests.support.stack_variants import EXISTING, variant


@functools.cache
def section(stack: str) -> str:
    return "\n".join(deployer_report.deployer_lines(committed_stack(stack)))


def test_prod_runs_on_the_codebuild_runner_through_the_private_endpoint():
    text = section("prod")
    assert "| runner | codebuild (deployer.runner) |" in text
    assert "`codebuild-llm-serving-prod-deployer-${{ github.run_id }}-${{ github.run_attempt }}`" in text
    assert "private endpoint inside the VPC" in text and "public endpoint" not in text
    assert f"admits {MOCK_DEPLOYER_RUNNER_SG} (placeholder" in text and "on TCP 443" in text
    assert "CodeBuild project's service role" in text
    assert "`pulumi up -s prod-deployer` first" in text


def test_dev_runs_on_a_github_hosted_runner_through_the_public_endpoint():
    text = section("dev")
    assert "| runner | github-hosted (deployer.runner) |" in text and "`ubuntu-24.04`" in text
    assert "public IP endpoint open to every address" in text
    assert "Workload Identity Federation" in text


def test_a_gke_dns_endpoint_is_reported_from_the_clusters_recorded_inputs():
    evaluation = committed_stack("dev")
    cluster = evaluation.of_type(deployer_report.GKE_CLUSTER)[0]
    cluster.inputs["controlPlaneEndpointsConfig"] = {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    text = "\n".join(deployer_report.deployer_lines(evaluation))
    assert "DNS-based endpoint, open to traffic from outside Google Cloud" in text


def test_an_existing_cluster_is_the_runners_business():
    evaluation = variant(EXISTING)
    assert "its own business" in "\n".join(deployer_report.deployer_lines(evaluation))


def test_the_deployer_stack_has_a_plan_of_its_own_shape():
    evaluation = evaluate_stack("prod-deployer")
    assert deployer_report.is_deployer_stack(evaluation)
    plan_md = render_plan(evaluation, [], [])
    assert plan_md.startswith("# Offline plan: stack `prod-deployer` (a deployer stack)")
    assert "| webhook events | WORKFLOW_JOB_QUEUED |" in plan_md
    assert "| build timeout | 480 min" in plan_md
    assert "codebuild-llm-serving-prod-deployer-${{ github.run_id }}" in plan_md
    assert "## Models" not in plan_md and "aws:codebuild/project:Project" in plan_md


def test_a_served_stack_evaluated_after_a_deployer_stack_keeps_only_its_own_outputs():
    """The SDK's root Stack lives in a context variable that outlives one evaluation; each
    evaluation must export into a Stack of its own, or prod planned after prod-deployer in one
    process carries `runnerLabel` and is written as a deployer stack's plan."""
    deployer = evaluate_stack("prod-deployer")
    served = evaluate_stack("prod")
    assert "runnerLabel" in deployer.outputs
    assert "runnerLabel" not in served.outputs
    assert not deployer_report.is_deployer_stack(served)
    assert "sizing" in served.outputs and "sizing" not in evaluate_stack("prod-deployer").outputs
