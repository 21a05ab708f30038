"""https-listener-certificate-obtainable holds for both committed stacks and every stack variant,
and fires on the circle issue 25 found (GKE's Gateway with cert-manager's HTTP-01 through itself)
and on a Certificate Manager certificate the regional Gateway cannot serve."""

from __future__ import annotations

import pulumi_gcp as gcp
import pytest

import stack_config.stack as stack_module
from offline_plan.mock_runtime import evaluate_stack
from tests.support import rules_tls
from tests.support.committed import committed_stack
from tests.support.first_apply import RULE_INFO, check
from tests.support.stack_variants import VARIANTS, variant

GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway entrance-gateway (Gateway)"
ACME = {
    "exposure": {
        "entrance": {
            "hostname": "llm.dev.example.com",
            "picker": {"failureMode": "FailOpen"},
            "tls": {"certificate": "acme"},
        }
    }
}


def fired(evaluation) -> list[str]:
    return [str(v) for v in check(evaluation, only=rules_tls.TLS_RULES)]


def test_the_rule_is_an_environment_rule_of_a_cloud_not_of_the_programs_own_numbers():
    info = RULE_INFO[rules_tls.NAME]
    assert (info.kind, info.self_consistency) == ("environment", False)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_committed_stacks_can_obtain_their_certificates(stack):
    assert fired(committed_stack(stack)) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_stack_variant_can_obtain_its_certificate(name):
    assert fired(variant(name)) == [], name


def test_an_existing_gke_cluster_gets_the_same_regional_certificate():
    # cluster.create false on GKE: no cluster resource to read the region from, the certificate
    # still regional and waited for.
    ev = evaluate_stack(
        "dev",
        overrides={
            "cluster": {"name": "shared-gpu", "region": "us-central1", "create": False},
            "security": {"profile": "development", "networkPolicyEnforcement": "gke-dataplane-v2"},
            "addons": {"preinstalled": ["prometheusOperator", "gatewayApi", "inferenceExtension", "llmdRouter"]},
        },
    )
    [cert] = ev.of_type(rules_tls.CM_CERTIFICATE)
    assert (cert.inputs["name"], cert.inputs["location"]) == ("shared-gpu-entrance", "us-central1")
    assert fired(ev) == []


def test_prod_keeps_acme_because_agentgateway_serves_the_challenge_beside_a_missing_secret():
    # The rule does see prod's circle-shaped setup: an Issuer whose HTTP-01 route attaches to the
    # Gateway whose HTTPS listener serves the Secret it writes. The class decides.
    ev = committed_stack("prod")
    from tests.support.first_apply import ApplyGraph

    graph = ApplyGraph(ev)
    [gateway] = [r for r in graph.kubernetes_objects() if r.inputs.get("kind") == "Gateway"]
    [issuer] = [r for r in graph.kubernetes_objects() if r.inputs.get("kind") == "Issuer"]
    assert rules_tls.challenge_through(issuer, gateway)
    assert gateway.inputs["spec"]["gatewayClassName"] == "agentgateway"
    assert not rules_tls.rejects_whole_gateway("agentgateway")


def test_regression_gke_gateway_with_acme_http01_through_itself(monkeypatch):
    # Issue 25: dev's entrance had tls.certificate acme on the GKE Gateway controller: GKE rejects
    # the Gateway while the Secret is missing, so the challenge route never serves. The config now
    # refuses it; with that check silenced the rule still catches the circle.
    monkeypatch.setattr(stack_module, "tls_problems", lambda *a: [])
    found = fired(evaluate_stack("dev", overrides=ACME))
    assert len(found) == 1, found
    assert "gke-l7-regional-external-managed rejects the whole Gateway" in found[0]
    assert "Secret llm-serving-tls" in found[0] and "HTTP-01" in found[0]


def test_a_bootstrap_secret_created_before_the_gateway_would_break_the_circle(monkeypatch):
    monkeypatch.setattr(stack_module, "tls_problems", lambda *a: [])
    ev = evaluate_stack("dev", overrides=ACME)
    from tests.support.first_apply import ApplyGraph

    graph = ApplyGraph(ev)
    [gateway] = [r for r in graph.kubernetes_objects() if r.inputs.get("kind") == "Gateway"]
    # No Secret of that name exists in the stack, so the rule has nothing that breaks the circle.
    assert not rules_tls._bootstrap_secret(graph, gateway, "llm-serving-tls")


def _patched_certificate(monkeypatch, **forced):
    real = gcp.certificatemanager.Certificate

    def certificate(resource_name, **kwargs):
        return real(resource_name, **{**kwargs, **forced})

    monkeypatch.setattr(gcp.certificatemanager, "Certificate", certificate)


def test_a_global_certificate_behind_the_regional_gateway_fires(monkeypatch):
    _patched_certificate(monkeypatch, location="global")
    found = fired(evaluate_stack("dev"))
    assert any("a global certificate; a regional Gateway serves regional ones only" in v for v in found), found


def test_a_certificate_in_another_region_fires(monkeypatch):
    _patched_certificate(monkeypatch, location="europe-west4")
    found = fired(evaluate_stack("dev"))
    assert any("in europe-west4, not the cluster's region (us-central1)" in v for v in found), found


def test_a_google_managed_certificate_without_dns_authorization_fires(monkeypatch):
    _patched_certificate(
        monkeypatch, managed=gcp.certificatemanager.CertificateManagedArgs(domains=["llm.dev.example.com"])
    )
    found = fired(evaluate_stack("dev"))
    assert any("without a DNS authorization" in v for v in found), found


def test_a_listener_naming_a_certificate_the_stack_does_not_create_fires(monkeypatch):
    from components.entrance import google_cert

    monkeypatch.setattr(google_cert, "listener_options", lambda name: {google_cert.CERT_MANAGER_CERTS_OPTION: "other"})
    found = fired(evaluate_stack("dev"))
    assert found == [
        (
            f"{rules_tls.NAME}: {GATEWAY}: listener https "
            "names Certificate Manager certificate other, which the stack does not create"
        )
    ], found


def test_a_gateway_that_does_not_wait_for_its_certificate_fires(monkeypatch):
    from components.entrance import google_cert

    class Unwaited(google_cert.GoogleManagedCertificate):
        def __init__(self, name, args, opts=None):
            super().__init__(name, args, opts)
            # What the Entrance waits for: the authorization only, not the certificate the listener names.
            self.certificate = self.authorization  # type: ignore[assignment]

    monkeypatch.setattr(google_cert, "GoogleManagedCertificate", Unwaited)
    found = fired(evaluate_stack("dev"))
    assert found == [
        (
            f"{rules_tls.NAME}: {GATEWAY}: listener https "
            "names llm-serving-dev-entrance, but the Gateway does not wait for it (GKE refuses a missing certificate)"
        )
    ], found
