"""Environment rules: what the clouds' own controllers need for the Kubernetes objects the program
creates, and what enforces what it declares. The mock runtime accepts a NetworkPolicy nothing
enforces, a Filestore claim on the wrong network and an InferencePool whose API is off; a real
cluster silently ignores the first and leaves the others Pending.

- network-policies-enforced: a stack that creates NetworkPolicies runs on a cluster that enforces
  them. GKE: datapathProvider ADVANCED_DATAPATH (Dataplane V2) or networkPolicy enabled
  (https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2). EKS: the `vpc-cni`
  managed add-on with configurationValues enableNetworkPolicy "true" at v1.14.0 or later, created
  before the NetworkPolicies (EKS User Guide, "Restrict Pod network traffic with Kubernetes network
  policies", https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
  A cluster the stack does not create: its serving Namespace names the enforcer the stack file
  declares (security.networkPolicyEnforcement).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from common import contract
from offline_plan.mock_runtime import RecordedResource
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

GKE_CLUSTER = "gcp:container/cluster:Cluster"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"
VPC_CNI_MIN_VERSION = (1, 14, 0)


def _kind(resource: RecordedResource) -> str | None:
    return resource.inputs.get("kind") if resource.is_kubernetes_object else None


def objects_of_kind(graph: ApplyGraph, kind: str) -> list[RecordedResource]:
    return [r for r in graph.kubernetes_objects() if _kind(r) == kind]


def _enforcing_vpc_cni(addon: RecordedResource) -> bool:
    if addon.inputs.get("addonName") != "vpc-cni":
        return False
    try:
        values = json.loads(addon.inputs.get("configurationValues") or "{}")
    except ValueError:
        return False
    version = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", addon.inputs.get("addonVersion") or "v99.0.0")
    return (
        values.get("enableNetworkPolicy") == "true"
        and bool(version)
        and (
            tuple(int(g) for g in version.groups()) >= VPC_CNI_MIN_VERSION  # type: ignore[union-attr]
        )
    )


@rule("network-policies-enforced", kind="environment")
def network_policies_enforced(graph: ApplyGraph) -> Iterable[Violation]:
    name = "network-policies-enforced"
    policies = objects_of_kind(graph, "NetworkPolicy")
    if not policies:
        return
    gke, eks = graph.of_type(GKE_CLUSTER), graph.of_type(EKS_CLUSTER)
    for cluster in gke:
        datapath = cluster.inputs.get("datapathProvider")
        if datapath != "ADVANCED_DATAPATH" and not (cluster.inputs.get("networkPolicy") or {}).get("enabled"):
            yield Violation(
                name,
                describe(cluster),
                f"datapathProvider {datapath or 'unset (LEGACY_DATAPATH)'} and no networkPolicy: nothing enforces the "
                f"stack's {len(policies)} NetworkPolicies; set datapathProvider ADVANCED_DATAPATH (at creation only)",
            )
    if eks:
        cnis = [a for a in graph.of_type(EKS_ADDON) if _enforcing_vpc_cni(a)]
        if not cnis:
            yield Violation(
                name,
                describe(eks[0]),
                'no vpc-cni add-on (v1.14.0+) with enableNetworkPolicy "true": the VPC CNI EKS installs by itself '
                f"leaves its network policy agent off, so nothing enforces the stack's {len(policies)} NetworkPolicies",
            )
        for policy in policies:
            if cnis and not any(graph.waits_for(policy, cni) for cni in cnis):
                yield Violation(name, describe(policy), "is created before the VPC CNI add-on that enforces it")
    if gke or eks:
        return
    namespaces = {(r.inputs.get("metadata") or {}).get("name"): r for r in objects_of_kind(graph, "Namespace")}
    for namespace in sorted({(p.inputs.get("metadata") or {}).get("namespace") for p in policies}):
        ns = namespaces.get(namespace)
        declared = ((ns.inputs.get("metadata") or {}).get("annotations") or {}) if ns else {}
        if declared.get(contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION) not in contract.NETWORK_POLICY_ENFORCERS:
            yield Violation(
                name,
                f"namespace {namespace}",
                "holds NetworkPolicies on a cluster the stack does not create, and declares no enforcer "
                f"({contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION}; security.networkPolicyEnforcement)",
            )


CONTROLLER_RULES = ("network-policies-enforced",)
