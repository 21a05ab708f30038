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
  declares (security.networkPolicyEnforcement), and an existing GKE cluster's look-up, where it
  answers datapathProvider and networkPolicies (pulumi_gcp container get_cluster), agrees.
- filestore-volume-on-the-stack-network: a claim provisioned by the Filestore CSI driver gets its
  instance on the network its StorageClass names, `default` when it names none
  (kubernetes-sigs/gcp-filestore-csi-driver README, "Supported CreateVolume parameters"; GKE's own
  classes name none), and only nodes on that network can mount it. So the class names the GKE
  cluster's network, is created before the claim, and the cluster runs the Filestore CSI add-on
  (addonsConfig.gcpFilestoreCsiDriverConfig; no provisioner answers otherwise).
- controller-apis-enabled: the Google APIs GKE's controllers call for the objects the stack
  creates are enabled before those objects (a controller's call to a disabled API fails, and the
  object stays unprogrammed or Pending): a Gateway of a gke-l7 class, Compute Engine (the load
  balancer); an InferencePool behind it (GKE Inference Gateway), Compute Engine and Network Services
  ("Deploy GKE Inference Gateway", https://cloud.google.com/kubernetes-engine/docs/how-to/deploy-gke-inference-gateway);
  a claim of a Filestore class, the Filestore API (https://cloud.google.com/filestore/docs/csi-driver);
  a Service of type LoadBalancer, Compute Engine; a gke-l7 Gateway listener serving Certificate
  Manager certificates (tls.options networking.gke.io/cert-manager-certs, GKE docs "Secure a
  Gateway"), the Certificate Manager API. The table is this rule's own, from those pages,
  not the program's (components/cluster/gcp/apis.py CONTROLLER_APIS).
- aws-controllers-have-what-they-need: on EKS, a claim of an EFS class is provisioned by the EFS CSI
  add-on's controller, which needs an identity with AmazonEFSCSIDriverPolicy (it creates an access
  point per claim: "Dynamic provisioning", kubernetes-sigs/aws-efs-csi-driver; the add-on's Pod
  Identity association names service account efs-csi-controller-sa), and the class waits for that
  add-on; a Gateway of the agentgateway class gets a Service of type LoadBalancer, which EKS's
  built-in service controller (no AWS Load Balancer Controller is installed) puts in public subnets
  it discovers by the tag kubernetes.io/role/elb (kubernetes/kubernetes#97431, EKS's subnet
  discovery without the cluster tag; AWS Load Balancer Controller docs, "Subnet Auto Discovery"),
  so a VPC the stack creates tags its public subnets so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

import stack_config as cfg
from common import contract
from components.cluster.gcp import filestore
from offline_plan.mock_runtime import RecordedResource, mock_id
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
    if values.get("enableNetworkPolicy") != "true":
        return False
    if addon.inputs.get("addonVersion") is None:
        # EKS installs its default build for the cluster's version (unresolved here that it is
        # v1.14.0+: components/cluster/aws/eks.py says how to settle it).
        return True
    version = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", addon.inputs["addonVersion"])
    return version is not None and tuple(int(g) for g in version.groups()) >= VPC_CNI_MIN_VERSION


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
    # An existing GKE cluster's look-up answers what its dataplane is; it overrides the declaration.
    for token, _args, result in graph.evaluation.call_results:
        datapath = result.get("datapathProvider")
        if token != "gcp:container/getCluster:getCluster" or datapath is None:
            continue
        calico = any(p.get("enabled") for p in result.get("networkPolicies") or [])
        if datapath != "ADVANCED_DATAPATH" and not calico:
            yield Violation(
                name,
                f"existing GKE cluster {_args.get('name')}",
                f"the look-up answers datapathProvider {datapath} and no network policy, so nothing enforces the "
                f"stack's {len(policies)} NetworkPolicies, whatever security.networkPolicyEnforcement declares",
            )
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


def _metadata_name(resource: RecordedResource) -> str | None:
    return (resource.inputs.get("metadata") or {}).get("name")


def gke_cluster_network(graph: ApplyGraph) -> str | None:
    """The name of the network the GKE cluster's nodes are on: a network the stack creates, the
    `default` network (no network given), or what the look-up of an existing cluster answered."""
    for cluster in graph.of_type(GKE_CLUSTER):
        network_id = cluster.inputs.get("network")
        if network_id is None:
            return "default"
        for network in graph.of_type("gcp:compute/network:Network"):
            if mock_id(network.type, network.name) == network_id:
                return network.inputs.get("name")
        return str(network_id).rsplit("/", 1)[-1]
    for token, _args, result in graph.evaluation.call_results:
        if token == "gcp:container/getCluster:getCluster" and result.get("network"):
            return str(result["network"]).rsplit("/", 1)[-1]
    return None


@rule("filestore-volume-on-the-stack-network", kind="environment")
def filestore_volume_on_the_stack_network(graph: ApplyGraph) -> Iterable[Violation]:
    name = "filestore-volume-on-the-stack-network"
    classes = {_metadata_name(c): c for c in objects_of_kind(graph, "StorageClass")}
    network = gke_cluster_network(graph)
    clusters = graph.of_type(GKE_CLUSTER)
    for claim in objects_of_kind(graph, "PersistentVolumeClaim"):
        class_name = (claim.inputs.get("spec") or {}).get("storageClassName")
        created = classes.get(class_name)
        if created is not None:
            if created.inputs.get("provisioner") != filestore.PROVISIONER:
                continue
            on = (created.inputs.get("parameters") or {}).get("network") or "default"
            if not graph.waits_for(claim, created):
                yield Violation(name, describe(claim), f"is created before its StorageClass {class_name}")
        elif class_name in cfg.GKE_FILESTORE_CLASSES and (clusters or network):
            on = "default"
        else:
            continue
        if network is not None and on.rsplit("/", 1)[-1] != network:
            yield Violation(
                name,
                describe(claim),
                f"class {class_name} creates its Filestore instance on network {on}, but the cluster's nodes are on "
                f"{network}: the volume never mounts",
            )
        for cluster in clusters:
            if not ((cluster.inputs.get("addonsConfig") or {}).get("gcpFilestoreCsiDriverConfig") or {}).get("enabled"):
                yield Violation(
                    name,
                    describe(claim),
                    f"class {class_name} needs the Filestore CSI add-on, which {describe(cluster)} does not run",
                )


GCP_SERVICE = "gcp:projects/service:Service"
COMPUTE, NETWORK_SERVICES, FILESTORE = "compute.googleapis.com", "networkservices.googleapis.com", "file.googleapis.com"
CERTIFICATE_MANAGER = "certificatemanager.googleapis.com"
CERT_MANAGER_CERTS = "networking.gke.io/cert-manager-certs"
PICKER_CHART_SUFFIX = "/" + contract.PICKER_CHART


def _gke_controller_needs(graph: ApplyGraph, resource: RecordedResource, classes: dict) -> tuple[str, ...]:
    spec = resource.inputs.get("spec") or {}
    kind = _kind(resource)
    if kind == "Gateway" and str(spec.get("gatewayClassName", "")).startswith("gke-l7"):
        # A listener serving a Certificate Manager certificate: the controller reads it there
        # (GKE docs, "Secure a Gateway", tls.options networking.gke.io/cert-manager-certs).
        certs = any(
            CERT_MANAGER_CERTS in ((listener.get("tls") or {}).get("options") or {})
            for listener in spec.get("listeners") or []
        )
        return (COMPUTE, CERTIFICATE_MANAGER) if certs else (COMPUTE,)
    if kind == "Service" and spec.get("type") == "LoadBalancer":
        return (COMPUTE,)
    if kind == "PersistentVolumeClaim":
        created = classes.get(spec.get("storageClassName"))
        if (created is not None and created.inputs.get("provisioner") == filestore.PROVISIONER) or (
            created is None and spec.get("storageClassName") in cfg.GKE_FILESTORE_CLASSES
        ):
            return (FILESTORE,)
    gke_gateway = any(
        str((g.inputs.get("spec") or {}).get("gatewayClassName", "")).startswith("gke-l7")
        for g in objects_of_kind(graph, "Gateway")
    )
    # The picker chart renders the InferencePool (llm-d-router-gateway templates/inferencepool.yaml).
    pool = kind == "InferencePool" or (
        resource.type == "kubernetes:helm.sh/v3:Release"
        and str(resource.inputs.get("chart", "")).endswith(PICKER_CHART_SUFFIX)
    )
    if pool and gke_gateway:
        return (COMPUTE, NETWORK_SERVICES)
    return ()


@rule("controller-apis-enabled", kind="environment")
def controller_apis_enabled(graph: ApplyGraph) -> Iterable[Violation]:
    if not graph.of_type(GKE_CLUSTER) and not any(
        t == "gcp:container/getCluster:getCluster" for t, _ in graph.evaluation.calls
    ):
        return
    classes = {_metadata_name(c): c for c in objects_of_kind(graph, "StorageClass")}
    for resource in graph.resources:
        needed = _gke_controller_needs(graph, resource, classes)
        if not needed:
            continue
        enabled = {
            graph.by_urn[u].inputs.get("service")
            for u in graph.upstream(resource)
            if graph.by_urn[u].type == GCP_SERVICE
        }
        for api in needed:
            if api not in enabled:
                yield Violation(
                    "controller-apis-enabled",
                    describe(resource),
                    f"its GKE controller calls {api}, which no gcp.projects.Service created before it enables",
                )


EFS_PROVISIONER = "efs.csi.aws.com"
EFS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
EFS_CONTROLLER_SA = "efs-csi-controller-sa"
ELB_TAG = "kubernetes.io/role/elb"


def _efs_controller_ready(graph: ApplyGraph, klass: RecordedResource) -> str | None:
    addons = [a for a in graph.of_type(EKS_ADDON) if a.inputs.get("addonName") == "aws-efs-csi-driver"]
    if not addons:
        return "no aws-efs-csi-driver add-on provisions it"
    attached = {
        a.inputs.get("role")
        for a in graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs.get("policyArn") == EFS_CSI_POLICY
    }
    for addon in addons:
        if not any(
            a.get("serviceAccount") == EFS_CONTROLLER_SA for a in addon.inputs.get("podIdentityAssociations") or []
        ):
            continue
        # The association's role is one the add-on reads (its ARN); the role's name is its own or,
        # unnamed, the one the provider derives from the logical name (as the mock answers).
        roles = [graph.by_urn[u] for u in graph.direct(addon) if graph.by_urn[u].type == "aws:iam/role:Role"]
        if any((r.inputs.get("name") or r.name) in attached for r in roles):
            if not graph.waits_for(klass, addon):
                return "is created before the EFS CSI add-on that provisions it"
            return None
    return f"the EFS CSI controller ({EFS_CONTROLLER_SA}) has no identity with AmazonEFSCSIDriverPolicy"


@rule("aws-controllers-have-what-they-need", kind="environment")
def aws_controllers_have_what_they_need(graph: ApplyGraph) -> Iterable[Violation]:
    name = "aws-controllers-have-what-they-need"
    if not graph.of_type(EKS_CLUSTER) and not any(
        t == "aws:eks/getCluster:getCluster" for t, _ in graph.evaluation.calls
    ):
        return
    for klass in objects_of_kind(graph, "StorageClass"):
        if klass.inputs.get("provisioner") == EFS_PROVISIONER and (why := _efs_controller_ready(graph, klass)):
            yield Violation(name, describe(klass), why)
    subnets = graph.of_type("aws:ec2/subnet:Subnet")
    if not subnets:
        return  # a VPC the stack does not create: its owner tags it
    tagged = [s for s in subnets if (s.inputs.get("tags") or {}).get(ELB_TAG) in ("1", "")]
    for gateway in objects_of_kind(graph, "Gateway"):
        if (gateway.inputs.get("spec") or {}).get("gatewayClassName") == "agentgateway" and not tagged:
            yield Violation(
                name,
                describe(gateway),
                f"its LoadBalancer Service needs public subnets tagged {ELB_TAG}, and the stack's VPC has none",
            )


CONTROLLER_RULES = (
    "network-policies-enforced",
    "filestore-volume-on-the-stack-network",
    "controller-apis-enabled",
    "aws-controllers-have-what-they-need",
)
