"""Lifecycle rules: what `pulumi destroy` (and a second `up`) meets that the mock runtime does not.

Pulumi deletes in the reverse of the order it creates: a resource goes only after everything that
depends on it (https://www.pulumi.com/docs/iac/concepts/how-pulumi-works/, "deletes ... in reverse
dependency order"). So "X is deleted while its controller still runs" is, in the recorded graph,
"X waits for the controller". pulumi-kubernetes deletes with foreground propagation unless an object
says otherwise (pulumi/pulumi-kubernetes provider/pkg/metadata/overrides.go, DeletionPropagation:
"Foreground by default"), so the delete of an owner returns only once the objects it owns (a
NodePool's NodeClaims, a Gateway's Service) are gone, and those carry finalizers their controllers
remove after cleaning up what they made in the cloud.

- destroy-leaves-nothing-billable-unexplained: every model bucket is either retained on purpose
  (retainOnDelete, with an entry in offline_plan.lifecycle.RETAINED that plan.md prints with the
  commands that empty and delete it) or force-destroyable; a filled bucket with neither makes
  destroy fail (S3: BucketNotEmpty; GCS: "The bucket you tried to delete is not empty").
- karpenter-objects-go-before-karpenter: NodePools and EC2NodeClasses wait for the Karpenter
  release, so they are deleted while Karpenter runs. Karpenter puts a finalizer on each node and
  NodeClaim it launches and terminates the instance before removing it
  (https://karpenter.sh/docs/concepts/disruption/, "Control Flow"); with Karpenter gone first
  nothing terminates those instances (aws/karpenter-provider-aws#1268: "There's nothing to execute
  the node termination logic (including ec2 terminate instance)"), and the VPC's subnets then
  cannot be deleted either.
- load-balancers-go-before-cluster-and-network: Gateways and LoadBalancer Services wait for the
  cluster, every subnet and network of the stack, and the release of the Gateway controller the
  program installs, so their cloud load balancers (forwarding rules, NEGs, NLBs) are removed by
  the controller before those go. GKE: "for Services (type: LoadBalancer), we recommend that you
  delete the Services before deleting your cluster"
  (https://cloud.google.com/kubernetes-engine/docs/how-to/deleting-a-cluster); a NEG "cannot be
  deleted if there are backend services referencing it"
  (https://cloud.google.com/compute/docs/reference/rest/v1/networkEndpointGroups/delete).
- dynamic-volumes-go-before-their-driver: every PVC waits for the cluster, for the StorageClass it
  names when the program creates that class, and through it for the CSI driver add-on; that class
  deletes its volumes (reclaimPolicy Delete, the Kubernetes default:
  https://kubernetes.io/docs/concepts/storage/storage-classes/#reclaim-policy), so the EFS access
  point or Filestore instance behind the claim is deleted by the driver, not left behind.
- weekly-changes-replace-only-what-must: a second `up` after each everyday change (a new model
  revision, a new vLLM release, more replicas, a new LoRA adapter; offline_plan/update_diff.py)
  replaces or deletes no cluster, node pool, bucket, network, KMS key or file system, replaces only
  Jobs (a Job's pod template cannot change: pulumi-kubernetes provider/pkg/provider/diff.go lists
  `.spec.template` as forceNew for batch Jobs, after the API server's own rule that
  "spec.template" of a Job is immutable) and ConfigMaps that carry their content in their name, and
  does replace the mirror Job a new revision must re-run.
- cluster-deletable: a GKE cluster the program creates has deletion_protection false: pulumi-gcp's
  default is true, and then "Deleting this cluster via terraform destroy or terraform apply will
  only succeed if this field is false in the Terraform state" (pulumi-gcp v10.2.0
  gcp.container.Cluster, deletion_protection).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from offline_plan import lifecycle, update_diff
from offline_plan.mock_runtime import RecordedResource
from stack_config.formats import default_model_name
from tests.support.first_apply import ApplyGraph, Violation, describe, rule

BUCKET_TYPES = ("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket")
CLUSTER_TYPES = ("aws:eks/cluster:Cluster", "gcp:container/cluster:Cluster")
# What a cloud load balancer sits in: deleting one of these while the load balancer exists fails
# (EC2 DependencyViolation on a subnet or VPC with network interfaces or mapped public addresses;
# GCP "resource is in use" on a subnetwork with forwarding rules).
NETWORK_TYPES = (
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/internetGateway:InternetGateway",
    "gcp:compute/network:Network",
    "gcp:compute/subnetwork:Subnetwork",
)
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KARPENTER_KINDS = {("karpenter.sh", "NodePool"), ("karpenter.k8s.aws", "EC2NodeClass")}
# Gateway classes whose controller the program installs, and the chart that installs it
# (stack_config/entrance.py AGENTGATEWAY_CLASS; components/addons/agentgateway.py).
CONTROLLER_CHARTS = {"agentgateway": "agentgateway"}
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
CSI_ADDONS = {"efs.csi.aws.com": "aws-efs-csi-driver"}


def _group_kind(resource: RecordedResource) -> tuple[str, str]:
    api = str(resource.inputs.get("apiVersion", ""))
    return (api.split("/", 1)[0] if "/" in api else "", str(resource.inputs.get("kind", "")))


def _chart(resource: RecordedResource) -> str:
    """The chart's own name: `oci://.../karpenter` and `karpenter` are both `karpenter`."""
    return str(resource.inputs.get("chart", "")).rstrip("/").rsplit("/", 1)[-1]


def _releases(graph: ApplyGraph, chart: str) -> list[RecordedResource]:
    return [r for r in graph.of_type(HELM_RELEASE) if _chart(r) == chart]


def _missing(graph: ApplyGraph, later: RecordedResource, earlier: Iterable[RecordedResource]) -> list[str]:
    return [describe(e) for e in earlier if not graph.waits_for(later, e)]


@rule("destroy-leaves-nothing-billable-unexplained", kind="lifecycle")
def destroy_leaves_nothing_billable_unexplained(graph: ApplyGraph) -> Iterable[Violation]:
    for bucket in graph.of_type(*BUCKET_TYPES):
        if bucket.retain_on_delete:
            if bucket.type not in lifecycle.RETAINED:
                yield Violation(
                    "destroy-leaves-nothing-billable-unexplained",
                    describe(bucket),
                    "is retained on destroy but offline_plan/lifecycle.py RETAINED does not say how to remove "
                    "it; add the commands that empty and delete it",
                )
        elif bucket.inputs.get("forceDestroy") is not True:
            yield Violation(
                "destroy-leaves-nothing-billable-unexplained",
                describe(bucket),
                "is neither retained (retainOnDelete) nor force_destroy: `pulumi destroy` fails on it once "
                "it holds weights (S3 and GCS refuse to delete a bucket that is not empty); set "
                "modelStore.onDestroy",
            )


@rule("karpenter-objects-go-before-karpenter", kind="lifecycle")
def karpenter_objects_go_before_karpenter(graph: ApplyGraph) -> Iterable[Violation]:
    releases = _releases(graph, "karpenter")
    for obj in graph.kubernetes_objects():
        if _group_kind(obj) not in KARPENTER_KINDS:
            continue
        if not releases:
            continue  # an existing cluster's Karpenter: the program does not delete it
        missing = _missing(graph, obj, releases)
        if missing:
            yield Violation(
                "karpenter-objects-go-before-karpenter",
                describe(obj),
                f"does not wait for {', '.join(missing)}: destroy may remove Karpenter first, and the nodes "
                "this object launched keep running (their finalizer needs Karpenter to terminate them)",
            )


def _load_balancer_objects(graph: ApplyGraph) -> list[RecordedResource]:
    out = []
    for obj in graph.kubernetes_objects():
        group, kind = _group_kind(obj)
        spec = obj.inputs.get("spec") or {}
        if (group, kind) == ("gateway.networking.k8s.io", "Gateway") or (
            kind == "Service" and spec.get("type") == "LoadBalancer"
        ):
            out.append(obj)
    return out


@rule("load-balancers-go-before-cluster-and-network", kind="lifecycle")
def load_balancers_go_before_cluster_and_network(graph: ApplyGraph) -> Iterable[Violation]:
    infrastructure = graph.of_type(*CLUSTER_TYPES, *NETWORK_TYPES)
    for obj in _load_balancer_objects(graph):
        needed = list(infrastructure)
        chart = CONTROLLER_CHARTS.get(str((obj.inputs.get("spec") or {}).get("gatewayClassName", "")))
        if chart:
            needed += _releases(graph, chart)
        missing = _missing(graph, obj, needed)
        if missing:
            yield Violation(
                "load-balancers-go-before-cluster-and-network",
                describe(obj),
                f"does not wait for {', '.join(missing)}: destroy may delete those while the cloud load "
                "balancer this object made still exists (left behind, or the network's delete fails)",
            )


@rule("dynamic-volumes-go-before-their-driver", kind="lifecycle")
def dynamic_volumes_go_before_their_driver(graph: ApplyGraph) -> Iterable[Violation]:
    classes = {
        str((sc.inputs.get("metadata") or {}).get("name", "")): sc
        for sc in graph.kubernetes_objects()
        if sc.type == STORAGE_CLASS
    }
    for sc in classes.values():
        policy = sc.inputs.get("reclaimPolicy", "Delete")
        if policy != "Delete":
            yield Violation(
                "dynamic-volumes-go-before-their-driver",
                describe(sc),
                f"has reclaimPolicy {policy}: the volumes it provisions outlive their claims and `pulumi destroy`",
            )
        addon_name = CSI_ADDONS.get(str(sc.inputs.get("provisioner", "")))
        addons = [a for a in graph.of_type("aws:eks/addon:Addon") if a.inputs.get("addonName") == addon_name]
        missing = _missing(graph, sc, addons)
        if missing:
            yield Violation(
                "dynamic-volumes-go-before-their-driver",
                describe(sc),
                f"does not wait for {', '.join(missing)}: its claims may outlive the driver that deletes their volumes",
            )
    clusters = graph.of_type(*CLUSTER_TYPES)
    for pvc in graph.kubernetes_objects():
        if pvc.inputs.get("kind") != "PersistentVolumeClaim":
            continue
        needed = list(clusters)
        cls = classes.get(str((pvc.inputs.get("spec") or {}).get("storageClassName", "")))
        if cls is not None:
            needed.append(cls)
        missing = _missing(graph, pvc, needed)
        if missing:
            yield Violation(
                "dynamic-volumes-go-before-their-driver",
                describe(pvc),
                f"does not wait for {', '.join(missing)}: destroy may remove those first, and the volume "
                "behind the claim (an EFS access point, a Filestore instance) is never deleted",
            )


@rule("cluster-deletable", kind="lifecycle")
def cluster_deletable(graph: ApplyGraph) -> Iterable[Violation]:
    for cluster in graph.of_type("gcp:container/cluster:Cluster"):
        if cluster.read_id is None and cluster.inputs.get("deletionProtection") is not False:
            yield Violation(
                "cluster-deletable",
                describe(cluster),
                "has deletion_protection on (pulumi-gcp's default): `pulumi destroy` fails on the cluster "
                "and everything it holds stays; set deletion_protection=False",
            )


# What a weekly change may replace: Kubernetes objects of these kinds (Jobs re-run; a ConfigMap whose
# name carries a hash of its content is replaced by design so that whatever mounts it rolls).
MAY_REPLACE_KINDS = {"Job", "ConfigMap"}


@rule("weekly-changes-replace-only-what-must", kind="lifecycle")
def weekly_changes_replace_only_what_must(graph: ApplyGraph) -> Iterable[Violation]:
    before = graph.evaluation
    if before.error is not None:
        return
    for change in update_diff.weekly_changes(before.config):
        name = "weekly-changes-replace-only-what-must"
        try:
            diff = update_diff.classify(before, update_diff.with_change(before, change))
        except Exception as err:
            yield Violation(name, change.name, f"the program refuses the change: {str(err).splitlines()[0]}")
            continue
        for c in diff.values():
            if c.type in update_diff.NEVER_REPLACED and c.kind in ("replace", "delete"):
                yield Violation(name, f"{c.type} {c.name}", f"{change.name}: {c.kind}d ({', '.join(c.forced)})")
            elif c.kind == "replace":
                kind = next((r.inputs.get("kind") for r in before.resources if r.urn == c.urn), None)
                if not (c.type.startswith("kubernetes:") and kind in MAY_REPLACE_KINDS):
                    yield Violation(
                        name, f"{c.type} {c.name}", f"{change.name}: replaced ({', '.join(c.forced)}), not a Job"
                    )
        if change.name == "new model revision":
            # The edited model's own Jobs that fetch its revision (another model may pin the same one).
            first = update_diff.config_list(before.config, "models")[0]
            served = first.get("name") or default_model_name(first["repo"])
            jobs = [
                r
                for r in graph.kubernetes_objects()
                if r.inputs.get("kind") == "Job"
                and r.name.startswith(f"{served}-")
                and first["revision"] in json.dumps(r.inputs.get("spec", {}).get("template"))
            ]
            for job in jobs:
                if diff.get(job.urn) is None or diff[job.urn].kind != "replace":
                    yield Violation(
                        name, describe(job), "a new revision leaves this Job, which fetches the old revision, in place"
                    )


LIFECYCLE_RULES = (
    "destroy-leaves-nothing-billable-unexplained",
    "karpenter-objects-go-before-karpenter",
    "load-balancers-go-before-cluster-and-network",
    "dynamic-volumes-go-before-their-driver",
    "cluster-deletable",
    "weekly-changes-replace-only-what-must",
)
