"""Body-based routing: the base model of the request's `model`, in a header the route matches.

An HTTPRoute matches headers, not bodies, so with several base models behind one host the Gateway
must read the JSON body first. agentgateway does it natively: an AgentgatewayPolicy in phase
PreRouting, attached to the Gateway, sets `contract.BASE_MODEL_HEADER` from a CEL map indexed by
`json(request.body).model` (the pattern of gateway-api-inference-extension@v1.5.0
site-src/guides/serving-multiple-inference-pools-latest.md, "Kgateway" tab, lines 46-75, written
for the group gateway.kgateway.dev; agentgateway v1.4.1 names it agentgateway.dev/v1alpha1, and its
CRD accepts `traffic.phase: PreRouting` with `transformation.request.set[{name, value}]`, value a
CEL expression, only on a Gateway or ListenerSet target: the transcription in tests/fixtures/crds).
Every served name maps to its base model: a base model to itself, each of its adapters to it. A
name the map lacks leaves the header unset (the CEL lookup fails), no rule matches, and the Gateway
answers 404; that behaviour was not observed on a live agentgateway (docs/routing.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from common import contract
from common.facts import Fact
from components.entrance.routes import GATEWAY_GROUP

AGENTGATEWAY_API = "agentgateway.dev/v1alpha1"
UNKNOWN_NAME = Fact(
    subject="agentgateway answers 404 for a model name the CEL map lacks (the header stays unset)",
    value=None,
    source="inferred from Gateway API route matching; not observed on a live agentgateway",
    established=False,
    resolve_with="curl -s -o /dev/null -w '%{http_code}' https://<host>/v1/completions "
    '-H \'Content-Type: application/json\' -d \'{"model": "nope", "prompt": "x"}\'',
)


def base_model_map(models: Mapping[str, list[str]]) -> dict[str, str]:
    """every name a client may send -> its base model, from base model -> the other names served on it
    (its adapters and every alias)."""
    mapping: dict[str, str] = {}
    for base, others in models.items():
        for name in [base, *others]:
            if name in mapping:
                raise ValueError(f"{name!r} is served twice; the stack checks should have refused this")
            mapping[name] = base
    return mapping


def cel_lookup(mapping: Mapping[str, str]) -> str:
    """A CEL expression: the map literal indexed by the body's model (JSON string literals are CEL
    string literals, so json.dumps writes the map)."""
    return f"{json.dumps(dict(sorted(mapping.items())))}[json(request.body).model]"


def agentgateway_policy_manifest(
    name: str, namespace: str, *, gateway: str, mapping: Mapping[str, str], labels: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": AGENTGATEWAY_API,
        "kind": "AgentgatewayPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": gateway}],
            "traffic": {
                "phase": "PreRouting",
                "transformation": {
                    "request": {"set": [{"name": contract.BASE_MODEL_HEADER, "value": cel_lookup(mapping)}]}
                },
            },
        },
    }
