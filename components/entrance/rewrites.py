"""Model aliases: other names clients may send, rewritten by the endpoint picker to served names.

One InferenceModelRewrite (llm-d.ai/v1alpha2, llm-d-router v0.10.0; CRD in tests/fixtures/crds) per
pool that has aliases: a rule per served name, matching each of its aliases exactly and rewriting
to the name vLLM serves. The picker rewrites the request body's `model` before forwarding and the
answer's `model` back to the name the client sent (pkg/epp/requestcontrol/director.go
modelRewriteIfNeeded; pkg/epp/handlers/server.go rewriteModelName at the tag), so a client that
asked for `meta-llama/Llama-3.1-8B-Instruct` gets that name back. Rewrites act within one pool
(`poolRef`), which is why the body-based routing map lists each alias under its base model too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.entrance.routes import INFERENCE_GROUP

API = "llm-d.ai/v1alpha2"


def rewrite_manifest(
    pool: str, namespace: str, aliases: Mapping[str, list[str]], labels: Mapping[str, str]
) -> dict[str, Any] | None:
    """`aliases`: served name -> the other names clients may use for it. None when there are none."""
    rules = [
        {
            "matches": [{"model": {"type": "Exact", "value": alias}} for alias in names],
            "targets": [{"modelRewrite": served}],
        }
        for served, names in aliases.items()
        if names
    ]
    if not rules:
        return None
    return {
        "apiVersion": API,
        "kind": "InferenceModelRewrite",
        "metadata": {"name": f"{pool}-aliases", "namespace": namespace, "labels": dict(labels)},
        "spec": {"poolRef": {"group": INFERENCE_GROUP, "kind": "InferencePool", "name": pool}, "rules": rules},
    }
