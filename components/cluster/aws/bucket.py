"""The S3 model bucket and the two EKS Pod Identity roles that may touch it.

Identity choice: EKS Pod Identity, not IRSA. Pod Identity needs no per-cluster OIDC provider in
IAM, its trust policy names one fixed service principal (so the same role pattern works on a
created and an existing cluster), and the ServiceAccount carries no annotation: the association
(cluster, namespace, ServiceAccount) -> role lives in the EKS API, made here. It needs the
`eks-pod-identity-agent` add-on on the cluster (installed by `EksCluster` on a cluster it creates).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster.aws import policies
from components.cluster.common import retains_bucket
from components.cluster.interface import ModelBucket, ServiceAccountBinding


@dataclass(frozen=True)
class S3ModelBucketArgs:
    # Logical name; the real bucket name is this plus a random suffix unless `bucket_name` is set.
    resource_name: str
    prefix: str
    namespace: str
    writer_service_account: str
    reader_service_account: str
    cluster_name: pulumi.Input[str]
    region: str
    bucket_name: str | None = None
    # modelStore.onDestroy: retain (kept out of `pulumi destroy`) or empty (force_destroy).
    on_destroy: str = "retain"


class S3ModelBucket(pulumi.ComponentResource):
    """Private, encrypted, versioned bucket; a writer identity and a reader identity, prefix-scoped."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    writer_role_arn: pulumi.Output[str]
    reader_role_arn: pulumi.Output[str]
    model_bucket: ModelBucket

    def __init__(self, name: str, args: S3ModelBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:ModelBucket", name, None, opts)
        region = args.region
        # modelStore.onDestroy (docs/lifecycle.md). retain: the bucket and the settings that keep it
        # private, encrypted and versioned stay as they are after `pulumi destroy` (a retained
        # bucket without its public access block or TLS-only policy would be weaker than the one
        # `up` made). empty: `force_destroy` makes the provider delete every object version and
        # delete marker before the bucket (hashicorp/terraform-provider-aws internal/service/s3,
        # EmptyBucket: "deleting all object versions and delete markers"; the pulumi-aws Bucket
        # docs: "all objects (including any locked objects) should be deleted from the bucket when
        # the bucket is destroyed"). S3 refuses to delete a bucket that is not empty, so without
        # one of the two `pulumi destroy` fails on a filled bucket.
        retain = retains_bucket(args.on_destroy)
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=retain)
        bucket = aws.s3.Bucket(
            args.resource_name,
            bucket=args.bucket_name,
            region=region,
            tags={"llm-serving/purpose": "model-weights"},
            force_destroy=not retain,
            opts=child,
        )
        # S3's bucket id is its name; `bucket.id` is known as soon as the bucket exists.
        name_out = bucket.id
        arn = bucket.arn

        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=name_out,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            region=region,
            opts=child,
        )
        # ACLs off: every object belongs to the bucket owner whichever role uploaded it.
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=name_out,
            rule={"object_ownership": "BucketOwnerEnforced"},
            region=region,
            opts=child,
        )
        # SSE-S3 (AES256): the weights are public Hub artefacts, and SSE-KMS would put a KMS
        # request on the path of every parallel ranged read the servers make at start-up.
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=name_out,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
            region=region,
            opts=child,
        )
        # Versioning keeps any overwrite of a mirrored revision recoverable.
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=name_out,
            versioning_configuration={"status": "Enabled"},
            region=region,
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=name_out,
            policy=pulumi.Output.json_dumps(policies.tls_only_bucket_policy(arn)),
            region=region,
            # A bucket policy put while the public access block is being written can be refused.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block], retain_on_delete=retain),
        )

        writer_role = self._pod_role(
            f"{name}-writer",
            args,
            args.writer_service_account,
            policies.writer_policy(arn, args.prefix),
            "writes model weights under the models prefix",
        )
        reader_role = self._pod_role(
            f"{name}-reader",
            args,
            args.reader_service_account,
            policies.reader_policy(arn, args.prefix),
            "reads model weights under the models prefix",
        )

        self.bucket_name = name_out
        self.bucket_arn = arn
        self.writer_role_arn = writer_role.arn
        self.reader_role_arn = reader_role.arn
        # Pod Identity: the association above does the binding, so the ServiceAccounts need no
        # annotation.
        self.model_bucket = ModelBucket(
            scheme="s3",
            name=name_out,
            prefix=args.prefix,
            writer=ServiceAccountBinding(args.namespace, args.writer_service_account, {}),
            reader=ServiceAccountBinding(args.namespace, args.reader_service_account, {}),
            region=region,
        )
        self.register_outputs(
            {
                "bucketName": self.bucket_name,
                "bucketArn": self.bucket_arn,
                "writerRoleArn": self.writer_role_arn,
                "readerRoleArn": self.reader_role_arn,
            }
        )

    def _pod_role(
        self, name: str, args: S3ModelBucketArgs, service_account: str, policy: dict, what: str
    ) -> aws.iam.Role:
        # The identities go with the stack whatever happens to the bucket.
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=False)
        role = aws.iam.Role(
            name,
            description=f"{args.namespace}/{service_account} {what}",
            assume_role_policy=pulumi.Output.json_dumps(
                policies.pod_identity_trust_policy(args.cluster_name, args.namespace, service_account)
            ),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-s3",
            role=role.name,
            policy=pulumi.Output.json_dumps(policy),
            opts=child,
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args.cluster_name,
            namespace=args.namespace,
            service_account=service_account,
            role_arn=role.arn,
            region=args.region,
            opts=child,
        )
        return role
