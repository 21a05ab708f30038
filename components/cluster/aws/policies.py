"""IAM policy documents for the EKS cluster, its GPU nodes and the model bucket's two identities.

Plain functions returning plain dicts (values may be `pulumi.Output`s), so the documents can be
serialised with `Output.json_dumps` and the tests can parse and evaluate exactly what is sent.
"""

from __future__ import annotations

from typing import Any

import pulumi

VERSION = "2012-10-17"

# AWS-managed policies a managed node group's role needs, and nothing more:
NODE_MANAGED_POLICIES = {
    # Lets the kubelet describe its instance and register the node with the cluster.
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    # The VPC CNI (aws-node) runs with the node's role unless given its own; it assigns pod IPs
    # from ENIs, which needs ec2:AssignPrivateIpAddresses and friends.
    "cni": "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    # Pulls the EKS add-on images (VPC CNI, kube-proxy, CoreDNS, Pod Identity agent) from ECR.
    "ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
}

CLUSTER_MANAGED_POLICIES = {"cluster": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"}


def service_trust_policy(service: str) -> dict[str, Any]:
    """Trust policy letting an AWS service (eks.amazonaws.com, ec2.amazonaws.com) assume a role."""
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": ["sts:AssumeRole", "sts:TagSession"] if service.startswith("eks") else ["sts:AssumeRole"],
            }
        ],
    }


def pod_identity_trust_policy(cluster_name: pulumi.Input[str], namespace: str, service_account: str) -> dict[str, Any]:
    """Trust policy for EKS Pod Identity, pinned to one cluster, namespace and ServiceAccount.

    The association already maps one ServiceAccount to the role, but any association in the
    account could name this role; the session-tag conditions make the role refuse every pod but
    the intended one (EKS Pod Identity sets these tags on each session).
    """
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        "aws:RequestTag/eks-cluster-name": cluster_name,
                        "aws:RequestTag/kubernetes-namespace": namespace,
                        "aws:RequestTag/kubernetes-service-account": service_account,
                    }
                },
            }
        ],
    }


def _list_under_prefix(bucket_arn: pulumi.Input[str], prefix: str) -> dict[str, Any]:
    # ListBucket is a bucket-level action; the s3:prefix condition keeps listings inside the
    # models prefix (a listing of the bucket root or another prefix is denied).
    return {
        "Sid": "ListModelsPrefix",
        "Effect": "Allow",
        "Action": ["s3:ListBucket"],
        "Resource": [bucket_arn],
        "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}},
    }


def writer_policy(bucket_arn: pulumi.Input[str], prefix: str) -> dict[str, Any]:
    """The mirror Job: upload (incl. multipart) and read back, only under `<prefix>/`.

    No DeleteObject: a mirrored revision is immutable, and versioning keeps any overwrite.
    """
    return {
        "Version": VERSION,
        "Statement": [
            _list_under_prefix(bucket_arn, prefix),
            {
                "Sid": "WriteModelsPrefix",
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject"],
                "Resource": [pulumi.Output.concat(bucket_arn, f"/{prefix}/*")],
            },
        ],
    }


def reader_policy(bucket_arn: pulumi.Input[str], prefix: str) -> dict[str, Any]:
    """The servers: read and list, only under `<prefix>/`."""
    return {
        "Version": VERSION,
        "Statement": [
            _list_under_prefix(bucket_arn, prefix),
            {
                "Sid": "ReadModelsPrefix",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [pulumi.Output.concat(bucket_arn, f"/{prefix}/*")],
            },
        ],
    }


def tls_only_bucket_policy(bucket_arn: pulumi.Input[str]) -> dict[str, Any]:
    """Refuse any request to the bucket that does not use TLS."""
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, pulumi.Output.concat(bucket_arn, "/*")],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }
