"""First-apply rules of the clouds: what GCP, EC2, EKS and the NVIDIA driver enforce on a first
`pulumi up` that the mock runtime does not.

- cloud-api-enabled-before-use: a GCP resource is created only after the API that serves it is
  enabled (403 "API has not been used in project ... or it is disabled" otherwise).
- identity-binding-waits-for-pool: a binding to `<project>.svc.id.goog[ns/ksa]` waits for the
  WI-enabled cluster that creates the pool (400 "Identity Pool does not exist" otherwise).
- multi-interface-nodes-in-private-subnets: nodes with several network interfaces (EFA) go only in
  subnets that route through NAT: EC2 assigns no public address to them.
- private-nodes-wait-for-nat: nodes in private subnets are created after their route out.
- gpu-capacity-has-an-autoscaler: every node the plan counts for a GPU pool exists from the start
  or can be launched by an autoscaler that is installed for that pool.
- node-driver-runs-engine-cuda: the NVIDIA driver on a server's nodes (pinned EKS AMI, GKE's
  setting, the GPU Operator's driver) runs the CUDA of the server's image.
- eks-endpoint-accepted: EKS accepts the cluster's endpoint settings (one of public and private
  access on; at most 40 publicAccessCidrs, none reserved) and none of them is silently ignored
  (publicAccessCidrs with public access off).
- eks-secrets-key-usable: a cluster that envelope-encrypts Secrets names a symmetric key of its own
  region and waits for its role's permission to use that key.
- gke-secrets-key-granted-before-cluster: a GKE cluster with application-layer secrets encryption
  is created after the project's GKE service agent holds cryptoKeyEncrypterDecrypter on the key
  (creation fails otherwise), and its key ring is in the cluster's location.
- regional-gateway-has-its-gke-prerequisites: a Gateway of a GKE regional class runs on a cluster
  whose Gateway API is on (no GatewayClass exists otherwise) and, in a network the stack creates,
  with an ACTIVE proxy-only subnet (REGIONAL_MANAGED_PROXY) in the cluster's region, which the
  regional load balancer's proxies need ("If you are using the internal GatewayClasses, you must
  enable a proxy-only subnet", https://cloud.google.com/kubernetes-engine/docs/how-to/configure-gateway-resources;
  the regional external class uses the same Envoy-based proxies).
- mirrored-image-has-its-cache: an image pulled through an ECR pull-through cache or an Artifact
  Registry remote repository (images.pullThrough) has that cache created before the pod, and the
  nodes may fill it (ECR: ecr:BatchImportUpstreamImage + ecr:CreateRepository; Artifact Registry:
  roles/artifactregistry.reader).

Each reads only what the mock runtime recorded (resources, dependencies, look-ups and their
answers) and the published facts of common/driver_versions.py and common/engine.py.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from typing import Any

from common import contract, driver_versions, engine
from components.cluster.aws.efa import EFA_NODE_LABEL
from offline_plan.mock_runtime import RecordedResource, mock_id
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

# --- GCP APIs ----------------------------------------------------------------------------------

GCP_SERVICE = "gcp:projects/service:Service"
# The API each GCP resource type is served by (type token prefix -> APIs).
GCP_TYPE_APIS = {
    "gcp:container/cluster:Cluster": ("container.googleapis.com", "compute.googleapis.com"),
    "gcp:container/nodePool:NodePool": ("container.googleapis.com", "compute.googleapis.com"),
    "gcp:compute/": ("compute.googleapis.com",),
    "gcp:serviceaccount/": ("iam.googleapis.com",),
    "gcp:storage/": ("storage.googleapis.com",),
    "gcp:artifactregistry/": ("artifactregistry.googleapis.com",),
    "gcp:kms/": ("cloudkms.googleapis.com",),
    "gcp:certificatemanager/": ("certificatemanager.googleapis.com",),
}
# Enabling services goes through these; they are enabled by hand once (README), never by the program.
GCP_BOOTSTRAP_APIS = {"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"}


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def gcp_apis_needed(resource: RecordedResource) -> set[str]:
    apis: set[str] = set()
    for prefix, needed in GCP_TYPE_APIS.items():
        if resource.type.startswith(prefix):
            apis |= set(needed)
    if resource.type == "gcp:container/cluster:Cluster" and _get(
        resource.inputs, "addonsConfig", "gcpFilestoreCsiDriverConfig", "enabled"
    ):
        apis.add("file.googleapis.com")
    if resource.type == "gcp:container/nodePool:NodePool" and _get(
        resource.inputs, "nodeConfig", "gcfsConfig", "enabled"
    ):
        apis.add("containerfilesystem.googleapis.com")
    return apis


@rule("cloud-api-enabled-before-use")
def cloud_api_enabled_before_use(graph: ApplyGraph) -> Iterable[Violation]:
    for resource in graph.resources:
        if not resource.custom or not resource.type.startswith("gcp:") or resource.type == GCP_SERVICE:
            continue
        enabled_before = {
            graph.by_urn[u].inputs.get("service")
            for u in graph.upstream(resource)
            if graph.by_urn[u].type == GCP_SERVICE
        }
        for api in sorted(gcp_apis_needed(resource) - GCP_BOOTSTRAP_APIS - enabled_before):
            yield Violation(
                "cloud-api-enabled-before-use",
                describe(resource),
                f"needs {api}, which no gcp.projects.Service created before it enables",
            )


# --- Workload Identity pool --------------------------------------------------------------------

WI_BINDING = "gcp:serviceaccount/iAMMember:IAMMember"


@rule("identity-binding-waits-for-pool")
def identity_binding_waits_for_pool(graph: ApplyGraph) -> Iterable[Violation]:
    clusters = [
        r
        for r in graph.of_type("gcp:container/cluster:Cluster")
        if _get(r.inputs, "workloadIdentityConfig", "workloadPool")
    ]
    looked_up = any(token == "gcp:container/getCluster:getCluster" for token, _ in graph.evaluation.calls)
    for binding in graph.of_type(WI_BINDING):
        if ".svc.id.goog[" not in str(binding.inputs.get("member", "")):
            continue
        if any(graph.waits_for(binding, cluster) for cluster in clusters):
            continue
        if not clusters and looked_up:
            # An existing WI-enabled cluster: its pool exists already.
            continue
        yield Violation(
            "identity-binding-waits-for-pool",
            describe(binding),
            "binds a Workload Identity principal before any WI-enabled cluster (which creates the "
            "project's identity pool) exists",
        )


# --- Subnets: public or private ----------------------------------------------------------------

AWS_SUBNET = "aws:ec2/subnet:Subnet"


class Subnets:
    """Whether a subnet id (created or looked up) is private: its route out goes through NAT and no
    route reaches an internet gateway. None when the recorded evaluation cannot tell."""

    def __init__(self, graph: ApplyGraph):
        self.graph = graph
        self.created = {mock_id(r.type, r.name): r for r in graph.of_type(AWS_SUBNET)}
        self.tables = {mock_id(r.type, r.name): r for r in graph.of_type("aws:ec2/routeTable:RouteTable")}
        self.routes = graph.of_type("aws:ec2/route:Route")
        self.associations = graph.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
        self.gateways = {mock_id(r.type, r.name) for r in graph.of_type("aws:ec2/internetGateway:InternetGateway")}
        self.results = graph.evaluation.call_results

    def table_of(self, subnet_id: str) -> RecordedResource | None:
        for association in self.associations:
            if association.inputs.get("subnetId") == subnet_id:
                return self.tables.get(association.inputs.get("routeTableId"))
        return None

    def routes_of(self, table: RecordedResource) -> list[RecordedResource]:
        return [r for r in self.routes if r.inputs.get("routeTableId") == mock_id(table.type, table.name)]

    def _looked_up_routes(self, subnet_id: str) -> list[dict] | None:
        table_ids = None
        for token, args, result in self.results:
            filters = {f["name"]: f["values"] for f in args.get("filters", [])}
            if token == "aws:ec2/getRouteTables:getRouteTables" and filters.get("association.subnet-id") == [subnet_id]:
                table_ids = list(result.get("ids") or [])
        if table_ids == []:
            table_ids = [
                i
                for token, args, result in self.results
                if token == "aws:ec2/getRouteTables:getRouteTables"
                and any(f["name"] == "association.main" for f in args.get("filters", []))
                for i in result.get("ids") or []
            ]
        if not table_ids:
            return None
        routes = [
            route
            for token, args, result in self.results
            if token == "aws:ec2/getRouteTable:getRouteTable" and args.get("routeTableId") in table_ids
            for route in result.get("routes") or []
        ]
        return routes or None

    def default_subnets(self) -> set[str]:
        """Default subnets of a default VPC, as looked up: public by definition (EC2 maps public IPs
        on launch there and the main route table routes to the internet gateway)."""
        return {
            i
            for token, args, result in self.results
            if token == "aws:ec2/getSubnets:getSubnets"
            and any(f["name"] == "default-for-az" for f in args.get("filters", []))
            for i in result.get("ids") or []
        }

    def private(self, subnet_id: str) -> bool | None:
        if subnet_id in self.default_subnets():
            return False
        subnet = self.created.get(subnet_id)
        if subnet is not None:
            if subnet.inputs.get("mapPublicIpOnLaunch"):
                return False
            table = self.table_of(subnet_id)
            if table is None:
                return None
            routes = self.routes_of(table)
            if any(r.inputs.get("gatewayId") in self.gateways for r in routes):
                return False
            return any(r.inputs.get("natGatewayId") for r in routes)
        routes = self._looked_up_routes(subnet_id)
        if routes is None:
            return None
        if any(str(r.get("gatewayId") or "").startswith("igw-") for r in routes):
            return False
        return any(r.get("natGatewayId") for r in routes)

    def egress_of(self, subnet_id: str) -> list[RecordedResource]:
        """The association and NAT route a created private subnet's nodes need before they start."""
        table = self.table_of(subnet_id)
        if table is None:
            return []
        association = [a for a in self.associations if a.inputs.get("subnetId") == subnet_id]
        return association + [r for r in self.routes_of(table) if r.inputs.get("natGatewayId")]


def _launch_template(graph: ApplyGraph, node_group: RecordedResource) -> RecordedResource | None:
    template_id = _get(node_group.inputs, "launchTemplate", "id")
    return next(
        (r for r in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate") if mock_id(r.type, r.name) == template_id),
        None,
    )


def _custom_objects(graph: ApplyGraph, kind: str) -> list[RecordedResource]:
    return [r for r in graph.kubernetes_objects() if r.inputs.get("kind") == kind]


def efa_node_classes(graph: ApplyGraph) -> list[RecordedResource]:
    """EC2NodeClasses whose NodePools launch EFA nodes (Karpenter adds one interface per card)."""
    names = {
        _get(p.inputs, "spec", "template", "spec", "nodeClassRef", "name")
        for p in _custom_objects(graph, "NodePool")
        if EFA_NODE_LABEL in (_get(p.inputs, "spec", "template", "metadata", "labels") or {})
    }
    return [c for c in _custom_objects(graph, "EC2NodeClass") if _get(c.inputs, "metadata", "name") in names]


def node_subnet_sources(graph: ApplyGraph) -> list[tuple[RecordedResource, list[str], bool]]:
    """(node source, its subnet ids, launches nodes with several interfaces) for every managed
    node group and every Karpenter EC2NodeClass."""
    out = []
    efa_classes = {r.urn for r in efa_node_classes(graph)}
    for group in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = _launch_template(graph, group)
        interfaces = (template.inputs.get("networkInterfaces") or []) if template else []
        out.append((group, list(group.inputs.get("subnetIds") or []), len(interfaces) > 1))
    for node_class in _custom_objects(graph, "EC2NodeClass"):
        ids = [t.get("id") for t in _get(node_class.inputs, "spec", "subnetSelectorTerms") or []]
        out.append((node_class, [i for i in ids if i], node_class.urn in efa_classes))
    return out


@rule("multi-interface-nodes-in-private-subnets")
def multi_interface_nodes_in_private_subnets(graph: ApplyGraph) -> Iterable[Violation]:
    subnets = Subnets(graph)
    for source, subnet_ids, multi in node_subnet_sources(graph):
        if not multi:
            continue
        if _get(source.inputs, "spec", "associatePublicIPAddress") is True:
            yield Violation(
                "multi-interface-nodes-in-private-subnets",
                describe(source),
                "asks for a public IP with several interfaces, which EC2 refuses",
            )
        if not subnet_ids:
            yield Violation("multi-interface-nodes-in-private-subnets", describe(source), "names no subnet")
        for subnet_id in subnet_ids:
            private = subnets.private(subnet_id)
            if private is not True:
                why = "routes to an internet gateway" if private is False else "cannot be shown to route through NAT"
                yield Violation(
                    "multi-interface-nodes-in-private-subnets",
                    describe(source),
                    f"launches nodes with several network interfaces (EFA) in subnet {subnet_id}, which "
                    f"{why}; EC2 gives such nodes no public address, so they never join",
                )


@rule("private-nodes-wait-for-nat")
def private_nodes_wait_for_nat(graph: ApplyGraph) -> Iterable[Violation]:
    subnets = Subnets(graph)
    for source, subnet_ids, _ in node_subnet_sources(graph):
        for subnet_id in subnet_ids:
            if subnet_id not in subnets.created or not subnets.private(subnet_id):
                continue
            for needed in subnets.egress_of(subnet_id):
                if not graph.waits_for(source, needed):
                    yield Violation(
                        "private-nodes-wait-for-nat",
                        describe(source),
                        f"starts nodes in private subnet {subnet_id} before {describe(needed)}, "
                        "so they cannot reach ECR, EKS or STS and never join",
                    )
    nats = graph.of_type("gcp:compute/routerNat:RouterNat")
    for pool in graph.of_type("gcp:container/nodePool:NodePool"):
        if _get(pool.inputs, "networkConfig", "enablePrivateNodes") and not any(
            graph.waits_for(pool, nat) for nat in nats
        ):
            yield Violation(
                "private-nodes-wait-for-nat",
                describe(pool),
                "has private nodes but does not wait for a Cloud NAT, so image pulls from Docker Hub fail",
            )


# --- Autoscaling -------------------------------------------------------------------------------


def _pool_label(labels: Any) -> str | None:
    return (labels or {}).get(contract.LABEL_POOL) if isinstance(labels, dict) else None


def deliverable_nodes(graph: ApplyGraph, pool: str) -> tuple[int, list[str]]:
    """Nodes the recorded resources can give `pool`, and how."""
    nodes, how = 0, []
    for group in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        if _pool_label(group.inputs.get("labels")) == pool:
            size = int(_get(group.inputs, "scalingConfig", "desiredSize") or 0)
            nodes += size
            how.append(f"node group {group.name}: {size} node(s)")
    releases = [
        r
        for r in graph.of_type("kubernetes:helm.sh/v3:Release")
        if "karpenter" in str(r.inputs.get("chart")) and _get(r.inputs, "values", "settings", "clusterName")
    ]
    classes = {_get(c.inputs, "metadata", "name") for c in _custom_objects(graph, "EC2NodeClass")}
    for node_pool in _custom_objects(graph, "NodePool"):
        if _pool_label(_get(node_pool.inputs, "spec", "template", "metadata", "labels")) != pool:
            continue
        if not any(graph.waits_for(node_pool, release) for release in releases):
            how.append(f"NodePool {node_pool.name} without a Karpenter release before it: 0 nodes")
            continue
        if _get(node_pool.inputs, "spec", "template", "spec", "nodeClassRef", "name") not in classes:
            how.append(f"NodePool {node_pool.name} names no EC2NodeClass the stack creates: 0 nodes")
            continue
        limit = int(_get(node_pool.inputs, "spec", "limits", "nodes") or 0)
        nodes += limit
        how.append(f"Karpenter NodePool {node_pool.name}: up to {limit} node(s)")
    for gke_pool in graph.of_type("gcp:container/nodePool:NodePool"):
        if _pool_label(_get(gke_pool.inputs, "nodeConfig", "labels")) == pool:
            most = int(_get(gke_pool.inputs, "autoscaling", "totalMaxNodeCount") or 0)
            nodes += most
            how.append(f"GKE node pool {gke_pool.name}: autoscaled to {most} node(s)")
    return nodes, how


@rule("gpu-capacity-has-an-autoscaler")
def gpu_capacity_has_an_autoscaler(graph: ApplyGraph) -> Iterable[Violation]:
    for row in graph.evaluation.outputs.get("pools") or []:
        if row.get("autoscaler", "").startswith("declared"):
            continue  # cloud: existing: the stack describes the cluster's own nodes
        counted = int(row["nodesCounted"])
        nodes, how = deliverable_nodes(graph, row["pool"])
        if nodes < counted:
            yield Violation(
                "gpu-capacity-has-an-autoscaler",
                f"pool {row['pool']}",
                f"the plan counts {counted} node(s) but the stack can deliver {nodes} "
                f"({'; '.join(how) or 'nothing creates its nodes'})",
            )


# --- Driver and CUDA ---------------------------------------------------------------------------


def _pool_driver_facts(graph: ApplyGraph, pool: str) -> list[tuple[str, Any]]:
    """(where, Fact or problem string) for every node source of `pool`."""
    operator = [
        r
        for r in graph.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs.get("chart") == "gpu-operator" and _get(r.inputs, "values", "driver", "enabled")
    ]
    if operator:
        version = _get(operator[0].inputs, "values", "driver", "version")
        if version and version != driver_versions.GPU_OPERATOR_DRIVER.value:
            return [("GPU Operator", f"driver.version {version} is not a recorded driver")]
        return [("GPU Operator", driver_versions.GPU_OPERATOR_DRIVER)]
    facts: list[tuple[str, Any]] = []
    for group in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        if _pool_label(group.inputs.get("labels")) == pool:
            release = driver_versions.eks_ami_release_of(group.inputs.get("releaseVersion"))
            facts.append(
                (
                    group.name,
                    driver_versions.EKS_AMI_DRIVERS.get(release or "")
                    or f"AMI release {group.inputs.get('releaseVersion') or '(not pinned: the newest at creation)'} "
                    "has no recorded driver",
                )
            )
    classes = {_get(c.inputs, "metadata", "name"): c for c in _custom_objects(graph, "EC2NodeClass")}
    for node_pool in _custom_objects(graph, "NodePool"):
        if _pool_label(_get(node_pool.inputs, "spec", "template", "metadata", "labels")) != pool:
            continue
        node_class = classes.get(_get(node_pool.inputs, "spec", "template", "spec", "nodeClassRef", "name"))
        aliases = [
            t.get("alias") for t in (_get(node_class.inputs, "spec", "amiSelectorTerms") if node_class else []) or []
        ]
        release = driver_versions.eks_ami_release_of(aliases[0] if aliases else None)
        facts.append(
            (
                node_pool.name,
                driver_versions.EKS_AMI_DRIVERS.get(release or "")
                or f"AMI {aliases or '(none)'} is not a pinned release: it has no recorded driver",
            )
        )
    for gke_pool in graph.of_type("gcp:container/nodePool:NodePool"):
        if _pool_label(_get(gke_pool.inputs, "nodeConfig", "labels")) == pool:
            accelerators = _get(gke_pool.inputs, "nodeConfig", "guestAccelerators") or []
            version = _get(accelerators[0], "gpuDriverInstallationConfig", "gpuDriverVersion") if accelerators else None
            facts.append(
                (
                    gke_pool.name,
                    driver_versions.GKE_DRIVERS.get(version or "")
                    or f"gpu_driver_version {version!r} installs no known driver",
                )
            )
    return facts


def server_workloads(graph: ApplyGraph) -> list[tuple[RecordedResource, str, str]]:
    """(workload, engine image, pool) for every GPU server the stack runs."""
    out = []
    # The program's own ServingRuntimes by name: each names the image its InferenceService runs.
    runtime_images = {}
    for resource in graph.kubernetes_objects():
        if resource.inputs.get("kind") == "ServingRuntime":
            containers = _get(resource.inputs.get("spec") or {}, "containers") or [{}]
            runtime_images[_get(resource.inputs, "metadata", "name")] = containers[0].get("image", "")
    for resource in graph.kubernetes_objects():
        kind, spec = resource.inputs.get("kind"), resource.inputs.get("spec") or {}
        templates = []
        if kind == "Deployment":
            templates = [_get(spec, "template")]
        elif kind == "LeaderWorkerSet":
            templates = [
                _get(spec, "leaderWorkerTemplate", "leaderTemplate"),
                _get(spec, "leaderWorkerTemplate", "workerTemplate"),
            ]
        if kind == "InferenceService":
            predictor = _get(spec, "predictor") or {}
            pool = _pool_label(predictor.get("nodeSelector"))
            if pool:
                runtime = _get(predictor, "model", "runtime")
                out.append(
                    (resource, runtime_images.get(runtime, f"kserve runtime {runtime} (not created here)"), pool)
                )
        for template in templates:
            pod = _get(template, "spec") or {}
            pool = _pool_label(pod.get("nodeSelector"))
            for container in pod.get("containers") or []:
                if pool and contract.GPU_RESOURCE in (_get(container, "resources", "limits") or {}):
                    out.append((resource, container.get("image", ""), pool))
    return out


def driver_checks(graph: ApplyGraph) -> list[tuple[RecordedResource, str, str, Any, Any]]:
    """(workload, image, node source, CUDA fact, driver fact or problem) for every server."""
    out = []
    for workload, image, pool in server_workloads(graph):
        cuda = engine.image_cuda(image)
        for where, driver in _pool_driver_facts(graph, pool):
            out.append((workload, image, where, cuda, driver))
    return out


@rule("node-driver-runs-engine-cuda")
def node_driver_runs_engine_cuda(graph: ApplyGraph) -> Iterable[Violation]:
    for workload, image, where, cuda, driver in driver_checks(graph):
        if isinstance(driver, str):
            yield Violation("node-driver-runs-engine-cuda", describe(workload), f"on {where}: {driver}")
            continue
        if cuda is None or cuda.value is None or driver.value is None:
            continue  # unresolved: the offline plan lists it with the command that settles it
        if driver_versions.driver_runs(driver.value, cuda.value) is False:
            yield Violation(
                "node-driver-runs-engine-cuda",
                describe(workload),
                f"{image} is built with CUDA {cuda.value}, which needs driver >= "
                f"{driver_versions.minimum_driver(cuda.value)}; {where} runs {driver.value} ({driver.subject})",
            )


# --- GKE Gateway ------------------------------------------------------------------------------------

GKE_REGIONAL_CLASSES = {"gke-l7-regional-external-managed", "gke-l7-rilb"}
GCP_SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"


@rule("regional-gateway-has-its-gke-prerequisites")
def regional_gateway_has_its_gke_prerequisites(graph: ApplyGraph) -> Iterable[Violation]:
    gateways = [
        r
        for r in graph.kubernetes_objects()
        if r.inputs.get("kind") == "Gateway" and _get(r.inputs, "spec", "gatewayClassName") in GKE_REGIONAL_CLASSES
    ]
    clusters = graph.of_type("gcp:container/cluster:Cluster")
    if not gateways or not clusters:
        return  # no regional GKE Gateway, or a cluster the stack does not create
    [cluster] = clusters
    for gateway in gateways:
        if (_get(cluster.inputs, "gatewayApiConfig", "channel") or "CHANNEL_DISABLED") == "CHANNEL_DISABLED":
            yield Violation(
                "regional-gateway-has-its-gke-prerequisites",
                describe(gateway),
                "the cluster's Gateway API is off, so GKE has no GatewayClass "
                f"{_get(gateway.inputs, 'spec', 'gatewayClassName')} and the Gateway is never programmed",
            )
        network = cluster.inputs.get("network")
        if network is None:
            continue  # the project's default network: its proxy-only subnet is the owner's (docs/routing.md)
        region = cluster.inputs.get("location")
        proxies = [
            s
            for s in graph.of_type(GCP_SUBNETWORK)
            if s.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"
            and s.inputs.get("role") == "ACTIVE"
            and s.inputs.get("region") == region
        ]
        if not proxies:
            yield Violation(
                "regional-gateway-has-its-gke-prerequisites",
                describe(gateway),
                f"no ACTIVE proxy-only subnet (REGIONAL_MANAGED_PROXY) in {region} for the regional "
                "load balancer's proxies; the Gateway would never get an address",
            )


# --- API endpoint and Secrets encryption ------------------------------------------------------------

EKS_CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
# EKS service quota "Public endpoint access CIDR ranges per cluster": 40, not adjustable
# (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html).
EKS_PUBLIC_CIDR_QUOTA = 40


@rule("eks-endpoint-accepted")
def eks_endpoint_accepted(graph: ApplyGraph) -> Iterable[Violation]:
    import ipaddress

    for cluster in graph.of_type(EKS_CLUSTER):
        vpc = cluster.inputs.get("vpcConfig") or {}
        public = vpc.get("endpointPublicAccess", True)  # EKS's defaults: public on, private off
        private = vpc.get("endpointPrivateAccess", False)
        cidrs = vpc.get("publicAccessCidrs") or []
        if not public and not private:
            yield Violation(
                "eks-endpoint-accepted",
                describe(cluster),
                "both endpointPublicAccess and endpointPrivateAccess are off; EKS refuses a cluster "
                "with no API endpoint",
            )
        if not public and cidrs:
            yield Violation(
                "eks-endpoint-accepted",
                describe(cluster),
                "publicAccessCidrs are set with endpointPublicAccess off; EKS ignores them, so the list "
                "restricts nothing",
            )
        if len(cidrs) > EKS_PUBLIC_CIDR_QUOTA:
            yield Violation(
                "eks-endpoint-accepted",
                describe(cluster),
                f"{len(cidrs)} publicAccessCidrs, above EKS's fixed quota of {EKS_PUBLIC_CIDR_QUOTA}",
            )
        for cidr in cidrs:
            net = ipaddress.ip_network(cidr)
            if net.prefixlen and (net.is_private or net.is_reserved or net.is_link_local or net.is_loopback):
                yield Violation(
                    "eks-endpoint-accepted",
                    describe(cluster),
                    f"publicAccessCidrs lists {cidr}, a reserved range, which EKS refuses",
                )


def _policy_statements(policy: Any) -> list[dict]:
    import json

    document = json.loads(policy) if isinstance(policy, str) else (policy or {})
    statements = document.get("Statement") or []
    return [statements] if isinstance(statements, dict) else list(statements)


def _allows(statement: dict, actions: set[str], resource: str) -> set[str]:
    """The actions of `actions` an Allow statement grants on `resource`."""
    if statement.get("Effect") != "Allow":
        return set()
    resources = statement.get("Resource")
    resources = [resources] if isinstance(resources, str) else list(resources or [])
    if not any(r in ("*", resource) for r in resources):
        return set()
    granted = statement.get("Action")
    granted = [granted] if isinstance(granted, str) else list(granted or [])
    return {a for a in actions if a in granted or "kms:*" in granted or "*" in granted}


@rule("eks-secrets-key-usable")
def eks_secrets_key_usable(graph: ApplyGraph) -> Iterable[Violation]:
    needed = {"kms:Encrypt", "kms:Decrypt", "kms:DescribeKey"}
    for cluster in graph.of_type(EKS_CLUSTER):
        encryption = cluster.inputs.get("encryptionConfig")
        if not encryption:
            continue
        key_arn = _get(encryption, "provider", "keyArn")
        if encryption.get("resources") != ["secrets"]:
            yield Violation("eks-secrets-key-usable", describe(cluster), "encryptionConfig.resources must be [secrets]")
        # The mock runtime's ARN of a created key is arn:aws:mock:::<name>.
        keys = [k for k in graph.of_type(KMS_KEY) if str(key_arn).endswith(f":::{k.name}")]
        for key in keys:
            if key.inputs.get("customerMasterKeySpec", "SYMMETRIC_DEFAULT") != "SYMMETRIC_DEFAULT":
                yield Violation("eks-secrets-key-usable", describe(cluster), f"{describe(key)} is not symmetric")
            if key.inputs.get("region") != cluster.inputs.get("region"):
                yield Violation(
                    "eks-secrets-key-usable",
                    describe(cluster),
                    f"{describe(key)} is in {key.inputs.get('region')}, the cluster in "
                    f"{cluster.inputs.get('region')}; EKS needs a key of its own region",
                )
        role_arn = str(cluster.inputs.get("roleArn"))
        granted: set[str] = set()
        for u in graph.upstream(cluster):
            policy = graph.by_urn[u]
            role = str(policy.inputs.get("role"))
            if policy.type == ROLE_POLICY and role_arn.endswith(("/" + role, ":" + role)):
                for statement in _policy_statements(policy.inputs.get("policy")):
                    granted |= _allows(statement, needed, str(key_arn))
        if needed - granted:
            yield Violation(
                "eks-secrets-key-usable",
                describe(cluster),
                f"the cluster role may not {', '.join(sorted(needed - granted))} on {key_arn} before the "
                "cluster is created, so EKS cannot encrypt Secrets with it",
            )


GKE_CLUSTER = "gcp:container/cluster:Cluster"
KMS_KEY_MEMBER = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
GKE_AGENT_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"


@rule("gke-secrets-key-granted-before-cluster")
def gke_secrets_key_granted_before_cluster(graph: ApplyGraph) -> Iterable[Violation]:
    for cluster in graph.of_type(GKE_CLUSTER):
        encryption = cluster.inputs.get("databaseEncryption") or {}
        if encryption.get("state") != "ENCRYPTED":
            continue
        key = encryption.get("keyName")
        members = [graph.by_urn[u] for u in graph.upstream(cluster) if graph.by_urn[u].type == KMS_KEY_MEMBER]
        if not any(
            m.inputs.get("cryptoKeyId") == key
            and m.inputs.get("role") == GKE_AGENT_ROLE
            and str(m.inputs.get("member", "")).endswith("@container-engine-robot.iam.gserviceaccount.com")
            for m in members
        ):
            yield Violation(
                "gke-secrets-key-granted-before-cluster",
                describe(cluster),
                f"no {GKE_AGENT_ROLE} for the GKE service agent on {key} is in place before the cluster "
                "is created; GKE refuses to create a cluster whose Secrets key it cannot use",
            )
        keys = [k for k in graph.of_type("gcp:kms/cryptoKey:CryptoKey") if mock_id(k.type, k.name) == key]
        ring_ids = {k.inputs.get("keyRing") for k in keys}
        for ring in (r for r in graph.of_type("gcp:kms/keyRing:KeyRing") if mock_id(r.type, r.name) in ring_ids):
            if ring.inputs.get("location") != cluster.inputs.get("location"):
                yield Violation(
                    "gke-secrets-key-granted-before-cluster",
                    describe(cluster),
                    f"{describe(ring)} is in {ring.inputs.get('location')}, the cluster in "
                    f"{cluster.inputs.get('location')}; the key ring must be in the cluster's location",
                )


CLOUD_RULES = (
    "cloud-api-enabled-before-use",
    "identity-binding-waits-for-pool",
    "multi-interface-nodes-in-private-subnets",
    "private-nodes-wait-for-nat",
    "gpu-capacity-has-an-autoscaler",
    "node-driver-runs-engine-cuda",
    "regional-gateway-has-its-gke-prerequisites",
    "mirrored-image-has-its-cache",
    "eks-endpoint-accepted",
    "eks-secrets-key-usable",
    "gke-secrets-key-granted-before-cluster",
)


# --- pull-through image caches (images.pullThrough) ---------------------------------------------

ECR_RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
AR_REPOSITORY = "gcp:artifactregistry/repository:Repository"
AR_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_ROLE = "aws:iam/role:Role"
ECR_PULL_THROUGH_ACTIONS = {"ecr:BatchImportUpstreamImage", "ecr:CreateRepository"}
_ECR_HOST = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_AR_HOST = re.compile(r"^([a-z0-9-]+)-docker\.pkg\.dev$")


def _pod_images(spec: Any) -> list[str]:
    pod = spec or {}
    return [c.get("image", "") for c in (pod.get("containers") or []) + (pod.get("initContainers") or [])]


def workload_images(graph: ApplyGraph) -> list[tuple[RecordedResource, str]]:
    """(resource, image) for every image a created pod will pull: pod templates, KServe's storage
    container, and the endpoint picker's chart values."""
    out = []
    for resource in graph.kubernetes_objects():
        inputs = resource.inputs
        spec = inputs.get("spec") or {}
        templates = [
            _get(spec, "template"),
            _get(spec, "jobTemplate", "spec", "template"),
            _get(spec, "leaderWorkerTemplate", "leaderTemplate"),
            _get(spec, "leaderWorkerTemplate", "workerTemplate"),
        ]
        for template in templates:
            out += [(resource, image) for image in _pod_images(_get(template, "spec"))]
        if inputs.get("kind") == "ClusterStorageContainer":
            out.append((resource, _get(spec, "container", "image") or ""))
    for release in graph.of_type("kubernetes:helm.sh/v3:Release"):
        image = _get(release.inputs, "values", "router", "epp", "image")
        if isinstance(image, dict) and image.get("registry"):
            out.append((release, f"{image['registry']}/{image.get('repository')}:{image.get('tag')}"))
    return [(r, i) for r, i in out if isinstance(i, str) and i]


def _statements(policy: Any) -> list[dict]:
    try:
        document = json.loads(policy) if isinstance(policy, str) else policy
    except ValueError:
        return []
    statements = (document or {}).get("Statement") or []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _grants(policy: Any, actions: set[str], resource_arn: str) -> bool:
    def listed(value: Any) -> list[str]:
        return value if isinstance(value, list) else [value]

    granted: set[str] = set()
    for statement in _statements(policy):
        if statement.get("Effect") != "Allow":
            continue
        if any(fnmatch.fnmatchcase(resource_arn, pattern) for pattern in listed(statement.get("Resource"))):
            granted |= {a for a in actions if any(fnmatch.fnmatchcase(a, p) for p in listed(statement.get("Action")))}
    return granted == actions


def _node_roles(graph: ApplyGraph) -> list[RecordedResource]:
    """Roles EC2 instances assume: the nodes' (managed node groups, Karpenter's)."""
    out = []
    for role in graph.of_type(IAM_ROLE):
        for statement in _statements(role.inputs.get("assumeRolePolicy")):
            principal = statement.get("Principal") or {}
            services = principal.get("Service") if isinstance(principal, dict) else None
            if "ec2.amazonaws.com" in (services if isinstance(services, list) else [services]):
                out.append(role)
    return out


@rule("mirrored-image-has-its-cache")
def mirrored_image_has_its_cache(graph: ApplyGraph) -> Iterable[Violation]:
    """An image pulled through an ECR pull-through cache or an Artifact Registry remote repository
    needs that cache to exist before the pod (ECR answers "repository ... not found" and the pull
    fails; Artifact Registry answers 404), and the nodes need the right to fill it: on ECR
    ecr:BatchImportUpstreamImage and, for the first pull, ecr:CreateRepository on the cache's
    repositories (https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html);
    on Artifact Registry roles/artifactregistry.reader on the repository for the nodes' account."""
    rules_by_prefix = {r.inputs.get("ecrRepositoryPrefix"): r for r in graph.of_type(ECR_RULE)}
    repositories = {
        (r.inputs.get("location"), r.inputs.get("project"), r.inputs.get("repositoryId")): r
        for r in graph.of_type(AR_REPOSITORY)
    }
    node_accounts = {
        _get(p.inputs, "nodeConfig", "serviceAccount") for p in graph.of_type("gcp:container/nodePool:NodePool")
    } - {None}
    for resource, image in workload_images(graph):
        host, _, rest = image.partition("/")
        first = rest.split("/", 1)[0]
        ecr, ar = _ECR_HOST.match(host), _AR_HOST.match(host)
        if ecr:
            account, region = ecr.groups()
            cache = rules_by_prefix.get(first)
            if cache is None:
                yield Violation(
                    "mirrored-image-has-its-cache",
                    describe(resource),
                    f"pulls {image} through ECR prefix {first!r}, but no pull-through cache rule has that prefix",
                )
                continue
            if not graph.waits_for(resource, cache):
                yield Violation(
                    "mirrored-image-has-its-cache",
                    describe(resource),
                    f"pulls {image} before the pull-through cache rule {cache.name} exists",
                )
            arn = f"arn:aws:ecr:{region}:{account}:repository/{rest.rsplit(':', 1)[0].split('@')[0]}"
            for role in _node_roles(graph):
                policies = [
                    p
                    for p in graph.of_type(ROLE_POLICY)
                    if p.inputs.get("role") == role.inputs.get("name", role.name)
                    and _grants(p.inputs.get("policy"), ECR_PULL_THROUGH_ACTIONS, arn)
                ]
                if not policies:
                    yield Violation(
                        "mirrored-image-has-its-cache",
                        describe(resource),
                        f"node role {role.name} may not fill the cache for {image} "
                        f"({', '.join(sorted(ECR_PULL_THROUGH_ACTIONS))} on {arn})",
                    )
                elif not any(graph.waits_for(resource, p) for p in policies):
                    yield Violation(
                        "mirrored-image-has-its-cache",
                        describe(resource),
                        f"pulls {image} before node role {role.name} may fill the cache",
                    )
        elif ar:
            project, repository_id = first, rest.split("/", 2)[1] if rest.count("/") >= 2 else ""
            repo = repositories.get((ar.group(1), project, repository_id))
            if repo is None or repo.inputs.get("mode") != "REMOTE_REPOSITORY":
                yield Violation(
                    "mirrored-image-has-its-cache",
                    describe(resource),
                    f"pulls {image}, but no Artifact Registry remote repository {repository_id!r} exists there",
                )
                continue
            readers = [
                m
                for m in graph.of_type(AR_MEMBER)
                if m.inputs.get("repository") == repo.inputs.get("name", repo.name)
                and m.inputs.get("role") == "roles/artifactregistry.reader"
                and any(m.inputs.get("member") == f"serviceAccount:{sa}" for sa in node_accounts)
            ]
            if not readers:
                yield Violation(
                    "mirrored-image-has-its-cache",
                    describe(resource),
                    f"the nodes' service account may not read {repository_id} (roles/artifactregistry.reader)",
                )
            elif not graph.waits_for(resource, repo) or not any(graph.waits_for(resource, m) for m in readers):
                yield Violation(
                    "mirrored-image-has-its-cache",
                    describe(resource),
                    f"pulls {image} before the remote repository {repository_id} and its reader binding exist",
                )
