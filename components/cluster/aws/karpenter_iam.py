"""IAM policy documents of the Karpenter controller, as the v1.14 docs give them.

Transcribed statement by statement from Karpenter's getting-started CloudFormation template for
v1.14 (aws/karpenter-provider-aws@1d927085dd81,
website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml: the
six managed policies NodeLifecycle :30, IAMIntegration :173, EKSIntegration :258, Interruption
:277, ZonalShift :300, ResourceDiscovery :324; the queue policy :389). Each document is a plain
dict whose values may be `pulumi.Output`s, serialised with `Output.json_dumps`, so the tests
evaluate exactly what is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

VERSION = "2012-10-17"


@dataclass(frozen=True)
class Scope:
    """What the policies are scoped to: this cluster in this account and region."""

    cluster: str
    region: str
    account: str
    partition: str = "aws"

    def ec2(self, resource: str, account: bool = True) -> str:
        return f"arn:{self.partition}:ec2:{self.region}:{'*' if account else ''}:{resource}"

    @property
    def instance_profiles(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:instance-profile/*"

    @property
    def cluster_arn(self) -> str:
        return f"arn:{self.partition}:eks:{self.region}:{self.account}:cluster/{self.cluster}"


def _launch_resources(scope: Scope) -> list[str]:
    return [
        scope.ec2(f"{kind}/*")
        for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    ]


def node_lifecycle_policy(scope: Scope) -> dict[str, Any]:
    """Launch, tag and terminate instances and launch templates of this cluster's NodePools."""
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{scope.cluster}": "owned"}
    requested = {
        f"aws:RequestTag/kubernetes.io/cluster/{scope.cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": scope.cluster,
    }
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Resource": [
                    scope.ec2("image/*", account=False),
                    scope.ec2("snapshot/*", account=False),
                    scope.ec2("security-group/*"),
                    scope.ec2("subnet/*"),
                    scope.ec2("capacity-reservation/*"),
                    scope.ec2("placement-group/*"),
                ],
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Resource": scope.ec2("launch-template/*"),
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Resource": _launch_resources(scope),
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Condition": {"StringEquals": requested, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Resource": _launch_resources(scope),
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {
                        **requested,
                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Resource": scope.ec2("instance/*"),
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": owned,
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": scope.cluster},
                    "ForAllValues:StringEquals": {
                        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                    },
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Resource": [scope.ec2("instance/*"), scope.ec2("launch-template/*")],
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
            },
        ],
    }


def iam_integration_policy(scope: Scope, node_role_arn: pulumi.Input[str]) -> dict[str, Any]:
    """Pass the node role to EC2, and manage the instance profiles Karpenter makes from it."""
    owned_here = {
        f"aws:ResourceTag/kubernetes.io/cluster/{scope.cluster}": "owned",
        "aws:ResourceTag/topology.kubernetes.io/region": scope.region,
    }
    requested = {
        f"aws:RequestTag/kubernetes.io/cluster/{scope.cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": scope.cluster,
        "aws:RequestTag/topology.kubernetes.io/region": scope.region,
    }
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Resource": node_role_arn,
                "Action": "iam:PassRole",
                "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
            },
            {
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Resource": scope.instance_profiles,
                "Action": ["iam:CreateInstanceProfile"],
                "Condition": {
                    "StringEquals": requested,
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Resource": scope.instance_profiles,
                "Action": ["iam:TagInstanceProfile"],
                "Condition": {
                    "StringEquals": {**owned_here, **requested},
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Resource": scope.instance_profiles,
                "Action": [
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ],
                "Condition": {
                    "StringEquals": owned_here,
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
        ],
    }


def eks_integration_policy(scope: Scope) -> dict[str, Any]:
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Resource": scope.cluster_arn,
                "Action": "eks:DescribeCluster",
            },
        ],
    }


def interruption_policy(queue_arn: pulumi.Input[str]) -> dict[str, Any]:
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Resource": queue_arn,
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            },
        ],
    }


def zonal_shift_policy(scope: Scope) -> dict[str, Any]:
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowZonalShiftStatusReadOnly",
                "Effect": "Allow",
                "Resource": "*",
                "Action": ["arc-zonal-shift:GetManagedResource"],
                "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": scope.cluster_arn}},
            },
        ],
    }


def resource_discovery_policy(scope: Scope) -> dict[str, Any]:
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": [
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Condition": {"StringEquals": {"aws:RequestedRegion": scope.region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Resource": f"arn:{scope.partition}:ssm:{scope.region}::parameter/aws/service/*",
                "Action": "ssm:GetParameter",
            },
            {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
            {
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Resource": "*",
                "Action": "iam:ListInstanceProfiles",
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Resource": scope.instance_profiles,
                "Action": "iam:GetInstanceProfile",
            },
        ],
    }


def controller_policies(
    scope: Scope, node_role_arn: pulumi.Input[str], queue_arn: pulumi.Input[str]
) -> dict[str, dict]:
    """The six documents by short name (one inline role policy each)."""
    return {
        "node-lifecycle": node_lifecycle_policy(scope),
        "iam-integration": iam_integration_policy(scope, node_role_arn),
        "eks-integration": eks_integration_policy(scope),
        "interruption": interruption_policy(queue_arn),
        "zonal-shift": zonal_shift_policy(scope),
        "resource-discovery": resource_discovery_policy(scope),
    }


def interruption_queue_policy(queue_arn: pulumi.Input[str]) -> dict[str, Any]:
    """EventBridge (and SQS itself) may send to the queue; nothing may reach it without TLS."""
    return {
        "Version": VERSION,
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                "Principal": "*",
            },
        ],
    }


# The EventBridge rules that feed the interruption queue (cloudformation.yaml :405-463):
# (short name, source, detail-type).
INTERRUPTION_EVENTS = (
    ("scheduled-change", "aws.health", "AWS Health Event"),
    ("spot-interruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("instance-state-change", "aws.ec2", "EC2 Instance State-change Notification"),
    ("capacity-reservation-interruption", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
)
