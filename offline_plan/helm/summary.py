"""plan.md's "Helm releases" section: per release, what its chart really creates."""

from __future__ import annotations

from collections import Counter
from typing import Any

from common import images
from offline_plan.helm import pod_security, quantities
from offline_plan.helm.engine import RenderedRelease
from offline_plan.helm.pods import PodSummary, custom_resource_images, summaries

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# admissionregistration.k8s.io/v1 defaults failurePolicy to Fail
# (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy).
DEFAULT_FAILURE_POLICY = "Fail"


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _image_state(ref: str) -> str:
    """Whether the reference pins bytes, and what common/images.py's table says of it."""
    entries = images.entries_for(ref)
    table = (
        "not in the image table"
        if not entries
        else "table: pinned by digest"
        if any(e.resolved for e in entries)
        else "table: by tag only (unresolved)"
    )
    return ("digest in the reference" if "@sha256:" in ref else "by tag") + f"; {table}"


def _webhooks(objects: list[dict[str, Any]]) -> list[str]:
    lines = []
    for obj in objects:
        if obj.get("kind") not in WEBHOOK_KINDS:
            continue
        for hook in obj.get("webhooks") or []:
            policy = hook.get("failurePolicy") or f"{DEFAULT_FAILURE_POLICY} (default)"
            lines.append(f"`{obj['kind']}/{_name(obj)}` `{hook.get('name')}`: failurePolicy {policy}")
    return lines


def _placement(pod: PodSummary) -> str:
    parts = [f"`{k}={v}`" for k, v in sorted(pod.node_selector.items())]
    parts += [f"affinity `{a}`" for a in pod.affinity_keys]
    return ", ".join(parts) or "any node"


def _tolerations(pod: PodSummary) -> str:
    shown = []
    for t in pod.tolerations:
        key = t.get("key") or "(every taint)"
        value = f"={t['value']}" if t.get("value") else ""
        shown.append(f"`{key}{value}:{t.get('effect') or 'any'}`")
    return ", ".join(shown) or "none"


def _pod_security(pod: PodSummary, default_namespace: str, namespaces: dict[str, str]) -> str:
    namespace = pod.namespace or default_namespace
    enforced = namespaces.get(namespace)
    shown = f"meets {pod.level}" + (f" ({'; '.join(pod.level_gaps[:2])})" if pod.level_gaps else "")
    if enforced is None:
        return f"{shown}; `{namespace}` is not the program's (no enforce label: privileged)"
    verdict = "admitted" if pod_security.admitted(pod.level, enforced) else "**REFUSED**"
    return f"{shown}; `{namespace}` enforces {enforced}: {verdict}"


def release_lines(rendered: RenderedRelease, namespaces: dict[str, str]) -> list[str]:
    rel = rendered.release
    kinds = Counter(str(o.get("kind")) for o in rendered.objects)
    hooks = Counter(str(o.get("kind")) for o in rendered.hooks)
    out = [
        f"### `{rel.namespace}/{rel.name}`: {rel.chart_name} {rel.version}",
        "",
        f"- **Chart**: `{rel.chart}` {rel.version}, from `charts/{rel.chart_dir().name}/` (resource `{rel.resource}`)",
        f"- **Objects** ({len(rendered.objects)}): " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
    ]
    if hooks:
        out.append("- **Install hooks among them**: " + ", ".join(f"{k} {n}" for k, n in sorted(hooks.items())))
    crds = [_name(o) for o in rendered.crds] + [
        _name(o) for o in rendered.objects if o.get("kind") == "CustomResourceDefinition"
    ]
    out.append(f"- **CRDs it installs** ({len(crds)}): " + (", ".join(f"`{c}`" for c in sorted(crds)) or "none"))
    webhooks = _webhooks(rendered.objects)
    out.append("- **Webhooks it registers**: " + ("; ".join(webhooks) or "none"))
    if rel.placeholders:
        out.append(
            "- **Rendered with placeholders** (values a cloud computes or secrets, stood in for by the mock "
            "runtime): " + ", ".join(f"`{p}`" for p in rel.placeholders)
        )
    pods = summaries(rendered.objects)
    refs: dict[str, str] = {}
    for pod in pods:
        for image in pod.images:
            refs.setdefault(image, pod.ref)
    for where, image in custom_resource_images(rendered.objects):
        refs.setdefault(image, f"{where} (its operator runs it)")
    if refs:
        out += ["", "| image | pinned | first used by |", "|---|---|---|"]
        out += [f"| `{ref}` | {_image_state(ref)} | {where} |" for ref, where in sorted(refs.items())]
    if pods:
        out += [
            "",
            (
                "| workload | pods | CPU request / pod | memory request / pod | nodes (selector, required affinity) "
                "| tolerations | Pod Security |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        for pod in pods:
            unset = f" (none for {', '.join(pod.unset)})" if pod.unset else ""
            shown = f"{quantities.cpu(pod.cpu)}{unset} | {quantities.memory(pod.memory)}{unset}"
            security = _pod_security(pod, rel.namespace, namespaces)
            out.append(
                f"| `{pod.ref}` | {pod.count} | {shown} | {_placement(pod)} | {_tolerations(pod)} | {security} |"
            )
        steady = [p for p in pods if p.count not in ("per node", "run once")]
        cpu = sum(p.cpu * p.replicas for p in steady)
        memory = sum(p.memory * p.replicas for p in steady)
        out += ["", f"Replicated workloads request {quantities.cpu(cpu)} CPU and {quantities.memory(memory)} in all."]
    return [*out, ""]


def section(rendered: list[RenderedRelease], namespaces: dict[str, str]) -> list[str]:
    """`namespaces`: the Pod Security level each namespace the program creates enforces."""
    out = [
        "## Helm releases (rendered)",
        "",
        (
            "Each release rendered offline by Helm's own engine (helm-python-sdk 0.2.2, Helm Go SDK v4.2.3) from "
            "`charts/`, with the release name, namespace, chart version and values the program passes; the "
            "objects are in `manifests/helm.<namespace>.<release>.*`. Objects an operator creates later (the "
            "GPU Operator's operands, the Prometheus pods) are not rendered; their images are listed where the "
            "chart names them. A pod's Pod Security level is checked on its rendered spec against the "
            "Pod Security Standards; a namespace the program does not create is taken to enforce nothing."
        ),
        "",
    ]
    if not rendered:
        return [*out, "The stack installs no Helm release.", ""]
    for release in rendered:
        out += release_lines(release, namespaces)
    return out
