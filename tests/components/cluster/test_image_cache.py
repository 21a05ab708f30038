"""Issue 17, images.pullThrough: a pull-through cache per upstream registry (ECR on EKS, Artifact
Registry on GKE), every image of the program rewritten to it, the nodes allowed to fill it, and
the first-apply rule that catches a copy of the stack with one of those removed.
"""

from __future__ import annotations

import pytest

from common import images
from components.cluster.aws import registry_cache as ecr_cache
from components.cluster.gcp import apis
from components.cluster.gcp import registry_cache as ar_cache
from offline_plan.mock_runtime import evaluate_stack
from tests.support import first_apply_cloud as rules
from tests.support.committed import committed_stack
from tests.support.first_apply import check
from tests.support.stack_variants import PROD_PULL_THROUGH

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
AR = "us-central1-docker.pkg.dev/mock-project"


def fired(evaluation, rule_name="mirrored-image-has-its-cache"):
    return [str(v) for v in check(evaluation, only=[rule_name])]


def pod_images(evaluation) -> set[str]:
    return {image for _, image in rules.workload_images(rules.ApplyGraph(evaluation))}


@pytest.fixture(scope="module")
def prod_cached():
    return evaluate_stack("prod", overrides=PROD_PULL_THROUGH)


@pytest.fixture(scope="module")
def dev_cached():
    return evaluate_stack("dev", overrides={"images": {"pullThrough": True}})


def test_eks_creates_one_rule_per_upstream_with_its_secret_and_rewrites_every_image(prod_cached):
    rules_ = {r.inputs["upstreamRegistryUrl"]: r.inputs for r in prod_cached.of_type(rules.ECR_RULE)}
    assert set(rules_) == {"registry-1.docker.io", "ghcr.io"}
    assert rules_["registry-1.docker.io"]["credentialArn"].endswith("ecr-pullthroughcache/docker-hub-AbCdEf")
    assert rules_["registry-1.docker.io"]["ecrRepositoryPrefix"] == "llm-serving-prod-docker-hub"
    found = pod_images(prod_cached)
    assert found and all(i.startswith(f"{ECR}/llm-serving-prod-") for i in found), found
    # Tag and digest survive the rewrite.
    assert f"{ECR}/llm-serving-prod-docker-hub/{images.reference('vllm')}" in found
    assert f"{ECR}/llm-serving-prod-ghcr/{images.reference('endpoint-picker').removeprefix('ghcr.io/')}" in found
    # Both node roles may fill the cache (managed node groups and Karpenter's nodes).
    policies = [p for p in prod_cached.of_type(rules.ROLE_POLICY) if "image-cache" in p.name]
    assert sorted(p.inputs["role"] for p in policies) == [
        "llm-serving-prod-gpu-node",
        "llm-serving-prod-karpenter-node",
    ]


def test_gke_creates_a_remote_repository_per_upstream_readable_by_the_nodes(dev_cached):
    repos = {r.inputs["repositoryId"]: r.inputs for r in dev_cached.of_type(rules.AR_REPOSITORY)}
    assert repos["llm-serving-dev-docker-hub"]["remoteRepositoryConfig"]["dockerRepository"] == {
        "publicRepository": "DOCKER_HUB"
    }
    assert repos["llm-serving-dev-ghcr"]["remoteRepositoryConfig"]["commonRepository"] == {"uri": "https://ghcr.io"}
    assert all(r["mode"] == "REMOTE_REPOSITORY" and r["format"] == "DOCKER" for r in repos.values())
    assert {m.inputs["role"] for m in dev_cached.of_type(rules.AR_MEMBER)} == {"roles/artifactregistry.reader"}
    assert "artifactregistry.googleapis.com" in {s.inputs["service"] for s in dev_cached.of_type(rules.GCP_SERVICE)}
    found = pod_images(dev_cached)
    assert found and all(i.startswith(f"{AR}/llm-serving-dev-") for i in found), found


def test_without_pull_through_nothing_is_created_and_nothing_rewritten():
    evaluation = committed_stack("dev")
    assert evaluation.of_type(rules.AR_REPOSITORY) == []
    assert not any("docker.pkg.dev" in i for i in pod_images(evaluation))


# --- broken copies the first-apply rule catches -----------------------------------------------------


def test_rule_fires_when_the_nodes_may_not_import_upstream_images(monkeypatch):
    original = ecr_cache.node_policy
    monkeypatch.setattr(
        ecr_cache,
        "node_policy",
        lambda prefixes, account, region, partition: {
            **original(prefixes, account, region, partition),
            "Statement": [
                {**original(prefixes, account, region, partition)["Statement"][0], "Action": ["ecr:CreateRepository"]}
            ],
        },
    )
    found = fired(evaluate_stack("prod", overrides=PROD_PULL_THROUGH))
    assert found and all("may not fill the cache" in v for v in found), found


def test_rule_fires_when_images_point_at_a_prefix_no_rule_has(monkeypatch):
    original = ecr_cache.mirrors
    monkeypatch.setattr(ecr_cache, "mirrors", lambda *a: {u: p + "-typo" for u, p in original(*a).items()})
    found = fired(evaluate_stack("prod", overrides=PROD_PULL_THROUGH))
    assert found and all("no pull-through cache rule has that prefix" in v for v in found), found


def test_rule_fires_when_the_gke_nodes_cannot_read_the_remote_repository(monkeypatch):
    monkeypatch.setattr(ar_cache, "READER_ROLE", "roles/artifactregistry.serviceAgent")
    found = fired(evaluate_stack("dev", overrides={"images": {"pullThrough": True}}))
    assert found and all("may not read" in v for v in found), found


def test_api_rule_fires_when_artifact_registry_is_not_enabled(monkeypatch):
    original = apis.needed_apis
    monkeypatch.setattr(apis, "needed_apis", lambda **kw: [a for a in original(**kw) if a != apis.ARTIFACT_REGISTRY])
    found = fired(evaluate_stack("dev", overrides={"images": {"pullThrough": True}}), "cloud-api-enabled-before-use")
    assert found and all("artifactregistry.googleapis.com" in v for v in found), found


# --- config -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stack, images_config, says",
    [
        ("prod", {"pullThrough": True}, "images.upstreamCredentials"),
        (
            "prod",
            {
                "pullThrough": True,
                "upstreamCredentials": {
                    "docker.io": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ecr-pullthroughcache/hub",
                    "ghcr.io": "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/ghcr",
                },
            },
            "images.upstreamCredentials.docker.io",
        ),
        (
            "prod",
            {
                "pullThrough": True,
                "upstreamCredentials": {"docker.io": "arn:aws:secretsmanager:us-east-1:123456789012:secret:dockerhub"},
            },
            "ecr-pullthroughcache/",
        ),
        (
            "dev",
            {
                "upstreamCredentials": {
                    "docker.io": "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/hub"
                }
            },
            "only a pull-through cache reads them",
        ),
        (
            "dev",
            {
                "pullThrough": True,
                "upstreamCredentials": {
                    "docker.io": "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/hub"
                },
            },
            "mean nothing on GKE",
        ),
        ("dev", {"pullThrough": True, "upstreamCredentials": {"quay.io": "x"}}, "images.upstreamCredentials"),
    ],
)
def test_config_errors_name_the_key_and_the_fix(stack, images_config, says):
    evaluation = evaluate_stack(stack, overrides={"images": images_config}, raise_errors=False)
    assert evaluation.error is not None
    assert says in str(evaluation.error), str(evaluation.error)
