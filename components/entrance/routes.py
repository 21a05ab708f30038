"""The Gateway clients call, the HTTPRoute from it to each base model's InferencePool, and the
redirect from plain HTTP to HTTPS. Pure functions returning manifests (tests validate them against
the Gateway API v1.6.1 CRDs in tests/fixtures/crds).

Listeners: `http` on port 80 (only the redirect route and, with an ACME certificate, cert-manager's
challenge route attach to it) and `https` on port 443 terminating TLS with the certificate Secret,
both for the one host name, admitting routes from the Gateway's own namespace only.

The inference route: requests under /v1 go to the InferencePool of their base model. With several
base models the Gateway first copies the base model of the body's `model` into
`contract.BASE_MODEL_HEADER` (body_routing.py) and each pool's rule matches it; with one base model
every /v1 request goes to its pool and the server itself answers an unknown name with 404.
Nothing else is routed: /metrics and /health of the servers stay inside the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common import contract

GATEWAY_GROUP = "gateway.networking.k8s.io"
INFERENCE_GROUP = "inference.networking.k8s.io"
HTTP_LISTENER, HTTPS_LISTENER = "http", "https"
API_PREFIX = "/v1"


@dataclass(frozen=True)
class PoolRoute:
    """One base model's share of the route."""

    pool: str
    """The InferencePool's name (the picker release's name)."""
    base_model: str
    """The served name the routing header carries for this pool."""
    request_timeout_seconds: int
    """How long one request may take end to end: the server's drain allowance, which bounds the
    longest generation it lets finish (components/serving/probes.py drain_seconds)."""


def gateway_manifest(
    name: str,
    namespace: str,
    *,
    gateway_class: str,
    hostname: str,
    tls_secret: str | None,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    infrastructure_annotations: Mapping[str, str] | None = None,
    tls_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The HTTPS listener terminates TLS with `tls_secret` (a kubernetes.io/tls Secret) or, without
    one, with what `tls_options` name (GKE: Certificate Manager certificates). The Gateway CRD
    requires one of the two in Terminate mode ("certificateRefs or options must be specified when
    mode is Terminate", Gateway API v1.6.1 GatewayTLSConfig; tests/fixtures/crds)."""
    if not tls_secret and not tls_options:
        raise ValueError("the HTTPS listener needs a certificate Secret or implementation options naming one")
    tls: dict[str, Any] = {"mode": "Terminate"}
    if tls_secret:
        tls["certificateRefs"] = [{"group": "", "kind": "Secret", "name": tls_secret}]
    if tls_options:
        tls["options"] = dict(tls_options)
    same_namespace = {"namespaces": {"from": "Same"}}
    spec: dict[str, Any] = {
        "gatewayClassName": gateway_class,
        "listeners": [
            {
                "name": HTTP_LISTENER,
                "protocol": "HTTP",
                "port": 80,
                "hostname": hostname,
                "allowedRoutes": same_namespace,
            },
            {
                "name": HTTPS_LISTENER,
                "protocol": "HTTPS",
                "port": 443,
                "hostname": hostname,
                "tls": tls,
                "allowedRoutes": same_namespace,
            },
        ],
    }
    if infrastructure_annotations:
        # Gateway API: "Annotations that SHOULD be applied to any resources created in response to
        # this Gateway" (the load balancer Service agentgateway creates).
        spec["infrastructure"] = {"annotations": dict(infrastructure_annotations)}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "Gateway", "metadata": metadata, "spec": spec}


def _parent(gateway: str, namespace: str, listener: str) -> dict[str, str]:
    return {"group": GATEWAY_GROUP, "kind": "Gateway", "name": gateway, "namespace": namespace, "sectionName": listener}


def inference_route_manifest(
    name: str,
    namespace: str,
    *,
    gateway: str,
    hostname: str,
    pools: list[PoolRoute],
    route_on_header: bool,
    request_timeouts: bool,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """`route_on_header`: one rule per pool matching the base-model header (several base models);
    else one pool takes every /v1 request. `request_timeouts`: HTTPRoute `timeouts.request` on each
    rule (off where the implementation takes the timeout from a policy instead, GKE)."""
    if not route_on_header and len(pools) != 1:
        raise ValueError(
            f"{len(pools)} pools behind a Gateway that cannot route on the body's model; "
            "the stack checks should have refused this"
        )
    rules = []
    for pool in pools:
        match: dict[str, Any] = {"path": {"type": "PathPrefix", "value": API_PREFIX}}
        if route_on_header:
            match["headers"] = [{"type": "Exact", "name": contract.BASE_MODEL_HEADER, "value": pool.base_model}]
        rule: dict[str, Any] = {
            "matches": [match],
            "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": pool.pool}],
        }
        if request_timeouts:
            rule["timeouts"] = {"request": f"{pool.request_timeout_seconds}s"}
        rules.append(rule)
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"parentRefs": [_parent(gateway, namespace, HTTPS_LISTENER)], "hostnames": [hostname], "rules": rules},
    }


def redirect_route_manifest(
    name: str, namespace: str, *, gateway: str, hostname: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """Plain HTTP answers 301 to the same URL on https. cert-manager's HTTP-01 challenge route on the
    same listener matches its path Exact, which wins over this route's implicit PathPrefix / (the
    HTTPRoute CRD's match precedence: "Exact path match" first)."""
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "parentRefs": [_parent(gateway, namespace, HTTP_LISTENER)],
            "hostnames": [hostname],
            "rules": [
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
            ],
        },
    }
