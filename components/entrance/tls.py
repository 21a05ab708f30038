"""The HTTPS listener's certificate from an ACME CA, through cert-manager (tls.certificate acme).

An Issuer in the Gateway's namespace, and the annotation `cert-manager.io/issuer` on the Gateway:
cert-manager's gateway-shim then keeps a Certificate for every HTTPS listener with a host name and
a Secret reference in the Gateway's namespace, and renews it (cert-manager v1.21.1
pkg/controller/certificate-shim/sync.go:270-312, 500-533; annotation keys in
pkg/apis/certmanager/v1/types.go:45-151). The ACME HTTP-01 challenge is answered by an HTTPRoute
cert-manager attaches to the Gateway's `http` listener (`gatewayHTTPRoute.parentRefs`, the
ClusterIssuer/Issuer CRD, tests/fixtures/crds), for the path /.well-known/acme-challenge/<token>
(pkg/issuer/acme/http/httproute.go), so the host name must resolve to the Gateway's address first.
The solver's Service is ClusterIP: both Gateway implementations reach endpoints directly
(serviceType defaults to NodePort).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.facts import Fact
from components.entrance.routes import GATEWAY_GROUP, HTTP_LISTENER

ISSUER_ANNOTATION = "cert-manager.io/issuer"
GKE_HTTP01 = Fact(
    subject="cert-manager's HTTP-01 solver route (ClusterIP Service) is served by GKE's regional Gateway",
    value=None,
    source="not verified on GKE (docs/routing.md)",
    established=False,
    resolve_with="kubectl get certificates,challenges -n <namespace> (READY True); else use tls.certificate secret",
)


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
