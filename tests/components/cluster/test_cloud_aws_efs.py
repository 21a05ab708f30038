"""EFS behind the EKS ReadWriteMany model volume, under mocks: what a fresh `pulumi up` needs so the
model store's claim of class `efs-sc` binds instead of staying Pending."""

from __future__ import annotations

import json

import pytest

from common import contract
from components.cluster.aws import efs
from components.cluster.select import create_cluster
from offline_plan.mock_runtime import RecordingMocks, mock_id
from tests.support.aws_cluster import POOLS, PRIVATE, custom, stack
from tests.support.cloud_mocks import MOCK_CLUSTER_SG, one, run_cloud
from tests.support.committed import committed_stack
from tests.support.schemas import validate_object

EFS_TYPES = ("aws:efs/",)


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


@pytest.fixture(scope="module")
def existing():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test"))


def storage_class(evaluation):
    (sc,) = [r for r in evaluation.resources if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    return sc


def nfs_group(evaluation):
    return one(evaluation, "aws:ec2/securityGroup:SecurityGroup", "-efs-nfs")


def admits(group_inputs: dict, source_group: str, port: int, protocol: str = "tcp") -> bool:
    """Would this security group's ingress let `source_group` reach `port`? (AWS rule semantics.)"""
    for rule in group_inputs.get("ingress", []):
        if rule["protocol"] not in (protocol, "-1"):
            continue
        if rule["protocol"] != "-1" and not rule["fromPort"] <= port <= rule["toPort"]:
            continue
        if source_group in rule.get("securityGroups", []):
            return True
    return False


# --- the file system -----------------------------------------------------------------------------


def test_file_system_is_encrypted_with_elastic_throughput(created):
    fs = one(created, "aws:efs/fileSystem:FileSystem").inputs
    assert fs["encrypted"] is True
    assert fs["throughputMode"] == "elastic"
    # Elastic throughput is only offered in General Purpose mode.
    assert fs["performanceMode"] == "generalPurpose"
    # No transition to Infrequent Access: weights are read rarely but must then be read fast.
    assert not fs.get("lifecyclePolicies")


def test_one_mount_target_per_zone_of_the_private_node_subnets_all_on_this_file_system(created):
    fs = one(created, "aws:efs/fileSystem:FileSystem")
    targets = created.of_type("aws:efs/mountTarget:MountTarget")
    node_subnets = [t["id"] for t in custom(created, "EC2NodeClass", "l4")["spec"]["subnetSelectorTerms"]]
    assert sorted(t.inputs["subnetId"] for t in targets) == sorted(node_subnets) == [PRIVATE[z] for z in "abc"]
    # Named by zone: a created VPC's subnet ids are unknown until it exists.
    assert sorted(t.name for t in targets) == [f"llm-serving-efs-mount-us-east-1{z}" for z in "abc"]
    group = nfs_group(created)
    for target in targets:
        assert target.inputs["fileSystemId"] == f"{fs.name}-id"
        assert target.inputs["securityGroups"] == [mock_id(group.type, group.name)]
    # The EFA pool's single subnet is one of them, so its nodes mount in their own zone.
    efa_subnets = one(created, "aws:eks/nodeGroup:NodeGroup", "-h100-ng").inputs["subnetIds"]
    assert set(efa_subnets) <= {t.inputs["subnetId"] for t in targets}


def test_nfs_is_admitted_only_from_the_cluster_security_group_on_2049(created):
    group = nfs_group(created).inputs
    assert group["vpcId"] == mock_id("aws:ec2/vpc:Vpc", "llm-serving-network-vpc")
    assert admits(group, MOCK_CLUSTER_SG, 2049)
    assert not admits(group, MOCK_CLUSTER_SG, 2049, "udp")
    assert not admits(group, MOCK_CLUSTER_SG, 22) and not admits(group, MOCK_CLUSTER_SG, 111)
    assert not admits(group, "sg-someone-else", 2049)
    (rule,) = group["ingress"]
    # No address ranges, no self-reference: the cluster security group is the only source.
    assert set(rule) - {"description"} == {"protocol", "fromPort", "toPort", "securityGroups"}
    assert rule["securityGroups"] == [MOCK_CLUSTER_SG]
    # Mount targets never open connections; stateful groups answer NFS without egress rules.
    assert not group.get("egress")


# --- the CSI driver and its identity ------------------------------------------------------------


def test_csi_driver_addon_has_a_pod_identity_association_for_its_controller(created):
    addon = one(created, "aws:eks/addon:Addon", "-efs-csi-driver").inputs
    assert addon["addonName"] == "aws-efs-csi-driver"
    assert addon["clusterName"] == "llm-serving"
    role = one(created, "aws:iam/role:Role", "-efs-csi-controller")
    assert addon["podIdentityAssociations"] == [
        {"serviceAccount": "efs-csi-controller-sa", "roleArn": f"arn:aws:mock:::{role.name}"}
    ]


def test_controller_role_has_exactly_the_efs_csi_managed_policy(created):
    role = one(created, "aws:iam/role:Role", "-efs-csi-controller")
    attached = [
        a.inputs["policyArn"]
        for a in created.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == role.name
    ]
    assert attached == ["arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"]
    assert not [p for p in created.of_type("aws:iam/rolePolicy:RolePolicy") if p.inputs["role"] == role.name]


def test_controller_role_trusts_only_pod_identity_for_the_controller_service_account(created):
    trust = json.loads(one(created, "aws:iam/role:Role", "-efs-csi-controller").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # EKS Pod Identity tags each session with these; the role refuses any other pod, even one an
    # association in the account might map to it.
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-name": "llm-serving",
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "efs-csi-controller-sa",
        }
    }


def test_controller_tolerates_the_gpu_taint_so_a_gpu_only_cluster_can_provision(created):
    config = json.loads(one(created, "aws:eks/addon:Addon", "-efs-csi-driver").inputs["configurationValues"])
    tolerations = config["controller"]["tolerations"]
    gpu = {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": contract.GPU_TAINT_EFFECT}
    assert gpu in tolerations
    assert created.result.placements["l4"].toleration == gpu
    # The chart's own defaults are kept, since setting the list replaces them.
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in tolerations


# --- the StorageClass ------------------------------------------------------------------------------


def test_storage_class_is_valid_and_provisions_access_points_on_this_file_system(created):
    sc = storage_class(created)
    validate_object(sc.inputs)
    fs = one(created, "aws:efs/fileSystem:FileSystem")
    assert sc.inputs["metadata"]["name"] == created.result.rwx_storage_class == "efs-sc"
    assert sc.inputs["provisioner"] == "efs.csi.aws.com"
    params = sc.inputs["parameters"]
    assert params["provisioningMode"] == "efs-ap"
    assert params["fileSystemId"] == f"{fs.name}-id"
    assert params["directoryPerms"] == "700" and params["basePath"].startswith("/")
    assert sc.inputs["reclaimPolicy"] == "Delete"
    assert sc.inputs["volumeBindingMode"] == "Immediate"


def test_storage_class_is_created_through_the_cluster_provider(created):
    (provider,) = created.of_type("pulumi:providers:kubernetes")
    reference = storage_class(created).provider
    assert reference and reference.split("::")[:-1] == provider.urn.split("::")


def test_existing_cluster_gets_efs_in_its_own_vpc_behind_its_own_security_group(existing):
    group = nfs_group(existing).inputs
    assert group["vpcId"] == "vpc-mock-existing"
    assert admits(group, MOCK_CLUSTER_SG, 2049)
    assert one(existing, "aws:eks/addon:Addon", "-efs-csi-driver").inputs["clusterName"] == "shared-gpu"
    assert storage_class(existing).inputs["metadata"]["name"] == "efs-sc"


def test_existing_cluster_with_two_subnets_per_zone_gets_one_mount_target_per_zone(monkeypatch):
    # An existing cluster commonly lists a public and a private subnet in each zone; EFS refuses a
    # second mount target in a zone, so the program picks one node (private) subnet per zone.
    zones = {
        "subnet-pub-a": "us-east-1a",
        "subnet-priv-a": "us-east-1a",
        "subnet-pub-b": "us-east-1b",
        "subnet-priv-b": "us-east-1b",
        "subnet-priv2-b": "us-east-1b",
        "subnet-only-c": "us-east-1c",
    }
    original = RecordingMocks.call

    def call(self, args):
        result = original(self, args)
        if args.token == "aws:eks/getCluster:getCluster":
            result["vpcConfig"] = {**result["vpcConfig"], "subnetIds": list(zones)}
        if args.token == "aws:ec2/getSubnet:getSubnet":
            result["availabilityZone"] = zones[args.args["id"]]
        if args.token == "aws:ec2/getRouteTables:getRouteTables":
            subnet = [f["values"][0] for f in args.args.get("filters", []) if f["name"] == "association.subnet-id"]
            if subnet and "pub" not in subnet[0]:
                result["ids"] = ["rtb-mock-private"]
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)
    evaluation = run_cloud(
        lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test")
    )
    mounted = sorted(t.inputs["subnetId"] for t in evaluation.of_type("aws:efs/mountTarget:MountTarget"))
    assert mounted == ["subnet-only-c", "subnet-priv-a", "subnet-priv-b"]


# --- who manages the class -------------------------------------------------------------------------


@pytest.mark.parametrize("configured,manages", [(None, True), ("", True), ("efs-sc", True), ("fsx-lustre", False)])
def test_only_the_default_class_is_managed(configured, manages):
    assert efs.manages_storage_class(configured) is manages


def test_nothing_efs_is_created_when_the_user_names_their_own_class():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"rwxStorageClass": "team-nfs"}), "test"))
    assert evaluation.result.rwx_storage_class == "team-nfs"
    assert evaluation.result.rwx_storage is None
    assert not [r for r in evaluation.resources if r.type.startswith(EFS_TYPES)]
    assert not [r for r in evaluation.resources if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    assert [a.inputs["addonName"] for a in evaluation.of_type("aws:eks/addon:Addon")] == [
        "eks-pod-identity-agent",
        "vpc-cni",
    ]
    assert not [r for r in evaluation.of_type("aws:iam/role:Role") if "efs" in r.name]
    assert not [r for r in evaluation.of_type("aws:ec2/securityGroup:SecurityGroup") if "nfs" in r.name]


def test_naming_the_default_class_explicitly_still_creates_it():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"rwxStorageClass": "efs-sc"}), "test"))
    assert storage_class(evaluation).inputs["metadata"]["name"] == "efs-sc"
    assert len(evaluation.of_type("aws:efs/fileSystem:FileSystem")) == 1


@pytest.mark.parametrize(
    "configured,manage,expected",
    [
        (None, None, True),
        ("team-nfs", None, False),
        (None, False, False),
        ("efs-sc", False, False),
        ("team-efs", True, True),
        (None, True, True),
    ],
)
def test_manage_rwx_storage_wins_over_the_class_name_rule(configured, manage, expected):
    assert efs.manages_rwx_storage(configured, manage) is expected


def test_manage_rwx_storage_false_leaves_an_existing_efs_sc_class_to_the_cluster_owner():
    # A cluster that already has the add-on and an `efs-sc` class: claim it, create nothing.
    evaluation = run_cloud(
        lambda: create_cluster(
            stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu", "manageRwxStorage": False}), "test"
        )
    )
    assert evaluation.result.rwx_storage_class == "efs-sc"
    assert evaluation.result.rwx_storage is None
    assert not [r for r in evaluation.resources if r.type.startswith(EFS_TYPES)]
    assert not [r for r in evaluation.resources if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    assert not evaluation.of_type("aws:eks/addon:Addon")


def test_manage_rwx_storage_true_creates_efs_behind_a_class_of_the_configured_name():
    evaluation = run_cloud(
        lambda: create_cluster(
            stack(POOLS[:1], cluster={"rwxStorageClass": "team-efs", "manageRwxStorage": True}), "test"
        )
    )
    assert evaluation.result.rwx_storage_class == "team-efs"
    assert evaluation.result.rwx_storage is not None
    sc = storage_class(evaluation)
    validate_object(sc.inputs)
    assert sc.inputs["metadata"]["name"] == "team-efs"
    fs = one(evaluation, "aws:efs/fileSystem:FileSystem")
    assert sc.inputs["parameters"]["fileSystemId"] == f"{fs.name}-id"
    assert len(evaluation.of_type("aws:efs/mountTarget:MountTarget")) == len(PRIVATE) - 1  # three zones
    assert one(evaluation, "aws:eks/addon:Addon", "-efs-csi-driver").inputs["addonName"] == "aws-efs-csi-driver"


# --- the whole program ---------------------------------------------------------------------------------


def test_prod_stack_claims_the_class_the_program_creates():
    evaluation = committed_stack("prod")
    (sc,) = [o for o in evaluation.kubernetes_objects if o["kind"] == "StorageClass"]
    claims = [o for o in evaluation.kubernetes_objects if o["kind"] == "PersistentVolumeClaim"]
    assert claims and {c["spec"]["storageClassName"] for c in claims} == {sc["metadata"]["name"]}
    assert all(c["spec"]["accessModes"] == ["ReadWriteMany"] for c in claims)
    validate_object(sc)
    assert len(evaluation.of_type("aws:efs/fileSystem:FileSystem")) == 1
