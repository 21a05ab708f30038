"""pod-security-context and namespace-pod-security: hardened pods, and namespaces that enforce it.

The controls and the exception annotation are defined once in common/pod_security.py, which the
components that write the manifests read too. Per container (init, sidecar and main, in every pod
template of the object: Job, LeaderWorkerSet leader and worker, KServe predictor, canary,
transformer and worker spec):
- allowPrivilegeEscalation false, capabilities drop ALL (adding back NET_BIND_SERVICE only), not
  privileged, a RuntimeDefault or Localhost seccomp profile (its own or the pod's): never waivable;
- runAsNonRoot true and no runAsUser 0 (its own or the pod's), readOnlyRootFilesystem true: unless
  the pod template's exception annotation waives the control with a reason;
and per pod, automountServiceAccountToken false unless waived the same way.

A Namespace must carry a `pod-security.kubernetes.io/enforce` label with a known level, and a level
weaker than restricted the reason annotation beside it.
"""

from __future__ import annotations

import json

from common import pod_security as ps
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.workloads import ContainerView, PodView, workload

# KServe runtimes are container templates merged into an InferenceService's pod: the pod-level fields
# (the token, the pod securityContext) are the InferenceService's, and their schema has none.
NO_POD_LEVEL_KINDS = {"ServingRuntime", "ClusterServingRuntime"}
# The one capability the restricted level lets a container add back.
ALLOWED_ADDED_CAPABILITIES = {"NET_BIND_SERVICE"}
NOT_NON_ROOT = "does not set runAsNonRoot: true"
RUNS_AS_ROOT = "sets runAsUser: 0 (root)"
NOT_READ_ONLY = "does not set readOnlyRootFilesystem: true"


def _flow(value: object) -> str:
    """A value as one line of JSON, which is also YAML flow style: pasted as it is, it parses."""
    return json.dumps(value, separators=(", ", ": "))


def fix_hint(problems: list[str]) -> str:
    """What to write, exactly as this program writes it for vLLM, so that the advice followed
    literally gives a pod that passes the rule and still starts: vLLM's image runs as root with
    HOME=/root, so a non-root uid on a read-only root needs a writable HOME and /tmp."""
    hint = f"set the container's securityContext to {_flow(ps.container_security_context())}"
    if NOT_NON_ROOT in problems or RUNS_AS_ROOT in problems:
        hint += f" and the pod's to {_flow(ps.pod_security_context())}"
    if {NOT_NON_ROOT, RUNS_AS_ROOT, NOT_READ_ONLY} & set(problems):
        hint += (
            f"; an image that runs as root (vLLM's does) writes its caches under HOME and its sockets under /tmp, "
            f"which a non-root uid on a read-only root cannot, so add to the container env {_flow(ps.writable_env())} "
            f"and volumeMounts {_flow(ps.writable_mounts())} and to the pod volumes {_flow(ps.writable_volumes())}, "
            f"as this program does for vLLM"
        )
    return (
        f"{hint} (see {ps.SECURITY_DOC}); or add the pod template annotation {ps.EXCEPTION_ANNOTATION}: "
        f"'<control>: <reason>' for runAsNonRoot or readOnlyRootFilesystem"
    )


def _effective(container_ctx: dict, pod_ctx: dict, key: str):
    """A container's value, else the pod's (how Kubernetes resolves runAsNonRoot, runAsUser, seccomp)."""
    value = container_ctx.get(key)
    return pod_ctx.get(key) if value is None else value


def _container_problems(c: ContainerView, pod_ctx: dict, waived: dict[str, str]) -> list[str]:
    ctx = c.container.get("securityContext")
    if is_unknown(ctx):
        return []
    ctx = as_dict(ctx)
    problems = []
    if ctx.get("privileged") is True:
        problems.append("is privileged")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append("does not set allowPrivilegeEscalation: false")
    caps = as_dict(ctx.get("capabilities"))
    dropped = {str(x).upper() for x in as_list(caps.get("drop"))}
    if "ALL" not in dropped:
        problems.append("does not drop ALL capabilities")
    added = {str(x).upper() for x in as_list(caps.get("add"))} - ALLOWED_ADDED_CAPABILITIES
    if added:
        problems.append(f"adds capabilities {', '.join(sorted(added))}")
    seccomp = _effective(ctx, pod_ctx, "seccompProfile")
    if not is_unknown(seccomp) and as_str(as_dict(seccomp).get("type")) not in ps.ACCEPTED_SECCOMP_TYPES:
        problems.append("has no RuntimeDefault (or Localhost) seccompProfile")
    if ps.RUN_AS_NON_ROOT not in waived:
        if _effective(ctx, pod_ctx, "runAsNonRoot") is not True:
            problems.append(NOT_NON_ROOT)
        elif _effective(ctx, pod_ctx, "runAsUser") == 0:
            problems.append(RUNS_AS_ROOT)
    if ps.READ_ONLY_ROOT_FS not in waived and ctx.get("readOnlyRootFilesystem") is not True:
        problems.append(NOT_READ_ONLY)
    return problems


def _pod_findings(ref: str, pod: PodView, pod_level: bool) -> list[Finding]:
    out = []
    raw = pod.annotations.get(ps.EXCEPTION_ANNOTATION)
    waived = ps.parse_exceptions(raw)
    if raw is not None and not is_unknown(raw) and not waived:
        out.append(
            Finding(
                f"{ref}: the {ps.EXCEPTION_ANNOTATION} annotation of {pod.where} waives nothing it may: write "
                f"'<control>: <reason of at least {ps.MIN_REASON_CHARS} characters>' with a control among "
                f"{', '.join(ps.WAIVABLE)}."
            )
        )
    pod_ctx = pod.spec.get("securityContext")
    if is_unknown(pod_ctx):
        return out
    pod_ctx = as_dict(pod_ctx)
    automount = pod.spec.get("automountServiceAccountToken")
    if pod_level and automount is not False and not is_unknown(automount) and ps.AUTOMOUNT_TOKEN not in waived:
        out.append(
            Finding(
                f"{ref}: {pod.where} does not set automountServiceAccountToken: false, so every container holds a "
                f"Kubernetes API token; set it to false, or waive it with the {ps.EXCEPTION_ANNOTATION} annotation "
                "('automountServiceAccountToken: <why the pod calls the API>')."
            )
        )
    for c in pod.containers:
        problems = _container_problems(c, pod_ctx, waived)
        if problems:
            out.append(Finding(f"{ref}: {c.label} in {pod.where} {'; '.join(problems)}; {fix_hint(problems)}.", c.name))
    return out


def pod_security_context(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out: list[Finding] = []
    for pod in w.pods:
        out += _pod_findings(w.ref, pod, pod_level=w.kind not in NO_POD_LEVEL_KINDS)
    return out


def is_namespace(obj: dict) -> bool:
    return obj.get("kind") == "Namespace"


def namespace_pod_security(obj: dict, config: dict) -> list[Finding]:
    meta = as_dict(obj.get("metadata"))
    name = as_str(meta.get("name")) or "<unnamed>"
    labels, annotations = meta.get("labels"), meta.get("annotations")
    if is_unknown(labels):
        return []
    level = as_dict(labels).get(f"{ps.PSA_PREFIX}/enforce")
    if is_unknown(level):
        return []
    ref = f"Namespace/{name}"
    if level not in ps.PSA_LEVELS:
        shown = "no" if level is None else f"the unknown level {level!r} as its"
        return [
            Finding(
                f"{ref}: has {shown} {ps.PSA_PREFIX}/enforce label, so Pod Security Admission admits any pod; label it "
                f"'{ps.RESTRICTED}' (or the strictest level its pods meet, with the reason in "
                f"{ps.LEVEL_REASON_ANNOTATION})."
            )
        ]
    if level != ps.RESTRICTED and not is_unknown(annotations):
        reason = as_str(as_dict(annotations).get(ps.LEVEL_REASON_ANNOTATION)) or ""
        if len(reason.strip()) < ps.MIN_REASON_CHARS:
            return [
                Finding(
                    f"{ref}: enforces the {level} Pod Security level without saying why it cannot be "
                    f"{ps.RESTRICTED}; write the reason in the {ps.LEVEL_REASON_ANNOTATION} annotation, or enforce "
                    f"{ps.RESTRICTED}."
                )
            ]
    return []
