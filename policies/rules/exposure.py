"""authenticated-exposure (stack rule): a server a Gateway reaches asks for an API key.

A server is exposed when a Gateway can send it requests: an InferencePool (an object, or the one a
release of the endpoint picker chart renders) selects its pods, or an HTTPRoute attached to a
Gateway names a Service whose selector matches them. An exposed server answers whoever reaches
the Gateway unless one of its long-running containers asks for a key:

- evidence of a key: the env var vLLM reads its key from (VLLM_API_KEY, common/contract.py), taken
  from a Secret (`valueFrom`), or an `--api-key` flag with a value on its command line;
- the waiver: the pods carry `llm-serving.io/allow-unauthenticated: "true"`, which the program
  writes only when the stack says `exposure.allowUnauthenticated: true`; a manifest written by
  hand can carry it too, in plain sight of its reviewers.

A ClusterIP Service no route names is not exposure (only the cluster reaches it), so a stack
without `exposure` has nothing to check.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.contract import ANNOTATION_ALLOW_UNAUTHENTICATED, API_KEY_ENV
from policies.commands import flag_values, tokens
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.routing import pools
from policies.rules.stack import _same_namespace, selector_matches
from policies.workloads import PodView, Workload, workload

API_KEY_FLAG = "--api-key"


@dataclass
class Door:
    """One way in from a Gateway: what opens it, its namespace and the pod labels it selects."""

    what: str
    namespace: str | None
    selector: dict


def _route_doors(resources: list[Resource]) -> list[Door]:
    services = {(r.namespace or "default", r.name): r for r in resources if r.is_kubernetes and r.kind == "Service"}
    doors = []
    for route in resources:
        if not (route.is_kubernetes and route.kind in ("HTTPRoute", "GRPCRoute")):
            continue
        spec = as_dict(route.props.get("spec"))
        if not any(as_str(as_dict(p).get("kind")) in (None, "Gateway") for p in as_list(spec.get("parentRefs"))):
            continue
        for rule in as_list(spec.get("rules")):
            for ref in as_list(as_dict(rule).get("backendRefs")):
                ref = as_dict(ref)
                if as_str(ref.get("kind")) not in (None, "Service") or as_str(ref.get("group")) not in (None, ""):
                    continue  # InferencePools are found as pools below
                namespace = as_str(ref.get("namespace")) or route.namespace or "default"
                service = services.get((namespace, as_str(ref.get("name")) or ""))
                if service is None:
                    continue
                selector = as_dict(as_dict(service.props.get("spec")).get("selector"))
                if selector:
                    doors.append(Door(f"{route.kind}/{route.name} -> Service/{service.name}", namespace, selector))
    return doors


def doors(resources: list[Resource]) -> list[Door]:
    found = [Door(p.what, p.namespace, p.selector) for p in pools(resources)]
    return found + _route_doors(resources)


def asks_for_key(pod: PodView) -> bool:
    for c in pod.containers:
        if not c.runs_alongside:
            continue
        for e in as_list(c.container.get("env")):
            e = as_dict(e)
            if as_str(e.get("name")) == API_KEY_ENV and as_dict(e.get("valueFrom")):
                return True
        if any(value and not value.startswith("-") for _, value in flag_values(tokens(c.container), (API_KEY_FLAG,))):
            return True
    return False


def waived(pod: PodView) -> bool:
    return as_str(pod.annotations.get(ANNOTATION_ALLOW_UNAUTHENTICATED)) == "true"


def authenticated_exposure(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    entries = doors(resources)
    if not entries:
        return []
    workloads: list[tuple[Resource, Workload]] = []
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is not None and w.long_running:
            workloads.append((r, w))
    out = []
    for r, w in workloads:
        for pod in w.pods:
            if not any(c.runs_alongside for c in pod.containers):
                continue
            through = [
                d
                for d in entries
                if not any(is_unknown(v) for v in d.selector.values())
                and _same_namespace(d.namespace, w.namespace)
                and selector_matches({"matchLabels": d.selector}, pod.labels)
            ]
            if not through or asks_for_key(pod) or waived(pod):
                continue
            out.append(
                (
                    r,
                    Finding(
                        f"{w.ref} ({pod.where}) is reachable from a Gateway through {through[0].what} but asks for "
                        f"no API key, so anyone who reaches the Gateway can use it; give its server the key from a "
                        f"Secret ({API_KEY_ENV} via secretKeyRef, or {API_KEY_FLAG} $(VAR)); the program does so once "
                        f"the stack sets the apiKey secret. To serve it openly on purpose set "
                        f"exposure.allowUnauthenticated: true (pods annotated {ANNOTATION_ALLOW_UNAUTHENTICATED}: "
                        '"true").'
                    ),
                )
            )
    return out
