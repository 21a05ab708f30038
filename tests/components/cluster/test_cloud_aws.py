"""EKS cluster layer under mocks: GPU pools (always-on node groups and Karpenter), node roles, the
system node group, the model bucket and its identities. The VPC and Karpenter themselves:
tests/components/cluster/test_cloud_aws_network.py and tests/components/cluster/test_cloud_aws_karpenter.py."""

from __future__ import annotations

import json

import pytest

import stack_config as cfg
from common import contract, driver_versions, images
from components.cluster.aws import efa, efs, eks
from components.cluster.aws.policies import NODE_MANAGED_POLICIES
from components.cluster.common import MODEL_READER_SERVICE_ACCOUNT, MODEL_WRITER_SERVICE_ACCOUNT
from components.cluster.interface import RdmaAttachment
from components.cluster.select import create_cluster
from offline_plan.mock_runtime import MOCK_PRIVATE_SUBNETS, RecordingMocks, mock_id
from tests.support.aws_cluster import POOLS, PRIVATE, REVISION, custom, node_group, stack
from tests.support.cloud_mocks import MOCK_CLUSTER_SG, one, run_cloud
from tests.support.iam_eval import aws_allows
from tests.support.schemas import validate_object


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


@pytest.fixture(scope="module")
def existing():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test"))


def launch_template(evaluation, pool):
    return one(evaluation, "aws:ec2/launchTemplate:LaunchTemplate", f"-{pool}-lt")


def role_policy(evaluation, role_part):
    return json.loads(one(evaluation, "aws:iam/rolePolicy:RolePolicy", role_part).inputs["policy"])


# --- GPU pools: always-on node groups and Karpenter ------------------------------------------


def gpu_node_groups(evaluation):
    return [g for g in evaluation.of_type("aws:eks/nodeGroup:NodeGroup") if g.inputs["amiType"] == eks.GPU_AMI_TYPE]


def test_a_pool_starting_empty_has_no_node_group_and_karpenter_may_launch_up_to_max_nodes(created):
    assert [g.name for g in gpu_node_groups(created)] == ["llm-serving-h100-ng"]
    assert custom(created, "NodePool", "l4")["spec"]["limits"] == {"nodes": "3"}


def test_min_nodes_are_a_fixed_size_node_group_and_karpenter_adds_the_rest(created):
    scaling = node_group(created, "h100").inputs["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (1, 1, 1)
    # maxNodes 2 = the one always-on node + at most one Karpenter node.
    assert custom(created, "NodePool", "h100")["spec"]["limits"] == {"nodes": "1"}


def test_every_gpu_node_source_carries_the_gpu_taint_with_the_exact_key_and_effect(created):
    assert node_group(created, "h100").inputs["taints"] == [
        {"key": contract.GPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}
    ]
    for pool in ("l4", "h100"):
        assert custom(created, "NodePool", pool)["spec"]["template"]["spec"]["taints"] == [
            {"key": contract.GPU_TAINT_KEY, "value": "present", "effect": contract.GPU_TAINT_EFFECT}
        ]


def test_node_labels_are_the_placement_labels_workloads_select_on(created):
    cluster = created.result
    # EFA nodes carry one label more: the one the EFA device plugin's DaemonSet selects on.
    extra = {"l4": {}, "h100": {efa.EFA_NODE_LABEL: "true"}}
    for pool in ("l4", "h100"):
        placement = cluster.placements[pool]
        expected = {**placement.node_selector, **extra[pool]}
        assert custom(created, "NodePool", pool)["spec"]["template"]["metadata"]["labels"] == expected
        assert placement.node_selector == {contract.LABEL_POOL: pool, contract.LABEL_ACCELERATOR: placement.gpu.lower()}
        assert placement.toleration == {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    assert node_group(created, "h100").inputs["labels"] == {
        **cluster.placements["h100"].node_selector,
        efa.EFA_NODE_LABEL: "true",
    }


def test_nodes_run_the_pinned_nvidia_ami_and_the_catalog_instance_type(created):
    group = node_group(created, "h100").inputs
    assert group["amiType"] == "AL2023_x86_64_NVIDIA"
    assert group["instanceTypes"] == ["p5.48xlarge"]
    # The AMI release is pinned, so the NVIDIA driver on the nodes is a known fact.
    assert group["releaseVersion"] == driver_versions.EKS_RELEASE_VERSIONS["1.33"] == "1.33.13-20260714"
    assert custom(created, "EC2NodeClass", "l4")["spec"]["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    requirement = {
        r["key"]: r["values"] for r in custom(created, "NodePool", "l4")["spec"]["template"]["spec"]["requirements"]
    }
    assert requirement["node.kubernetes.io/instance-type"] == ["g6.xlarge"]


def test_capacity_type_is_spelled_as_eks_and_karpenter_want_it(created):
    assert node_group(created, "h100").inputs["capacityType"] == "SPOT"
    for pool, wanted in (("l4", ["on-demand"]), ("h100", ["spot"])):
        requirements = custom(created, "NodePool", pool)["spec"]["template"]["spec"]["requirements"]
        assert {r["key"]: r["values"] for r in requirements}["karpenter.sh/capacity-type"] == wanted


def test_root_disk_is_sized_from_disk_gib_and_encrypted_on_both_node_sources(created):
    (mapping,) = launch_template(created, "h100").inputs["blockDeviceMappings"]
    assert mapping["deviceName"] == eks.ROOT_DEVICE
    assert mapping["ebs"]["volumeSize"] == 200
    assert (mapping["ebs"]["encrypted"], mapping["ebs"]["volumeType"]) == ("true", "gp3")
    # A node group with a launch template must not also set disk_size (EKS refuses it).
    assert "diskSize" not in node_group(created, "h100").inputs
    group_template = node_group(created, "h100").inputs["launchTemplate"]
    assert group_template["id"] == mock_id("aws:ec2/launchTemplate:LaunchTemplate", "llm-serving-h100-lt")
    assert group_template["version"] == "1"
    (device,) = custom(created, "EC2NodeClass", "l4")["spec"]["blockDeviceMappings"]
    assert device["deviceName"] == eks.ROOT_DEVICE
    assert device["ebs"]["volumeSize"] == "300Gi" and device["ebs"]["encrypted"] is True
    assert custom(created, "EC2NodeClass", "l4")["spec"]["metadataOptions"]["httpTokens"] == "required"


def test_node_role_has_exactly_the_three_node_policies_and_nothing_inline(created):
    attachments = [
        r for r in created.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "gpu-node" in r.name
    ]
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(NODE_MANAGED_POLICIES.values())
    assert {a.inputs["role"] for a in attachments} == {"llm-serving-gpu-node"}
    assert not [
        p for p in created.of_type("aws:iam/rolePolicy:RolePolicy") if p.inputs["role"] == "llm-serving-gpu-node"
    ]
    trust = json.loads(one(created, "aws:iam/role:Role", "gpu-node").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_efa_pool_gets_interfaces_a_placement_group_and_one_private_subnet_in_a_zone_offering_it(created):
    template = launch_template(created, "h100").inputs
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == efa.EFA_INTERFACES["p5.48xlarge"] == 32
    assert {i["interfaceType"] for i in interfaces} == {"efa"}
    assert [i["networkCardIndex"] for i in interfaces] == list(range(len(interfaces)))
    assert interfaces[0]["deviceIndex"] == 0 and {i["deviceIndex"] for i in interfaces[1:]} == {1}
    # No subnet in a managed node group's launch template (EKS refuses it); the node group has one.
    assert not any("subnetId" in i for i in interfaces)
    efa_sg = one(created, "aws:ec2/securityGroup:SecurityGroup", "h100-efa")
    for interface in interfaces:
        assert interface["securityGroups"] == [MOCK_CLUSTER_SG, mock_id(efa_sg.type, efa_sg.name)]
    assert efa_sg.inputs["ingress"][0]["self"] is True
    group = one(created, "aws:ec2/placementGroup:PlacementGroup", "h100-pg")
    assert group.inputs["strategy"] == "cluster"
    assert template["placement"]["groupName"] == group.name
    # p5.48xlarge is offered in zones b and d of the mock region: the private subnet of zone b.
    assert node_group(created, "h100").inputs["subnetIds"] == [PRIVATE["b"]]
    assert created.result.placements["h100"].rdma is True
    # Karpenter's nodes of the pool: same subnet, zone, placement group and security groups.
    node_class = custom(created, "EC2NodeClass", "h100")["spec"]
    assert node_class["subnetSelectorTerms"] == [{"id": PRIVATE["b"]}]
    assert node_class["placementGroupSelector"] == {"name": group.name}
    assert node_class["securityGroupSelectorTerms"] == [
        {"id": MOCK_CLUSTER_SG},
        {"id": mock_id(efa_sg.type, efa_sg.name)},
    ]
    assert node_class["associatePublicIPAddress"] is False
    requirements = custom(created, "NodePool", "h100")["spec"]["template"]["spec"]["requirements"]
    assert {r["key"]: r["values"] for r in requirements}["topology.kubernetes.io/zone"] == ["us-east-1b"]


def test_efa_pool_exposes_the_efa_devices_its_pods_request_and_other_pools_none(created):
    assert created.result.rdma_attachments == {
        "h100": RdmaAttachment(
            resource="vpc.amazonaws.com/efa", count=efa.EFA_INTERFACES["p5.48xlarge"], env=(("FI_PROVIDER", "efa"),)
        ),
    }


def helm_releases(evaluation, chart_part=""):
    return [r for r in evaluation.of_type("kubernetes:helm.sh/v3:Release") if chart_part in r.inputs["chart"]]


def test_efa_device_plugin_is_installed_pinned_on_efa_nodes_tolerating_the_gpu_taint(created):
    (release,) = helm_releases(created, "efa")
    inputs = release.inputs
    assert inputs["chart"] == "aws-efa-k8s-device-plugin"
    assert inputs["version"] == efa.EFA_CHART_VERSION == "v0.5.30"
    assert inputs["repositoryOpts"] == {"repo": "https://aws.github.io/eks-charts"}
    assert inputs["namespace"] == "kube-system"
    values = inputs["values"]
    # Only keys the chart's values.yaml (v0.5.30) has; Helm would silently ignore any other.
    assert set(values) <= {"nodeSelector", "tolerations", "image"}
    # The image from the one table (charts/aws-efa-k8s-device-plugin-v0.5.30/values.yaml:1-4).
    assert values["image"] == {"repository": images.IMAGES["efa-device-plugin"].repository, "tag": "v0.5.20"}
    # It runs exactly where the EFA pools' nodes are: both node sources carry the selected label.
    ((selector_key, selector_value),) = values["nodeSelector"].items()
    assert node_group(created, "h100").inputs["labels"][selector_key] == selector_value
    assert custom(created, "NodePool", "h100")["spec"]["template"]["metadata"]["labels"][selector_key] == selector_value
    assert selector_key not in custom(created, "NodePool", "l4")["spec"]["template"]["metadata"]["labels"]
    assert values["tolerations"] == [created.result.placements["h100"].toleration]
    # Through the cluster's provider, like every Kubernetes resource of the stack.
    provider = one(created, "pulumi:providers:kubernetes")
    assert release.provider.split("::")[-2] == provider.name


def test_no_efa_device_plugin_without_an_efa_pool(existing):
    assert helm_releases(existing, "efa") == []
    assert existing.result.rdma_attachments == {}


def test_pool_without_efa_uses_every_private_subnet_of_a_zone_offering_its_type(created):
    node_class = custom(created, "EC2NodeClass", "l4")["spec"]
    assert node_class["subnetSelectorTerms"] == [{"id": PRIVATE[z]} for z in "abc"]
    assert "placementGroupSelector" not in node_class
    assert node_class["securityGroupSelectorTerms"] == [{"id": MOCK_CLUSTER_SG}]
    assert created.result.placements["l4"].rdma is False


def test_karpenter_objects_validate_against_the_v1_14_1_crds(created):
    for pool in ("l4", "h100"):
        validate_object(custom(created, "NodePool", pool))
        validate_object(custom(created, "EC2NodeClass", pool))


# --- system node group ---------------------------------------------------------------------------


def test_created_cluster_has_an_untainted_cpu_system_node_group_for_everything_but_gpu_servers(created):
    group = node_group(created, "system").inputs
    assert not group.get("taints")
    assert group["labels"] == {contract.LABEL_POOL: "system"}
    assert group["amiType"] == "AL2023_x86_64_STANDARD"
    assert group["releaseVersion"] == "1.33.13-20260714"
    assert group["instanceTypes"] == [eks.DEFAULT_SYSTEM_INSTANCE_TYPE] == ["m6i.2xlarge"]
    assert group["capacityType"] == "ON_DEMAND"
    scaling = group["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (2, 2, 4)
    # Every private subnet of the created VPC (zone b for p5, then a and c).
    assert group["subnetIds"] == [PRIVATE[z] for z in "abc"]
    # Its nodes join with the same role as the GPU nodes (the three node policies, nothing else).
    assert (
        group["nodeRoleArn"]
        == node_group(created, "h100").inputs["nodeRoleArn"]
        == "arn:aws:mock:::llm-serving-gpu-node"
    )
    # Its pool label value is no GPU pool's, so no GPU server's node selector can match it.
    assert "system" not in created.result.placements


def test_system_node_group_root_disk_is_encrypted_gp3_from_the_launch_template(created):
    (mapping,) = launch_template(created, "system").inputs["blockDeviceMappings"]
    assert (mapping["deviceName"], mapping["ebs"]["volumeSize"]) == (eks.ROOT_DEVICE, 200)
    assert (mapping["ebs"]["volumeType"], mapping["ebs"]["encrypted"]) == ("gp3", "true")
    assert launch_template(created, "system").inputs["metadataOptions"]["httpTokens"] == "required"
    assert "diskSize" not in node_group(created, "system").inputs


def test_system_pool_sizes_and_instance_type_come_from_config():
    evaluation = run_cloud(
        lambda: create_cluster(
            stack(
                POOLS[1:],
                cluster={"systemPool": {"machineType": "m7i.xlarge", "minNodes": 1, "maxNodes": 6, "diskGib": 120}},
            ),
            "test",
        )
    )
    group = node_group(evaluation, "system").inputs
    assert group["instanceTypes"] == ["m7i.xlarge"]
    scaling = group["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (1, 1, 6)
    assert launch_template(evaluation, "system").inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 120
    (gpu,) = gpu_node_groups(evaluation)
    assert gpu.inputs["taints"][0]["key"] == contract.GPU_TAINT_KEY


def test_the_efs_csi_add_on_waits_for_the_system_nodes_its_controller_runs_on(monkeypatch):
    seen: list = []

    class Recording(efs.EfsStorage):
        def __init__(self, name, args, opts=None):
            seen.extend(args.addon_depends_on)
            super().__init__(name, args, opts)

    monkeypatch.setattr(efs, "EfsStorage", Recording)
    run_cloud(lambda: create_cluster(stack(POOLS[:1]), "test"))
    assert sorted(type(r).__name__ for r in seen) == ["Addon", "SystemNodeGroup"]


def test_existing_cluster_gets_no_system_node_group_and_no_karpenter(existing):
    # An existing cluster is assumed to have its own CPU nodes: only the GPU pool is added.
    assert [g.name for g in existing.of_type("aws:eks/nodeGroup:NodeGroup")] == ["shared-gpu-l4-ng"]
    assert [t.name for t in existing.of_type("aws:ec2/launchTemplate:LaunchTemplate")] == ["shared-gpu-l4-lt"]
    assert helm_releases(existing, "karpenter") == []
    assert not [r for r in existing.resources if r.is_kubernetes_object and r.inputs["kind"] == "NodePool"]


def test_existing_cluster_node_group_keeps_min_desired_max_and_its_private_subnets(existing):
    group = node_group(existing, "l4").inputs
    scaling = group["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (0, 0, 3)
    # The cluster lists three public and three private subnets: nodes go in the private ones.
    assert group["subnetIds"] == MOCK_PRIVATE_SUBNETS[:3]
    # The pinned AMI release of the cluster's own Kubernetes version (1.33 in the mock).
    assert group["releaseVersion"] == "1.33.13-20260714"


# --- model bucket --------------------------------------------------------------------------------


def test_bucket_blocks_public_access_encrypts_versions_and_enforces_owner(created):
    block = one(created, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(
        block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    (rule,) = one(
        created, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] in ("AES256", "aws:kms")
    assert (
        one(created, "aws:s3/bucketVersioning:BucketVersioning").inputs["versioningConfiguration"]["status"]
        == "Enabled"
    )
    ownership = one(created, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    bucket = one(created, "aws:s3/bucket:Bucket")
    assert not bucket.inputs.get("forceDestroy") and not bucket.inputs.get("acl")
    # Every sub-resource configures this bucket, not another one.
    for token in (
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "aws:s3/bucketVersioning:BucketVersioning",
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    ):
        assert one(created, token).inputs["bucket"] == f"{bucket.name}-id"


def test_bucket_refuses_requests_without_tls(created):
    policy = json.loads(one(created, "aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    arn = "arn:aws:mock:::llm-serving-test-models"
    assert not aws_allows(policy, "s3:GetObject", f"{arn}/models/x", {"aws:SecureTransport": "false"})
    deny = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert deny and deny[0]["Principal"] == "*"


def test_default_bucket_name_is_auto_named_and_an_explicit_name_is_used_as_is(created):
    assert "bucket" not in one(created, "aws:s3/bucket:Bucket").inputs  # Pulumi adds a random suffix
    named = run_cloud(lambda: create_cluster(stack(POOLS[:1], model_store={"bucketName": "acme-llm-weights"}), "test"))
    assert one(named, "aws:s3/bucket:Bucket").inputs["bucket"] == "acme-llm-weights"


ARN = "arn:aws:mock:::llm-serving-test-models"


@pytest.mark.parametrize("action", ["s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject"])
def test_writer_may_write_only_under_the_models_prefix(created, action):
    writer = role_policy(created, "writer")
    assert aws_allows(writer, action, f"{ARN}/models/Qwen/Qwen2.5-7B-Instruct/{REVISION}/model.safetensors")
    assert not aws_allows(writer, action, f"{ARN}/other/file")
    assert not aws_allows(writer, action, f"{ARN}/models-evil/file")
    assert not aws_allows(writer, action, f"{ARN}/top-level-file")


def test_writer_cannot_delete_or_change_the_bucket(created):
    writer = role_policy(created, "writer")
    for action in (
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:PutBucketPolicy",
        "s3:PutObjectAcl",
        "s3:DeleteBucket",
    ):
        assert not aws_allows(writer, action, f"{ARN}/models/x") and not aws_allows(writer, action, ARN)


def test_reader_may_only_read_under_the_models_prefix(created):
    reader = role_policy(created, "reader")
    assert aws_allows(reader, "s3:GetObject", f"{ARN}/models/Qwen/x/config.json")
    assert not aws_allows(reader, "s3:GetObject", f"{ARN}/other/x")
    for action in ("s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:PutObjectAcl"):
        assert not aws_allows(reader, action, f"{ARN}/models/x"), action


@pytest.mark.parametrize("who", ["writer", "reader"])
def test_listing_is_confined_to_the_models_prefix(created, who):
    policy = role_policy(created, who)
    assert aws_allows(policy, "s3:ListBucket", ARN, {"s3:prefix": "models/Qwen/"})
    assert not aws_allows(policy, "s3:ListBucket", ARN, {"s3:prefix": ""})
    assert not aws_allows(policy, "s3:ListBucket", ARN, {"s3:prefix": "other/"})
    assert not aws_allows(policy, "s3:ListBucket", ARN)


@pytest.mark.parametrize(
    "who,service_account", [("writer", MODEL_WRITER_SERVICE_ACCOUNT), ("reader", MODEL_READER_SERVICE_ACCOUNT)]
)
def test_each_role_is_assumable_only_by_its_service_account_through_pod_identity(created, who, service_account):
    role = one(created, "aws:iam/role:Role", f"models-{who}")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    tags = statement["Condition"]["StringEquals"]
    assert tags["aws:RequestTag/kubernetes-namespace"] == "llm-serving"
    assert tags["aws:RequestTag/kubernetes-service-account"] == service_account
    assert tags["aws:RequestTag/eks-cluster-name"] == "llm-serving"
    association = one(created, "aws:eks/podIdentityAssociation:PodIdentityAssociation", f"{who}-pod-identity").inputs
    assert association["roleArn"] == f"arn:aws:mock:::{role.name}"
    assert (association["namespace"], association["serviceAccount"]) == ("llm-serving", service_account)


def test_bindings_name_the_service_accounts_and_need_no_annotation_with_pod_identity(created):
    bucket = created.result.bucket
    assert bucket.scheme == "s3" and bucket.prefix == "models"
    assert (bucket.writer.namespace, bucket.writer.name, bucket.writer.annotations) == (
        "llm-serving",
        MODEL_WRITER_SERVICE_ACCOUNT,
        {},
    )
    assert (bucket.reader.namespace, bucket.reader.name, bucket.reader.annotations) == (
        "llm-serving",
        MODEL_READER_SERVICE_ACCOUNT,
        {},
    )


def test_created_cluster_uses_api_access_entries_and_installs_the_pod_identity_agent(created):
    cluster = one(created, "aws:eks/cluster:Cluster").inputs
    assert cluster["name"] == "llm-serving" and cluster["version"] == "1.33"
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    # The control plane's interfaces in the private subnets of the created VPC.
    assert cluster["vpcConfig"]["subnetIds"] == [PRIVATE[z] for z in "abc"]
    assert one(created, "aws:eks/addon:Addon", "pod-identity-agent").inputs["addonName"] == "eks-pod-identity-agent"


# --- Kubernetes provider -----------------------------------------------------------------------


def kubeconfig(evaluation):
    provider = one(evaluation, "pulumi:providers:kubernetes")
    return json.loads(provider.inputs["kubeconfig"])


def test_provider_kubeconfig_comes_from_the_cluster_and_mints_tokens_with_aws_cli(created):
    config = kubeconfig(created)
    assert config["clusters"][0]["cluster"] == {
        "server": "https://mock-eks-endpoint.example",
        "certificate-authority-data": "bW9jay1jYQ==",
    }
    (user,) = config["users"]
    assert set(user["user"]) == {"exec"}  # no static token or client key in state
    assert user["user"]["exec"]["command"] == "aws"
    assert user["user"]["exec"]["args"] == [
        "eks",
        "get-token",
        "--cluster-name",
        "llm-serving",
        "--region",
        "us-east-1",
        "--output",
        "json",
    ]


def test_existing_cluster_is_looked_up_by_name_and_not_created(existing):
    assert not existing.of_type("aws:eks/cluster:Cluster")
    assert not existing.of_type("aws:ec2/vpc:Vpc")
    # The cluster's own add-ons are its owner's; only the EFS CSI driver
    # (tests/components/cluster/test_cloud_aws_efs.py) is added.
    assert [a.inputs["addonName"] for a in existing.of_type("aws:eks/addon:Addon")] == ["aws-efs-csi-driver"]
    assert ("aws:eks/getCluster:getCluster", {"name": "shared-gpu", "region": "us-east-1"}) in existing.calls_made
    assert node_group(existing, "l4").inputs["clusterName"] == "shared-gpu"
    config = kubeconfig(existing)
    assert config["clusters"][0]["cluster"]["server"] == "https://mock-existing-eks-endpoint.example"
    assert "shared-gpu" in config["users"][0]["user"]["exec"]["args"]


def test_region_from_config_reaches_every_regional_resource():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"region": "eu-west-1"}), "test"))
    regional = [
        r
        for r in evaluation.resources
        if r.type.startswith(("aws:eks/", "aws:ec2/", "aws:s3/", "aws:efs/", "aws:sqs/", "aws:cloudwatch/"))
    ]
    assert regional and {r.inputs.get("region") for r in regional} == {"eu-west-1"}
    assert {s.inputs["availabilityZone"][:-1] for s in evaluation.of_type("aws:ec2/subnet:Subnet")} == {"eu-west-1"}


# --- config errors -----------------------------------------------------------------------------


def problems(pools):
    with pytest.raises(cfg.ConfigError) as err:
        stack(pools)
    return err.value.problems


def test_instance_type_without_gpus_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "L4", "machineType": "m5.xlarge"}])
    assert "pools[0].machineType" in problem and "m5.xlarge" in problem and "not a GPU machine type on aws" in problem


def test_more_gpus_per_node_than_the_machine_has_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "L4", "machineType": "g6.xlarge", "gpusPerNode": 4}])
    assert "pools[0].gpusPerNode" in problem and "g6.xlarge has 1 GPU" in problem


def test_gpu_count_no_machine_offers_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "L4", "gpusPerNode": 2}])
    assert "pools[0].gpusPerNode" in problem and "no aws machine has 2 x L4" in problem


def test_efa_on_an_instance_type_without_it_fails_naming_the_key():
    (problem,) = problems([{"name": "p", "gpu": "L40S", "efa": True}])
    assert "pools[0].efa" in problem and "g6e.xlarge does not support EFA" in problem


# --- Capacity Blocks ---------------------------------------------------------------------------

RESERVATION = "cr-0123456789abcdef0"
BLOCK_POOL = {
    "name": "block",
    "gpu": "H100-80GB",
    "gpusPerNode": 8,
    "capacityType": "capacity-block",
    "capacityReservationId": RESERVATION,
    "minNodes": 1,
    "maxNodes": 2,
}


def answering(monkeypatch, answers):
    """Make the mock provider answer some look-ups as the real cloud would; `answers[token](args)`
    returns the result, or None to fall back to the default mock answer."""
    original = RecordingMocks.call

    def call(self, args):
        answer = answers.get(args.token)
        result = answer(dict(args.args)) if answer else None
        if result is None:
            return original(self, args)
        self.calls.append((args.token, dict(args.args)))
        self.call_results.append((args.token, dict(args.args), result))
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)


def block_in(zone, instance_type="p5.48xlarge"):
    def reservation(args):
        assert args["id"] == RESERVATION
        return {"id": RESERVATION, "availabilityZone": zone, "instanceType": instance_type}

    return {"aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation": reservation}


def test_capacity_block_pool_targets_its_reservation_from_the_launch_template_and_karpenter(monkeypatch):
    answering(monkeypatch, block_in("us-east-1d"))
    evaluation = run_cloud(lambda: create_cluster(stack([POOLS[0], BLOCK_POOL]), "test"))
    template = launch_template(evaluation, "block").inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": RESERVATION},
    }
    # The instance type lives in the template (EKS's Capacity Block procedure), not in the node group too.
    assert template["instanceType"] == "p5.48xlarge"
    group = node_group(evaluation, "block").inputs
    assert group["capacityType"] == "CAPACITY_BLOCK"
    assert not group.get("instanceTypes")
    # The VPC spans the block's zone and the pool gets only its subnet there.
    assert group["subnetIds"] == [PRIVATE["d"]]
    # Karpenter consumes the block as reserved capacity (tasks/odcrs.md).
    node_class = custom(evaluation, "EC2NodeClass", "block")["spec"]
    assert node_class["capacityReservationSelectorTerms"] == [{"id": RESERVATION}]
    requirements = custom(evaluation, "NodePool", "block")["spec"]["template"]["spec"]["requirements"]
    assert {r["key"]: r["values"] for r in requirements}["karpenter.sh/capacity-type"] == ["reserved"]
    validate_object(custom(evaluation, "EC2NodeClass", "block"))
    # Other pools keep every private subnet of a zone offering their type and no reservation.
    assert "capacityReservationSelectorTerms" not in custom(evaluation, "EC2NodeClass", "l4")["spec"]


def test_capacity_block_with_efa_uses_the_blocks_placement_not_a_placement_group_of_its_own(monkeypatch):
    answering(monkeypatch, block_in("us-east-1b"))
    evaluation = run_cloud(lambda: create_cluster(stack([{**BLOCK_POOL, "efa": True}]), "test"))
    template = launch_template(evaluation, "block").inputs
    assert len(template["networkInterfaces"]) == efa.EFA_INTERFACES["p5.48xlarge"]
    assert "placement" not in template
    assert not evaluation.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert "placementGroupSelector" not in custom(evaluation, "EC2NodeClass", "block")["spec"]
    assert node_group(evaluation, "block").inputs["subnetIds"] == [PRIVATE["b"]]


def test_capacity_block_in_a_zone_eks_refuses_fails_naming_the_key(monkeypatch):
    # us-east-1e is use1-az3 in the mock account, where EKS takes no cluster subnet.
    answering(monkeypatch, block_in("us-east-1e"))
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack([BLOCK_POOL]), "test"))
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: pools[0].capacityReservationId: ")
    assert "us-east-1e" in problem


def test_capacity_block_outside_an_existing_clusters_zones_fails_naming_the_key(monkeypatch):
    answering(monkeypatch, block_in("us-east-1d"))
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack([BLOCK_POOL], cluster={"create": False, "name": "shared"}), "test"))
    (problem,) = err.value.problems
    assert "pools[0].capacityReservationId" in problem and RESERVATION in problem and "us-east-1d" in problem


def test_capacity_block_of_another_instance_type_fails_naming_the_key(monkeypatch):
    answering(monkeypatch, block_in("us-east-1b", instance_type="p5en.48xlarge"))
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack([BLOCK_POOL]), "test"))
    (problem,) = err.value.problems
    assert "pools[0].capacityReservationId" in problem and "p5en.48xlarge" in problem and "p5.48xlarge" in problem


# --- zones and subnets EKS refuses ---------------------------------------------------------------


def test_created_vpc_never_spans_a_zone_eks_refuses():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"network": {"zoneCount": 6}}), "test"))
    zones = sorted(
        s.inputs["availabilityZone"] for s in evaluation.of_type("aws:ec2/subnet:Subnet") if "private" in s.name
    )
    # Six zones in the mock region, one of them (us-east-1e = use1-az3) refused by EKS.
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]


def test_default_vpc_leaves_out_default_subnets_in_zones_eks_does_not_support(monkeypatch):
    zone_ids = {"subnet-mock-a": "use1-az1", "subnet-mock-b": "use1-az3", "subnet-mock-c": "use1-az6"}
    answering(
        monkeypatch,
        {
            "aws:ec2/getSubnet:getSubnet": lambda args: {
                "id": args["id"],
                "availabilityZoneId": zone_ids[args["id"]],
                "availabilityZone": f"us-east-1{args['id'][-1]}",
            }
        },
    )
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"network": {"vpc": "default"}}), "test"))
    kept = ["subnet-mock-a", "subnet-mock-c"]
    assert one(evaluation, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"] == kept
    assert node_group(evaluation, "system").inputs["subnetIds"] == kept
    assert custom(evaluation, "EC2NodeClass", "l4")["spec"]["subnetSelectorTerms"] == [{"id": s} for s in kept]
    assert sorted(t.inputs["subnetId"] for t in evaluation.of_type("aws:efs/mountTarget:MountTarget")) == kept
