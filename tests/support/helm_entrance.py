"""Issue 26 point 4: the entrance is whole with what the picker charts really render.

The HTTPRoute's InferencePool backendRefs must name the pools the llm-d-router-gateway releases
render (Gateway API Inference Extension: an HTTPRoute backendRef of kind InferencePool,
https://gateway-api-inference-extension.sigs.k8s.io/api-types/inferencepool/), in the servers'
namespace, selecting exactly that model's server pods on a port they listen on, with an endpoint
picker reference to the Service the same release renders, which selects the rendered picker pods.
"""

from __future__ import annotations

from common import contract
from offline_plan.helm import RenderedRelease
from offline_plan.mock_runtime import Evaluation
from policies.workloads import workload


def _selects(selector: dict, labels: dict) -> bool:
    # The picker chart writes matchLabels only; anything else is reported as not matching.
    if set(selector) - {"matchLabels"}:
        return False
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def entrance_problems(evaluation: Evaluation, rendered: list[RenderedRelease]) -> list[str]:
    stack = evaluation.stack
    pools = {
        (o["metadata"].get("namespace", r.release.namespace), o["metadata"]["name"]): (r, o)
        for r in rendered
        for o in r.objects
        if o.get("kind") == "InferencePool"
    }
    servers = [
        (w, pod)
        for obj in evaluation.kubernetes_objects
        if (w := workload(obj)) is not None and w.long_running
        for pod in w.pods
        if pod.labels.get(contract.LABEL_MODEL)
    ]
    refs = [
        (route["metadata"]["namespace"], rule, ref)
        for route in evaluation.kubernetes_objects
        if route.get("kind") == "HTTPRoute"
        for rule in route["spec"].get("rules") or []
        for ref in rule.get("backendRefs") or []
        if ref.get("kind") == "InferencePool"
    ]
    if not refs:
        return [f"{stack}: the HTTPRoute names no InferencePool"]
    problems = []
    for route_namespace, rule, ref in refs:
        key = (ref.get("namespace") or route_namespace, ref["name"])
        if ref.get("group") != "inference.networking.k8s.io":
            problems.append(f"{stack}: backendRef {key} has group {ref.get('group')!r}")
        if key not in pools:
            problems.append(f"{stack}: backendRef {key} names no InferencePool a picker release renders")
            continue
        release, pool = pools[key]
        spec = pool["spec"]
        selected = [(w, pod) for w, pod in servers if w.namespace == key[0] and _selects(spec["selector"], pod.labels)]
        if not selected:
            problems.append(f"{stack}: InferencePool {key} selects no server pod")
        models = {pod.labels[contract.LABEL_MODEL] for _, pod in selected}
        headers = {h["value"] for m in rule.get("matches") or [] for h in m.get("headers") or []}
        if selected and not (len(models) == 1 and models <= headers | {ref["name"]}):
            problems.append(f"{stack}: InferencePool {key} selects the servers of {sorted(models)}")
        ports = {p["number"] for p in spec.get("targetPorts") or []}
        for w, pod in selected:
            listening = {p.get("containerPort") for c in pod.containers for p in c.container.get("ports") or []}
            if not ports <= listening:
                problems.append(f"{stack}: {w.ref} does not listen on the pool's target ports {ports}")
        picker = spec.get("endpointPickerRef") or {}
        services = {
            o["metadata"]["name"]: o
            for o in release.objects
            if o.get("kind") == "Service" and o["metadata"].get("namespace", release.release.namespace) == key[0]
        }
        service = services.get(picker.get("name"))
        if service is None:
            problems.append(f"{stack}: {key}'s endpoint picker Service {picker.get('name')!r} is not rendered")
            continue
        if (picker.get("port") or {}).get("number") not in {p["port"] for p in service["spec"]["ports"]}:
            problems.append(f"{stack}: {key}'s endpoint picker port is not a port of Service {picker['name']}")
        picker_pods = [
            pod for o in release.objects if (w := workload(o)) is not None and w.kind == "Deployment" for pod in w.pods
        ]
        selector = service["spec"].get("selector") or {}
        if not any(all(pod.labels.get(k) == v for k, v in selector.items()) for pod in picker_pods):
            problems.append(f"{stack}: the picker Service {picker['name']} selects no rendered picker pod")
    return problems
