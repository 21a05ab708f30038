"""A deployer stack (`llm-serving:role: deployer`, e.g. Pulumi.prod-deployer.yaml): the network and
the AWS CodeBuild-hosted GitHub Actions runner that another stack's `pulumi up` runs on.

A stack whose EKS endpoint is private answers only inside its VPC, so the runner and that VPC must
exist before anything calls the API: this small stack builds them, from a machine that needs only
AWS APIs, and the served stack (`cluster.network.vpc: deployer`) finds them by their tags.
docs/deployer.md has the one-time set-up and the order.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import Field, ValidationError, field_validator

from stack_config.base import StrictModel
from stack_config.cluster import DEFAULT_REGIONS, NatGateways, NetworkConfig
from stack_config.errors import ConfigError, format_validation_error
from stack_config.formats import aws_region_problem
from stack_config.policy_config import PolicyConfigPath

DEPLOYER_ROLE: Final = "deployer"
SERVING_ROLE: Final = "serving"
StackRole = Literal["serving", "deployer"]

# CodeBuild's build timeout is "from 5 to 2160 (36 hours)" minutes (pulumi-aws 7.51.1,
# sdk/python/pulumi_aws/codebuild/project.py, `build_timeout`; AWS CodeBuild API, Project.timeoutInMinutes).
CODEBUILD_MIN_TIMEOUT_MINUTES = 5
CODEBUILD_MAX_TIMEOUT_MINUTES = 2160
# Long enough for prod's longest chain of waits (306 min, offline_plan/waits.py; the job's 325 in
# .github/workflows/pulumi-up.yml), with room for a slow first install: 8 hours.
DEFAULT_BUILD_TIMEOUT_MINUTES = 480
# The service role's permissions: `pulumi up` of the served stack creates an EKS cluster, IAM roles
# and policies, KMS keys, S3, EFS, SQS, ECR, EC2 security groups and launch templates, so the default is
# AdministratorAccess (AWS managed policy, https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AdministratorAccess.html);
# list narrower policies of your own instead (docs/deployer.md).
DEFAULT_RUNNER_POLICY_ARNS = ("arn:aws:iam::aws:policy/AdministratorAccess",)
# The curated CodeBuild image the runner starts from: Ubuntu (standard 7.0, Ubuntu 22.04;
# https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-available.html), because the
# workflow's actions/setup-python installs builds of actions/python-versions, which are made for
# GitHub's Ubuntu images (actions/python-versions README, "Building installation packages";
# actions/setup-python docs/advanced-usage.md, "Using setup-python with a self-hosted runner").
# That the image also holds the AWS CLI (the exec kubeconfig calls `aws eks get-token`) and `make`
# is unresolved here; settle it with `aws codebuild list-curated-environment-images` and the image's
# Dockerfile in aws/aws-codebuild-docker-images (ubuntu/standard/7.0) before the first run.
DEFAULT_RUNNER_IMAGE = "aws/codebuild/standard:7.0"
# A CodeConnections (or older CodeStar Connections) connection ARN, e.g.
# arn:aws:codeconnections:us-east-1:123456789012:connection/0a1b2c3d-...
CONNECTION_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}"
)
POLICY_ARN_RE = re.compile(r"arn:aws[a-z-]*:iam::(aws|\d{12}):policy/[\w+=,.@/-]{1,512}")
# GitHub owner/name (owner: letters, digits and '-'; name: also '.', '_').
REPOSITORY_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
# CodeBuild project names: 2-255 characters, letters, digits, '-' and '_', a letter or digit first
# (AWS CodeBuild API Reference, CreateProject, `name`: pattern [A-Za-z0-9][A-Za-z0-9\-_]{1,254},
# https://docs.aws.amazon.com/codebuild/latest/APIReference/API_CreateProject.html).
PROJECT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,254}")
# CodeBuild compute types of a Linux container on demand (AWS CodeBuild API, ProjectEnvironment.computeType).
ComputeType = Literal["BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE"]


class RunnerConfig(StrictModel):
    connectionArn: str = Field(alias="connectionArn", max_length=200)
    """The AWS CodeConnections GitHub connection the runner's webhook and source use. AWS creates a connection PENDING;
    a person approves it once in the console before `pulumi up` (docs/deployer.md)."""
    repository: str = Field(max_length=140)
    """The GitHub repository (owner/name) whose workflow jobs the runner takes."""
    projectName: str | None = Field(None, alias="projectName", max_length=255)
    """The CodeBuild project's name; the served stack's workflow runs on `codebuild-<projectName>-<run id>-<attempt>`.
    Default: `<servesCluster>-deployer`."""
    buildTimeoutMinutes: int = Field(
        DEFAULT_BUILD_TIMEOUT_MINUTES,
        alias="buildTimeoutMinutes",
        ge=CODEBUILD_MIN_TIMEOUT_MINUTES,
        le=CODEBUILD_MAX_TIMEOUT_MINUTES,
    )
    """How long one runner job may take, in minutes (CodeBuild allows 5 to 2160); longer than the served stack's
    longest chain of waits."""
    computeType: ComputeType = Field("BUILD_GENERAL1_MEDIUM", alias="computeType")
    """The CodeBuild compute type of the runner (`pulumi up` itself needs little)."""
    image: str = Field(DEFAULT_RUNNER_IMAGE, max_length=200)
    """The CodeBuild image the runner runs in."""
    policyArns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_RUNNER_POLICY_ARNS), alias="policyArns", min_length=1, max_length=20
    )
    """IAM policies attached to the runner's service role: what `pulumi up` of the served stack may do. Default
    AdministratorAccess."""

    @field_validator("connectionArn")
    @classmethod
    def _connection(cls, v: str) -> str:
        if not CONNECTION_ARN_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a CodeConnections connection ARN (arn:aws:codeconnections:<region>:<account>:"
                "connection/<id>); create the GitHub connection in the console and paste its ARN"
            )
        return v

    @field_validator("repository")
    @classmethod
    def _repository(cls, v: str) -> str:
        if not REPOSITORY_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a GitHub repository (owner/name)")
        return v

    @field_validator("projectName")
    @classmethod
    def _project(cls, v: str | None) -> str | None:
        if v is not None and not PROJECT_NAME_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a CodeBuild project name (letters, digits, '-', '_'; 2-255)")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        # A curated image (aws/codebuild/standard:7.0) or an ECR / registry image reference.
        if not re.fullmatch(r"[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?", v):
            raise ValueError(f"{v!r} is not an image reference (such as {DEFAULT_RUNNER_IMAGE})")
        return v

    @field_validator("policyArns")
    @classmethod
    def _policies(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not POLICY_ARN_RE.fullmatch(arn):
                raise ValueError(f"{arn!r} is not an IAM policy ARN (arn:aws:iam::<account|aws>:policy/<name>)")
        if len(set(v)) != len(v):
            raise ValueError("a policy is listed twice")
        return v


class DeployerNetworkConfig(StrictModel):
    cidr: str = "10.0.0.0/16"
    """The VPC's IPv4 range, /16 to /20 (the served EKS cluster's pods take their addresses from it)."""
    zoneCount: int = Field(3, ge=2, le=6, alias="zoneCount")
    """Availability Zones the VPC spans; zones offering `zonesOffering` come first."""
    natGateways: NatGateways = Field("single", alias="natGateways")
    """`single` NAT gateway or one `per-zone`."""
    zonesOffering: list[str] = Field(default_factory=list, alias="zonesOffering", max_length=10)
    """Instance types (the served stack's GPU machines, e.g. p5.48xlarge) whose zones the VPC must include."""

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        # The same rule as a served stack's own VPC.
        NetworkConfig.model_validate({"cidr": v})
        return v

    @field_validator("zonesOffering")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[a-z][a-z0-9-]*\d[a-z0-9-]*\.[a-z0-9]+", name):
                raise ValueError(f"{name!r} is not an EC2 instance type (such as p5.48xlarge)")
        return v


class DeployerStackConfig(StrictModel):
    role: Literal["deployer"]
    """`deployer`: this stack builds the runner and network of another stack (docs/deployer.md)."""
    cloud: Literal["aws"]
    """The cloud of the runner: `aws` (a CodeBuild-hosted GitHub Actions runner)."""
    servesCluster: str = Field(alias="servesCluster", pattern=r"^[a-z0-9][a-z0-9-]{0,98}[a-z0-9]$")
    """The `cluster.name` of the stack this one deploys; the VPC, subnets and runner security group carry it in their
    tags."""
    region: str = Field(max_length=30)
    """The AWS region of the served stack's cluster."""
    network: DeployerNetworkConfig = Field(default_factory=DeployerNetworkConfig)
    """The VPC: private subnets behind NAT (the runner, the cluster, its nodes), public ones (load balancers, NAT)."""
    runner: RunnerConfig
    """The CodeBuild-hosted GitHub Actions runner."""
    policyConfig: PolicyConfigPath | None = Field(default=None, alias="policyConfig", max_length=200)
    """The policy pack's config for this stack's gate (`policies/config/<name>.json`); default
    `policies/config/<stack>.json`."""

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", v):
            raise ValueError(f"{v!r} is not an AWS region (such as {DEFAULT_REGIONS['aws']})")
        # A region of that shape the cloud does not have (stack_config/regions.py).
        problem = aws_region_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @property
    def project_name(self) -> str:
        return self.runner.projectName or f"{self.servesCluster}-deployer"


def role_of(raw: dict[str, Any]) -> StackRole:
    """`serving` unless the stack file says `role: deployer`."""
    return DEPLOYER_ROLE if raw.get("role") == DEPLOYER_ROLE else SERVING_ROLE


def parse_deployer_config(raw: dict[str, Any], source: str) -> DeployerStackConfig:
    try:
        return DeployerStackConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError([f"{source}: {p}" for p in format_validation_error(err, DeployerStackConfig)]) from None


def stack_role() -> StackRole:
    """The running stack's role, read before anything else: a deployer stack has none of a served stack's keys."""
    import pulumi

    from stack_config.loader import PROJECT

    return DEPLOYER_ROLE if pulumi.Config(PROJECT).get("role") == DEPLOYER_ROLE else SERVING_ROLE


def load_deployer() -> DeployerStackConfig:
    """Read and validate a deployer stack's config (its own small schema)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    from stack_config.loader import decode_config_values

    stack = pulumi.get_stack()
    values = dict(runtime_config.CONFIG.get())
    for k, v in runtime_config.get_config_env().items():
        values.setdefault(k, v)
    secret_keys = {k for k in values if runtime_config.is_config_secret(k)}
    secret_keys |= set(runtime_config.get_config_secret_keys_env())
    raw, problems = decode_config_values(values, secret_keys, stack)
    source = f"Pulumi.{stack}.yaml"
    if problems:
        raise ConfigError([f"{source}: {p}" for p in problems])
    return parse_deployer_config(raw, source)
