"""Where `pulumi up` of the stack runs from: the runner of `.github/workflows/pulumi-up.yml`.

The runner decides what the deployer can reach (a private cluster endpoint answers only inside its
network) and how long its cloud credentials live (a GitHub-hosted job holds a fixed-length OIDC
session; a runner with an instance or container role has credentials the SDKs refresh). The stack
file says which runner deploys it, so the offline plan and the tests can hold the two together.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stack_config.base import StrictModel

# github-hosted: GitHub's ubuntu runners, on the public internet, credentials from OIDC.
# codebuild: an AWS CodeBuild-hosted GitHub Actions runner in the stack's private subnets.
# self-hosted: a runner the team operates; the stack file says what it can reach.
RunnerKind = Literal["github-hosted", "codebuild", "self-hosted"]


class DeployerConfig(StrictModel):
    runner: RunnerKind = "github-hosted"
    """Where the workflow runs `pulumi up` of this stack: `github-hosted` (GitHub's runners, on the public internet),
    `codebuild` (an AWS CodeBuild-hosted GitHub Actions runner inside the stack's VPC) or `self-hosted` (a runner you
    operate). The cluster endpoint must admit it (docs/deployer.md)."""
    codebuildProject: str | None = Field(
        None, alias="codebuildProject", max_length=255, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{1,254}$"
    )
    """With runner `codebuild`: the deployer stack's CodeBuild project (its `runner.projectName`), whose runner label
    the workflow's `runs-on` names. Default `<cluster.name>-deployer`."""

    def project_for(self, cluster_name: str) -> str:
        return self.codebuildProject or f"{cluster_name}-deployer"


def runs_on_label(project_name: str) -> str:
    """The `runs-on` label of a job on the CodeBuild project's runner ("codebuild-<project-name>-${{github.run_id}}-
    ${{github.run_attempt}}", required; AWS CodeBuild User Guide, "Label overrides supported with the CodeBuild-hosted
    GitHub Actions runner", https://docs.aws.amazon.com/codebuild/latest/userguide/sample-github-action-runners-update-labels.html)."""
    return f"codebuild-{project_name}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"


# The runner label of GitHub's Ubuntu 24.04 image ("About GitHub-hosted runners", standard runners,
# https://docs.github.com/en/actions/using-github-hosted-runners/using-github-hosted-runners/about-github-hosted-runners).
GITHUB_HOSTED_LABEL = "ubuntu-24.04"


def deployer_summary(deployer: DeployerConfig, cluster_name: str) -> dict[str, str]:
    """What the stack says about where its `pulumi up` runs: the runner kind and the `runs-on` label
    the workflow must use (exported as `deployer`; the plan and the tests compare it with the workflow)."""
    if deployer.runner == "codebuild":
        project = deployer.project_for(cluster_name)
        return {"runner": "codebuild", "runsOn": runs_on_label(project), "codebuildProject": project}
    if deployer.runner == "github-hosted":
        return {"runner": "github-hosted", "runsOn": GITHUB_HOSTED_LABEL}
    return {"runner": "self-hosted", "runsOn": "the labels of your own runner"}
