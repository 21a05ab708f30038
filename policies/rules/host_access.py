"""no-host-access and no-projected-api-token: pods that reach past their own sandbox.

no-host-access: a pod that shares the node's network, process or IPC namespace (hostNetwork,
hostPID, hostIPC), mounts a node directory (a hostPath volume) or binds a node port (a container
port with hostPort) can read other pods' traffic and processes, or the node's files and kubelet
credentials. These are the "Host Namespaces", "HostPath Volumes" and "Host Ports" controls of the
Pod Security Standards' baseline level (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
Pod Security Admission refuses them only in a namespace that enforces baseline or restricted, and
only when the pod is created; this rule refuses them wherever the pod runs, before it is applied.

no-projected-api-token: `automountServiceAccountToken: false` turns off only the automatic
`kube-api-access-*` volume; a `projected` volume with a `serviceAccountToken` source still mounts
a Kubernetes API token for the pod's service account
(https://kubernetes.io/docs/concepts/storage/projected-volumes/#serviceaccounttoken and
https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#opt-out-of-api-credential-automounting).
The pod-security-context rule's waiver for the automatic token (the pod template annotation
`llm-serving.io/pod-security-exception: 'automountServiceAccountToken: <reason>'`) waives a
projected token too: both are "this pod holds an API token, on purpose".
"""

from __future__ import annotations

from common import pod_security as ps
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.workloads import PodView, workload

HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _host_problems(pod: PodView) -> list[tuple[str, str | None]]:
    """(problem, container name or None) for every way the pod reaches into its node."""
    problems: list[tuple[str, str | None]] = []
    for key in HOST_NAMESPACES:
        if pod.spec.get(key) is True:
            problems.append((f"sets {key}: true", None))
    for v in as_list(pod.spec.get("volumes")):
        v = as_dict(v)
        if "hostPath" in v and not is_unknown(v.get("hostPath")):
            path = as_str(as_dict(v.get("hostPath")).get("path")) or "?"
            problems.append((f"mounts the node directory '{path}' (hostPath volume '{v.get('name', '?')}')", None))
    for c in pod.containers:
        for port in as_list(c.container.get("ports")):
            host_port = as_dict(port).get("hostPort")
            if isinstance(host_port, int) and not isinstance(host_port, bool) and host_port != 0:
                problems.append((f"{c.label} binds node port {host_port} (hostPort)", c.name))
    return problems


def no_host_access(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        problems = _host_problems(pod)
        if not problems:
            continue
        containers = {c for _, c in problems if c}
        out.append(
            Finding(
                f"{w.ref}: {pod.where} {'; '.join(p for p, _ in problems)}, which gives its containers the node's "
                "network, processes or files; remove them (use a Service instead of hostNetwork or hostPort, and a "
                "PersistentVolumeClaim, ConfigMap or emptyDir instead of a hostPath volume).",
                containers.pop() if len(containers) == 1 and len(problems) == 1 else None,
            )
        )
    return out


def _projected_token_volumes(pod: PodView) -> list[str]:
    names = []
    for v in as_list(pod.spec.get("volumes")):
        v = as_dict(v)
        sources = as_list(as_dict(v.get("projected")).get("sources"))
        if any(isinstance(s, dict) and "serviceAccountToken" in s for s in sources):
            names.append(as_str(v.get("name")) or "?")
    return names


def no_projected_api_token(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    for pod in w.pods:
        if ps.AUTOMOUNT_TOKEN in ps.parse_exceptions(pod.annotations.get(ps.EXCEPTION_ANNOTATION)):
            continue
        for name in _projected_token_volumes(pod):
            out.append(
                Finding(
                    f"{w.ref}: {pod.where} mounts a Kubernetes API token through the projected volume '{name}' "
                    "(a serviceAccountToken source), which automountServiceAccountToken: false does not stop; remove "
                    f"the source, or waive it with the {ps.EXCEPTION_ANNOTATION} annotation "
                    "('automountServiceAccountToken: <why the pod calls the API>')."
                )
            )
    return out
