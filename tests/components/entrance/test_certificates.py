"""Where the HTTPS listener's certificate comes from: Google-managed (Certificate Manager, DNS
authorization) on GKE's Gateway, ACME through cert-manager on agentgateway, the user's Secret
anywhere; the config names the key and the fix when a source cannot work with the Gateway."""

from __future__ import annotations

import pytest

import stack_config as cfg
from components.entrance import google_cert, routes
from components.entrance.entrance import GATEWAY_NAME
from offline_plan.mock_runtime import mock_id
from stack_config.entrance import GKE_GATEWAY_CLASS, GKE_REGIONAL_CLASSES
from tests.support.committed import committed_stack
from tests.support.schemas import validate_object
from tests.support.stack_variants import DEV_ADAPTERS, EXISTING_ENTRANCE, variant

CERTIFICATE = "gcp:certificatemanager/certificate:Certificate"
AUTHORIZATION = "gcp:certificatemanager/dnsAuthorization:DnsAuthorization"
SERVICE = "gcp:projects/service:Service"

BASE = {
    "cloud": "gcp",
    "cluster": {"name": "llm-test", "region": "europe-west4", "gcpProject": "acme-llm-dev"},
    "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}],
    "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
}
ENTRANCE = {"hostname": "llm.acme.io", "picker": {"failureMode": "FailOpen"}}
EXISTING = {
    "cloud": "existing",
    "cluster": {"kubeconfig": "/k", "rwxStorageClass": "nfs"},
    "operators": {"gpuOperator": {"driver": "preinstalled"}},
    "security": {"networkPolicyEnforcement": "calico"},
}


def parse(raw: dict) -> cfg.StackConfig:
    return cfg.parse_stack_config(raw, "Pulumi.test.yaml")


def problems(raw: dict) -> list[str]:
    with pytest.raises(cfg.ConfigError) as err:
        parse(raw)
    return err.value.problems


def with_tls(tls: dict | None, base: dict = BASE, **entrance) -> dict:
    e = {**ENTRANCE, **entrance, **({"tls": tls} if tls is not None else {})}
    return {**base, "exposure": {"entrance": e}}


def https_listener(ev) -> dict:
    [gateway] = [o for o in ev.kubernetes_objects if o["kind"] == "Gateway"]
    return next(listener for listener in gateway["spec"]["listeners"] if listener["protocol"] == "HTTPS")


# --- the default follows the Gateway implementation ---------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        (with_tls(None), "google-managed"),
        (with_tls({}), "google-managed"),
        # An explicit null is left out too, so every reader (add-ons, policies, the program) agrees.
        (with_tls({"certificate": None}), "google-managed"),
        ({**with_tls({"certificate": None}), "cloud": "aws", "cluster": {}}, "acme"),
        ({**with_tls(None), "cloud": "aws", "cluster": {}}, "acme"),
        (with_tls(None, base={**BASE, **EXISTING}, implementation="agentgateway"), "acme"),
        (with_tls(None, base={**BASE, **EXISTING}, gatewayClass="mine"), "acme"),
        (with_tls({"certificate": "secret", "secretName": "mine"}), "secret"),
    ],
)
def test_the_certificate_source_defaults_per_implementation(raw, expected):
    assert parse(raw).exposure.entrance.tls.certificate == expected


# --- sources that cannot work are refused with the key and the fix -----------------------------


@pytest.mark.parametrize(
    "raw, words",
    [
        # The circle: the GKE Gateway controller never serves the challenge route.
        (
            with_tls({"certificate": "acme"}),
            ["acme cannot be issued through the GKE Gateway controller", "google-managed"],
        ),
        (
            with_tls({"certificate": "acme"}, base={**BASE, **EXISTING}, implementation="gke"),
            ["rejects the whole Gateway", "secret"],
        ),
        ({**with_tls({"certificate": "google-managed"}), "cloud": "aws", "cluster": {}}, ["only GKE's Gateway"]),
        (
            with_tls({"certificate": "google-managed"}, base={**BASE, **EXISTING}, implementation="gke"),
            ["cloud existing does not know", "cluster.create false"],
        ),
    ],
)
def test_a_certificate_the_gateway_cannot_obtain_is_refused(raw, words):
    found = problems(raw)
    assert any(
        line.startswith("Pulumi.test.yaml: exposure.entrance.tls.certificate:") and all(w in line for w in words)
        for line in found
    ), found


@pytest.mark.parametrize(
    "tls, words",
    [
        ({"certificate": "google-managed", "secretName": "mine"}, "secretName applies to certificate: secret"),
        ({"certificate": "google-managed", "acmeEmail": "ops@acme.io"}, "acmeEmail and acmeServer apply"),
        ({"certificate": "letsencrypt"}, "certificate"),
    ],
)
def test_keys_of_another_source_are_refused(tls, words):
    found = problems(with_tls(tls))
    assert any(line.startswith("Pulumi.test.yaml: exposure.entrance.tls") and words in line for line in found), found


# --- what the program creates on GKE -------------------------------------------------------------


def test_dev_serves_a_regional_google_managed_certificate_authorized_by_dns():
    ev = committed_stack("dev")
    [cert] = ev.of_type(CERTIFICATE)
    [auth] = ev.of_type(AUTHORIZATION)
    region = "us-central1"  # Pulumi.dev.yaml cluster.region
    assert cert.inputs["location"] == auth.inputs["location"] == region
    assert cert.inputs["name"] == auth.inputs["name"] == google_cert.certificate_name("llm-serving-dev")
    assert auth.inputs["domain"] == "llm.dev.example.com"
    assert cert.inputs["managed"]["domains"] == ["llm.dev.example.com"]
    # The authorization's id (projects/<p>/locations/<region>/dnsAuthorizations/<name>), not its name.
    assert cert.inputs["managed"]["dnsAuthorizations"] == [mock_id(AUTHORIZATION, auth.name)]
    assert "selfManaged" not in cert.inputs
    listener = https_listener(ev)
    assert listener["tls"] == {
        "mode": "Terminate",
        "options": {google_cert.CERT_MANAGER_CERTS_OPTION: cert.inputs["name"]},
    }
    # No cert-manager, no Issuer: nothing on the Gateway depends on its own challenge.
    assert not [o for o in ev.kubernetes_objects if o["kind"] == "Issuer"]
    assert "certManager" not in [row["addon"] for row in ev.outputs["addons"]]


def test_the_certificate_manager_api_is_enabled_first_and_kept_on_destroy():
    ev = committed_stack("dev")
    services = {r.inputs["service"]: r for r in ev.of_type(SERVICE)}
    api = services["certificatemanager.googleapis.com"]
    assert api.inputs["disableOnDestroy"] is False
    for r in ev.of_type(CERTIFICATE) + ev.of_type(AUTHORIZATION):
        assert api.urn in r.dependencies, r.name


def test_the_gateway_waits_for_the_certificate_it_names():
    from tests.support.first_apply import ApplyGraph

    ev = committed_stack("dev")
    graph = ApplyGraph(ev)
    [gateway] = [r for r in graph.kubernetes_objects() if r.inputs.get("kind") == "Gateway"]
    [cert] = graph.of_type(CERTIFICATE)
    assert graph.waits_for(gateway, cert)


def test_the_cname_record_is_a_stack_output_and_in_the_plan():
    from offline_plan.write import render_plan

    ev = committed_stack("dev")
    entrance = ev.outputs["entrance"]
    assert (
        "gcloud certificate-manager dns-authorizations describe llm-serving-dev-entrance"
        in (entrance["certificateDnsRecord"])
    )
    plan = render_plan(ev, [], []).split("## Entrance")[1].split("\n## ")[0]
    assert "DNS record that authorizes the certificate (CNAME, create once)" in plan
    assert "Google-managed, Certificate Manager certificate llm-serving-dev-entrance in us-central1" in plan


def test_the_record_line_reads_the_authorization_output():
    records = [
        {"name": "_acme-challenge_x.llm.acme.io.", "type": "CNAME", "data": "x.authorize.certificatemanager.goog."}
    ]
    assert google_cert._record_line(records, "later") == (
        "_acme-challenge_x.llm.acme.io. CNAME x.authorize.certificatemanager.goog."
    )
    assert google_cert._record_line(None, "later") == "later"


def test_certificate_names_follow_certificate_managers_pattern():
    assert google_cert.certificate_name("llm-serving-dev") == "llm-serving-dev-entrance"
    with pytest.raises(ValueError, match="Certificate Manager name"):
        google_cert.certificate_name("x" * 60)
    with pytest.raises(ValueError, match="Certificate Manager name"):
        google_cert.certificate_name("1cluster")


def test_the_committed_dev_class_is_a_regional_one():
    assert GKE_GATEWAY_CLASS in GKE_REGIONAL_CLASSES


# --- the listener manifest ----------------------------------------------------------------------


def test_a_listener_with_options_only_validates_against_the_gateway_crd():
    manifest = routes.gateway_manifest(
        GATEWAY_NAME,
        "llm-serving",
        gateway_class=GKE_GATEWAY_CLASS,
        hostname="llm.acme.io",
        tls_secret=None,
        labels={},
        tls_options=google_cert.listener_options("llm-test-entrance"),
    )
    validate_object(manifest)
    with pytest.raises(ValueError, match="needs a certificate Secret or implementation options"):
        routes.gateway_manifest(
            GATEWAY_NAME,
            "llm-serving",
            gateway_class=GKE_GATEWAY_CLASS,
            hostname="h.acme.io",
            tls_secret=None,
            labels={},
        )


def test_other_gke_variants_and_the_secret_variant_keep_their_sources():
    # dev with adapters: the same Google-managed certificate; an existing cluster with its Secret.
    assert google_cert.CERT_MANAGER_CERTS_OPTION in https_listener(variant(DEV_ADAPTERS))["tls"]["options"]
    tls = https_listener(variant(EXISTING_ENTRANCE))["tls"]
    assert tls["certificateRefs"][0]["name"] == "llm-tls" and "options" not in tls
