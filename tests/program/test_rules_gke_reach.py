"""A GitHub-hosted runner reaches every GKE cluster the program creates: through the DNS-based
endpoint, which the program turns on and the provider's kubeconfig uses (issue 25, point 1, GKE)."""

from __future__ import annotations

import json

import pulumi
import pytest

from components.cluster.gcp import gke
from offline_plan.mock_runtime import evaluate_stack
from tests.support.committed import STACKS, committed_stack
from tests.support.first_apply import RULE_INFO, check
from tests.support.rules_gke_reach import NAME
from tests.support.stack_variants import DEV_PRIVATE_ENDPOINT, DEV_PRIVATE_ENDPOINT_OVERRIDES, VARIANTS, variant


def provider_cluster(evaluation) -> dict:
    [provider] = [r for r in evaluation.resources if r.type == "pulumi:providers:kubernetes"]
    return json.loads(provider.inputs["kubeconfig"])["clusters"][0]["cluster"]


def test_the_rule_is_an_environment_rule():
    assert RULE_INFO[NAME].kind == "environment"


@pytest.mark.parametrize("stack", STACKS)
def test_the_committed_stacks_reach_their_clusters(stack):
    assert check(committed_stack(stack), only=[NAME]) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_reaches_its_cluster(name):
    assert check(variant(name), only=[NAME]) == [], name


def test_dev_connects_through_the_dns_endpoint_without_a_pinned_ca():
    [cluster] = committed_stack("dev").of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    server = provider_cluster(committed_stack("dev"))
    assert server == {"server": "https://gke-mock0123456789.mock-region.gke.goog"}


def test_a_private_ip_endpoint_keeps_its_settings_and_the_dns_endpoint_is_the_way_in():
    evaluation = variant(DEV_PRIVATE_ENDPOINT)
    [cluster] = evaluation.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["privateClusterConfig"]["enablePrivateEndpoint"] is True
    assert cluster.inputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True
    assert provider_cluster(evaluation)["server"].endswith(".gke.goog")


def test_fires_when_the_provider_uses_the_private_ip_endpoint(monkeypatch):
    # The kubeconfig built from the IP endpoint, as before the DNS endpoint was used.
    monkeypatch.setattr(gke, "dns_endpoint_of", lambda cluster: cluster.endpoint)
    found = [str(v) for v in check(evaluate_stack("dev", overrides=DEV_PRIVATE_ENDPOINT_OVERRIDES), only=[NAME])]
    assert len(found) == 1 and "the IP endpoint is private (enablePrivateEndpoint)" in found[0], found


def test_fires_when_the_dns_endpoint_takes_no_user_traffic(monkeypatch):
    monkeypatch.setattr(
        gke, "control_plane_endpoints_config", lambda on: {"dns_endpoint_config": {"allow_external_traffic": False}}
    )
    found = [str(v) for v in check(evaluate_stack("dev", overrides=DEV_PRIVATE_ENDPOINT_OVERRIDES), only=[NAME])]
    assert any("takes no user traffic" in v for v in found), found


def test_a_private_cluster_without_the_dns_endpoint_is_refused_for_a_github_hosted_runner():
    overrides = {
        **DEV_PRIVATE_ENDPOINT_OVERRIDES,
        "security": {"profile": "development", "clusterEndpoint": {"publicAccess": False, "dnsEndpoint": False}},
    }
    error = evaluate_stack("dev", overrides=overrides, raise_errors=False).error
    assert isinstance(error, pulumi.RunError)
    assert "security.clusterEndpoint.dnsEndpoint: with publicAccess false and the DNS endpoint off" in str(error)
    # From a runner inside the VPC it is a valid choice, and the rule does not apply.
    inside = evaluate_stack("dev", overrides={**overrides, "deployer": {"runner": "self-hosted"}})
    assert check(inside, only=[NAME]) == []
    assert provider_cluster(inside)["server"] == "https://203.0.113.10"
