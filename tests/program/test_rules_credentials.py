"""Every credential of one `pulumi up` outlives the longest chain of waits, for both committed stacks,
their clouds and the runners a stack can name (deployer.runner), read from the real workflow; and
the rule fires on each way that breaks (issue 25, point 2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from offline_plan import credentials, waits
from offline_plan.mock_runtime import Evaluation, RecordedResource
from tests.support import paths
from tests.support.committed import STACKS, committed_stack
from tests.support.first_apply import RULE_INFO, ApplyGraph, check
from tests.support.rules_credentials import NAME, credential_violations
from tests.support.stack_variants import PROD_CODEBUILD, PROD_GITHUB_HOSTED, VARIANTS, variant

WORKFLOW = paths.ROOT / ".github" / "workflows" / "pulumi-up.yml"


def violations(evaluation: Evaluation, workflow: Path = WORKFLOW) -> list[str]:
    return [str(v) for v in credential_violations(ApplyGraph(evaluation), workflow)]


def edited_workflow(tmp_path: Path, action: str, **inputs) -> Path:
    """A copy of the committed workflow with the `with:` inputs of one step changed (None removes)."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    [step] = [s for s in doc["jobs"]["up"]["steps"] if str(s.get("uses", "")).startswith(action + "@")]
    for key, value in inputs.items():
        if value is None:
            step["with"].pop(key, None)
        else:
            step["with"][key] = value
    path = tmp_path / "pulumi-up.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_rule_is_an_environment_rule():
    assert RULE_INFO[NAME].kind == "environment" and not RULE_INFO[NAME].self_consistency


@pytest.mark.parametrize("stack", STACKS)
def test_every_credential_outlives_the_committed_stacks_longest_chain(stack):
    assert check(committed_stack(stack), only=[NAME]) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_credential_outlives_each_variants_longest_chain(name):
    assert check(variant(name), only=[NAME]) == [], name


def test_the_workflows_session_and_token_cover_prods_chain_with_its_margin():
    """The two numbers tied together: the workflow's lifetimes against prod's computed chain."""
    wf = credentials.read_workflow(WORKFLOW)
    # Committed prod runs on the CodeBuild runner: only the Pulumi token is fixed-length there.
    d = credentials.deployment(committed_stack("prod"))
    need = d.chain_seconds + credentials.margin_seconds(d.chain_seconds)
    assert d.cloud == "aws" and d.runner == "codebuild"
    assert wf.pulumi_token_expiration is not None and wf.pulumi_token_expiration >= need
    # The same chain on a GitHub-hosted runner holds the OIDC session the workflow asks for.
    d = credentials.deployment(variant(PROD_GITHUB_HOSTED))
    need = d.chain_seconds + credentials.margin_seconds(d.chain_seconds)
    assert d.runner == "github-hosted"
    assert wf.aws_role_duration_seconds is not None
    assert need <= wf.aws_role_duration_seconds <= credentials.AWS_MAX_ROLE_DURATION_SECONDS


def test_deploy_yml_fetches_each_committed_stacks_own_cloud():
    clouds = credentials.deploy_clouds()
    for stack in STACKS:
        assert clouds[stack] == credentials.stack_settings(committed_stack(stack)).cloud.value, stack


# --- broken variants -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [PROD_GITHUB_HOSTED])
def test_fires_on_a_github_hosted_aws_stack_whose_workflow_leaves_out_role_duration_seconds(tmp_path, name):
    evaluation = committed_stack("prod") if name == "prod" else variant(name)
    workflow = edited_workflow(tmp_path, credentials.AWS_ACTION, **{"role-duration-seconds": None})
    [found] = violations(evaluation, workflow)
    assert "AWS role session" in found and "3600 s, not refreshed" in found
    assert "llama-3-3-70b-instruct-mirror 190 min" in found


def test_fires_on_a_role_duration_above_what_iam_allows(tmp_path):
    workflow = edited_workflow(tmp_path, credentials.AWS_ACTION, **{"role-duration-seconds": 50000})
    found = violations(committed_stack("prod"), workflow)
    assert any("role-duration-seconds 50000 is outside 900-43200" in v for v in found), found


@pytest.mark.parametrize("stack", STACKS)
def test_fires_on_a_pulumi_token_shorter_than_the_chain(tmp_path, stack):
    workflow = edited_workflow(tmp_path, credentials.PULUMI_AUTH_ACTION, **{"token-expiration": 3600})
    [found] = violations(committed_stack(stack), workflow)
    assert "Pulumi Cloud token (pulumi/auth-actions" in found and "3600 s, not refreshed" in found


def test_fires_on_a_pulumi_token_whose_lifetime_is_left_to_the_server(tmp_path):
    workflow = edited_workflow(tmp_path, credentials.PULUMI_AUTH_ACTION, **{"token-expiration": None})
    [found] = violations(committed_stack("dev"), workflow)
    assert "lifetime not set; set token-expiration" in found


def test_fires_on_gcp_credentials_without_the_refreshing_file(tmp_path):
    workflow = edited_workflow(tmp_path, credentials.GCP_ACTION, create_credentials_file=False)
    [found] = violations(committed_stack("dev"), workflow)
    assert "GCP Workload Identity Federation credentials file" in found and "3600 s, not refreshed" in found


def with_wait(evaluation: Evaluation, seconds: int) -> Evaluation:
    """The evaluation plus one more awaited object at the end of its longest chain."""
    _, chain = waits.longest_chain(evaluation.resources)
    last = chain[-1].resource
    extra = RecordedResource(
        type="kubernetes:batch/v1:Job",
        name="late-job",
        inputs={"apiVersion": "batch/v1", "kind": "Job", "metadata": {}},
        provider=None,
        custom=True,
        urn="urn:pulumi:test::llm-serving::kubernetes:batch/v1:Job::late-job",
        dependencies=[last.urn],
        custom_timeouts={"create": f"{seconds}s"},
    )
    return dataclasses.replace(evaluation, resources=[*evaluation.resources, extra])


def test_fires_on_a_chain_longer_than_the_github_hosted_job_limit():
    longer = with_wait(variant(PROD_GITHUB_HOSTED), 3600)
    found = violations(longer)
    assert any("beyond the GitHub-hosted job limit (6 h)" in v for v in found), found
    # The credentials need not outlive the job that holds them: the session of 6 h still suffices.
    assert not any("AWS role session" in v for v in found), found


def with_codebuild_project(evaluation: Evaluation, timeout_minutes: int | None) -> Evaluation:
    inputs = {} if timeout_minutes is None else {"buildTimeout": timeout_minutes}
    project = RecordedResource("aws:codebuild/project:Project", "deployer", inputs, None, True)
    return dataclasses.replace(evaluation, resources=[*evaluation.resources, project])


def codebuild_workflow(tmp_path: Path) -> Path:
    """The workflow as the CodeBuild runner's branch writes it: the OIDC step skipped there."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    [step] = [s for s in doc["jobs"]["up"]["steps"] if str(s.get("uses", "")).startswith(credentials.AWS_ACTION)]
    step["if"] = "inputs.cloud == 'aws' && inputs.runner != 'codebuild'"
    path = tmp_path / "pulumi-up.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_on_codebuild_the_service_roles_credentials_refresh_within_the_build_timeout(tmp_path):
    d = credentials.deployment(variant(PROD_CODEBUILD))
    skipped = credentials.read_workflow(codebuild_workflow(tmp_path))
    [aws] = [c for c in credentials.credentials(d, skipped) if "AWS" in c.name]
    assert aws.refreshes and aws.name.startswith("AWS CodeBuild service role")
    # The committed workflow skips the OIDC step there too, so the service role is what counts.
    [aws] = [c for c in credentials.credentials(d, credentials.read_workflow(WORKFLOW)) if "AWS" in c.name]
    assert aws.refreshes


def test_fires_on_a_codebuild_build_timeout_shorter_than_the_chain(tmp_path):
    workflow = codebuild_workflow(tmp_path)
    short = with_codebuild_project(variant(PROD_CODEBUILD), None)  # CodeBuild's default: 60 min
    found = violations(short, workflow)
    # The build ends the job (and its credentials) first: one problem, the timeout.
    [found] = found
    assert "beyond the CodeBuild build timeout (60 min)" in found
    long_enough = with_codebuild_project(variant(PROD_CODEBUILD), credentials.CODEBUILD_MAX_TIMEOUT_MINUTES)
    assert violations(long_enough, workflow) == []


# --- plan.md and docs ---------------------------------------------------------------------------------


def test_plan_md_shows_each_credential_against_the_chain():
    text = "\n".join(credentials.credentials_section(committed_stack("prod")))
    d = credentials.deployment(committed_stack("prod"))
    assert f"Longest chain of waits: {d.chain_seconds} s" in text
    assert "| AWS CodeBuild service role (container credentials) |" in text
    assert "**FAILS**" not in text
    hosted = "\n".join(credentials.credentials_section(variant(PROD_GITHUB_HOSTED)))
    assert "| AWS role session (OIDC, AssumeRoleWithWebIdentity) |" in hosted and "21600 s" in hosted


def test_the_docs_tell_users_the_role_session_the_workflow_asks_for():
    duration = credentials.read_workflow(WORKFLOW).aws_role_duration_seconds
    text = " ".join((paths.ROOT / "docs" / "ci.md").read_text().split())
    assert f"--max-session-duration {duration}" in text
    assert f"role-duration-seconds: {duration}" in text
    token = credentials.read_workflow(WORKFLOW).pulumi_token_expiration
    assert f"token-expiration: {token}" in text
    minutes = {s: round(credentials.deployment(committed_stack(s)).chain_seconds / 60) for s in STACKS}
    assert f"{minutes['prod']} minutes for prod, {minutes['dev']} for dev" in text


def test_render_plan_has_the_credentials_section():
    from offline_plan.write import render_plan

    assert "\n## Credentials against the longest wait\n" in render_plan(committed_stack("dev"), [], [])


@pytest.mark.parametrize(
    "condition, runs",
    [
        ("inputs.cloud == 'aws'", True),
        ("inputs.cloud == 'aws' && inputs.runner != 'codebuild'", False),
        ("inputs.cloud == 'aws' && inputs.runner == 'github-hosted'", False),
        ("inputs.cloud == 'aws' && inputs.runner == 'codebuild'", True),
    ],
)
def test_whether_the_oidc_step_runs_on_a_codebuild_runner_is_read_from_its_condition(condition, runs):
    assert credentials.aws_step_runs_on("codebuild", condition) is runs
