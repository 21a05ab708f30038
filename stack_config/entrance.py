"""The one entrance: a Gateway in front of every model, with an endpoint picker per base model.

`exposure.entrance` puts one HTTPS base URL in front of the stack: a Gateway API Gateway whose
HTTPRoute sends each request to the InferencePool of the base model its `model` field names, where
the endpoint picker (llm-d-router) chooses the server by queue depth, KV-cache load and prefix-cache
affinity. Which Gateway implementation serves it follows from the cloud (`implementation_for`), so
the add-ons, the cluster layer and the entrance component read one decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from common.untrusted import excerpt
from stack_config.base import StrictModel
from stack_config.formats import dns_label, hostname

# Let's Encrypt's production ACME directory (https://letsencrypt.org/docs/acme-protocol-updates/,
# "API Endpoints": https://acme-v02.api.letsencrypt.org/directory).
LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory"

# The InferencePool CRD's enum for endpointPickerRef.failureMode (Gateway API Inference Extension
# v1.6.0, config/crd/bases/inference.networking.k8s.io_inferencepools.yaml; tests/fixtures/crds).
FAILURE_MODES = ("FailOpen", "FailClose")

# Domains reserved for documentation and testing (RFC 2606, RFC 6761): no CA issues for them, so a
# stack that keeps one was not yet given its real host name.
RESERVED_DOMAINS = ("example.com", "example.org", "example.net", "test", "invalid", "localhost", "example")


class PickerConfig(StrictModel):
    replicas: int = Field(2, ge=2, le=5)
    """Endpoint picker pods per base model. Leader election keeps one active and the others warm, so a lost pod costs a
    failover of seconds instead of a restart; at least 2, with a PodDisruptionBudget."""
    failureMode: Literal["FailOpen", "FailClose"] = Field(alias="failureMode")
    """What the Gateway does when no picker answers: FailOpen sends the request to a server of the pool by plain
    balancing (no queue or cache awareness); FailClose refuses it (HTTP 5xx). Required: an outage's behaviour is a
    choice, not a default."""

    @field_validator("failureMode", mode="before")
    @classmethod
    def _spelling(cls, v: Any) -> Any:
        if v == "FailClosed":
            # The llm-d-router chart README spells it this way; the CRD's enum does not.
            raise ValueError(
                "'FailClosed' is not allowed; use FailClose (the InferencePool CRD's spelling; the API "
                "server rejects FailClosed) or FailOpen"
            )
        return v


Certificate = Literal["acme", "secret", "google-managed"]


class TlsConfig(StrictModel):
    certificate: Certificate | None = None
    """google-managed (the default on GKE's Gateway classes): a Google-managed Certificate Manager certificate in the
    cluster's region, proven by a DNS authorization whose CNAME record you create once (`pulumi stack output entrance`
    prints it); acme (the default elsewhere): cert-manager obtains and renews a certificate for `hostname` from
    `acmeServer`, answering the HTTP-01 challenge through the Gateway's port 80 (the host name must resolve to the
    Gateway's address first; not on GKE, whose Gateway controller rejects the whole Gateway while the listener's Secret
    is missing, docs/routing.md); secret: a kubernetes.io/tls Secret you create and renew, named by `secretName`, in
    the serving namespace."""
    acmeServer: str = Field(LETS_ENCRYPT, alias="acmeServer")
    """ACME directory URL (certificate: acme). Default: Let's Encrypt production; its staging directory avoids rate
    limits while testing."""
    acmeEmail: str | None = Field(None, alias="acmeEmail")
    """Contact address the ACME CA sends expiry notices to (certificate: acme); optional."""
    secretName: str | None = Field(None, alias="secretName")
    """certificate: secret: the kubernetes.io/tls Secret (tls.crt, tls.key) in the serving namespace that the HTTPS
    listener serves."""

    @field_validator("acmeServer")
    @classmethod
    def _https(cls, v: str) -> str:
        if not v.startswith("https://"):
            raise ValueError(f"{v!r} is not an https:// ACME directory URL, e.g. {LETS_ENCRYPT}")
        return v

    @field_validator("acmeEmail")
    @classmethod
    def _email(cls, v: str | None) -> str | None:
        if v is not None and ("@" not in v or v.startswith("@") or v.endswith("@") or " " in v):
            raise ValueError(f"{v!r} is not an e-mail address")
        return v

    @field_validator("secretName")
    @classmethod
    def _secret(cls, v: str | None) -> str | None:
        return None if v is None else dns_label(v)

    @model_validator(mode="after")
    def _mode_keys(self) -> TlsConfig:
        # Only what the explicit `certificate` decides; the default follows the Gateway implementation
        # and is checked with it (`tls_problems`).
        acme_keys = "acmeEmail" in self.model_fields_set or "acmeServer" in self.model_fields_set
        if self.certificate == "secret" and not self.secretName:
            raise ValueError("certificate is secret: name the kubernetes.io/tls Secret in secretName")
        if self.certificate in ("acme", "google-managed") and self.secretName:
            raise ValueError(
                f"secretName applies to certificate: secret; with {self.certificate} the program provides the "
                "certificate (remove secretName, or set certificate: secret)"
            )
        if self.certificate in ("secret", "google-managed") and acme_keys:
            raise ValueError("acmeEmail and acmeServer apply to certificate: acme")
        return self


Implementation = Literal["gke", "agentgateway", "other"]


class EntranceConfig(StrictModel):
    hostname: str
    """The host name clients call: https://<hostname>/v1 for every model and adapter (a DNS record pointing at the
    Gateway's address is yours to create)."""
    picker: PickerConfig
    """The endpoint picker (llm-d-router) in front of each base model's servers."""
    tls: TlsConfig = Field(default_factory=TlsConfig)
    """Where the HTTPS listener's certificate comes from; plain HTTP on port 80 redirects to HTTPS."""
    implementation: Implementation | None = None
    """cloud existing only: the Gateway implementation already on the cluster. agentgateway (routes on the request body
    itself), gke (GKE Gateway controller; the program adds the Body-Based Router, so several base models share the
    entrance there too) or other (one base model behind the entrance). On aws and gcp the cloud decides: agentgateway
    on EKS, installed by the program; the GKE Gateway controller on GKE."""
    gatewayClass: str | None = Field(None, alias="gatewayClass")
    """cloud existing only: the GatewayClass of that implementation; default: agentgateway for agentgateway,
    gke-l7-regional-external-managed for gke; required for other."""

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, v: str) -> str:
        hostname(v)
        # The certificate is proven by an ACME HTTP-01 challenge, which cannot prove a wildcard.
        if v.startswith("*."):
            raise ValueError(
                f"{excerpt(v)} is a wildcard; give the one host name clients call, e.g. llm.example.org "
                "(an ACME HTTP-01 challenge cannot prove a wildcard)"
            )
        return v

    @field_validator("gatewayClass")
    @classmethod
    def _class(cls, v: str | None) -> str | None:
        return None if v is None else dns_label(v)

    @property
    def reserved_hostname(self) -> bool:
        """The host name is under a documentation/test domain: no CA will issue for it."""
        return any(self.hostname == d or self.hostname.endswith("." + d) for d in RESERVED_DOMAINS)


# -- which Gateway implementation serves the entrance --------------------------------------------

# GKE's regional external Application Load Balancer: the class llm-d's GKE guide uses for
# InferencePool backends (https://llm-d.ai/docs/resources/gateway/gke; llm-d/llm-d-router@v0.10.0
# config/manifests/gateway/gke/gateway.yaml), the class of GKE's Inference Extension conformance
# report (gateway-api-inference-extension@v1.6.0 conformance/reports/v0.5.0/gateway/gke-gateway/).
# It needs a proxy-only subnet in the region (components/cluster/gcp/network.py).
GKE_GATEWAY_CLASS = "gke-l7-regional-external-managed"
# The GatewayClass the agentgateway controller creates (agentgateway/agentgateway@v1.4.1
# controller/install/helm/agentgateway/values.yaml, gatewayClassParametersRefs/the controller's
# default class, controller/api/settings/settings.go:263 controllerName agentgateway.dev/agentgateway).
AGENTGATEWAY_CLASS = "agentgateway"


@dataclass(frozen=True)
class EntranceImplementation:
    """The Gateway implementation behind the entrance, and what follows from it."""

    name: Implementation
    gateway_class: str
    picker_provider: Literal["gke", "none"]
    """The llm-d-router-gateway chart's `provider.name`: gke renders GKE's health-check and backend
    policies for the pool; none renders nothing implementation-specific."""
    body_router: Literal["agentgateway", "bbr", "none"]
    """Who copies the base model of the request body's `model` into a header before routing, so
    several base models share the one route: agentgateway itself (a PreRouting transformation), the
    Gateway API Inference Extension's Body-Based Router called by GKE's load balancer as a routing
    extension (components/entrance/bbr.py), or nobody (one base model per entrance)."""
    installed_by_program: bool
    """The program installs the implementation (agentgateway on a created EKS cluster)."""

    @property
    def routes_on_body(self) -> bool:
        return self.body_router != "none"

    @property
    def title(self) -> str:
        return {
            "gke": "GKE Gateway controller",
            "agentgateway": "agentgateway",
            "other": f"GatewayClass {self.gateway_class}",
        }[self.name]


def implementation_for(cloud: str, creates_cluster: bool, entrance: EntranceConfig) -> EntranceImplementation:
    """GKE: the GKE Gateway controller; EKS: agentgateway (installed on a created cluster); an
    existing cluster: what `implementation` and `gatewayClass` say (validated by the stack checks)."""
    if cloud == "gcp":
        return EntranceImplementation("gke", GKE_GATEWAY_CLASS, "gke", "bbr", False)
    if cloud == "aws":
        return EntranceImplementation("agentgateway", AGENTGATEWAY_CLASS, "none", "agentgateway", creates_cluster)
    name = entrance.implementation or "other"
    default_class = {"gke": GKE_GATEWAY_CLASS, "agentgateway": AGENTGATEWAY_CLASS}.get(name, "")
    router: dict[str, Literal["agentgateway", "bbr", "none"]] = {"agentgateway": "agentgateway", "gke": "bbr"}
    return EntranceImplementation(
        name,
        entrance.gatewayClass or default_class,
        "gke" if name == "gke" else "none",
        router.get(name, "none"),
        False,
    )


# -- where the HTTPS listener's certificate comes from ------------------------------------------

# GKE's regional Gateway classes take Certificate Manager certificates of the Gateway's region by
# name, in the HTTPS listener's `tls.options` key networking.gke.io/cert-manager-certs, and
# Google-managed certificates work with regional and global Gateways ("Secure a Gateway",
# https://cloud.google.com/kubernetes-engine/docs/how-to/secure-gateway, "Restrictions and
# limitations"); certificate maps are what the global, Google Front End load balancers reference
# (https://cloud.google.com/certificate-manager/docs/deploy, "Certificate Manager configuration
# methods"), so a regional class gets certificates by name. A regional Google-managed certificate
# is authorized by DNS: load balancer authorization exists in the global location only
# (https://cloud.google.com/certificate-manager/docs/certificates, "Create a Google-managed certificate").
GKE_REGIONAL_CLASSES = ("gke-l7-regional-external-managed", "gke-l7-rilb")


def default_certificate(implementation: Implementation) -> Certificate:
    """GKE's Gateway controller: google-managed (acme cannot be issued there, `tls_problems`); else acme."""
    return "google-managed" if implementation == "gke" else "acme"


def with_certificate_default(data: Any) -> Any:
    """The raw stack config with `exposure.entrance.tls.certificate` filled in from the Gateway
    implementation when the file leaves it out (the implementation follows from `cloud` and, on an
    existing cluster, `exposure.entrance.implementation`; `implementation_for`)."""
    if not isinstance(data, dict):
        return data
    exposure = data.get("exposure")
    if not isinstance(exposure, dict):
        return data
    entrance = exposure.get("entrance")
    if not isinstance(entrance, dict):
        return data
    tls = entrance.get("tls", {})
    # An explicit null counts as left out: every reader then sees the one resolved value.
    if not isinstance(tls, dict) or tls.get("certificate") is not None:
        return data
    cloud = getattr(data.get("cloud"), "value", data.get("cloud"))
    gke = cloud == "gcp" or (cloud == "existing" and entrance.get("implementation") == "gke")
    tls = {**tls, "certificate": default_certificate("gke" if gke else "other")}
    return {**data, "exposure": {**exposure, "entrance": {**entrance, "tls": tls}}}


def tls_problems(cloud: str, entrance: EntranceConfig, impl: EntranceImplementation) -> list[tuple[str, str]]:
    """The certificate's source against the Gateway implementation that must serve it."""
    key = "exposure.entrance.tls.certificate"
    certificate = entrance.tls.certificate or default_certificate(impl.name)
    problems: list[tuple[str, str]] = []
    if impl.name == "gke" and certificate == "acme":
        # GKE translates a Gateway as a whole: one invalid listener fails it ("failed to translate
        # Gateway ...: Error GWCER105: Listener "https" is invalid", cert-manager/cert-manager#6196,
        # kubernetes-sigs/gateway-api#1275), so the challenge route on port 80 is never served while
        # the Secret it would produce is missing (docs/routing.md, "Certificates").
        problems.append(
            (
                key,
                (
                    "acme cannot be issued through the GKE Gateway controller: it rejects the whole Gateway while "
                    "the HTTPS listener's Secret is missing, so cert-manager's HTTP-01 challenge route on the same "
                    "Gateway is never served; use google-managed (the default on GKE: a Certificate Manager "
                    "certificate authorized by a DNS record you create) or secret (a kubernetes.io/tls Secret you "
                    "create before `pulumi up`)"
                ),
            )
        )
    if certificate == "google-managed":
        if impl.name != "gke":
            problems.append(
                (
                    key,
                    (
                        f"google-managed is a Certificate Manager certificate, which only GKE's Gateway controller "
                        f"serves; the {impl.title} serves a Secret: use acme or secret"
                    ),
                )
            )
        elif cloud != "gcp":
            problems.append(
                (
                    key,
                    (
                        "google-managed creates the certificate in the cluster's project and region, which cloud "
                        "existing does not know; use cloud gcp with cluster.create false, or certificate: secret"
                    ),
                )
            )
        elif impl.gateway_class not in GKE_REGIONAL_CLASSES:
            problems.append(
                (
                    key,
                    (
                        f"GatewayClass {impl.gateway_class} is not one of GKE's regional classes "
                        f"({', '.join(GKE_REGIONAL_CLASSES)}), which take regional Certificate Manager certificates "
                        "by name; use one of them or certificate: secret"
                    ),
                )
            )
    return problems
