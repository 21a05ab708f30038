"""The operators' namespace, and what GKE needs in it before their pods are admitted."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.operators.values import gke_critical_pods_quota_spec


def operator_namespace(
    name: str, namespace: str, cloud: str, opts: pulumi.ResourceOptions
) -> tuple[k8s.core.v1.Namespace, list[pulumi.Resource]]:
    """Create the namespace (and on GKE its critical-pods quota); return it and what Helm must wait for.

    The operators run privileged host-level daemonsets (driver, toolkit, device plugins), so the
    namespace opts out of Pod Security Admission's baseline where a cluster enforces it.
    """
    ns = k8s.core.v1.Namespace(
        f"{name}-ns",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=namespace,
            labels={"pod-security.kubernetes.io/enforce": "privileged"},
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
