"""The operators' namespace, and what GKE needs in it before their pods are admitted."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from common import pod_security
from components.operators.values import gke_critical_pods_quota_spec

# Why the operators' namespace enforces `privileged`, written on it (namespace-pod-security rule).
POD_SECURITY_REASON = (
    "the NVIDIA GPU and Network Operators run host-level daemonsets here (driver and "
    "container-toolkit installers, device plugins, DCGM, the MOFED driver) that need privileged "
    "containers, hostPath mounts, the host PID namespace and host networking."
)


def operator_namespace(
    name: str, namespace: str, cloud: str, opts: pulumi.ResourceOptions, psa_version: str = pod_security.PSA_VERSION
) -> tuple[k8s.core.v1.Namespace, list[pulumi.Resource]]:
    """Create the namespace (and on GKE its critical-pods quota); return it and what Helm must wait for.

    The operators run privileged host-level daemonsets (driver, toolkit, device plugins), so the
    namespace opts out of Pod Security Admission's baseline where a cluster enforces it, with the
    reason beside the label; warn and audit stay at restricted.
    """
    level = pod_security.PRIVILEGED
    ns = k8s.core.v1.Namespace(
        f"{name}-ns",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=namespace,
            labels=pod_security.namespace_labels(level, psa_version),
            annotations=pod_security.namespace_annotations(level, [POD_SECURITY_REASON]),
        ),
        opts=opts,
    )
    before_helm: list[pulumi.Resource] = [ns]
    if cloud == "gcp":
        quota = gke_critical_pods_quota_spec()
        before_helm.append(
            k8s.core.v1.ResourceQuota(
                f"{name}-critical-pods",
                metadata=k8s.meta.v1.ObjectMetaArgs(name="gpu-operator-quota", namespace=ns.metadata.name),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(
                    hard=quota["hard"],
                    scope_selector=k8s.core.v1.ScopeSelectorArgs(
                        match_expressions=[
                            k8s.core.v1.ScopedResourceSelectorRequirementArgs(
                                operator=e["operator"], scope_name=e["scopeName"], values=e["values"]
                            )
                            for e in quota["scopeSelector"]["matchExpressions"]
                        ]
                    ),
                ),
                opts=opts,
            )
        )
    return ns, before_helm
