"""An Artifact Registry remote repository per upstream registry, and the nodes' permission to read it.

With `images.pullThrough`, every image of the program is pulled as
`<region>-docker.pkg.dev/<project>/<repository>/<upstream path>:<tag>@<digest>` (common/images.py
`mirrored`): Artifact Registry fetches it from the upstream on the first pull and serves it from the
project afterwards.

Facts this module rests on:
- A remote repository is `gcp.artifactregistry.Repository` with `mode: REMOTE_REPOSITORY`, format
  DOCKER and a `remote_repository_config`: `docker_repository.public_repository: DOCKER_HUB` for
  Docker Hub, `common_repository.uri` (a registry URI such as `https://registry-1.docker.io`) for
  another registry (pulumi_gcp artifactregistry/_inputs.py, RepositoryRemoteRepositoryConfigArgs and
  ...CommonRepositoryArgs; `docker_repository.custom_repository` is deprecated there in its favour).
- The API is artifactregistry.googleapis.com (enabled by components/cluster/gcp/apis.py).
- Nodes pull with their service account; `roles/artifactregistry.reader` on the repository lets it
  read, and reading a remote repository is what fills its cache.
Docker Hub is pulled anonymously (its rate limit then applies to the project's egress, shared by
every remote repository of the region); upstream credentials are not wired (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

_SHORT = {"docker.io": "docker-hub", "ghcr.io": "ghcr"}
READER_ROLE = "roles/artifactregistry.reader"
# Repository ids: lower-case letters, digits and hyphens, starting with a letter, at most 63.
REPOSITORY_ID_MAX = 63


def remote_config(upstream: str) -> dict:
    if upstream == "docker.io":
        return {"description": "Docker Hub", "docker_repository": {"public_repository": "DOCKER_HUB"}}
    return {"description": upstream, "common_repository": {"uri": f"https://{upstream}"}}


def repository_id(cluster_name: str, upstream: str) -> str:
    short = _SHORT[upstream]
    head = cluster_name.lower()[: REPOSITORY_ID_MAX - len(short) - 1].strip("-")
    return f"{head}-{short}"


def mirrors(cluster_name: str, upstreams: list[str], project: str, location: str) -> dict[str, str]:
    """Upstream registry -> the prefix its images are pulled through (plain strings)."""
    return {u: f"{location}-docker.pkg.dev/{project}/{repository_id(cluster_name, u)}" for u in upstreams}


@dataclass(frozen=True)
class ArtifactRegistryCacheArgs:
    cluster_name: str
    location: str
    project: str
    upstreams: list[str]
    node_service_account: pulumi.Input[str]
    """E-mail of the nodes' service account."""
    apis_ready: list[pulumi.Resource]


class ArtifactRegistryCache(pulumi.ComponentResource):
    """One remote repository per upstream; `mirrors` is what image references are rewritten to."""

    mirrors: dict[str, str]

    def __init__(self, name: str, args: ArtifactRegistryCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gcp:ArtifactRegistryCache", name, None, opts)
        self.mirrors = mirrors(args.cluster_name, args.upstreams, args.project, args.location)
        self.repositories = []
        self.readers = []
        for upstream in args.upstreams:
            repo = gcp.artifactregistry.Repository(
                f"{name}-{_SHORT[upstream]}",
                repository_id=repository_id(args.cluster_name, upstream),
                location=args.location,
                project=args.project,
                format="DOCKER",
                mode="REMOTE_REPOSITORY",
                description=f"Pull-through cache of {upstream} for the llm-serving cluster {args.cluster_name}",
                remote_repository_config=remote_config(upstream),
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis_ready),
            )
            self.repositories.append(repo)
            self.readers.append(
                gcp.artifactregistry.RepositoryIamMember(
                    f"{name}-{_SHORT[upstream]}-nodes",
                    repository=repo.name,
                    location=args.location,
                    project=args.project,
                    role=READER_ROLE,
                    member=pulumi.Output.from_input(args.node_service_account).apply(lambda e: f"serviceAccount:{e}"),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        self.register_outputs({"mirrors": self.mirrors})
