"""Whether the cluster a stack deploys to enforces NetworkPolicy: the half of network-policy-present
that a default-deny object alone cannot show.

A NetworkPolicy is implemented by the cluster's network plugin; where none does, it has no effect
(Kubernetes docs, Network Policies, "Prerequisites",
https://kubernetes.io/docs/concepts/services-networking/network-policies/#prerequisites). What
the pack can see:
- a GKE cluster (gcp:container/cluster:Cluster) enforces with datapathProvider ADVANCED_DATAPATH
  (GKE Dataplane V2) or networkPolicy.enabled (the legacy Calico enforcement) (GKE docs, "GKE
  Dataplane V2", https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2); it is
  LEGACY_DATAPATH without either, and enforces nothing;
- an EKS cluster (aws:eks/cluster:Cluster) enforces when the stack manages its `vpc-cni` add-on
  (aws:eks/addon:Addon) with configurationValues enableNetworkPolicy "true" at v1.14.0 or later
  (EKS User Guide, "Restrict Pod network traffic with Kubernetes network policies",
  https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html); the VPC CNI
  EKS installs by itself leaves the agent off;
- a stack without a cluster resource (an existing cluster) declares its enforcer on the servers'
  Namespace: the annotation common/contract.py NETWORK_POLICY_ENFORCEMENT_ANNOTATION naming one of
  NETWORK_POLICY_ENFORCERS (what the program writes from security.networkPolicyEnforcement).
Values the engine has not resolved yet pass: they are judged at `pulumi up`.
"""

from __future__ import annotations

import json
import re

from common.contract import NETWORK_POLICY_ENFORCEMENT_ANNOTATION, NETWORK_POLICY_ENFORCERS
from policies.objects import as_dict, as_str, is_unknown
from policies.resource import Resource

EKS_CLUSTER = "aws:eks/cluster:Cluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"
DATAPLANE_V2 = "ADVANCED_DATAPATH"
VPC_CNI = "vpc-cni"
VPC_CNI_MIN_VERSION = (1, 14, 0)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def _gke_gap(cluster: Resource) -> str | None:
    datapath = cluster.props.get("datapathProvider")
    if is_unknown(datapath) or as_str(datapath) == DATAPLANE_V2:
        return None
    calico = as_dict(cluster.props.get("networkPolicy")).get("enabled")
    if calico is True or is_unknown(calico):
        return None
    return (
        f"GKE cluster {cluster.name} has datapathProvider {as_str(datapath) or 'unset (LEGACY_DATAPATH)'} and no "
        "networkPolicy, so nothing enforces NetworkPolicy; create it with datapathProvider ADVANCED_DATAPATH "
        "(GKE Dataplane V2, settable at creation only)"
    )


def _cni_version(addon: Resource) -> tuple[int, ...] | None:
    version = addon.props.get("addonVersion")
    if version is None or is_unknown(version):
        return None
    found = _VERSION.match(as_str(version) or "")
    return tuple(int(g) for g in found.groups()) if found else None


def _eks_gap(resources: list[Resource]) -> str | None:
    addons = [r for r in resources if r.type == EKS_ADDON and as_str(r.props.get("addonName")) == VPC_CNI]
    for addon in addons:
        values = addon.props.get("configurationValues")
        if is_unknown(values):
            return None
        try:
            enabled = as_dict(json.loads(as_str(values) or "{}")).get("enableNetworkPolicy")
        except ValueError:
            continue
        version = _cni_version(addon)
        if str(enabled).lower() == "true" and (version is None or version >= VPC_CNI_MIN_VERSION):
            return None
    return (
        "the EKS cluster's VPC CNI network policy agent is off (no vpc-cni add-on of v1.14.0 or later with "
        'configurationValues {"enableNetworkPolicy": "true"}), so nothing enforces NetworkPolicy; add that '
        "aws.eks.Addon"
    )


def enforcement_gap(resources: list[Resource], namespace: str) -> str | None:
    """Why NetworkPolicies in `namespace` would not be enforced, or None when they are (or may be)."""
    gaps = [_gke_gap(r) for r in resources if r.type == GKE_CLUSTER]
    if any(r.type == EKS_CLUSTER for r in resources):
        gaps.append(_eks_gap(resources))
    if gaps:
        return next((g for g in gaps if g), None)
    for r in resources:
        if not (r.is_kubernetes and r.kind == "Namespace"):
            continue
        metadata = as_dict(r.props.get("metadata"))
        if as_str(metadata.get("name")) != namespace:
            continue
        declared = as_dict(metadata.get("annotations")).get(NETWORK_POLICY_ENFORCEMENT_ANNOTATION)
        if is_unknown(declared) or as_str(declared) in NETWORK_POLICY_ENFORCERS:
            return None
    return (
        f"nothing in the stack shows that the cluster enforces NetworkPolicy (no GKE or EKS cluster resource, and "
        f"namespace '{namespace}' has no {NETWORK_POLICY_ENFORCEMENT_ANNOTATION} annotation naming one of "
        f"{', '.join(NETWORK_POLICY_ENFORCERS)}); check the cluster's network plugin and declare it "
        "(security.networkPolicyEnforcement in this program's stack file)"
    )
