"""What enforces the serving namespace's NetworkPolicies, as the Namespace annotation says it.

A NetworkPolicy does nothing unless the cluster's network plugin implements it. On a cluster the
program creates, the program turns enforcement on itself: GKE Dataplane V2
(components/cluster/gcp/gke.py, DATAPATH_PROVIDER) and the EKS VPC CNI add-on with its network
policy agent (components/cluster/aws/eks.py, VPC_CNI_CONFIGURATION). On any other cluster the
stack file names the enforcer (security.networkPolicyEnforcement; stack_config refuses
networkPolicies without it). The annotation lets a reader, and the policy pack where the stack has
no cluster resource to judge, see which one the stack relies on.
"""

from __future__ import annotations

import stack_config as cfg
from common import contract

CREATED_CLUSTER_ENFORCERS = {cfg.Cloud.gcp: contract.GKE_DATAPLANE_V2, cfg.Cloud.aws: contract.EKS_VPC_CNI}


def network_policy_enforcer(stack: cfg.StackConfig) -> str | None:
    """The enforcer the stack relies on; None when it creates no NetworkPolicies."""
    if not stack.security.networkPolicies:
        return None
    if stack.creates_cluster:
        return CREATED_CLUSTER_ENFORCERS[stack.cloud]
    return stack.security.networkPolicyEnforcement


def namespace_annotations(stack: cfg.StackConfig) -> dict[str, str]:
    enforcer = network_policy_enforcer(stack)
    return {contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION: enforcer} if enforcer else {}
