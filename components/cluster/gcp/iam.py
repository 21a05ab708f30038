"""GCS IAM for the model bucket: which predefined roles each identity gets, and the condition that
keeps them inside the models prefix. Pure functions, so tests evaluate the exact expressions.
"""

from __future__ import annotations

# The mirror Job: create objects (incl. resumable/multipart uploads) and read/list what it wrote.
# objectCreator + objectViewer rather than objectUser: no delete and no overwrite, so a mirrored
# revision is immutable once written. GCS uploads are atomic (an object appears only when its
# upload completes), so a failed upload leaves nothing to overwrite; the mirror skips objects
# that already exist.
WRITER_ROLES = ("roles/storage.objectCreator", "roles/storage.objectViewer")
# The servers: get and list, nothing else.
READER_ROLES = ("roles/storage.objectViewer",)

WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
# Lets GKE nodes write logs and metrics and nothing more (instead of the Compute default SA,
# which holds Editor on the project in many organisations).
NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)


def prefix_condition_expression(bucket: str, prefix: str) -> str:
    """CEL that admits object requests under `<prefix>/` and listings of that prefix only.

    Object permissions are checked against `projects/_/buckets/<b>/objects/<name>`; the list
    permission is checked against the bucket itself, with the requested prefix exposed as the
    `storage.googleapis.com/objectListPrefix` attribute (Cloud Storage IAM conditions docs).
    """
    objects = f"projects/_/buckets/{bucket}/objects/{prefix}/"
    return (
        f'resource.name.startsWith("{objects}") || '
        f'(resource.type == "storage.googleapis.com/Bucket" && '
        f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}/"))'
    )


def workload_identity_member(project: str, namespace: str, service_account: str) -> str:
    """The Kubernetes ServiceAccount as a principal of the project's workload identity pool."""
    return f"serviceAccount:{project}.svc.id.goog[{namespace}/{service_account}]"


def account_id(base: str, suffix: str) -> str:
    """A GCP service account id (6-30 characters, lower-case, starts with a letter, no trailing '-')."""
    room = 30 - len(suffix) - 1
    return f"{base[:room].rstrip('-')}-{suffix}"
