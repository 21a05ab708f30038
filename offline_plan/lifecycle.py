"""plan.md's "What destroy removes and retains": the order `pulumi destroy` takes through the parts
the clusters' controllers act on, what it keeps on purpose, and what may remain.

Pulumi deletes a resource only after everything that depends on it (the reverse of the order it
creates them in: https://www.pulumi.com/docs/iac/concepts/how-pulumi-works/), so the step of a
resource below is the length of the longest chain of recorded dependents in front of it: step 1
goes first, and everything of one step may go in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from offline_plan.mock_runtime import Evaluation, RecordedResource


@dataclass(frozen=True)
class Retained:
    """A resource type `pulumi destroy` leaves in the cloud on purpose, and how to remove it."""

    what: str
    commands: tuple[str, ...]
    source: str


# Every type a stack may mark retainOnDelete; tests/support/rules_lifecycle.py refuses a retained
# resource whose type is missing here. `{bucket}` and `{region}` are filled from the resource.
RETAINED: dict[str, Retained] = {
    "aws:s3/bucket:Bucket": Retained(
        "the model bucket and its weights (versioned: every overwritten object is kept as a noncurrent version)",
        (
            # Deletes every object version and delete marker (boto3's batch action on the bucket's
            # object_versions collection), then the empty bucket.
            "python -c \"import boto3; boto3.resource('s3').Bucket('{bucket}').object_versions.delete()\"",
            "aws s3api delete-bucket --bucket {bucket} --region {region}",
        ),
        "A versioned bucket is empty only once every object version and delete marker is deleted "
        "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/empty-bucket.html); "
        "boto3 Bucket.object_versions.delete() "
        "(https://boto3.amazonaws.com/v1/documentation/api/latest/reference/services/s3/bucket/object_versions.html)",
    ),
    "gcp:storage/bucket:Bucket": Retained(
        "the model bucket and its weights (versioned: noncurrent versions are kept)",
        ("gcloud storage rm --recursive gs://{bucket}",),
        '`gcloud storage rm --recursive gs://my-bucket/` "deletes all versions of all resources in my-bucket '
        'and then deletes the bucket" (https://cloud.google.com/sdk/gcloud/reference/storage/rm)',
    ),
}

# Bucket names the cloud layer leaves to Pulumi's auto-naming: `<resource name>-<random suffix>`.
_LOOKUP = {
    "aws:s3/bucket:Bucket": "aws s3api list-buckets --query \"Buckets[?starts_with(Name, '{name}-')].Name\"",
    "gcp:storage/bucket:Bucket": "gcloud storage buckets list --filter='name~^{name}-' --format='value(name)'",
}

# Controller-managed objects and what their controller makes in the cloud.
_CONTROLLED = {
    ("karpenter.sh", "NodePool"): "Karpenter terminates the EC2 instances it launched for this pool",
    ("karpenter.k8s.aws", "EC2NodeClass"): "Karpenter deletes the launch templates and instance profile it made",
    ("gateway.networking.k8s.io", "Gateway"): "the Gateway controller deletes the cloud load balancer",
    ("", "PersistentVolumeClaim"): "the CSI driver deletes the volume behind the claim (reclaimPolicy Delete)",
}
_INFRASTRUCTURE = {
    "kubernetes:helm.sh/v3:Release": "Helm release",
    "aws:eks/addon:Addon": "EKS add-on",
    "kubernetes:storage.k8s.io/v1:StorageClass": "StorageClass",
    "aws:efs/fileSystem:FileSystem": "EFS file system",
    "aws:eks/nodeGroup:NodeGroup": "node group",
    "gcp:container/nodePool:NodePool": "node pool",
    "aws:eks/cluster:Cluster": "cluster",
    "gcp:container/cluster:Cluster": "cluster",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/vpc:Vpc": "VPC",
    "gcp:compute/subnetwork:Subnetwork": "subnetwork",
    "gcp:compute/network:Network": "network",
}
# Release charts whose controllers act on the objects above.
_CONTROLLER_CHARTS = ("karpenter", "agentgateway")


def _group_kind(r: RecordedResource) -> tuple[str, str]:
    api = str(r.inputs.get("apiVersion", ""))
    return (api.split("/", 1)[0] if "/" in api else "", str(r.inputs.get("kind", "")))


def destroy_steps(evaluation: Evaluation) -> dict[str, int]:
    """URN -> the step of `pulumi destroy` it is deleted in (1 = first)."""
    by_urn = {r.urn: r for r in evaluation.resources if r.urn}
    dependents: dict[str, set[str]] = {u: set() for u in by_urn}
    for r in by_urn.values():
        before = set(r.dependencies) | ({r.parent_urn} if r.parent_urn else set())
        if r.provider:
            before.add(r.provider.rsplit("::", 1)[0])
        for u in before:
            if u in dependents and u != r.urn:
                dependents[u].add(r.urn)

    @cache
    def step(urn: str) -> int:
        return 1 + max((step(d) for d in dependents[urn]), default=0)

    return {u: step(u) for u in by_urn}


def _label(r: RecordedResource) -> tuple[str, str] | None:
    """(what is deleted, what its controller does then) for the rows of the destroy table."""
    gk = _group_kind(r)
    if r.is_kubernetes_object and gk in _CONTROLLED:
        return f"{gk[1]} `{r.name}`", _CONTROLLED[gk]
    if r.type == "kubernetes:helm.sh/v3:Release":
        chart = str(r.inputs.get("chart", "")).rstrip("/").rsplit("/", 1)[-1]
        return (f"Helm release `{r.name}`", f"the {chart} controller stops") if chart in _CONTROLLER_CHARTS else None
    if r.type in _INFRASTRUCTURE and r.read_id is None:
        return f"{_INFRASTRUCTURE[r.type]} `{r.name}`", ""
    return None


def _bucket_name(r: RecordedResource) -> str:
    return str(r.inputs.get("bucket") or r.inputs.get("name") or "") if r.type.startswith("aws:") else ""


def destroy_section(evaluation: Evaluation) -> list[str]:
    steps = destroy_steps(evaluation)
    out = [
        "## What destroy removes and retains",
        "",
        (
            "`pulumi destroy` deletes everything below in the reverse of the order `up` created it; a resource goes "
            "only once everything that depends on it is gone, so each controller still runs while it cleans up what "
            "it made in the cloud (tests/support/rules_lifecycle.py holds this order). Step 1 goes first; one step's "
            "resources go in parallel. Controller-managed parts and the infrastructure under them:"
        ),
        "",
        "| step | deleted | what its controller does |",
        "|---|---|---|",
    ]
    rows = sorted((steps[r.urn], *label) for r in evaluation.resources if r.urn in steps and (label := _label(r)))
    out += [f"| {step} | {what} | {then} |" for step, what, then in rows]
    out += ["", "### Retained on purpose", ""]
    # Sorted: resources are recorded in the order the SDK's threads register them, which varies.
    retained = sorted(
        (r for r in evaluation.resources if r.retain_on_delete and r.type in RETAINED), key=lambda r: (r.type, r.name)
    )
    if not retained:
        out.append("Nothing: `modelStore.onDestroy: empty` deletes every object version and the bucket itself.")
    for r in retained:
        info = RETAINED[r.type]
        region = str(r.inputs.get("region") or r.inputs.get("location") or "<region>").lower()
        name = _bucket_name(r) or str(r.inputs.get("name") or "")
        out.append(f"- `{r.type}` `{r.name}`: {info.what} (modelStore.onDestroy: retain, the default).")
        if not name:
            out.append(f"  Its name has a random suffix; find it with `{_LOOKUP[r.type].format(name=r.name)}`.")
        out.append("  To remove it after `pulumi destroy`:")
        out.append("")
        out.append("  ```sh")
        out += [f"  {c.format(bucket=name or '<bucket>', region=region)}" for c in info.commands]
        out.append("  ```")
        out.append(f"  Source: {info.source}.")
        other = [c for c in evaluation.resources if c.retain_on_delete and c.type not in RETAINED]
        kept = sorted({c.type.rsplit(":", 1)[-1] for c in other if c.parent_urn == r.parent_urn})
        if kept:
            out.append(
                "  Retained with it, so the bucket stays as private as `up` made it: "
                + ", ".join(f"`{kind}`" for kind in kept)
                + " (removed with the bucket)."
            )
    out += ["", "### What may remain, and why", ""]
    out += [f"- {line}" for line in remaining(evaluation)]
    return [*out, ""]


def remaining(evaluation: Evaluation) -> list[str]:
    """Leftovers the program cannot prevent, for the types the stack has."""
    types = {r.type for r in evaluation.resources if r.read_id is None}
    pvcs = [
        r for r in evaluation.resources if r.is_kubernetes_object and r.inputs.get("kind") == "PersistentVolumeClaim"
    ]
    out = []
    if pvcs and "gcp:container/cluster:Cluster" in types:
        out.append(
            "Filestore instances behind the model volumes: the Filestore CSI driver deletes an instance after its "
            "claim is gone, asynchronously; Pulumi waits for the claim, not the instance. After destroy, "
            "`gcloud filestore instances list` and `gcloud filestore instances delete NAME --location ZONE` for any "
            "left (docs/lifecycle.md)."
        )
    if pvcs and "aws:efs/fileSystem:FileSystem" in types:
        out.append(
            "EFS access points behind the model volumes are deleted by the EFS CSI driver after their claims, "
            "asynchronously; the file system is deleted by Pulumi after the driver add-on. Whether AWS deletes a file "
            "system that still has access points is unresolved: `aws efs describe-access-points --file-system-id "
            "fs-...` after destroy settles it."
        )
    if "aws:kms/key:Key" in types:
        out.append(
            "The KMS key that encrypts Secrets is scheduled for deletion, not deleted: AWS keeps it for its "
            "deletion window (7-30 days, https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html)."
        )
    if "gcp:kms/cryptoKey:CryptoKey" in types or "gcp:kms/keyRing:KeyRing" in types:
        out.append(
            "Cloud KMS key rings and keys cannot be deleted: destroy removes them from the stack and destroys the "
            "key versions (https://cloud.google.com/kms/docs/destroy-restore); the empty ring stays, at no cost."
        )
    if "gcp:projects/service:Service" in types:
        out.append(
            "The GCP APIs the stack enabled stay enabled (disableOnDestroy: false), so destroying one stack never "
            "breaks another in the same project."
        )
    if not out:
        out.append("Nothing known beyond what is retained above.")
    return out
