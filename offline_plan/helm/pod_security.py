"""The Pod Security level a rendered pod meets, against the level its namespace enforces.

The controls are the Pod Security Standards' (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
"Baseline" and "Restricted" tables, policy version v1.33), checked on the pod spec as the chart
renders it. A namespace without an `enforce` label admits every pod (privileged), which is what a
namespace Helm creates (`createNamespace`) gets.
"""

from __future__ import annotations

from typing import Any

from common.pod_security import BASELINE, PRIVILEGED, PSA_PREFIX, RESTRICTED

__all__ = ["BASELINE", "PRIVILEGED", "RESTRICTED", "admitted", "level", "namespace_levels"]

# Baseline "Capabilities": adding any other is refused.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
# Restricted "Volume Types".
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
# Baseline "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or []]


def _baseline_problems(spec: dict[str, Any]) -> list[str]:
    problems = [f"{key}: true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    problems += [f"hostPath volume {v.get('name')}" for v in spec.get("volumes") or [] if "hostPath" in v]
    pod_context = spec.get("securityContext") or {}
    problems += [
        f"sysctl {s.get('name')}" for s in pod_context.get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS
    ]
    contexts = [("pod", pod_context)]
    for c in _containers(spec):
        name, context = str(c.get("name")), c.get("securityContext") or {}
        contexts.append((name, context))
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        added = set((context.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        problems += [f"{name}: adds {cap}" for cap in sorted(added)]
        problems += [f"{name}: hostPort {p['hostPort']}" for p in c.get("ports") or [] if p.get("hostPort")]
        if context.get("procMount") not in (None, "Default"):
            problems.append(f"{name}: procMount {context['procMount']}")
    for who, context in contexts:
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{who}: seccomp Unconfined")
        selinux = context.get("seLinuxOptions") or {}
        if (
            selinux.get("user")
            or selinux.get("role")
            or selinux.get("type")
            not in (
                None,
                "",
                "container_t",
                "container_init_t",
                "container_kvm_t",
                "container_engine_t",
            )
        ):
            problems.append(f"{who}: seLinuxOptions")
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            problems.append(f"{who}: AppArmor Unconfined")
    return problems


def _restricted_problems(spec: dict[str, Any]) -> list[str]:
    problems = [
        f"volume {v.get('name')} is not of a restricted type"
        for v in spec.get("volumes") or []
        if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    pod_context = spec.get("securityContext") or {}
    for c in _containers(spec):
        name, context = str(c.get("name")), c.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation not false")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot not true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: runAsUser 0")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            problems.append(f"{name}: does not drop ALL capabilities")
        problems += [f"{name}: adds {cap}" for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"]
    return problems


def level(spec: dict[str, Any]) -> tuple[str, list[str]]:
    """The strictest level the pod spec meets, and what keeps it from the next stricter one."""
    baseline = _baseline_problems(spec)
    if baseline:
        return PRIVILEGED, baseline
    restricted = _restricted_problems(spec)
    return (BASELINE, restricted) if restricted else (RESTRICTED, [])


def namespace_levels(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The enforced level of each namespace the program creates (its PSA `enforce` label)."""
    return {
        str((o.get("metadata") or {}).get("name")): ((o.get("metadata") or {}).get("labels") or {}).get(
            f"{PSA_PREFIX}/enforce", PRIVILEGED
        )
        for o in objects
        if o.get("kind") == "Namespace"
    }


def admitted(pod_level: str, namespace_level: str) -> bool:
    order = (RESTRICTED, BASELINE, PRIVILEGED)
    return order.index(pod_level) <= order.index(namespace_level)
