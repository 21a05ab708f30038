"""The GCS model bucket and its two Workload Identity service accounts (writer, reader)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from components.cluster.common import retains_bucket
from components.cluster.gcp import iam
from components.cluster.interface import ModelBucket, ServiceAccountBinding

# The annotation GKE's metadata server reads to map a Kubernetes ServiceAccount to a GSA.
GKE_GSA_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class GcsModelBucketArgs:
    # Logical name; the real bucket name is this plus a random suffix unless `bucket_name` is set.
    resource_name: str
    prefix: str
    namespace: str
    writer_service_account: str
    reader_service_account: str
    project: pulumi.Input[str]
    location: str
    # Base of the GCP service account ids (`<base>-model-writer`), e.g. the cluster name.
    account_base: str
    bucket_name: str | None = None
    # modelStore.onDestroy: retain (kept out of `pulumi destroy`) or empty (force_destroy).
    on_destroy: str = "retain"
    # The Storage and IAM APIs' enablement: the bucket and the accounts are created after them.
    apis_ready: list[pulumi.Resource] = field(default_factory=list)
    # What creates the project's Workload Identity pool (a created WI-enabled cluster). GCP refuses a
    # binding to `<project>.svc.id.goog[ns/ksa]` before the pool exists ("Identity Pool does not
    # exist", terraform-google-modules/terraform-google-kubernetes-engine#916), and the pool exists
    # only once the first WI-enabled cluster of the project does. Empty for an existing cluster.
    identity_pool_ready: list[pulumi.Resource] = field(default_factory=list)


class GcsModelBucket(pulumi.ComponentResource):
    """Private, versioned bucket (Google encrypts every object at rest); prefix-scoped identities."""

    bucket_name: pulumi.Output[str]
    writer_email: pulumi.Output[str]
    reader_email: pulumi.Output[str]
    model_bucket: ModelBucket

    def __init__(self, name: str, args: GcsModelBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:ModelBucket", name, None, opts)
        pulumi.ResourceOptions(parent=self, depends_on=args.apis_ready)

        # modelStore.onDestroy (docs/lifecycle.md). retain: the bucket stays after `pulumi destroy`.
        # empty: `force_destroy` deletes every object first; the provider lists them with
        # noncurrent versions included (hashicorp/terraform-provider-google
        # resource_storage_bucket.go, resourceStorageBucketDelete: Objects.List(...).Versions(true)),
        # and GCS refuses to delete a bucket that still holds objects, so without one of the two
        # `pulumi destroy` fails on a filled bucket.
        retain = retains_bucket(args.on_destroy)
        bucket = gcp.storage.Bucket(
            args.resource_name,
            name=args.bucket_name,
            project=args.project,
            location=args.location,
            # IAM only, no per-object ACLs, and never public whatever a later IAM edit says.
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning={"enabled": True},
            labels={"llm-serving-purpose": "model-weights"},
            force_destroy=not retain,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis_ready, retain_on_delete=retain),
        )
        bucket_name = bucket.name
        condition_expression = bucket_name.apply(lambda b: iam.prefix_condition_expression(b, args.prefix))

        writer = self._identity(
            f"{name}-writer",
            args,
            args.writer_service_account,
            iam.WRITER_ROLES,
            bucket_name,
            condition_expression,
            "writes model weights under the models prefix",
        )
        reader = self._identity(
            f"{name}-reader",
            args,
            args.reader_service_account,
            iam.READER_ROLES,
            bucket_name,
            condition_expression,
            "reads model weights under the models prefix",
        )

        self.bucket_name = bucket_name
        self.writer_email = writer.email
        self.reader_email = reader.email
        self.model_bucket = ModelBucket(
            scheme="gs",
            name=bucket_name,
            prefix=args.prefix,
            writer=ServiceAccountBinding(
                args.namespace, args.writer_service_account, {GKE_GSA_ANNOTATION: writer.email}
            ),
            reader=ServiceAccountBinding(
                args.namespace, args.reader_service_account, {GKE_GSA_ANNOTATION: reader.email}
            ),
            region=args.location,
        )
        self.register_outputs(
            {
                "bucketName": self.bucket_name,
                "writerServiceAccount": self.writer_email,
                "readerServiceAccount": self.reader_email,
            }
        )

    def _identity(
        self, name, args: GcsModelBucketArgs, service_account: str, roles, bucket_name, condition_expression, what: str
    ) -> gcp.serviceaccount.Account:
        child = pulumi.ResourceOptions(parent=self, depends_on=args.apis_ready)
        gsa = gcp.serviceaccount.Account(
            name,
            account_id=iam.account_id(args.account_base, service_account),
            display_name=f"{args.namespace}/{service_account} {what}",
            project=args.project,
            opts=child,
        )
        # Only this Kubernetes ServiceAccount may act as the GSA.
        gcp.serviceaccount.IAMMember(
            f"{name}-workload-identity",
            service_account_id=gsa.name,
            role=iam.WORKLOAD_IDENTITY_USER,
            member=pulumi.Output.from_input(args.project).apply(
                lambda p: iam.workload_identity_member(p, args.namespace, service_account)
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.apis_ready, *args.identity_pool_ready]),
        )
        for role in roles:
            short = role.rsplit(".", 1)[-1]
            gcp.storage.BucketIAMMember(
                f"{name}-{short}",
                bucket=bucket_name,
                role=role,
                member=gsa.email.apply(lambda e: f"serviceAccount:{e}"),
                condition={
                    "title": f"models-prefix-{short}"[:100],
                    "description": f"Only objects under {args.prefix}/ and listings of that prefix",
                    "expression": condition_expression,
                },
                opts=child,
            )
        return gsa
