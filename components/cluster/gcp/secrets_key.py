"""GKE application-layer secrets encryption: the Cloud KMS key (created here, or the user's own) and
the GKE service agent's right to use it, granted before the cluster exists.

GKE encrypts each Secret with a data key that this Cloud KMS key wraps, so etcd never holds a
Secret readable without the key. The cluster's creation fails unless the project's GKE service
agent, service-<project number>@container-engine-robot.iam.gserviceaccount.com, already holds
roles/cloudkms.cryptoKeyEncrypterDecrypter on the key, and the key ring must be in the cluster's
location ("Encrypt secrets at the application layer", GKE docs, "Grant permission to use the key"
and "Requirements", https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets;
confirm on a cluster with `gcloud container clusters describe <name> --region <r>
--format='value(databaseEncryption)'` after the first apply).

Cloud KMS never deletes a key ring or a key (a destroy only schedules the key's versions for
destruction), so the names here must not be reused by another stack of the same project and region.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

ENCRYPTER_DECRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
# 90 days: a new key version for new Secrets; old versions stay to decrypt older ones.
ROTATION_PERIOD = "7776000s"


def gke_service_agent(project_number: str) -> str:
    return f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


@dataclass
class SecretsKey:
    key_name: pulumi.Input[str]
    # What the cluster waits for: the service agent's role on the key.
    ready: list[pulumi.Resource]


def secrets_key(
    name: str,
    cluster_name: str,
    location: str,
    project: pulumi.Input[str],
    existing_key: str | None,
    apis_ready: list[pulumi.Resource],
    parent: pulumi.Resource,
) -> SecretsKey:
    child = pulumi.ResourceOptions(parent=parent, depends_on=apis_ready)
    if existing_key is not None:
        key_name: pulumi.Input[str] = existing_key
    else:
        ring = gcp.kms.KeyRing(
            f"{name}-secrets", name=f"{cluster_name}-secrets", location=location, project=project, opts=child
        )
        key = gcp.kms.CryptoKey(
            f"{name}-secrets",
            name="kubernetes-secrets",
            key_ring=ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=ROTATION_PERIOD,
            opts=child,
        )
        key_name = key.id
    number = gcp.organizations.get_project_output(project_id=project, opts=pulumi.InvokeOptions(parent=parent)).number
    grant = gcp.kms.CryptoKeyIAMMember(
        f"{name}-secrets-gke-agent",
        crypto_key_id=key_name,
        role=ENCRYPTER_DECRYPTER,
        member=number.apply(gke_service_agent),
        opts=child,
    )
    return SecretsKey(key_name=key_name, ready=[grant])
