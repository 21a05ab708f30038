"""The Google APIs the GKE layer uses, enabled before the resources that need them.

In a fresh project every API but a few is off, and a resource whose API is off fails with 403
"... API has not been used in project ... or it is disabled". Each API is a
`gcp.projects.Service` with `disable_on_destroy=False` (pulumi_gcp/projects/service.py: "should
generally only be true in configurations that manage the organizations.Project resource itself"):
`pulumi destroy` must not switch off an API other workloads of the project use.

Two APIs cannot be switched on this way, because enabling a service goes through them: the
Service Usage API and the Cloud Resource Manager API (which also serves the project IAM members
of the node service account). They are a one-time `gcloud services enable` (README, "Running it
for real"; hashicorp/terraform-provider-google#11435).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

CONTAINER = "container.googleapis.com"
COMPUTE = "compute.googleapis.com"
IAM = "iam.googleapis.com"
# Minting a service account's access token (Workload Identity pods acting as the bucket's GSAs).
IAM_CREDENTIALS = "iamcredentials.googleapis.com"
STORAGE = "storage.googleapis.com"
# Filestore: the Filestore CSI driver's `standard-rwx` volumes ("Enable the Cloud Filestore API and
# the Google Kubernetes Engine API", https://cloud.google.com/filestore/docs/accessing-fileshares).
FILESTORE = "file.googleapis.com"
# Image streaming on COS node pools (GKE docs, "Use Image streaming to pull container images").
CONTAINER_FILESYSTEM = "containerfilesystem.googleapis.com"
# Artifact Registry, for the pull-through cache of images.pullThrough (components/cluster/gcp/registry_cache.py).
ARTIFACT_REGISTRY = "artifactregistry.googleapis.com"

# Certificate Manager: the entrance's Google-managed certificate on GKE (tls.certificate google-managed;
# components/entrance/google_cert.py; REST service of the Certificate Manager API,
# https://cloud.google.com/certificate-manager/docs/reference/certificate-manager/rest).
CERTIFICATE_MANAGER = "certificatemanager.googleapis.com"

# Cloud KMS: the key that encrypts Kubernetes Secrets (security.secretsEncryption;
# components/cluster/gcp/secrets_key.py).
CLOUD_KMS = "cloudkms.googleapis.com"

# Network Services: GKE Inference Gateway (InferencePool backends of a GKE Gateway) ("Enable the
# Compute Engine API, the Network Services API, and the Model Armor API if needed", GKE docs,
# "Deploy GKE Inference Gateway", https://cloud.google.com/kubernetes-engine/docs/how-to/deploy-gke-inference-gateway;
# Model Armor only serves its AI-safety integration, which this program does not configure).
NETWORK_SERVICES = "networkservices.googleapis.com"

# What GKE's own controllers call for the Kubernetes objects this program creates, by the kind (and
# class) of the object: the program's resources wait for the cluster, the cluster layer waits for
# these. A new kind extends this table (e.g. a Certificate Manager map for the entrance's TLS:
# certificatemanager.googleapis.com).
GATEWAY_GKE = "Gateway (gke-l7-* GatewayClass)"
INFERENCE_POOL_GKE = "InferencePool (GKE Gateway controller)"
FILESTORE_CLAIM = "PersistentVolumeClaim (filestore.csi.storage.gke.io)"
CONTROLLER_APIS: dict[str, tuple[str, ...]] = {
    # The GKE Gateway controller programs a Compute Engine load balancer for each Gateway.
    GATEWAY_GKE: (COMPUTE,),
    INFERENCE_POOL_GKE: (COMPUTE, NETWORK_SERVICES),
    # The Filestore CSI driver creates a Filestore instance per claim.
    FILESTORE_CLAIM: (FILESTORE,),
}


def controller_apis(kinds: list[str]) -> list[str]:
    """The APIs the managed controllers of `kinds` call, in the table's order, each once."""
    out: list[str] = []
    for kind in kinds:
        out += [api for api in CONTROLLER_APIS[kind] if api not in out]
    return out


# Needed before this program can enable anything; enabled by hand once per project.
BOOTSTRAP_APIS = ("serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com")
BOOTSTRAP_COMMAND = f"gcloud services enable {' '.join(BOOTSTRAP_APIS)} --project <project>"


def needed_apis(filestore: bool, image_streaming: bool, image_cache: bool = False, kms: bool = False) -> list[str]:
    apis = [CONTAINER, COMPUTE, IAM, IAM_CREDENTIALS, STORAGE]
    if image_cache:
        apis.append(ARTIFACT_REGISTRY)
    if kms:
        apis.append(CLOUD_KMS)
    if filestore:
        apis.append(FILESTORE)
    if image_streaming:
        apis.append(CONTAINER_FILESYSTEM)
    return apis


@dataclass(frozen=True)
class ProjectApisArgs:
    project: pulumi.Input[str]
    apis: list[str]


class ProjectApis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API; `needs(...)` is what a resource depends on."""

    def __init__(self, name: str, args: ProjectApisArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:ProjectApis", name, None, opts)
        self.services: dict[str, gcp.projects.Service] = {
            api: gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                service=api,
                project=args.project,
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in args.apis
        }
        self.register_outputs({"apis": list(self.services)})

    def needs(self, *apis: str) -> list[pulumi.Resource]:
        """The Service resources of `apis` that this stack enables (the others are its owner's)."""
        return [self.services[api] for api in apis if api in self.services]
