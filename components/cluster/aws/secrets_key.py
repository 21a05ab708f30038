"""EKS envelope encryption of Kubernetes Secrets: the KMS key (created here, or the user's own), the
key policy, and the cluster role's right to use it.

EKS encrypts each Secret's data key with this KMS key before it reaches etcd, so a copy of etcd (a
backup, a snapshot) does not hold the HF token or the API key in a form anyone can read without
the key ("Encrypt Kubernetes secrets with KMS on existing clusters", Amazon EKS User Guide). Once a
cluster has an encryption configuration it cannot be removed or its key changed (same page:
"after you enable secrets encryption on your cluster, you can't disable it"; EKS API
AssociateEncryptionConfig has no inverse); tests/support/first_apply_cloud.py guards that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.cluster.aws.policies import VERSION

# The one resource kind EKS envelope-encrypts (pulumi_aws eks ClusterEncryptionConfigArgs.resources:
# "Valid values: `secrets`").
ENCRYPTED_RESOURCES = ["secrets"]
# What the cluster's role does with the key: encrypt and decrypt data keys, and read the key's
# metadata and grants (the actions terraform-aws-modules/terraform-aws-eks grants its cluster role for
# encryption, its `cluster_encryption` policy in modules/cluster/main.tf; unverified at a pinned tag:
# settle by reading that file at the module's current release, and if EKS reports "not authorized to
# perform kms:..." at creation, add that action here).
CLUSTER_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"]


def key_policy(account_id: str, partition: str) -> dict[str, Any]:
    """The account administers the key and may delegate its use through IAM: KMS's default key
    policy ("Default key policy", AWS KMS Developer Guide: "Allows access to the AWS account and
    enables IAM policies"). Without it a key can become unmanageable (no principal may change it)."""
    return {
        "Version": VERSION,
        "Statement": [
            {
                "Sid": "AccountAdministersTheKey",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }


def cluster_role_policy(key_arn: pulumi.Input[str]) -> dict[str, Any]:
    return {"Version": VERSION, "Statement": [{"Effect": "Allow", "Action": CLUSTER_KEY_ACTIONS, "Resource": key_arn}]}


@dataclass
class SecretsKey:
    key_arn: pulumi.Input[str]
    # What the cluster waits for: the role's permission to use the key.
    ready: list[pulumi.Resource]


def secrets_key(
    name: str,
    cluster_name: str,
    region: str,
    role: aws.iam.Role,
    existing_key_arn: str | None,
    tags: dict[str, str],
    parent: pulumi.Resource,
) -> SecretsKey:
    """The key a created cluster encrypts Secrets with, and the cluster role's grant on it."""
    child = pulumi.ResourceOptions(parent=parent)
    if existing_key_arn is not None:
        key_arn: pulumi.Input[str] = existing_key_arn
    else:
        invoke = pulumi.InvokeOptions(parent=parent)
        account = aws.get_caller_identity(opts=invoke).account_id
        partition = aws.get_partition(opts=invoke).partition
        key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes Secrets in EKS cluster {cluster_name}",
            # Symmetric encryption keys only (EKS encryptionConfig.provider.keyArn).
            key_usage="ENCRYPT_DECRYPT",
            customer_master_key_spec="SYMMETRIC_DEFAULT",
            # Yearly automatic rotation: new key material, old material kept to decrypt.
            enable_key_rotation=True,
            # 30 days (the most KMS allows) to cancel an accidental deletion before every Secret
            # of the cluster becomes unreadable.
            deletion_window_in_days=30,
            policy=pulumi.Output.json_dumps(key_policy(account, partition)),
            region=region,
            tags=tags,
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-secrets", name=f"alias/{cluster_name}-secrets", target_key_id=key.key_id, region=region, opts=child
        )
        key_arn = key.arn
    grant = aws.iam.RolePolicy(
        f"{name}-cluster-secrets-key",
        role=role.name,
        policy=pulumi.Output.json_dumps(cluster_role_policy(key_arn)),
        opts=child,
    )
    return SecretsKey(key_arn=key_arn, ready=[grant])
