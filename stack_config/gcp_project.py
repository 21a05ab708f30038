"""A GKE stack needs a GCP project, and the plan says which key sets it before anything is created.

Without `cluster.gcpProject` the program asks the provider for its default project
(`gcp.organizations.get_client_config`), which is `gcp:project` or, failing that, the first of the
environment variables GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT, GCLOUD_PROJECT, CLOUDSDK_CORE_PROJECT
(Pulumi's Google Cloud provider, "Installation & Configuration",
https://www.pulumi.com/registry/packages/gcp/installation-configuration/). With none of them the
first GCP call fails deep inside `pulumi up`, and the offline plan would invent one; refusing at plan
time names the key to set instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from stack_config.cluster import Cloud
from stack_config.stack import StackConfig

PROVIDER_PROJECT_KEY = "gcp:project"
PROJECT_ENV_VARS = ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")


def gcp_project_problems(
    stack_config: StackConfig, values: Mapping[str, str], environ: Mapping[str, str], source: str, stack: str
) -> list[str]:
    """One line naming the key to set when a GKE stack has no project from any of the places above."""
    if stack_config.cloud != Cloud.gcp or stack_config.cluster.gcpProject:
        return []
    if values.get(PROVIDER_PROJECT_KEY) or any(environ.get(name) for name in PROJECT_ENV_VARS):
        return []
    problem = (
        f"{source}: {PROVIDER_PROJECT_KEY}: a GKE stack needs the GCP project to deploy into, and none is set; "
        f"run `pulumi config set {PROVIDER_PROJECT_KEY} <project-id> -s {stack}` (or set cluster.gcpProject, or "
        f"{PROJECT_ENV_VARS[0]} in the environment)"
    )
    return [problem]
