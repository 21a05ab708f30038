"""Every name the stack would hand to the Kubernetes API or to Helm, checked against the rule of the
API that receives it, and every object named exactly once.

The program derives object names from model and adapter names (`<model>-epp`, `<model>-api`, a
truncated prefix plus a hash), and Helm charts derive theirs from the release name; the stack file's
own checks see only what the user wrote. Two derived names that collide are one object to the API
server (the second create fails with AlreadyExists, or one release's object silently replaces
another's), and a name the API's validation refuses fails the `pulumi up` half-way. Both are found
here, before anything is created, with the resources that produced them named.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from common.untrusted import excerpt
from offline_plan.helm.engine import RenderedRelease
from offline_plan.mock_runtime import Evaluation, redact_secrets
from stack_config.formats import (
    DNS1123_LABEL_RE,
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_RE,
    DNS_LABEL_RE,
    LABEL_VALUE_RE,
    default_model_name,
)
from stack_config.loader import PROJECT

NAMES_DOC = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
LABELS_DOC = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"
# Helm refuses a release name longer than 53 characters, room left under Kubernetes' 63-character
# label limit for the suffixes charts append (helm/helm v3 pkg/chartutil/validate_name.go:
# "invalid release name, must match regex ... and the length must not be longer than 53").
HELM_RELEASE_MAX = 53
# Names whose rule is stricter than a DNS-1123 subdomain (kubernetes/kubernetes
# pkg/apis/core/validation/validation.go: ValidateServiceName is DNS-1035 label,
# ValidateNamespaceName DNS-1123 label). A Job's pods carry its name as the
# `batch.kubernetes.io/job-name` label value, so a Job name is at most 63 characters too
# (https://kubernetes.io/docs/reference/labels-annotations-taints/#batch-kubernetes-io-job-name).
LABEL_LENGTH = 63
SERVICE_KINDS = frozenset({"Service"})
LABEL_NAMED_KINDS = frozenset({"Namespace", "Job"})
# RBAC object names are path segments, colons allowed (pkg/apis/rbac/validation/validation.go
# ValidateRBACName = path.IsValidPathSegmentName: not "." or "..", no "/" or "%").
PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


@dataclass(frozen=True)
class NamedObject:
    """One object the stack creates, and what produced it (shown when it is refused)."""

    obj: dict[str, Any]
    source: str


def _identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]  # v1 and apps/v1 differ by group only
    return group, str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _shown(obj: dict[str, Any]) -> str:
    _, kind, namespace, name = _identity(obj)
    return f"`{kind} {namespace + '/' if namespace else ''}{excerpt(name, 80)}`"


def _name_problem(kind: str, name: str) -> str | None:
    if kind in SERVICE_KINDS:
        if not DNS_LABEL_RE.fullmatch(name):
            return (
                f"a Service name must be an RFC 1035 label: at most {LABEL_LENGTH} lower-case letters, digits and "
                f"'-', starting with a letter ({NAMES_DOC}#rfc-1035-label-names); this one has {len(name)} characters"
            )
        return None
    if kind in LABEL_NAMED_KINDS:
        if not DNS1123_LABEL_RE.fullmatch(name):
            return (
                f"a {kind} name must be an RFC 1123 label of at most {LABEL_LENGTH} characters "
                f"({NAMES_DOC}#dns-label-names); this one has {len(name)}"
            )
        return None
    if kind in PATH_SEGMENT_KINDS:
        if name in ("", ".", "..") or "/" in name or "%" in name:
            return "an RBAC object name may not be empty, '.' or '..', nor hold '/' or '%'"
        return None
    if len(name) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN_RE.fullmatch(name):
        return (
            f"an object name must be a DNS subdomain: at most {DNS1123_SUBDOMAIN_MAX} lower-case letters, digits, "
            f"'-' and '.' ({NAMES_DOC}#dns-subdomain-names)"
        )
    return None


def _label_dicts(obj: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """The object's labels and its pod template's (a Deployment's, a Job's, a LeaderWorkerSet's)."""
    yield (obj.get("metadata") or {}).get("labels") or {}
    raw_spec = obj.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    templates = [spec.get("template")]
    group = spec.get("leaderWorkerTemplate")
    if isinstance(group, dict):
        templates += [group.get("leaderTemplate"), group.get("workerTemplate")]
    for template in templates:
        if isinstance(template, dict):
            yield (template.get("metadata") or {}).get("labels") or {}


def _label_problems(obj: dict[str, Any]) -> list[str]:
    problems = []
    for labels in _label_dicts(obj):
        if not isinstance(labels, dict):
            continue
        for key, value in sorted(labels.items(), key=lambda kv: str(kv[0])):
            if not isinstance(value, str) or not LABEL_VALUE_RE.fullmatch(value):
                problems.append(
                    f"label {excerpt(str(key), 80)}={excerpt(str(value), 80)}: a label value is at most "
                    f"{LABEL_LENGTH} letters, digits, '-', '_' and '.' ({LABELS_DOC})"
                )
    return problems


# Shown in place of a key when no model or adapter name explains a derived name (a chart's own).
NO_KEY = "(derived names)"


def _key_for(name: str, served_names: list[tuple[str, str]]) -> tuple[str, str]:
    """The stack-file key a derived name most likely comes from (the longest matching model or adapter
    name), and the advice that goes with it."""
    matches = [(key, served) for key, served in served_names if served and name.startswith(served[:20])]
    if not matches:
        return NO_KEY, ""
    key, served = max(matches, key=lambda m: len(m[1]))
    return key, f"; it is derived from {key} {excerpt(served, 80)}: choose a shorter or more distinct name there"


def served_names(config: dict[str, str]) -> list[tuple[str, str]]:
    """(stack-file key, name) for every model and adapter name of the evaluated config."""
    try:
        models = json.loads(config.get(f"{PROJECT}:models", "[]"))
    except ValueError:
        return []
    found: list[tuple[str, str]] = []
    for i, model in enumerate(models if isinstance(models, list) else []):
        if not isinstance(model, dict):
            continue
        # An unnamed model is served under the name stack_config derives from its repo id.
        found.append((f"models[{i}].name", str(model.get("name") or default_model_name(str(model.get("repo", ""))))))
        for j, adapter in enumerate(model.get("adapters") or []):
            if isinstance(adapter, dict):
                found.append((f"models[{i}].adapters[{j}].name", str(adapter.get("name", ""))))
    return found


def problems(
    objects: list[NamedObject], helm_releases: list[tuple[str, str]], served: list[tuple[str, str]]
) -> list[str]:
    """One line per collision, per name an API refuses and per Helm release name too long.

    `helm_releases`: (release name, the resource that installs it)."""
    found: list[str] = []
    first: dict[tuple[str, str, str, str], NamedObject] = {}
    for named in objects:
        identity = _identity(named.obj)
        key, advice = _key_for(identity[3], served)
        earlier = first.get(identity)
        if earlier is not None:
            found.append(
                f"{key}: {_shown(named.obj)} would be created twice, by {earlier.source} and by {named.source}: "
                f"the API server keeps one object per kind, namespace and name{advice}"
            )
            continue
        first[identity] = named
        problem = _name_problem(identity[1], identity[3])
        for why in ([problem] if problem else []) + _label_problems(named.obj):
            found.append(f"{key}: {_shown(named.obj)} (from {named.source}): {why}{advice}")
    for release, source in helm_releases:
        if len(release) > HELM_RELEASE_MAX:
            key, advice = _key_for(release, served)
            found.append(
                f"{key}: Helm release {excerpt(release, 80)} (from {source}): Helm refuses release names longer "
                f"than {HELM_RELEASE_MAX} characters, this one has {len(release)}{advice}"
            )
    return found


def named_objects(evaluation: Evaluation, rendered: list[RenderedRelease]) -> list[NamedObject]:
    """The program's own objects (not the ones it only reads) and every object the releases' templates
    render. A chart's crds/ folder is left out: Helm skips a CRD that exists already
    (https://helm.sh/docs/chart_best_practices/custom_resource_definitions/)."""
    found = [
        NamedObject(redact_secrets(r.inputs), f"resource {r.name} ({r.type})")
        for r in evaluation.resources
        if r.is_kubernetes_object and r.read_id is None
    ]
    for release in rendered:
        found += [NamedObject(obj, release.release.label) for obj in release.objects]
    return found


def helm_release_names(rendered: list[RenderedRelease]) -> list[tuple[str, str]]:
    return [(r.release.name, f"resource {r.release.resource}") for r in rendered]


def stack_problems(evaluation: Evaluation, rendered: list[RenderedRelease]) -> list[str]:
    """Each problem as a line of the stack file's, naming the key it comes from."""
    found = problems(named_objects(evaluation, rendered), helm_release_names(rendered), served_names(evaluation.config))
    return [f"Pulumi.{evaluation.stack}.yaml: {line}" for line in found]
