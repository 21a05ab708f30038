"""A deployer stack on AWS: the VPC a served EKS stack will use, and an AWS CodeBuild-hosted GitHub
Actions runner in its private subnets, on which that stack's `pulumi up` runs.

Why a stack of its own: a private-only EKS endpoint answers only inside its VPC, so the runner and
its network must exist before the served stack makes its first Kubernetes call; this stack needs
only AWS APIs and runs from anywhere (a GitHub-hosted runner, a laptop). The served stack
(`cluster.network.vpc: deployer`) finds the VPC, its subnets and the runner's security group by
the tags set here (network.DEPLOYER_TAG, network.DEPLOYER_RUNNER_TAG) and admits that group on 443.

How CodeBuild runs GitHub Actions jobs: a project whose webhook fires on WORKFLOW_JOB_QUEUED starts
a build for every queued job whose `runs-on` label is `codebuild-<project-name>-${{ github.run_id }}-
${{ github.run_attempt }}` (AWS CodeBuild User Guide, "Self-hosted GitHub Actions runners in AWS
CodeBuild", https://docs.aws.amazon.com/codebuild/latest/userguide/action-runner-overview.html, and
"Tutorial: Configure a CodeBuild-hosted GitHub Actions runner",
https://docs.aws.amazon.com/codebuild/latest/userguide/action-runner.html). Argument names are
pulumi-aws 7.51.1's (sdk/python/pulumi_aws/codebuild/project.py, webhook.py, _inputs.py).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.cluster.aws import network, policies
from stack_config.deployer import runs_on_label
from stack_config.deployer_stack import DeployerStackConfig

# The webhook event of a queued GitHub Actions job (pulumi-aws 7.51.1 codebuild/_inputs.py,
# WebhookFilterGroupFilterArgs.pattern: "`WORKFLOW_JOB_QUEUED` works with GitHub & GitHub Enterprise only").
WORKFLOW_JOB_QUEUED = "WORKFLOW_JOB_QUEUED"

# What CodeBuild itself needs, whatever `runner.policyArns` grants `pulumi up`:
# - to place a build in the VPC: network interfaces in the subnets (AWS CodeBuild User Guide, "Allow
#   CodeBuild access to AWS services required to create a VPC network interface",
#   https://docs.aws.amazon.com/codebuild/latest/userguide/auth-and-access-control-iam-identity-based-access-control.html);
# - to write the build's log to CloudWatch Logs (the service role policy of AWS CodeBuild User
#   Guide, "Allow CodeBuild to interact with other AWS services",
#   https://docs.aws.amazon.com/codebuild/latest/userguide/setting-up-service-role.html);
# - to use the GitHub connection (AWS CodeBuild User Guide, "GitHub App connections",
#   https://docs.aws.amazon.com/codebuild/latest/userguide/connections-github-app.html; actions of
#   the Service Authorization Reference for AWS CodeConnections,
#   https://docs.aws.amazon.com/service-authorization/latest/reference/list_awscodeconnections.html).
#   Which of these CodeBuild calls is unresolved here: after the first runner job, read CloudTrail
#   (`aws cloudtrail lookup-events --lookup-attributes
#   AttributeKey=EventSource,AttributeValue=codeconnections.amazonaws.com`) and drop the unused.
#   The older codestar-connections prefix covers connections created before the rename (the ARN
#   prefix must match).
VPC_INTERFACE_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcs",
]
LOG_ACTIONS = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
CONNECTION_ACTIONS = [
    "codeconnections:GetConnectionToken",
    "codeconnections:GetConnection",
    "codeconnections:UseConnection",
    "codestar-connections:GetConnectionToken",
    "codestar-connections:GetConnection",
    "codestar-connections:UseConnection",
]


def runner_base_policy(connection_arn: str, region: str, account: str, partition: str, project: str) -> dict:
    """The inline policy every runner role gets: what CodeBuild needs to run in the VPC, log and fetch."""
    return {
        "Version": policies.VERSION,
        "Statement": [
            {"Effect": "Allow", "Action": VPC_INTERFACE_ACTIONS, "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": ["ec2:CreateNetworkInterfacePermission"],
                "Resource": f"arn:{partition}:ec2:{region}:{account}:network-interface/*",
                "Condition": {"StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"}},
            },
            {
                "Effect": "Allow",
                "Action": LOG_ACTIONS,
                "Resource": f"arn:{partition}:logs:{region}:{account}:log-group:/aws/codebuild/{project}*",
            },
            {"Effect": "Allow", "Action": CONNECTION_ACTIONS, "Resource": connection_arn},
        ],
    }


class CodeBuildRunner(pulumi.ComponentResource):
    """The VPC (network.EksVpc, tagged for the served stack), the runner's security group (egress
    only), its service role, the CodeBuild project in the private subnets and its webhook."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Input[str]]
    public_subnet_ids: list[pulumi.Input[str]]
    security_group_id: pulumi.Output[str]
    role_arn: pulumi.Output[str]
    project_name: str
    runs_on: str

    def __init__(self, name: str, config: DeployerStackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:CodeBuildRunner", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        region, cluster = config.region, config.servesCluster
        net = config.network
        where = "network"
        needs = [
            (f"{where}.zonesOffering[{i}]", network.offering_zones(t, region, invoke))
            for i, t in enumerate(net.zonesOffering)
        ]
        zones = network.choose_zones(network.supported_zones(region, invoke), needs, net.zoneCount, where)
        vpc = network.EksVpc(
            f"{name}-network",
            network.VpcArgs(
                cluster_name=cluster,
                region=region,
                cidr=net.cidr,
                zones=zones,
                nat_gateways=net.natGateways,
                tags={network.DEPLOYER_TAG: cluster},
            ),
            opts=child,
        )
        self.vpc_id = pulumi.Output.from_input(vpc.network.vpc_id)
        self.private_subnet_ids = [s.id for s in vpc.network.node_subnets]
        self.public_subnet_ids = [s.id for s in vpc.network.public_subnets]

        # Egress only: the runner calls out (GitHub, Pulumi Cloud, AWS APIs, the cluster's private
        # endpoint); nothing calls in. The served cluster's security group admits this group on 443.
        group = aws.ec2.SecurityGroup(
            f"{name}-runner",
            description=f"CodeBuild runner that runs pulumi up of {cluster}",
            vpc_id=vpc.network.vpc_id,
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": [network.ANYWHERE]}],
            region=region,
            tags={network.DEPLOYER_RUNNER_TAG: cluster, "Name": f"{cluster}-deployer-runner"},
            opts=child,
        )
        self.security_group_id = group.id

        project = config.project_name
        role = aws.iam.Role(
            f"{name}-runner",
            description=f"CodeBuild runner of {cluster}: runs pulumi up of the served stack",
            assume_role_policy=pulumi.Output.json_dumps(policies.service_trust_policy("codebuild.amazonaws.com")),
            opts=child,
        )
        identity = aws.get_caller_identity(opts=invoke)
        partition = aws.get_partition(opts=invoke).partition
        ready: list[pulumi.Resource] = [
            aws.iam.RolePolicy(
                f"{name}-runner-codebuild",
                role=role.name,
                policy=pulumi.Output.json_dumps(
                    runner_base_policy(config.runner.connectionArn, region, identity.account_id, partition, project)
                ),
                opts=child,
            )
        ]
        ready += [
            aws.iam.RolePolicyAttachment(f"{name}-runner-{i}", role=role.name, policy_arn=arn, opts=child)
            for i, arn in enumerate(config.runner.policyArns)
        ]
        self.role_arn = role.arn

        runner = config.runner
        codebuild_project = aws.codebuild.Project(
            f"{name}-runner",
            name=project,
            description=f"GitHub Actions runner for pulumi up of {cluster} (docs/deployer.md)",
            service_role=role.arn,
            # The longest job it may run: the served stack's whole `pulumi up` (5 to 2160 minutes).
            build_timeout=runner.buildTimeoutMinutes,
            artifacts={"type": "NO_ARTIFACTS"},
            environment={"type": "LINUX_CONTAINER", "compute_type": runner.computeType, "image": runner.image},
            source={
                "type": "GITHUB",
                "location": f"https://github.com/{runner.repository}.git",
                # AWS leaves a new connection PENDING until a person approves it in the console;
                # its ARN comes from the stack file (docs/deployer.md, step 1).
                "auth": {"type": "CODECONNECTIONS", "resource": runner.connectionArn},
            },
            # In the private subnets: the runner reaches the served cluster's private endpoint, and
            # leaves the VPC through NAT.
            vpc_config={
                "vpc_id": vpc.network.vpc_id,
                "subnets": self.private_subnet_ids,
                "security_group_ids": [group.id],
            },
            region=region,
            tags={network.DEPLOYER_TAG: cluster},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*ready, *vpc.network.egress_ready]),
        )
        aws.codebuild.Webhook(
            f"{name}-runner",
            project_name=codebuild_project.name,
            build_type="BUILD",
            filter_groups=[{"filters": [{"type": "EVENT", "pattern": WORKFLOW_JOB_QUEUED}]}],
            region=region,
            opts=child,
        )
        self.project_name = project
        self.runs_on = runs_on_label(project)
        self.register_outputs({"projectName": project, "securityGroupId": group.id})


def build_deployer_stack(config: DeployerStackConfig) -> CodeBuildRunner:
    """The deployer stack's resources and exports (what the served stack and its workflow use)."""
    runner = CodeBuildRunner("deployer", config)
    pulumi.export("servesCluster", config.servesCluster)
    pulumi.export("runnerLabel", runner.runs_on)
    pulumi.export("codebuildProject", runner.project_name)
    pulumi.export("buildTimeoutMinutes", config.runner.buildTimeoutMinutes)
    pulumi.export("runnerSecurityGroupId", runner.security_group_id)
    pulumi.export("runnerRoleArn", runner.role_arn)
    pulumi.export("vpcId", runner.vpc_id)
    pulumi.export("privateSubnetIds", runner.private_subnet_ids)
    pulumi.export("publicSubnetIds", runner.public_subnet_ids)
    return runner
