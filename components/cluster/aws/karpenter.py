"""Karpenter v1.14.1 on a created EKS cluster: the controller and, per GPU pool, a NodePool and an
EC2NodeClass that grow the pool from its always-on nodes to maxNodes for pending GPU pods.

Why Karpenter and not the Cluster Autoscaler (docs/config-cloud.md, "Node autoscaling"): it
simulates a node from EC2's instance-type data (GPUs, EFA interfaces), so a pool scales from zero
without the node-template tags the Cluster Autoscaler needs on each Auto Scaling group, which EKS
managed node groups do not propagate; it builds a launch template with one EFA interface per
network card when a pod requests `vpc.amazonaws.com/efa`; it places nodes in a placement group
(`placementGroupSelector`) and in Capacity Blocks (capacity type `reserved`); and AWS's
ai-on-eks blueprints run their GPU pools on it.

Sources, all aws/karpenter-provider-aws: the chart at tag v1.14.1 (bde00654cd31); the v1.14 docs
and the published chart metadata at commit 1d927085dd81 ("docs: update for patch release
v1.14.1"): Chart.yaml `version: 1.14.1`, getting-started (`helm upgrade --install karpenter
oci://public.ecr.aws/karpenter/karpenter --version 1.14.1 --namespace kube-system`), concepts/
nodepools.md, disruption.md, nodeclasses.md, tasks/odcrs.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from common import contract, driver_versions, images
from components.cluster.aws import karpenter_iam, policies
from components.cluster.interface import GpuPlacement

VERSION = "1.14.1"
# The chart is published to ECR Public as an OCI artifact; the chart version has no leading "v".
CHART = "oci://public.ecr.aws/karpenter/karpenter"
NAMESPACE = "kube-system"
RELEASE_NAME = "karpenter"
# The ServiceAccount the chart creates (serviceAccount.name); the Pod Identity association names it.
SERVICE_ACCOUNT = "karpenter"
NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
HELM_TIMEOUT_SECONDS = 600
# Karpenter's own labels on the nodes it launches (concepts/scheduling.md, well-known labels).
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
# pools[].capacityType -> karpenter.sh/capacity-type. Capacity Blocks are capacity reservations to
# Karpenter, consumed with capacity type `reserved` (tasks/odcrs.md:31-46).
CAPACITY_TYPES = {"on-demand": "on-demand", "spot": "spot", "capacity-block": "reserved"}
# Getting-started sizing of the controller (scripts/step08-apply-helm-chart.sh:8-11).
CONTROLLER_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
# The chart spreads its replicas with a required anti-affinity on kubernetes.io/hostname
# (values.yaml:100-102), so there can be no more replicas than system nodes.
MAX_REPLICAS = 2
# Consolidate only empty nodes, five minutes after their last pod left (ai-on-eks GPU pools use
# WhenEmpty with 300s); a node under a serving pod is never consolidated, and the servers also
# carry contract.ANNOTATION_DO_NOT_DISRUPT against drift.
CONSOLIDATE_AFTER = "5m"
# Expiration is a forceful disruption that do-not-disrupt does not block (disruption.md:444-447):
# GPU serving nodes live until they are empty.
EXPIRE_AFTER = "Never"
# Root volume of Karpenter's nodes: the same disk as the managed node groups' launch template.
ROOT_DEVICE = "/dev/xvda"


def helm_values(
    cluster_name: pulumi.Input[str],
    cluster_endpoint: pulumi.Input[str],
    interruption_queue: pulumi.Input[str],
    system_nodes: int,
) -> dict[str, Any]:
    """Chart values; every key is one of the chart's values.yaml at v1.14.1 (tests/support/helm_values.py).

    The image comes from the one table (common/images.py "karpenter-controller"): the tag's values.yaml
    still names the 1.13.0 image (the release pipeline rewrites it), and the chart published as 1.14.1
    carries the 1.14.1 image and its digest, which the table records; the template renders
    "{repository}:{tag}@{digest}" (templates/_helpers.tpl:70-76 at 1.14.1).
    """
    image = images.chart_image("karpenter-controller")
    return {
        "settings": {
            # Required: the chart refuses to render without it (templates/deployment.yaml).
            "clusterName": cluster_name,
            "clusterEndpoint": cluster_endpoint,
            # Spot interruptions, rebalance recommendations, scheduled maintenance and Capacity
            # Block ends reach Karpenter through this queue; empty disables interruption handling.
            "interruptionQueue": interruption_queue,
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        "replicas": min(MAX_REPLICAS, system_nodes),
        # The chart keeps the controller off Karpenter's own nodes (affinity
        # karpenter.sh/nodepool DoesNotExist); this keeps it on the untainted system node group.
        "nodeSelector": {"kubernetes.io/os": "linux", contract.LABEL_POOL: contract.SYSTEM_POOL},
        "controller": {
            "resources": CONTROLLER_RESOURCES,
            "image": {
                "repository": image.name,
                "tag": image.tag,
                **({"digest": image.digest} if image.digest else {}),
            },
        },
    }


@dataclass(frozen=True)
class KarpenterArgs:
    cluster_name: pulumi.Input[str]
    cluster_endpoint: pulumi.Input[str]
    # Plain values: the IAM policies are scoped to them.
    scope: karpenter_iam.Scope
    system_nodes: int
    provider: k8s.Provider
    # What the controller needs running first: the system nodes it runs on, the Pod Identity agent.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class Karpenter(pulumi.ComponentResource):
    """The controller (Helm release), its IAM role via Pod Identity, the node role its nodes join
    with, and the interruption queue with its EventBridge rules."""

    release: k8s.helm.v3.Release
    node_role_name: pulumi.Output[str]
    # What a NodePool must wait for besides the release: its nodes' role may join the cluster.
    nodes_may_join: list[pulumi.Resource]
    values: dict[str, Any]

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:aws:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        scope = args.scope
        region = scope.region

        # The nodes' role: the same three node policies as the managed node groups, a role of its
        # own because EKS already made an access entry for the node groups' role, and this one
        # needs its own of type EC2_LINUX (the cluster authenticates with access entries only).
        node_role = aws.iam.Role(
            f"{name}-node",
            description="Nodes Karpenter launches for the llm-serving EKS cluster",
            assume_role_policy=pulumi.Output.json_dumps(policies.service_trust_policy("ec2.amazonaws.com")),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{key}", role=node_role.name, policy_arn=arn, opts=child)
            for key, arn in policies.NODE_MANAGED_POLICIES.items()
        ]
        access = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=args.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            region=region,
            opts=child,
        )

        queue = aws.sqs.Queue(
            f"{name}-interruptions",
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            region=region,
            opts=child,
        )
        queue_policy = aws.sqs.QueuePolicy(
            f"{name}-interruptions",
            queue_url=queue.url,
            policy=pulumi.Output.json_dumps(karpenter_iam.interruption_queue_policy(queue.arn)),
            region=region,
            opts=child,
        )
        targets = []
        for key, source, detail_type in karpenter_iam.INTERRUPTION_EVENTS:
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}",
                description=f"{detail_type} -> Karpenter's interruption queue",
                event_pattern=pulumi.Output.json_dumps({"source": [source], "detail-type": [detail_type]}),
                region=region,
                opts=child,
            )
            targets.append(
                aws.cloudwatch.EventTarget(
                    f"{name}-{key}",
                    rule=rule.name,
                    arn=queue.arn,
                    target_id="KarpenterInterruptionQueueTarget",
                    region=region,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[queue_policy]),
                )
            )

        controller_role = aws.iam.Role(
            f"{name}-controller",
            description=f"{NAMESPACE}/{SERVICE_ACCOUNT}: the Karpenter controller",
            assume_role_policy=pulumi.Output.json_dumps(
                policies.pod_identity_trust_policy(args.cluster_name, NAMESPACE, SERVICE_ACCOUNT)
            ),
            opts=child,
        )
        controller_policies = [
            aws.iam.RolePolicy(
                f"{name}-controller-{key}",
                role=controller_role.id,
                policy=pulumi.Output.json_dumps(document),
                opts=child,
            )
            for key, document in karpenter_iam.controller_policies(scope, node_role.arn, queue.arn).items()
        ]
        association = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=controller_role.arn,
            region=region,
            opts=pulumi.ResourceOptions(parent=self, depends_on=controller_policies),
        )

        self.values = helm_values(args.cluster_name, args.cluster_endpoint, queue.name, args.system_nodes)
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name=RELEASE_NAME,
                chart=CHART,
                version=VERSION,
                namespace=NAMESPACE,
                create_namespace=False,
                values=self.values,
                # The chart's crds/ (NodePool, EC2NodeClass, NodeClaim, ...) are installed with it.
                atomic=True,
                cleanup_on_fail=True,
                timeout=HELM_TIMEOUT_SECONDS,
            ),
            # A controller started without its credentials or its queue fails its first calls.
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[association, *targets, *args.depends_on]
            ),
        )
        self.node_role_name = node_role.name
        self.nodes_may_join = [access, *attachments]
        self.register_outputs({"release": self.release.status, "nodeRole": self.node_role_name})


# ---------------------------------------------------------------------------------------------
# Per GPU pool: an EC2NodeClass (how to launch) and a NodePool (what, how many, when to remove)


@dataclass(frozen=True)
class KarpenterPoolSpec:
    """What the EKS layer decided for one GPU pool; pure data, so the manifests are testable."""

    pool: str
    placement: GpuPlacement
    instance_type: str
    capacity_type: str  # pools[].capacityType
    # Nodes Karpenter may add on top of the pool's always-on managed node group.
    nodes: int
    disk_gib: int
    labels: dict[str, str]
    # Subnets (ids) and zones the nodes may go in: all private subnets, or the EFA pool's one.
    subnet_ids: list[pulumi.Input[str]]
    zones: list[str]
    security_group_ids: list[pulumi.Input[str]]
    node_role: pulumi.Input[str]
    placement_group: pulumi.Input[str] | None = None
    capacity_reservation_id: str | None = None
    efa: bool = False


def object_name(pool: str) -> str:
    return f"llm-serving-{pool}"


def ec2_node_class_spec(spec: KarpenterPoolSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "role": spec.node_role,
        # Pinned AMI release, so the NVIDIA driver on the nodes is a known fact
        # (common/driver_versions.py); Karpenter picks the NVIDIA variant for GPU instance types.
        "amiSelectorTerms": [{"alias": driver_versions.KARPENTER_AMI_ALIAS}],
        "subnetSelectorTerms": [{"id": subnet_id} for subnet_id in spec.subnet_ids],
        "securityGroupSelectorTerms": [{"id": sg} for sg in spec.security_group_ids],
        # Private subnets only: no public address (and EC2 refuses one with several EFA interfaces).
        "associatePublicIPAddress": False,
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "ebs": {
                    "volumeSize": f"{spec.disk_gib}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                    "throughput": 500,
                    "iops": 6000,
                },
            }
        ],
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 2},
        "tags": {"llm-serving/pool": spec.pool},
    }
    if spec.placement_group is not None:
        body["placementGroupSelector"] = {"name": spec.placement_group}
    if spec.capacity_reservation_id:
        body["capacityReservationSelectorTerms"] = [{"id": spec.capacity_reservation_id}]
    return body


def node_pool_spec(spec: KarpenterPoolSpec) -> dict[str, Any]:
    placement = spec.placement
    requirements = [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [spec.instance_type]},
        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [CAPACITY_TYPES[spec.capacity_type]]},
        {"key": ZONE_LABEL, "operator": "In", "values": list(spec.zones)},
    ]
    return {
        "template": {
            "metadata": {"labels": dict(spec.labels)},
            "spec": {
                "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": object_name(spec.pool)},
                "taints": [
                    {"key": placement.taint_key, "value": placement.taint_value, "effect": placement.taint_effect}
                ],
                "requirements": requirements,
                "expireAfter": EXPIRE_AFTER,
            },
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER},
        # Nodes Karpenter may run for this pool; the managed node group's always-on nodes are not
        # Karpenter's and do not count (nodepools.md, spec.limits: limits.nodes).
        "limits": {"nodes": str(spec.nodes)},
    }


class KarpenterPool(pulumi.ComponentResource):
    """The EC2NodeClass and NodePool of one GPU pool, created once Karpenter's CRDs exist."""

    def __init__(
        self,
        name: str,
        spec: KarpenterPoolSpec,
        provider: k8s.Provider,
        wait_for: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("llm-serving:aws:KarpenterPool", name, None, opts)
        metadata = {
            "name": object_name(spec.pool),
            "labels": {contract.LABEL_PART_OF: contract.PART_OF, contract.LABEL_POOL: spec.pool},
        }
        self.node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass",
            api_version=NODECLASS_API,
            kind="EC2NodeClass",
            metadata=metadata,
            spec=ec2_node_class_spec(spec),
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=wait_for),
        )
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool",
            api_version=NODEPOOL_API,
            kind="NodePool",
            metadata=metadata,
            spec=node_pool_spec(spec),
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*wait_for, self.node_class]),
        )
        self.register_outputs({})
