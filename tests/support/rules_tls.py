"""Environment rule of the entrance's certificate: every HTTPS listener can obtain the certificate it serves.

- https-listener-certificate-obtainable: an HTTPS listener's certificate exists, or can come into
  existence, while the Gateway implementation runs with what the listener names:
  * a Secret that cert-manager fills through an ACME HTTP-01 challenge routed through the same
    Gateway is a circle on a Gateway class whose controller rejects the whole Gateway while one
    listener's Secret is missing: GKE's Gateway controller fails the translation of the Gateway on
    one invalid listener ("failed to translate Gateway ...: Error GWCER105: Listener "https" is
    invalid", cert-manager/cert-manager#6196, kubernetes-sigs/gateway-api#1275), so the challenge
    route on port 80 is never served. agentgateway programs listeners one by one and leaves the
    others serving (agentgateway/agentgateway@v1.4.1
    controller/pkg/agentgateway/translator/conversion.go 1115-1147;
    testdata/gateways/invalid-tls.yaml: the Gateway stays Programmed with "Some listeners are not
    accepted"), so the circle does not exist there. A Secret the stack itself creates before the
    Gateway (a bootstrap certificate) breaks the circle anywhere. Classes of other implementations
    are not judged: their behaviour is not known here.
  * Certificate Manager certificates named in `tls.options["networking.gke.io/cert-manager-certs"]`
    exist before the Gateway (GKE refuses a listener naming a certificate that does not exist, the
    same GWCER105), on a regional GKE class, in a region (the cluster's, when the stack creates the
    cluster) rather than `global`, and Google-managed ones are authorized by DNS: regional Gateways
    take regional certificates by name, and load-balancer authorization exists in the global
    location only ("Secure a Gateway", https://cloud.google.com/kubernetes-engine/docs/how-to/secure-gateway;
    https://cloud.google.com/certificate-manager/docs/certificates, "Create a Google-managed certificate").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.entrance.google_cert import CERT_MANAGER_CERTS_OPTION
from offline_plan.mock_runtime import RecordedResource
from stack_config.entrance import GKE_REGIONAL_CLASSES
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

NAME = "https-listener-certificate-obtainable"
CM_CERTIFICATE = "gcp:certificatemanager/certificate:Certificate"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
# GKE's Gateway controller serves every class named gke-l7-* (GKE docs, "GatewayClass capabilities").
GKE_CLASS_PREFIX = "gke-l7-"
ISSUER_ANNOTATIONS = {"cert-manager.io/issuer": "Issuer", "cert-manager.io/cluster-issuer": "ClusterIssuer"}


def _meta(resource: RecordedResource) -> dict[str, Any]:
    return resource.inputs.get("metadata") or {}


def _spec(resource: RecordedResource) -> dict[str, Any]:
    return resource.inputs.get("spec") or {}


def rejects_whole_gateway(gateway_class: str) -> bool:
    """True where one listener's missing certificate keeps the whole Gateway from being served."""
    return gateway_class.startswith(GKE_CLASS_PREFIX)


def challenge_through(issuer: RecordedResource, gateway: RecordedResource) -> bool:
    """The issuer answers HTTP-01 with a route attached to `gateway`."""
    gw_name, gw_ns = _meta(gateway).get("name"), _meta(gateway).get("namespace")
    for solver in (_spec(issuer).get("acme") or {}).get("solvers") or []:
        route = (solver.get("http01") or {}).get("gatewayHTTPRoute") or {}
        for parent in route.get("parentRefs") or []:
            if (
                parent.get("kind", "Gateway") == "Gateway"
                and parent.get("name") == gw_name
                and parent.get("namespace", gw_ns) == gw_ns
            ):
                return True
    return False


def _issuer_of(graph: ApplyGraph, gateway: RecordedResource) -> RecordedResource | None:
    annotations = _meta(gateway).get("annotations") or {}
    for annotation, kind in ISSUER_ANNOTATIONS.items():
        name = annotations.get(annotation)
        if not name:
            continue
        for r in graph.kubernetes_objects():
            meta = _meta(r)
            same_ns = kind == "ClusterIssuer" or meta.get("namespace") == _meta(gateway).get("namespace")
            if r.inputs.get("kind") == kind and meta.get("name") == name and same_ns:
                return r
    return None


def _bootstrap_secret(graph: ApplyGraph, gateway: RecordedResource, name: str) -> bool:
    """The stack creates the Secret itself, before the Gateway."""
    ns = _meta(gateway).get("namespace")
    return any(
        r.inputs.get("kind") == "Secret"
        and _meta(r).get("name") == name
        and _meta(r).get("namespace") == ns
        and graph.waits_for(gateway, r)
        for r in graph.kubernetes_objects()
    )


def _cluster_regions(graph: ApplyGraph) -> set[str]:
    return {str(r.inputs.get("location")) for r in graph.of_type(GKE_CLUSTER) if r.inputs.get("location")}


def _secret_listener(graph: ApplyGraph, gateway: RecordedResource, listener: dict[str, Any]) -> Iterable[str]:
    gateway_class = str(_spec(gateway).get("gatewayClassName", ""))
    issuer = _issuer_of(graph, gateway)
    if issuer is None or not challenge_through(issuer, gateway) or not rejects_whole_gateway(gateway_class):
        return
    for ref in (listener.get("tls") or {}).get("certificateRefs") or []:
        if ref.get("kind", "Secret") != "Secret" or _bootstrap_secret(graph, gateway, ref.get("name")):
            continue
        yield (
            f"listener {listener.get('name')} serves Secret {ref.get('name')}, which only cert-manager's HTTP-01 "
            f"challenge through this same Gateway ({describe(issuer)}) can create, and class {gateway_class} "
            "rejects the whole Gateway while the Secret is missing: the challenge is never served"
        )


def _certificate_manager_listener(
    graph: ApplyGraph, gateway: RecordedResource, listener: dict[str, Any]
) -> Iterable[str]:
    options = (listener.get("tls") or {}).get("options") or {}
    names = [n.strip() for n in str(options.get(CERT_MANAGER_CERTS_OPTION, "")).split(",") if n.strip()]
    if not names:
        return
    gateway_class = str(_spec(gateway).get("gatewayClassName", ""))
    where = f"listener {listener.get('name')}"
    if gateway_class not in GKE_REGIONAL_CLASSES:
        yield f"{where} names Certificate Manager certificates, which class {gateway_class} does not take by name"
        return
    regions = _cluster_regions(graph)
    by_name = {str(r.inputs.get("name")): r for r in graph.of_type(CM_CERTIFICATE)}
    for name in names:
        cert = by_name.get(name)
        if cert is None:
            yield f"{where} names Certificate Manager certificate {name}, which the stack does not create"
            continue
        location = str(cert.inputs.get("location") or "global")
        if location == "global":
            yield f"{where} names {name}, a global certificate; a regional Gateway serves regional ones only"
        elif regions and location not in regions:
            yield f"{where} names {name} in {location}, not the cluster's region ({', '.join(sorted(regions))})"
        managed = cert.inputs.get("managed")
        if managed is not None and not managed.get("dnsAuthorizations") and not managed.get("issuanceConfig"):
            yield (
                f"{where} names {name}, a Google-managed certificate without a DNS authorization; "
                "load-balancer authorization exists for global certificates only"
            )
        if not graph.waits_for(gateway, cert):
            yield f"{where} names {name}, but the Gateway does not wait for it (GKE refuses a missing certificate)"


@rule(NAME, kind="environment")
def https_listener_certificate_obtainable(graph: ApplyGraph) -> Iterable[Violation]:
    for gateway in graph.kubernetes_objects():
        if gateway.inputs.get("kind") != "Gateway":
            continue
        for listener in _spec(gateway).get("listeners") or []:
            if (
                listener.get("protocol") != "HTTPS"
                or (listener.get("tls") or {}).get("mode", "Terminate") != "Terminate"
            ):
                continue
            for message in [
                *_secret_listener(graph, gateway, listener),
                *_certificate_manager_listener(graph, gateway, listener),
            ]:
                yield Violation(NAME, describe(gateway), message)


TLS_RULES = [NAME]
