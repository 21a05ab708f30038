"""plan.md's "What the cloud's controllers need": what enforces the stack's NetworkPolicies, the
network the model volume's file system lands on, and the APIs, add-ons and subnet tags the
clusters' own controllers use for the objects the program creates (tests/support/rules_controllers.py
holds the rules that check them).
"""

from __future__ import annotations

import json
from typing import Any

from common import contract
from offline_plan.mock_runtime import Evaluation

ENFORCERS = {
    contract.GKE_DATAPLANE_V2: (
        "GKE Dataplane V2 (datapathProvider ADVANCED_DATAPATH, set when the cluster is created: changing it later "
        "replaces the cluster)"
    ),
    contract.EKS_VPC_CNI: (
        "the EKS VPC CNI's network policy agent (managed add-on vpc-cni, configurationValues "
        '{"enableNetworkPolicy": "true"}, created before the node groups)'
    ),
}


def _objects(evaluation: Evaluation, kind: str) -> list[dict[str, Any]]:
    return [o for o in evaluation.kubernetes_objects if o.get("kind") == kind]


def _enforcement(evaluation: Evaluation) -> str:
    declared = {
        (ns["metadata"].get("annotations") or {}).get(contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION)
        for ns in _objects(evaluation, "Namespace")
    } - {None}
    if not _objects(evaluation, "NetworkPolicy"):
        return "no NetworkPolicies (security.networkPolicies is false): every pod of the cluster reaches the servers"
    if not declared:
        return "nothing declared: the NetworkPolicies may not be enforced"
    return "; ".join(
        ENFORCERS.get(str(d), f"{d}, as the stack file declares (security.networkPolicyEnforcement); not checked here")
        for d in sorted(map(str, declared))
    )


def _volumes(evaluation: Evaluation) -> list[str]:
    classes = {o["metadata"]["name"]: o for o in _objects(evaluation, "StorageClass")}
    used = sorted(
        {
            str((o.get("spec") or {}).get("storageClassName"))
            for o in _objects(evaluation, "PersistentVolumeClaim")
            if (o.get("spec") or {}).get("storageClassName")
        }
    )
    out = []
    for name in used:
        klass = classes.get(name)
        if klass is None:
            out.append(f"`{name}`: the cluster's own class (not created by this stack)")
            continue
        parameters = klass.get("parameters") or {}
        where = f", network `{parameters['network']}`" if "network" in parameters else ""
        out.append(f"`{name}`: created, provisioner `{klass.get('provisioner')}`{where}")
    return out


def controllers_section(evaluation: Evaluation) -> list[str]:
    platform = evaluation.outputs.get("platform") or {}
    out = [
        "## What the cloud's controllers need",
        "",
        f"- **NetworkPolicy enforcement**: {_enforcement(evaluation)}",
    ]
    out += [f"- **Model volume class**: {line}" for line in _volumes(evaluation)]
    if platform.get("rwxStorage"):
        out.append(f"- **ReadWriteMany storage**: {platform['rwxStorage']}")
    if platform.get("controllerApis"):
        out.append(f"- **APIs GKE's controllers call** (enabled by this stack): {platform['controllerApis']}")
    addons = {r.inputs.get("addonName"): r for r in evaluation.of_type("aws:eks/addon:Addon")}
    if "aws-efs-csi-driver" in addons:
        out.append(
            "- **EFS CSI controller**: add-on aws-efs-csi-driver, Pod Identity role with AmazonEFSCSIDriverPolicy "
            "(it creates one access point per claim)"
        )
    if "vpc-cni" in addons:
        values = json.loads(addons["vpc-cni"].inputs.get("configurationValues") or "{}")
        out.append(f"- **VPC CNI add-on configuration**: `{json.dumps(values)}`")
    elb = [
        s
        for s in evaluation.of_type("aws:ec2/subnet:Subnet")
        if "kubernetes.io/role/elb" in (s.inputs.get("tags") or {})
    ]
    if any(o.get("spec", {}).get("gatewayClassName") == "agentgateway" for o in _objects(evaluation, "Gateway")):
        out.append(
            "- **Load balancer subnets**: the entrance's LoadBalancer Service goes through EKS's built-in service "
            f"controller into public subnets tagged kubernetes.io/role/elb ({len(elb)} created and tagged)"
            if evaluation.of_type("aws:ec2/subnet:Subnet")
            else "- **Load balancer subnets**: the VPC's owner tags its public subnets kubernetes.io/role/elb"
        )
    return [*out, ""]
