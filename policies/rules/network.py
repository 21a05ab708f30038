"""network-policy-present and cluster-endpoint-restricted: who may talk to the servers and to the
cluster's API server.

network-policy-present (stack rule): every namespace the stack creates (a Namespace object among
the resources, as the program creates its serving namespace) that runs GPU servers has a default-deny
NetworkPolicy (with the `everyNamespace` setting: every namespace that runs GPU servers, also ones
created elsewhere): one that selects every pod (`podSelector: {}`), is of both policyTypes Ingress and
Egress, and allows nothing itself. Without it every pod of the cluster can reach the servers' API
port, and a compromised server can reach anything the node can (other teams' services, the cloud's
metadata endpoints, the internet). The allowed paths are other policies' business; this rule only
demands the closed default they are holes in, and that the cluster enforces it
(policies/rules/enforcement.py: GKE Dataplane V2, the EKS VPC CNI's network policy agent, or the
enforcer an existing cluster's Namespace declares).

cluster-endpoint-restricted: an EKS cluster (aws:eks/cluster:Cluster) or a GKE cluster
(gcp:container/cluster:Cluster) of a production stack (tag/label `llm-serving-profile:
production`, or every cluster with the rule's `requireRestricted` setting) does not expose its API
server to every address: EKS with endpointPublicAccess false, or publicAccessCidrs without
0.0.0.0/0 (EKS's default when the list is empty or absent: "If you specify no blocks, then the public
API server endpoint receives requests from all IP addresses", EKS User Guide, "Configure network
access to cluster API server endpoint"); GKE with privateClusterConfig.enablePrivateEndpoint, or
masterAuthorizedNetworksConfig on (its cidrBlocks, possibly none, without 0.0.0.0/0, and
gcpPublicCidrsAccessEnabled not true). A cluster tagged
`llm-serving-world-open-endpoint: allowed` has accepted that knowingly and passes.
"""

from __future__ import annotations

import ipaddress

from common.contract import CLUSTER_PROFILE_TAG, PRODUCTION_PROFILE, WORLD_OPEN_ALLOWED, WORLD_OPEN_ENDPOINT_TAG
from policies.gpu import pod_uses_gpus
from policies.objects import Finding, as_dict, as_list, as_str, is_unknown
from policies.resource import Resource
from policies.rules.enforcement import enforcement_gap
from policies.workloads import workload

EKS_CLUSTER = "aws:eks/cluster:Cluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
CLUSTER_TYPES = (EKS_CLUSTER, GKE_CLUSTER)


def is_default_deny(policy: Resource) -> bool:
    spec = as_dict(policy.props.get("spec"))
    selector = spec.get("podSelector")
    if not isinstance(selector, dict) or any(as_dict(selector).get(k) for k in ("matchLabels", "matchExpressions")):
        return False
    types = set(as_list(spec.get("policyTypes")))
    return {"Ingress", "Egress"} <= types and not as_list(spec.get("ingress")) and not as_list(spec.get("egress"))


def _created_namespaces(resources: list[Resource]) -> set[str]:
    return {
        r.name
        if is_unknown(as_dict(r.props.get("metadata")).get("name"))
        else as_str(as_dict(r.props.get("metadata")).get("name")) or r.name
        for r in resources
        if r.is_kubernetes and r.kind == "Namespace"
    }


def network_policy_present(resources: list[Resource], config: dict) -> list[tuple[Resource, Finding]]:
    judged = None if config.get("everyNamespace") else _created_namespaces(resources)
    denied = {
        (p.namespace or "default")
        for p in resources
        if p.is_kubernetes and p.kind == "NetworkPolicy" and not is_unknown(p.namespace) and is_default_deny(p)
    }
    out = []
    reported: set[str] = set()
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is None or is_unknown(w.namespace) or not any(pod_uses_gpus(pod) for pod in w.pods):
            continue
        namespace = w.namespace or "default"
        if namespace in reported or (judged is not None and namespace not in judged):
            continue
        if namespace in denied:
            gap = enforcement_gap(resources, namespace)
            if gap is not None:
                reported.add(namespace)
                out.append(
                    (
                        r,
                        Finding(
                            f"{w.ref}: namespace '{namespace}' has a default-deny NetworkPolicy, but {gap}; until "
                            "then every pod of the cluster can reach the servers and they can reach anything."
                        ),
                    )
                )
            continue
        reported.add(namespace)
        out.append(
            (
                r,
                Finding(
                    f"{w.ref}: namespace '{namespace}' runs GPU servers but has no default-deny NetworkPolicy, so "
                    f"every pod of the cluster can reach them and they can reach anything; add a NetworkPolicy in "
                    f"'{namespace}' with podSelector {{}}, policyTypes [Ingress, Egress] and no rules, then allow the "
                    "paths the servers need."
                ),
            )
        )
    return out


def network_rule_not_applicable(resources: list[Resource]) -> str | None:
    # A namespace the stack does not create is judged only with everyNamespace (a stack setting the
    # engine does not pass here), so "not applicable" is said only when no GPU server runs at all.
    for r in resources:
        w = workload(r.props) if r.is_kubernetes else None
        if w is not None and any(pod_uses_gpus(pod) for pod in w.pods):
            return None
    return "the stack runs no GPU server"


def _world_open(cidrs: list) -> bool:
    known = [as_str(c) for c in cidrs if not is_unknown(c)]
    if len(known) < len(cidrs):
        return False  # not known until the engine resolves it: judged at `pulumi up`
    for c in known:
        try:
            if ipaddress.ip_network(c or "", strict=False).prefixlen == 0:
                return True
        except ValueError:
            continue
    return not known


def cluster_endpoint_restricted(resource_type: str, name: str, props: dict, config: dict) -> list[Finding]:
    labels = as_dict(props.get("tags") if resource_type == EKS_CLUSTER else props.get("resourceLabels"))
    production = as_str(labels.get(CLUSTER_PROFILE_TAG)) == PRODUCTION_PROFILE
    if not (production or config.get("requireRestricted")):
        return []
    if as_str(labels.get(WORLD_OPEN_ENDPOINT_TAG)) == WORLD_OPEN_ALLOWED:
        return []
    kind = resource_type.rsplit(":", 1)[-1]
    why = "a production stack" if production else "requireRestricted is on"
    if resource_type == EKS_CLUSTER:
        vpc = as_dict(props.get("vpcConfig"))
        public = vpc.get("endpointPublicAccess")
        if public is False or is_unknown(public):
            return []
        if not _world_open(as_list(vpc.get("publicAccessCidrs"))):
            return []
        return [
            Finding(
                f"{kind}/{name}: {why}, and the cluster's public API endpoint admits every address "
                "(publicAccessCidrs empty or 0.0.0.0/0); set vpcConfig.endpointPublicAccess false (with "
                "endpointPrivateAccess true) or list the administrators' addresses in publicAccessCidrs, or tag the "
                f"cluster {WORLD_OPEN_ENDPOINT_TAG}={WORLD_OPEN_ALLOWED} to accept it knowingly."
            )
        ]
    private = as_dict(props.get("privateClusterConfig"))
    if private.get("enablePrivateEndpoint") is True or is_unknown(private.get("enablePrivateEndpoint")):
        return []
    networks = as_dict(props.get("masterAuthorizedNetworksConfig"))
    blocks = [as_dict(b).get("cidrBlock") for b in as_list(networks.get("cidrBlocks"))]
    # Authorized networks on with no blocks admit no outside address at all: restricted too.
    open_block = any(
        not is_unknown(b) and ipaddress.ip_network(as_str(b) or "0.0.0.0/0", strict=False).prefixlen == 0
        for b in blocks
    )
    if (
        props.get("masterAuthorizedNetworksConfig") is not None
        and not open_block
        and networks.get("gcpPublicCidrsAccessEnabled") is not True
    ):
        return []
    return [
        Finding(
            f"{kind}/{name}: {why}, and the cluster's API endpoint admits every address "
            "(masterAuthorizedNetworksConfig off, 0.0.0.0/0 among its cidrBlocks, or gcpPublicCidrsAccessEnabled); "
            "list the administrators' addresses in masterAuthorizedNetworksConfig.cidrBlocks or set "
            "privateClusterConfig.enablePrivateEndpoint true, or label the cluster "
            f"{WORLD_OPEN_ENDPOINT_TAG}={WORLD_OPEN_ALLOWED} to accept it knowingly."
        )
    ]
