"""Where the cluster pulls the program's images from: the upstream registries, or a pull-through
cache the program creates in the cloud account (ECR on EKS, Artifact Registry on GKE).

The images themselves (repository, tag, digest) are decided in common/images.py, not here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stack_config.base import StrictModel
from stack_config.fields import EcrCacheSecretArn

# The upstream registries the program's own images come from (common/images.py): Docker Hub and
# GitHub's container registry. A reference to any other registry is pulled from it directly.
Upstream = Literal["docker.io", "ghcr.io"]
UPSTREAMS: tuple[str, ...] = ("docker.io", "ghcr.io")


class ImagesConfig(StrictModel):
    pullThrough: bool = Field(False, alias="pullThrough")
    """Create a pull-through cache per upstream registry (docker.io, ghcr.io) in the cloud account (an ECR pull-through
    cache rule on EKS, an Artifact Registry remote repository on GKE) and pull every image of the program through it:
    nodes then pull from the account's own registry, rate limits and upstream outages stop mattering once an image is
    cached, and a digest still pins the same bytes."""
    upstreamCredentials: dict[Upstream, EcrCacheSecretArn] = Field(
        default_factory=dict, max_length=len(UPSTREAMS), alias="upstreamCredentials"
    )
    """EKS with pullThrough: per upstream (docker.io, ghcr.io), the ARN of the Secrets Manager secret named
    ecr-pullthroughcache/... holding its credentials (ECR requires them for Docker Hub and ghcr.io); same account and
    Region as the cluster."""
