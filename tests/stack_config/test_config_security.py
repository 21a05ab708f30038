"""The security section: a production profile refuses a world-open cluster API endpoint unless told
so, endpoint keys that a cloud would ignore or refuse are named, and KMS keys are checked against
the cloud and the region."""

from __future__ import annotations

import pytest

from stack_config import parse_stack_config
from stack_config.security import MAX_PUBLIC_CIDRS
from tests.support import paths
from tests.support.config_edits import SOURCE, base, edit, problems_of

KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
GCP_KEY = "projects/my-project-1/locations/us-central1/keyRings/ring/cryptoKeys/k"
# Any public range stands for an operator's egress addresses here; the documentation ranges of RFC 5737
# (203.0.113.0/24 ...) are reserved, and EKS refuses reserved ranges in publicAccessCidrs.
PUBLIC = "44.0.0.0/24"


def security(cloud: str, section: dict, **cluster) -> dict:
    raw = edit(base(cloud), "security", section)
    if cluster:
        raw = edit(raw, "cluster", {**raw.get("cluster", {}), **cluster})
    return raw


def test_defaults_are_development_with_network_policies_and_no_encryption():
    stack = parse_stack_config(base("aws"), SOURCE)
    assert stack.security.profile == "development" and stack.security.networkPolicies
    assert stack.security.clusterEndpoint.is_world_open and not stack.security.encrypt_secrets


def test_production_turns_secrets_encryption_on_by_default():
    stack = parse_stack_config(
        security("aws", {"profile": "production", "clusterEndpoint": {"publicAccess": False}}), SOURCE
    )
    assert stack.security.encrypt_secrets


@pytest.mark.parametrize(
    "cloud,endpoint",
    [
        ("aws", {}),
        ("aws", {"publicCidrs": ["0.0.0.0/0"]}),
        ("gcp", {}),
    ],
)
def test_production_refuses_a_world_open_endpoint_naming_the_key_and_the_fix(cloud, endpoint):
    (problem,) = problems_of(security(cloud, {"profile": "production", "clusterEndpoint": endpoint}))
    assert problem.startswith(f"{SOURCE}: security.clusterEndpoint.publicCidrs: security.profile is production")
    assert "allowWorldOpen: true" in problem and "publicAccess false" in problem


@pytest.mark.parametrize(
    "endpoint",
    [
        {"allowWorldOpen": True},
        {"publicCidrs": [PUBLIC]},
        {"publicAccess": False},
    ],
)
def test_production_accepts_a_restricted_or_knowingly_open_endpoint(endpoint):
    parse_stack_config(security("aws", {"profile": "production", "clusterEndpoint": endpoint}), SOURCE)


def test_development_may_stay_open():
    parse_stack_config(security("aws", {"clusterEndpoint": {}}), SOURCE)


@pytest.mark.parametrize(
    "cloud,endpoint,expected",
    [
        (
            "aws",
            {"publicAccess": False, "publicCidrs": [PUBLIC]},
            "security.clusterEndpoint.publicCidrs: publicAccess is false",
        ),
        (
            "aws",
            {"publicAccess": False, "privateAccess": False},
            "security.clusterEndpoint.privateAccess: with publicAccess false",
        ),
        (
            "aws",
            {"publicCidrs": ["10.0.0.0/16"]},
            "security.clusterEndpoint.publicCidrs: 10.0.0.0/16 is a private or reserved range",
        ),
        (
            "aws",
            {"publicCidrs": ["0.0.0.0/0", PUBLIC]},
            "security.clusterEndpoint.publicCidrs: 0.0.0.0/0 already admits",
        ),
        ("gcp", {"privateAccess": False}, "security.clusterEndpoint.privateAccess: applies to EKS only"),
        (
            "gcp",
            {"publicAccess": False},
            "security.clusterEndpoint.publicAccess: a GKE private endpoint exists only on a cluster with private nodes",
        ),
    ],
)
def test_endpoint_settings_a_cloud_would_refuse_or_ignore(cloud, endpoint, expected):
    found = problems_of(security(cloud, {"clusterEndpoint": endpoint}))
    assert any(p.startswith(f"{SOURCE}: {expected}") for p in found), found


def test_the_dns_endpoint_is_gke_only():
    found = problems_of(security("aws", {"clusterEndpoint": {"dnsEndpoint": True}}))
    assert any(p.startswith(f"{SOURCE}: security.clusterEndpoint.dnsEndpoint: applies to GKE only") for p in found)


def test_a_private_gke_endpoint_without_the_dns_endpoint_needs_a_runner_inside_the_vpc():
    endpoint = {"publicAccess": False, "dnsEndpoint": False}
    raw = security("gcp", {"clusterEndpoint": endpoint}, network={"privateNodes": True})
    [problem] = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: security.clusterEndpoint.dnsEndpoint: with publicAccess false")
    assert "deployer.runner" in problem
    parse_stack_config({**raw, "deployer": {"runner": "self-hosted"}}, SOURCE)
    # With the DNS endpoint (the default) a GitHub-hosted runner gets in.
    parse_stack_config(
        security("gcp", {"clusterEndpoint": {"publicAccess": False}}, network={"privateNodes": True}), SOURCE
    )


def test_gke_private_endpoint_with_private_nodes_is_accepted():
    raw = security("gcp", {"clusterEndpoint": {"publicAccess": False}}, network={"privateNodes": True})
    parse_stack_config(raw, SOURCE)


def test_public_cidrs_are_capped_at_the_eks_quota_and_checked():
    many = [f"44.0.{i}.0/24" for i in range(MAX_PUBLIC_CIDRS + 1)]
    (problem,) = problems_of(security("aws", {"clusterEndpoint": {"publicCidrs": many}}))
    assert "security.clusterEndpoint.publicCidrs" in problem and "40" in problem
    parse_stack_config(security("aws", {"clusterEndpoint": {"publicCidrs": many[:MAX_PUBLIC_CIDRS]}}), SOURCE)
    (problem,) = problems_of(security("aws", {"clusterEndpoint": {"publicCidrs": ["44.0.0.1/24"]}}))
    assert "not an IPv4 network" in problem
    (problem,) = problems_of(security("aws", {"clusterEndpoint": {"publicCidrs": ["203.0.113.0/24"]}}))
    assert "reserved range" in problem
    (problem,) = problems_of(security("aws", {"clusterEndpoint": {"publicCidrs": [PUBLIC] * 2}}))
    assert "listed twice" in problem


@pytest.mark.parametrize(
    "cloud,key,expected",
    [
        ("aws", GCP_KEY, "on EKS name an AWS KMS key ARN"),
        ("gcp", KEY_ARN, "on GKE name a Cloud KMS key"),
        ("aws", KEY_ARN.replace("us-east-1", "eu-west-1"), "EKS needs a key of the cluster's region"),
        ("gcp", GCP_KEY.replace("us-central1", "europe-west4"), "use a key ring of the cluster's region"),
        ("aws", "alias/my-key", "is neither an AWS KMS key ARN"),
    ],
)
def test_kms_keys_are_checked_against_the_cloud_and_region(cloud, key, expected):
    found = problems_of(security(cloud, {"secretsEncryption": {"enabled": True, "kmsKey": key}}))
    assert any("security.secretsEncryption.kmsKey" in p and expected in p for p in found), found


def test_kms_key_with_encryption_off_is_refused():
    found = problems_of(security("aws", {"secretsEncryption": {"enabled": False, "kmsKey": KEY_ARN}}))
    assert any("enabled is false" in p for p in found), found


def test_endpoint_and_encryption_are_not_checked_on_a_cluster_the_program_does_not_create():
    # The owner's cluster keeps its own settings; the plan says they are not applied.
    parse_stack_config(
        security(
            "existing",
            {"profile": "production", "clusterEndpoint": {"publicAccess": False}, "networkPolicyEnforcement": "calico"},
        ),
        SOURCE,
    )


def test_committed_stacks_set_their_profiles():

    import yaml

    root = paths.ROOT
    prod = yaml.safe_load((root / "Pulumi.prod.yaml").read_text())["config"]["llm-serving:security"]
    dev = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())["config"]["llm-serving:security"]
    assert prod["profile"] == "production" and prod["clusterEndpoint"]["publicAccess"] is False
    assert prod["secretsEncryption"]["enabled"] is True
    assert dev["profile"] == "development"
