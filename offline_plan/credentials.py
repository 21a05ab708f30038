"""Every credential one `pulumi up` of a stack holds, how long it lives, and whether that outlives
the longest chain of waits (offline_plan/waits.py).

A `pulumi up` that outlives a credential fails mid-update: the next cloud call is refused, and the
stack is left with a pending operation. The credentials depend on where the job runs
(`deployer.runner`) and on the cloud; their lifetimes come from the workflow that runs the update
(.github/workflows/pulumi-up.yml, read as YAML, never restated here). The facts, each from its
source:

- AWS on a GitHub-hosted or self-hosted runner: aws-actions/configure-aws-credentials v6.2.3
  (commit e6de054238d6b7531b4efff3b6587d9aade6a06c) calls AssumeRoleWithWebIdentity with
  `DurationSeconds` = `role-duration-seconds`, default 3600 (src/index.ts, DEFAULT_ROLE_DURATION),
  accepted from 900 to 43200 (README.md, inputs table), and exports the session as
  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (src/helpers.ts, exportCredentials).
  The web identity token is not kept, so nothing can renew the session (the action's open issue
  aws-actions/configure-aws-credentials#359, "Credentials obtained through OIDC cannot be
  refreshed"). STS refuses a DurationSeconds above the role's MaxSessionDuration, which IAM allows
  from 1 to 12 hours (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html,
  DurationSeconds).
- AWS on a CodeBuild-hosted runner: the build's service role, served by the container credentials
  endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
  https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-env-vars.html), which the
  SDKs call again before the credentials expire
  (https://docs.aws.amazon.com/sdkref/latest/guide/feature-container-credentials.html). They last
  as long as the build, which CodeBuild stops at the project's build timeout: 5 to 2160 minutes,
  default 60 (pulumi-aws 7.51.1 codebuild.Project `build_timeout`). Environment variables come
  before the container endpoint in the SDKs' credential chain
  (https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html), so when the
  workflow's OIDC step still runs on that runner, its fixed session is what the update uses.
- GCP: google-github-actions/auth v3.0.0 (commit 7c6bc770dae815cd3e89ee6cdf493a5fab2cc093) with
  Workload Identity Federation writes an `external_account` credentials file whose
  `credential_source.url` is the job's GitHub OIDC token endpoint and, with `service_account`, a
  `service_account_impersonation_url` (src/client/workload_identity_federation.ts,
  createCredentialsFile). Each access token lives 1 hour (README.md, access_token_lifetime: "The
  default value is 1 hour (3600s)"); when it expires the Google auth libraries and gcloud fetch a
  fresh GitHub OIDC token from that URL and exchange it again, which GitHub answers while the job
  runs and refuses after ("Can't issue ID_TOKEN for job in 'Completed' state",
  google-github-actions/auth#267). setup-gcloud v3.0.1 authenticates gcloud with the same file
  (src/main.ts, GOOGLE_GHA_CREDS_PATH), and gke-gcloud-auth-plugin, which the Kubernetes
  provider's kubeconfig runs, takes its tokens from gcloud. So the GCP credentials refresh for the
  life of the job.
- Pulumi Cloud: pulumi/auth-actions v2.1.0 (commit 141415910c3beb54e03b48e9057c204c97b956f2)
  requests `token-expiration` seconds (src/main.ts; sent only when set) and exports the token as
  PULUMI_ACCESS_TOKEN; "It is up to the Pulumi authorization server to grant or reduce it"
  (action.yml). The token is not renewed during the job. The server's default when the input is
  left out, and the cap it applies (the OIDC issuer's maximum expiration, `maxExpiration` of the
  Pulumi Service provider's OidcIssuer), are unresolved here: see docs/ci.md for the command that
  shows them. Without vars.PULUMI_ORGANIZATION the workflow uses the PULUMI_ACCESS_TOKEN secret, a
  token whose expiry its owner chose when creating it.
- The job itself: "Each job in a workflow can run for up to 6 hours of execution time" on
  GitHub-hosted runners
  (https://docs.github.com/en/actions/administering-github-actions/usage-limits-billing-and-administration),
  "up to 5 days" on self-hosted ones
  (https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/usage-limits-for-self-hosted-runners);
  a CodeBuild-hosted runner is a self-hosted runner inside a build, so the build timeout bounds it
  as well.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from offline_plan import waits
from offline_plan.mock_runtime import Evaluation

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "pulumi-up.yml"
DEPLOY_WORKFLOW = ROOT / ".github" / "workflows" / "deploy.yml"

AWS_ACTION = "aws-actions/configure-aws-credentials"
GCP_ACTION = "google-github-actions/auth"
PULUMI_AUTH_ACTION = "pulumi/auth-actions"

AWS_DEFAULT_ROLE_DURATION_SECONDS = 3600
AWS_MIN_ROLE_DURATION_SECONDS = 900
# Both the action's accepted range and IAM's MaxSessionDuration ceiling (12 hours).
AWS_MAX_ROLE_DURATION_SECONDS = 43200
GCP_ACCESS_TOKEN_SECONDS = 3600
CODEBUILD_DEFAULT_TIMEOUT_MINUTES = 60
CODEBUILD_MAX_TIMEOUT_MINUTES = 2160
GITHUB_HOSTED_JOB_LIMIT_SECONDS = waits.GITHUB_HOSTED_JOB_LIMIT_MINUTES * 60
SELF_HOSTED_JOB_LIMIT_SECONDS = 5 * 24 * 3600

# The margin a credential needs beyond the longest chain of waits:
# - the job's set-up (waits.WORKFLOW_SETUP_SECONDS): credentials are issued during set-up, before
#   `pulumi up` starts, and the verification-report step after it still calls the cluster with them;
# - a safety factor of SAFETY_FRACTION of the chain: the chain counts only the engine's waits, and
#   counts 0 for every API call of IAM, buckets and networks, for `pulumi up`'s own refresh and
#   preview before the first create, and for the providers' retries on throttling; a tenth of the
#   chain (about half an hour for prod) is a judgement with room for those.
SAFETY_FRACTION = 0.10


def margin_seconds(chain_seconds: int) -> int:
    return waits.WORKFLOW_SETUP_SECONDS + math.ceil(SAFETY_FRACTION * chain_seconds)


@dataclass(frozen=True)
class WorkflowSettings:
    """The credential settings of the `pulumi up` workflow, as written in it."""

    path: str
    timeout_minutes: int
    aws_step_if: str | None
    aws_role_duration_seconds: int | None  # None: the input is left out (the action's default)
    gcp_step_present: bool
    gcp_creates_credentials_file: bool
    pulumi_auth_present: bool
    pulumi_token_expiration: int | None  # None: the input is left out (the server decides)


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list((doc.get("jobs") or {}).get("up", {}).get("steps") or [])


def _step(steps: list[dict[str, Any]], action: str) -> dict[str, Any] | None:
    found = [s for s in steps if str(s.get("uses", "")).split("@")[0] == action]
    return found[0] if found else None


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(str(value).strip())


def read_workflow(path: Path = WORKFLOW) -> WorkflowSettings:
    doc = yaml.safe_load(path.read_text())
    job = (doc.get("jobs") or {}).get("up") or {}
    steps = _steps(doc)
    aws = _step(steps, AWS_ACTION)
    gcp = _step(steps, GCP_ACTION)
    pulumi_auth = _step(steps, PULUMI_AUTH_ACTION)
    return WorkflowSettings(
        path=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        timeout_minutes=int(job.get("timeout-minutes") or waits.GITHUB_HOSTED_JOB_LIMIT_MINUTES),
        aws_step_if=str(aws.get("if")) if aws and aws.get("if") is not None else None,
        aws_role_duration_seconds=_int((aws or {}).get("with", {}).get("role-duration-seconds")),
        gcp_step_present=gcp is not None,
        gcp_creates_credentials_file=str((gcp or {}).get("with", {}).get("create_credentials_file", "true")).lower()
        != "false",
        pulumi_auth_present=pulumi_auth is not None,
        pulumi_token_expiration=_int((pulumi_auth or {}).get("with", {}).get("token-expiration")),
    )


def deploy_clouds(path: Path = DEPLOY_WORKFLOW) -> dict[str, str]:
    """stack -> cloud, as deploy.yml calls the `pulumi up` workflow."""
    doc = yaml.safe_load(path.read_text())
    out = {}
    for job in (doc.get("jobs") or {}).values():
        args = job.get("with") or {}
        if "stack" in args and "cloud" in args:
            out[str(args["stack"])] = str(args["cloud"])
    return out


def aws_step_runs_on(runner: str, step_if: str | None) -> bool:
    """Whether the OIDC step runs for an AWS stack on `runner`, from the step's `if:` as written:
    skipped on a CodeBuild-hosted runner when it excludes `'codebuild'` (`!= 'codebuild'`) or runs
    only for the other runner kinds (`== 'github-hosted'` / `== 'self-hosted'`); otherwise it runs
    there too (and its fixed session then wins over the container credentials)."""
    if runner != "codebuild" or step_if is None:
        return True
    if re.search(r"!=\s*'codebuild'", step_if):
        return False
    return not re.search(r"==\s*'(github-hosted|self-hosted)'", step_if)


@dataclass(frozen=True)
class Deployment:
    """One stack as its workflow deploys it."""

    stack: str
    cloud: str  # aws | gcp: whose credentials the workflow fetches
    runner: str  # deployer.runner
    chain_seconds: int
    chain_top: str  # the longest single wait of the chain, for messages
    # The CodeBuild project's build timeout when the stack records one (None: not in this stack).
    codebuild_timeout_minutes: int | None = None


def stack_settings(evaluation: Evaluation) -> Any:
    """The evaluated stack's validated config (stack_config.StackConfig)."""
    from stack_config.loader import PROJECT, SECRET_KEYS, decode_config_values, parse_stack_config

    secret_keys = {f"{PROJECT}:{k}" for k in SECRET_KEYS}
    raw, _ = decode_config_values(evaluation.config, secret_keys, evaluation.stack)
    return parse_stack_config(raw, f"Pulumi.{evaluation.stack}.yaml")


def deployment(evaluation: Evaluation, deploy_workflow: Path = DEPLOY_WORKFLOW) -> Deployment:
    settings = stack_settings(evaluation)
    cloud = settings.cloud.value
    if cloud not in ("aws", "gcp"):
        # An existing cluster: the workflow still fetches the credentials deploy.yml names.
        cloud = deploy_clouds(deploy_workflow).get(evaluation.stack, "none")
    total, chain = waits.longest_chain(evaluation.resources)
    top = max(chain, key=lambda w: w.seconds) if chain else None
    projects = evaluation.of_type("aws:codebuild/project:Project")
    timeout = None
    if projects:
        timeout = min(int(p.inputs.get("buildTimeout") or CODEBUILD_DEFAULT_TIMEOUT_MINUTES) for p in projects)
    return Deployment(
        stack=evaluation.stack,
        cloud=cloud,
        runner=settings.deployer.runner,
        chain_seconds=total,
        chain_top=f"{top.resource.name} {top.seconds / 60:.0f} min" if top else "none",
        codebuild_timeout_minutes=timeout,
    )


def job_limit_seconds(d: Deployment) -> tuple[int, str]:
    if d.runner == "github-hosted":
        return GITHUB_HOSTED_JOB_LIMIT_SECONDS, "GitHub-hosted job limit (6 h)"
    if d.runner == "codebuild":
        minutes = d.codebuild_timeout_minutes
        if minutes is None:
            why = "self-hosted job limit (5 days); the CodeBuild build timeout also bounds it"
            return SELF_HOSTED_JOB_LIMIT_SECONDS, why
        return min(minutes * 60, SELF_HOSTED_JOB_LIMIT_SECONDS), f"CodeBuild build timeout ({minutes} min)"
    return SELF_HOSTED_JOB_LIMIT_SECONDS, "self-hosted job limit (5 days)"


@dataclass(frozen=True)
class Credential:
    name: str
    used_by: str
    # Seconds the credential lives once issued; None when it refreshes or its owner chose it.
    lifetime_seconds: int | None
    refreshes: bool
    # For a refreshing credential: how long the refreshing goes on (seconds), and what ends it.
    refresh_bound_seconds: int | None
    setting: str  # where its lifetime is set
    source: str  # the citation (see the module docstring)
    # The lifetime is unknown to this offline check (a server's decision); the rule says what to set.
    unknown: bool = False
    # The workflow input that sets the lifetime, for messages.
    key: str = ""


def credentials(d: Deployment, wf: WorkflowSettings) -> list[Credential]:
    """Every credential one `pulumi up` of the stack holds, on its runner and cloud."""
    limit, limit_why = job_limit_seconds(d)
    out: list[Credential] = []
    if d.cloud == "aws":
        if aws_step_runs_on(d.runner, wf.aws_step_if):
            duration = wf.aws_role_duration_seconds or AWS_DEFAULT_ROLE_DURATION_SECONDS
            out.append(
                Credential(
                    name="AWS role session (OIDC, AssumeRoleWithWebIdentity)",
                    used_by="pulumi-aws, the aws CLI of the EKS exec kubeconfig",
                    lifetime_seconds=duration,
                    refreshes=False,
                    refresh_bound_seconds=None,
                    setting=f"{wf.path}: role-duration-seconds "
                    + (
                        str(wf.aws_role_duration_seconds)
                        if wf.aws_role_duration_seconds
                        else f"(not set: the action's default {AWS_DEFAULT_ROLE_DURATION_SECONDS})"
                    ),
                    source=f"{AWS_ACTION} v6.2.3 src/index.ts, src/helpers.ts; STS AssumeRoleWithWebIdentity",
                    key="role-duration-seconds (and the role's MaxSessionDuration)",
                )
            )
        else:
            out.append(
                Credential(
                    name="AWS CodeBuild service role (container credentials)",
                    used_by="pulumi-aws, the aws CLI of the EKS exec kubeconfig",
                    lifetime_seconds=None,
                    refreshes=True,
                    refresh_bound_seconds=limit,
                    setting=f"the CodeBuild project's build timeout ({limit_why})",
                    source="AWS SDKs' container credential provider; CodeBuild build timeout 5-2160 min",
                )
            )
    elif d.cloud == "gcp":
        refreshing = wf.gcp_step_present and wf.gcp_creates_credentials_file
        out.append(
            Credential(
                name="GCP Workload Identity Federation credentials file",
                used_by="pulumi-gcp, gcloud and gke-gcloud-auth-plugin (Kubernetes provider)",
                lifetime_seconds=None if refreshing else GCP_ACCESS_TOKEN_SECONDS,
                refreshes=refreshing,
                refresh_bound_seconds=limit if refreshing else None,
                setting=f"{wf.path}: {GCP_ACTION} create_credentials_file "
                + ("(default true)" if refreshing else "false: no file, no refresh")
                + f"; each access token {GCP_ACCESS_TOKEN_SECONDS // 60} min",
                source=f"{GCP_ACTION} v3.0.0 src/client/workload_identity_federation.ts; auth#267",
            )
        )
    if wf.pulumi_auth_present:
        out.append(
            Credential(
                name="Pulumi Cloud token (pulumi/auth-actions, vars.PULUMI_ORGANIZATION set)",
                used_by="the Pulumi CLI (state checkpoints, the update's lease)",
                lifetime_seconds=wf.pulumi_token_expiration,
                refreshes=False,
                refresh_bound_seconds=None,
                setting=f"{wf.path}: token-expiration "
                + (str(wf.pulumi_token_expiration) if wf.pulumi_token_expiration else "(not set: the server decides)"),
                source=f"{PULUMI_AUTH_ACTION} v2.1.0 src/main.ts, action.yml",
                unknown=wf.pulumi_token_expiration is None,
                key="token-expiration (and the OIDC issuer's maximum expiration)",
            )
        )
    out.append(
        Credential(
            name="Pulumi Cloud token (PULUMI_ACCESS_TOKEN secret, without vars.PULUMI_ORGANIZATION)",
            used_by="the Pulumi CLI",
            lifetime_seconds=None,
            refreshes=False,
            refresh_bound_seconds=None,
            setting="the token's own expiry, chosen when it was created",
            source="docs/ci.md",
        )
    )
    return out


@dataclass(frozen=True)
class Verdict:
    credential: Credential
    required_seconds: int
    ok: bool
    message: str


def required_lifetime_seconds(d: Deployment) -> int:
    """The chain plus its margin, but never more than the job may run: a credential need not
    outlive the job that holds it."""
    limit, _ = job_limit_seconds(d)
    return min(d.chain_seconds + margin_seconds(d.chain_seconds), limit)


def verdicts(d: Deployment, wf: WorkflowSettings) -> list[Verdict]:
    need = required_lifetime_seconds(d)
    out = []
    for c in credentials(d, wf):
        if c.unknown:
            ok, msg = False, f"lifetime not set; set {c.key} to at least {need} s"
        elif c.refreshes:
            bound = c.refresh_bound_seconds or 0
            ok = bound >= need
            msg = f"refreshes until the job ends ({bound / 60:.0f} min)" + (
                "" if ok else f", shorter than the {need / 60:.0f} min needed"
            )
        elif c.lifetime_seconds is None:
            ok, msg = True, "not bounded by the workflow: make sure the token does not expire during a run"
        else:
            ok = c.lifetime_seconds >= need
            msg = f"{c.lifetime_seconds} s, not refreshed" + (
                " (covers it)" if ok else f": shorter than the {need} s needed; raise {c.key} to at least {need}"
            )
        out.append(Verdict(c, need, ok, msg))
    return out


def problems(d: Deployment, wf: WorkflowSettings) -> list[str]:
    """Every way one `pulumi up` of the stack would outlive a credential or its job."""
    out = []
    limit, limit_why = job_limit_seconds(d)
    job_needs = waits.required_job_minutes(d.chain_seconds) * 60
    if job_needs > limit:
        out.append(
            f"the longest chain of waits ({d.chain_seconds / 60:.0f} min, longest step {d.chain_top}) plus "
            f"set-up needs {job_needs / 60:.0f} min, beyond the {limit_why}: split the update or deploy from "
            "a runner with a longer limit (deployer.runner)"
        )
    duration = wf.aws_role_duration_seconds
    if (
        d.cloud == "aws"
        and duration is not None
        and not (AWS_MIN_ROLE_DURATION_SECONDS <= duration <= AWS_MAX_ROLE_DURATION_SECONDS)
    ):
        out.append(
            f"{wf.path}: role-duration-seconds {duration} is outside {AWS_MIN_ROLE_DURATION_SECONDS}-"
            f"{AWS_MAX_ROLE_DURATION_SECONDS}, which the action and STS accept"
        )
    for v in verdicts(d, wf):
        if not v.ok:
            out.append(
                f"{v.credential.name}: {v.message}; the chain of waits is {d.chain_seconds} s "
                f"(longest step {d.chain_top}) and the margin {margin_seconds(d.chain_seconds)} s"
            )
    return out


def credentials_section(evaluation: Evaluation, workflow: Path = WORKFLOW) -> list[str]:
    """plan.md: each credential of one `pulumi up`, its lifetime against the longest chain."""
    d = deployment(evaluation)
    wf = read_workflow(workflow)
    need = required_lifetime_seconds(d)
    limit, limit_why = job_limit_seconds(d)
    out = [
        "## Credentials against the longest wait",
        "",
        (
            f"`pulumi up` runs on the `{d.runner}` runner (deployer.runner) with {d.cloud} credentials from "
            f"`{wf.path}`. Longest chain of waits: {d.chain_seconds} s ({d.chain_seconds / 60:.0f} min); margin "
            f"{margin_seconds(d.chain_seconds)} s (job set-up {waits.WORKFLOW_SETUP_SECONDS} s + "
            f"{SAFETY_FRACTION:.0%} of the chain); job limit {limit / 60:.0f} min ({limit_why}). Every credential "
            f"must last {need} s ({need / 60:.0f} min)."
        ),
        "",
        "| credential | used by | lifetime | refreshes | set by | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for v in verdicts(d, wf):
        c = v.credential
        life = "unknown" if c.unknown else (f"{c.lifetime_seconds} s" if c.lifetime_seconds else "-")
        out.append(
            f"| {c.name} | {c.used_by} | {life} | {'yes' if c.refreshes else 'no'} | {c.setting} | "
            f"{'ok' if v.ok else '**FAILS**'}: {v.message} |"
        )
    extra = [p for p in problems(d, wf) if not any(p.startswith(v.credential.name) for v in verdicts(d, wf))]
    out += [""] + [f"- **{p}**" for p in extra] + ([""] if extra else [])
    return out
