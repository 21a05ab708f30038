"""The HTTPS listener's certificate from an ACME CA, through cert-manager (tls.certificate acme).

An Issuer in the Gateway's namespace, and the annotation `cert-manager.io/issuer` on the Gateway:
cert-manager's gateway-shim then keeps a Certificate for every HTTPS listener with a host name and
a Secret reference in the Gateway's namespace, and renews it (cert-manager v1.21.1
pkg/controller/certificate-shim/sync.go:270-312, 500-533; annotation keys in
pkg/apis/certmanager/v1/types.go:45-151). The ACME HTTP-01 challenge is answered by an HTTPRoute
cert-manager attaches to the Gateway's `http` listener (`gatewayHTTPRoute.parentRefs`, the
ClusterIssuer/Issuer CRD, tests/fixtures/crds), for the path /.well-known/acme-challenge/<token>
(pkg/issuer/acme/http/httproute.go), so the host name must resolve to the Gateway's address first.
The solver's Service is ClusterIP: agentgateway reaches endpoints directly (serviceType defaults to
NodePort).

The challenge is served while the HTTPS listener's Secret does not exist yet only because
agentgateway programs each listener on its own: a listener whose Secret is missing gets a
placeholder certificate and `Programmed: False`, the Gateway stays `Programmed: True` and its other
listeners serve (agentgateway/agentgateway@v1.4.1 controller/pkg/agentgateway/translator/conversion.go
1115-1147, `dummyTls`; testdata/gateways/invalid-tls.yaml: "Some listeners are not accepted: https:
Bad TLS configuration", Gateway Programmed True). GKE's Gateway controller does not (it rejects the
whole Gateway), so acme is refused there (stack_config/entrance.py `tls_problems`) and the
certificate is Google-managed instead (google_cert.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.entrance.routes import GATEWAY_GROUP, HTTP_LISTENER

ISSUER_ANNOTATION = "cert-manager.io/issuer"


def issuer_manifest(
    name: str, namespace: str, *, gateway: str, server: str, email: str | None, labels: Mapping[str, str]
) -> dict[str, Any]:
    acme: dict[str, Any] = {
        "server": server,
        # The ACME account key cert-manager creates and keeps here.
        "privateKeySecretRef": {"name": f"{name}-account-key"},
        "solvers": [
            {
                "http01": {
                    "gatewayHTTPRoute": {
                        "parentRefs": [
                            {
                                "group": GATEWAY_GROUP,
                                "kind": "Gateway",
                                "name": gateway,
                                "namespace": namespace,
                                "sectionName": HTTP_LISTENER,
                            }
                        ],
                        "serviceType": "ClusterIP",
                    }
                }
            }
        ],
    }
    if email:
        acme["email"] = email
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"acme": acme},
    }
