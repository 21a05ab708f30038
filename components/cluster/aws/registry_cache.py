"""An ECR pull-through cache per upstream registry, and the node permission to fill it.

With `images.pullThrough`, every image of the program is pulled as
`<account>.dkr.ecr.<region>.<dns suffix>/<prefix>/<upstream path>:<tag>@<digest>` (common/images.py
`mirrored`). The first pull of an image makes ECR fetch it from the upstream and create the
repository `<prefix>/<upstream path>`; later pulls are served from the account's own registry.

Facts this module rests on (AWS ECR user guide):
- Docker Hub and GitHub Container Registry need credentials in a Secrets Manager secret, one per
  rule, whose name begins with `ecr-pullthroughcache/`, in the rule's account and Region
  (pull-through-cache.html; pull-through-cache-creating-rule.html, "Prerequisites"). The stack file
  names those secrets (stack_config/images.py); the program never sees the credentials.
- Upstream registry URLs: `registry-1.docker.io` for Docker Hub and `ghcr.io` for GitHub's registry
  (pull-through-cache-creating-rule.html, the AWS CLI examples).
- Whoever pulls through the cache needs, besides the usual pull permissions (the nodes'
  AmazonEC2ContainerRegistryReadOnly, components/cluster/aws/policies.py), `ecr:BatchImportUpstreamImage`
  and, for the first pull of a repository, `ecr:CreateRepository` (pull-through-cache-iam.html).
  Both are granted here on the cache's repositories only, to every node role the program manages.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

UPSTREAM_URLS = {"docker.io": "registry-1.docker.io", "ghcr.io": "ghcr.io"}
_SHORT = {"docker.io": "docker-hub", "ghcr.io": "ghcr"}
# ECR's CreatePullThroughCacheRule takes an ecrRepositoryPrefix of 2 to 30 characters of lower-case
# letters, digits and . _ - separators (ECR API reference, CreatePullThroughCacheRule).
PREFIX_MAX = 30
PULL_THROUGH_ACTIONS = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")


def repository_prefix(cluster_name: str, upstream: str) -> str:
    """The cache's repository prefix: unique per cluster (two stacks in one account and Region must
    not share a rule) and within ECR's length."""
    short = _SHORT[upstream]
    head = cluster_name.lower()[: PREFIX_MAX - len(short) - 1].strip("-._")
    return f"{head}-{short}"


def registry_host(account: str, region: str, dns_suffix: str) -> str:
    return f"{account}.dkr.ecr.{region}.{dns_suffix}"


def mirrors(cluster_name: str, upstreams: list[str], account: str, region: str, dns_suffix: str) -> dict[str, str]:
    """Upstream registry -> the prefix its images are pulled through (plain strings, known at preview)."""
    host = registry_host(account, region, dns_suffix)
    return {u: f"{host}/{repository_prefix(cluster_name, u)}" for u in upstreams}


def node_policy(prefixes: list[str], account: str, region: str, partition: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PullThroughCache",
                "Effect": "Allow",
                "Action": list(PULL_THROUGH_ACTIONS),
                "Resource": [f"arn:{partition}:ecr:{region}:{account}:repository/{p}/*" for p in prefixes],
            }
        ],
    }


@dataclass(frozen=True)
class EcrPullThroughCacheArgs:
    cluster_name: str
    region: str
    credentials: dict[str, str]
    """Upstream (docker.io, ghcr.io) -> ARN of its ecr-pullthroughcache/ secret."""
    node_roles: dict[str, pulumi.Input[str]]
    """Key -> name of every node role the program manages (managed node groups, Karpenter's nodes)."""


class EcrPullThroughCache(pulumi.ComponentResource):
    """One `aws.ecr.PullThroughCacheRule` per upstream; `mirrors` is what image references are rewritten to."""

    mirrors: dict[str, str]

    def __init__(self, name: str, args: EcrPullThroughCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:EcrPullThroughCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        account = aws.get_caller_identity(opts=invoke).account_id
        partition = aws.get_partition(opts=invoke)
        upstreams = sorted(args.credentials)
        self.mirrors = mirrors(args.cluster_name, upstreams, account, args.region, partition.dns_suffix)
        self.rules = [
            aws.ecr.PullThroughCacheRule(
                f"{name}-{_SHORT[u]}",
                ecr_repository_prefix=repository_prefix(args.cluster_name, u),
                upstream_registry_url=UPSTREAM_URLS[u],
                credential_arn=args.credentials[u],
                region=args.region,
                opts=child,
            )
            for u in upstreams
        ]
        document = node_policy(
            [repository_prefix(args.cluster_name, u) for u in upstreams], account, args.region, partition.partition
        )
        self.node_policies = [
            aws.iam.RolePolicy(f"{name}-{key}", role=role, policy=pulumi.Output.json_dumps(document), opts=child)
            for key, role in args.node_roles.items()
        ]
        self.register_outputs({"mirrors": self.mirrors})
