"""What the cluster layer builds from security.clusterEndpoint and security.secretsEncryption, on EKS
and GKE, read from the resources the program registers."""

from __future__ import annotations

import json

import pytest

import stack_config as cfg
from components.cluster.aws.eks import endpoint_vpc_config
from components.cluster.gcp.gke import master_authorized_networks, private_cluster_config
from offline_plan.mock_runtime import evaluate_stack
from tests.support.committed import committed_stack

PUBLIC = "44.0.0.0/24"


def only(evaluation, type_token):
    (resource,) = evaluation.of_type(type_token)
    return resource


@pytest.fixture(scope="module")
def prod():
    return committed_stack("prod")


def test_prod_eks_is_private_only_with_envelope_encryption(prod):
    cluster = only(prod, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert cluster.inputs["vpcConfig"]["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in cluster.inputs["vpcConfig"]
    key = only(prod, "aws:kms/key:Key")
    assert cluster.inputs["encryptionConfig"] == {
        "resources": ["secrets"],
        "provider": {"keyArn": f"arn:aws:mock:::{key.name}"},
    }
    assert key.inputs["enableKeyRotation"] is True and key.inputs["customerMasterKeySpec"] == "SYMMETRIC_DEFAULT"
    (statement,) = json.loads(key.inputs["policy"])["Statement"]
    assert statement["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"} and statement["Action"] == "kms:*"
    assert cluster.inputs["tags"]["llm-serving-profile"] == "production"
    assert "private only" in prod.outputs["platform"]["apiEndpoint"]


@pytest.mark.parametrize(
    "access,expected",
    [
        ({}, {"endpoint_public_access": True, "endpoint_private_access": True}),
        (
            {"publicCidrs": [PUBLIC]},
            {"endpoint_public_access": True, "endpoint_private_access": True, "public_access_cidrs": [PUBLIC]},
        ),
        ({"publicAccess": False}, {"endpoint_public_access": False, "endpoint_private_access": True}),
    ],
)
def test_eks_endpoint_vpc_config(access, expected):
    assert endpoint_vpc_config(cfg.ClusterEndpointConfig.model_validate(access)) == expected


def test_gke_private_cluster_and_authorized_networks():
    open_ = cfg.ClusterEndpointConfig()
    listed = cfg.ClusterEndpointConfig.model_validate({"publicCidrs": [PUBLIC]})
    private = cfg.ClusterEndpointConfig.model_validate({"publicAccess": False})
    assert private_cluster_config(False, listed) is None
    assert private_cluster_config(True, private) == {
        "enable_private_nodes": True,
        "enable_private_endpoint": True,
        "master_ipv4_cidr_block": "172.16.0.0/28",
    }
    assert master_authorized_networks(open_) is None
    assert master_authorized_networks(listed) == {
        "cidr_blocks": [{"cidr_block": PUBLIC, "display_name": "security.clusterEndpoint.publicCidrs[0]"}],
        "gcp_public_cidrs_access_enabled": False,
    }
    # A private endpoint with no list: authorized networks on with only the VPC's own addresses.
    assert master_authorized_networks(private) == {"cidr_blocks": [], "gcp_public_cidrs_access_enabled": False}


def test_gke_encrypted_and_restricted_dev_variant():
    evaluation = evaluate_stack(
        "dev",
        overrides={
            "cluster": {"name": "llm-serving-dev", "region": "us-central1", "network": {"privateNodes": True}},
            "security": {"profile": "production", "clusterEndpoint": {"publicCidrs": [PUBLIC]}},
        },
    )
    cluster = only(evaluation, "gcp:container/cluster:Cluster")
    key = only(evaluation, "gcp:kms/cryptoKey:CryptoKey")
    member = only(evaluation, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert cluster.inputs["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": member.inputs["cryptoKeyId"]}
    assert member.inputs["member"] == "serviceAccount:service-123456789@container-engine-robot.iam.gserviceaccount.com"
    assert key.inputs["rotationPeriod"] == "7776000s"
    assert cluster.inputs["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster.inputs["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [
        {"cidrBlock": PUBLIC, "displayName": "security.clusterEndpoint.publicCidrs[0]"}
    ]
    assert cluster.inputs["resourceLabels"] == {"llm-serving-profile": "production"}
    assert "cloudkms.googleapis.com" in {
        s.inputs["service"] for s in evaluation.of_type("gcp:projects/service:Service")
    }


def test_dev_gke_stays_open_and_unencrypted():
    dev = committed_stack("dev")
    cluster = only(dev, "gcp:container/cluster:Cluster")
    assert "databaseEncryption" not in cluster.inputs and "masterAuthorizedNetworksConfig" not in cluster.inputs
    assert dev.of_type("gcp:kms/keyRing:KeyRing") == []
    assert dev.outputs["platform"]["apiEndpoint"].startswith("IP endpoint public, open to every address")
    assert "DNS-based endpoint on" in dev.outputs["platform"]["apiEndpoint"]
