"""Where `pulumi up` of the stack runs from: the runner of `.github/workflows/pulumi-up.yml`.

The runner decides what the deployer can reach (a private cluster endpoint answers only inside its
network) and how long its cloud credentials live (a GitHub-hosted job holds a fixed-length OIDC
session; a runner with an instance or container role has credentials the SDKs refresh). The stack
file says which runner deploys it, so the offline plan and the tests can hold the two together.
"""

from __future__ import annotations

from typing import Literal

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
