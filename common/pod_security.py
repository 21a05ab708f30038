"""Pod security: the hardened shape every pod the program creates wears, and the namespace levels.

One module that the components (which write the securityContexts and Pod Security Admission
labels) and the policy pack (which checks them) both read, so a manifest and the rule that judges
it cannot disagree on what "hardened" means. Standard library only.

The controls (Kubernetes "Pod Security Standards", restricted profile,
https://kubernetes.io/docs/concepts/security/pod-security-standards/):
- seccompProfile RuntimeDefault: the container runtime's syscall filter (blocks e.g. `unshare`,
  `keyctl`, kernel module calls) instead of none;
- allowPrivilegeEscalation false: no setuid binary or file capability can raise a process's rights
  (sets the kernel's no_new_privs);
- capabilities drop ALL: no CAP_NET_RAW (packet spoofing), CAP_CHOWN, CAP_SETUID ... inside;
- runAsNonRoot with a fixed uid/gid: a container escape lands as an unprivileged user;
- readOnlyRootFilesystem: nothing can be written into the image (dropped tools, patched code), only
  into the emptyDirs a pod declares for what must be writable;
- automountServiceAccountToken false: a compromised pod holds no Kubernetes API credential.

A pod that cannot meet one of them says so on its pod template: the annotation EXCEPTION_ANNOTATION
names the controls it waives and why ("runAsNonRoot: <reason>"; several separated by "; "). The
policy rule `pod-security-context` accepts a waived control only with a reason.
"""

from __future__ import annotations

from typing import Any

from common.contract import PREFIX

# --- the per-pod shape ------------------------------------------------------------------------

# What a non-root process on a read-only root filesystem writes to, given as emptyDirs. vLLM's image
# runs as root with HOME=/root; components/serving/writable.py says what it writes there and under
# /tmp (measured, docs/security.md "Pods and namespaces"). HOME points at the first emptyDir.
WRITABLE_HOME = "/home/vllm"
WRITABLE_TMP = "/tmp"
WRITABLE_HOME_VOLUME = "vllm-home"
WRITABLE_TMP_VOLUME = "vllm-tmp"
# Compile and JIT caches of a large model reach hundreds of MiB (torch.compile graphs, Triton and
# FlashInfer kernels); the cap is far above that but keeps a runaway writer from filling the node's disk,
# which would evict every pod on it, not just this one.
WRITABLE_HOME_SIZE_LIMIT = "8Gi"
# Ray's session logs of a multi-node group grow with uptime; IPC sockets and temp files are small.
WRITABLE_TMP_SIZE_LIMIT = "4Gi"
# Where the hardened shape and what vLLM writes are explained, for the messages that point at it.
SECURITY_DOC = 'docs/security.md "Pods and namespaces"'

# A uid/gid no image's passwd file is likely to own, above the range distributions give to login
# users (1000-60000, /etc/login.defs UID_MAX), so files it writes are never mistaken for a person's.
# The same number as user and group; files it writes in shared volumes are world-readable (umask 022).
RUN_AS_USER = 65532
RUN_AS_GROUP = 65532
# emptyDirs and (for drivers that honour it) block volumes are made group-writable by this gid.
FS_GROUP = 65532

RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}
# Seccomp profile types the restricted profile accepts.
ACCEPTED_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")

EXCEPTION_ANNOTATION = f"{PREFIX}/pod-security-exception"
# Controls a pod may waive with a reason. The other three (seccomp, no privilege escalation, no
# capabilities) cost nothing to any workload the program runs, so there is no exception for them.
RUN_AS_NON_ROOT = "runAsNonRoot"
READ_ONLY_ROOT_FS = "readOnlyRootFilesystem"
AUTOMOUNT_TOKEN = "automountServiceAccountToken"
WAIVABLE = (RUN_AS_NON_ROOT, READ_ONLY_ROOT_FS, AUTOMOUNT_TOKEN)
# A reason shorter than this is a placeholder ("n/a", "todo"), not a reason.
MIN_REASON_CHARS = 20


def writable_env() -> list[dict[str, Any]]:
    return [{"name": "HOME", "value": WRITABLE_HOME}]


def writable_volumes() -> list[dict[str, Any]]:
    return [
        {"name": WRITABLE_HOME_VOLUME, "emptyDir": {"sizeLimit": WRITABLE_HOME_SIZE_LIMIT}},
        {"name": WRITABLE_TMP_VOLUME, "emptyDir": {"sizeLimit": WRITABLE_TMP_SIZE_LIMIT}},
    ]


def writable_mounts() -> list[dict[str, Any]]:
    return [
        {"name": WRITABLE_HOME_VOLUME, "mountPath": WRITABLE_HOME},
        {"name": WRITABLE_TMP_VOLUME, "mountPath": WRITABLE_TMP},
    ]


def container_security_context(*, non_root: bool = True, read_only_root: bool = True) -> dict[str, Any]:
    """A container's securityContext with every control; `non_root=False` only with an exception."""
    ctx: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
        "readOnlyRootFilesystem": read_only_root,
        "runAsNonRoot": non_root,
    }
    if non_root:
        ctx["runAsUser"] = RUN_AS_USER
        ctx["runAsGroup"] = RUN_AS_GROUP
    return ctx


def pod_security_context(*, non_root: bool = True) -> dict[str, Any]:
    """The pod-level part: seccomp for every container, and the uid/gid/fsGroup when non-root."""
    ctx: dict[str, Any] = {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}
    if non_root:
        ctx.update({"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_GROUP, "fsGroup": FS_GROUP})
    return ctx


def exception_annotation(waived: dict[str, str]) -> dict[str, str]:
    """{EXCEPTION_ANNOTATION: "control: reason; ..."} for a pod template, or {} when nothing is waived."""
    for control, reason in waived.items():
        if control not in WAIVABLE:
            raise ValueError(f"{control} cannot be waived; only {', '.join(WAIVABLE)} can")
        if len(reason.strip()) < MIN_REASON_CHARS or ";" in reason:
            raise ValueError(f"the reason for waiving {control} must be a sentence without ';'")
    if not waived:
        return {}
    return {EXCEPTION_ANNOTATION: "; ".join(f"{c}: {r.strip()}" for c, r in waived.items())}


def parse_exceptions(value: Any) -> dict[str, str]:
    """The waived controls and their reasons from an EXCEPTION_ANNOTATION value (bad parts dropped)."""
    out: dict[str, str] = {}
    if not isinstance(value, str):
        return out
    for part in value.split(";"):
        control, sep, reason = part.partition(":")
        control, reason = control.strip(), reason.strip()
        if sep and control in WAIVABLE and len(reason) >= MIN_REASON_CHARS:
            out[control] = reason
    return out


# --- Pod Security Admission on namespaces -----------------------------------------------------

PSA_PREFIX = "pod-security.kubernetes.io"
PSA_MODES = ("enforce", "audit", "warn")
RESTRICTED, BASELINE, PRIVILEGED = "restricted", "baseline", "privileged"
# Strictest first.
PSA_LEVELS = (RESTRICTED, BASELINE, PRIVILEGED)
# The policy version the labels pin. "latest" would let a cluster upgrade tighten the checks under
# running workloads; a version makes an upgrade a decision. The program pins its stack's own
# cluster.kubernetesVersion (psa_version below), so a namespace never enforces a level older than
# the cluster it runs on (the policy rule namespace-pod-security-version refuses that); PSA_VERSION
# is the default cluster version (stack_config/cluster.py kubernetesVersion). PSA accepts `<MODE>-version: a valid
# Kubernetes minor version, or latest` (https://kubernetes.io/docs/concepts/security/
# pod-security-admission/ "Pod Security Admission labels for namespaces").
PSA_VERSION = "v1.33"
# Beside a level weaker than restricted: why. The policy rule `namespace-pod-security` asks for it.
LEVEL_REASON_ANNOTATION = f"{PREFIX}/pod-security-reason"


def psa_version(kubernetes_version: str) -> str:
    """The PSA policy version of a cluster's Kubernetes minor version: "1.34" -> "v1.34"."""
    major, _, minor = kubernetes_version.removeprefix("v").partition(".")
    minor = minor.split(".", 1)[0]
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"Kubernetes version {kubernetes_version!r} is not 'MAJOR.MINOR'")
    return f"v{int(major)}.{int(minor)}"


def namespace_labels(level: str, version: str = PSA_VERSION) -> dict[str, str]:
    """PSA labels: enforce `level` as Kubernetes `version` defines it; warn and audit always at
    restricted, so whatever would fail the strictest level is reported on every apply and in the
    audit log even where it is allowed."""
    if level not in PSA_LEVELS:
        raise ValueError(f"Pod Security level {level!r} is not one of {', '.join(PSA_LEVELS)}")
    labels = {f"{PSA_PREFIX}/enforce": level, f"{PSA_PREFIX}/enforce-version": version}
    for mode in ("warn", "audit"):
        labels[f"{PSA_PREFIX}/{mode}"] = RESTRICTED
        labels[f"{PSA_PREFIX}/{mode}-version"] = version
    return labels


def namespace_annotations(level: str, reasons: list[str]) -> dict[str, str]:
    """The reason annotation a level weaker than restricted carries (none at restricted)."""
    if level == RESTRICTED:
        return {}
    if not reasons:
        raise ValueError(f"Pod Security level {level} needs the reason it is weaker than restricted")
    return {LEVEL_REASON_ANNOTATION: " ".join(r.strip() for r in reasons)}


def strictest_level(exceptions: dict[str, str]) -> tuple[str, list[str]]:
    """The level a namespace can enforce given the exceptions of the pods it will run.

    `exceptions` maps what needs an exception to the level it still meets and why, as
    "<level>: <reason>". Restricted when there are none; else the weakest level named, with the
    reasons of everything that needs that level (the reasons the level is what it is).
    """
    if not exceptions:
        return RESTRICTED, []
    parsed = []
    for who, text in exceptions.items():
        level, _, reason = text.partition(":")
        level = level.strip()
        if level not in PSA_LEVELS or not reason.strip():
            raise ValueError(f"{who}: {text!r} is not '<Pod Security level>: <reason>'")
        parsed.append((PSA_LEVELS.index(level), f"{who}: {reason.strip()}"))
    weakest = max(index for index, _ in parsed)
    return PSA_LEVELS[weakest], [reason for index, reason in parsed if index == weakest]
