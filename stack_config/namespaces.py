"""Namespaces the program may create and label as its own, and the ones it must never take.

The serving namespace and the operators' namespace get a Pod Security label, a default-deny
NetworkPolicy and a ResourceQuota from this program; given `kube-system` they would cap
system-critical pods and cut CoreDNS off, given another add-on's namespace they would fence in that
add-on's pods. Such a name is refused where it is written.
"""

from __future__ import annotations

from common.untrusted import excerpt

# Kubernetes' own namespaces and its reserved prefix ("Avoid creating namespaces with the prefix
# kube-, since it is reserved for Kubernetes system namespaces",
# https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces).
KUBERNETES_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
RESERVED_PREFIXES = ("kube-",)
# GKE's managed namespaces: Managed Service for Prometheus runs in gmp-system and gmp-public
# (https://cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed). GKE's own components
# also run in namespaces named gke-* (gke-managed-system, gke-gmp-system); no GKE page listing them
# was checked: `kubectl get namespaces` on a new GKE cluster settles the list.
GKE_NAMESPACES = frozenset({"gmp-system", "gmp-public"})
GKE_PREFIXES = ("gke-",)
# The namespaces of the add-ons this program installs (components/addons/*.py; Karpenter goes to
# kube-system). tests/stack_config/test_namespaces.py holds this list against every Helm release and
# Namespace the committed stacks create.
ADDON_NAMESPACES = frozenset({"monitoring", "keda", "cert-manager", "kserve", "lws-system", "agentgateway-system"})


def reserved_reason(name: str) -> str | None:
    """Why `name` cannot be a namespace this program owns, or None."""
    if name in KUBERNETES_NAMESPACES or name.startswith(RESERVED_PREFIXES):
        return "a Kubernetes system namespace"
    if name in GKE_NAMESPACES or name.startswith(GKE_PREFIXES):
        return "a namespace GKE manages"
    if name in ADDON_NAMESPACES:
        return "the namespace of an add-on this program installs"
    return None


def own_namespace(name: str) -> str:
    """A namespace the program creates and fences (Pod Security label, default-deny, quota)."""
    reason = reserved_reason(name)
    if reason:
        raise ValueError(
            f"{excerpt(name)} is {reason}; the program labels, fences and caps the namespace it is given "
            "(Pod Security level, default-deny NetworkPolicy, ResourceQuota), which would break what already "
            "runs there: choose a namespace of its own, such as llm-serving"
        )
    return name
