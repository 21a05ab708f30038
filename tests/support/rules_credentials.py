"""Environment rule: every credential one `pulumi up` holds outlives the stack's longest chain of
waits, and the chain fits the job that runs it.

The facts and their sources are in offline_plan/credentials.py (aws-actions/configure-aws-credentials
v6.2.3: an OIDC role session of `role-duration-seconds`, default 3600, never refreshed; IAM caps it at
12 h; google-github-actions/auth v3.0.0: a credentials file the SDKs refresh while the job runs;
pulumi/auth-actions v2.1.0: a token of `token-expiration`, never refreshed; GitHub's job limits: 6 h
hosted, 5 days self-hosted; CodeBuild's build timeout). The rule reads the real workflow file, the
stack's `deployer.runner` and the chain offline_plan/waits.py computes over the recorded graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from offline_plan import credentials
from tests.support.first_apply import ApplyGraph, Violation, rule

NAME = "credentials-outlive-longest-wait"


def credential_violations(graph: ApplyGraph, workflow: Path = credentials.WORKFLOW) -> list[Violation]:
    """The rule over `workflow` (the committed file unless a test passes a modified copy)."""
    if not graph.evaluation.config:
        # A component run under mocks, not a stack: no workflow deploys it.
        return []
    d = credentials.deployment(graph.evaluation)
    wf = credentials.read_workflow(workflow)
    return [Violation(NAME, f"stack {d.stack} ({d.cloud}, {d.runner})", p) for p in credentials.problems(d, wf)]


@rule(NAME, kind="environment")
def credentials_outlive_longest_wait(graph: ApplyGraph) -> Iterable[Violation]:
    """A credential that expires mid-update fails the next cloud call and leaves a pending
    operation on the stack (sources: offline_plan/credentials.py)."""
    return credential_violations(graph)
