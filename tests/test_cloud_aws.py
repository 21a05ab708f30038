"""EKS cluster layer under mocks: GPU node groups, node role, model bucket and its identities."""

from __future__ import annotations

import json

import pytest

import stack_config as cfg
from common import contract
from components.cluster.aws import efa, efs, eks
from components.cluster.aws.policies import NODE_MANAGED_POLICIES
from components.cluster.common import MODEL_READER_SERVICE_ACCOUNT, MODEL_WRITER_SERVICE_ACCOUNT
from components.cluster.interface import RdmaAttachment
from components.cluster.select import create_cluster
from offline_plan.mock_runtime import RecordingMocks
from tests.cloud_mocks import MOCK_CLUSTER_SG, MOCK_SUBNETS, one, run_cloud
from tests.iam_eval import aws_allows

REVISION = "0123456789abcdef0123456789abcdef01234567"


def stack(pools, cluster=None, model_store=None) -> cfg.StackConfig:
    raw = {
        "cloud": "aws",
        "pools": pools,
        "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": pools[0]["name"]}],
    }
    if cluster:
        raw["cluster"] = cluster
    if model_store:
        raw["modelStore"] = model_store
    return cfg.parse_stack_config(raw, "Pulumi.test.yaml")


POOLS = [
    {"name": "l4", "gpu": "L4", "minNodes": 0, "maxNodes": 3, "diskGib": 300},
    {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "efa": True, "capacityType": "spot", "maxNodes": 2},
]


@pytest.fixture(scope="module")
def created():
    return run_cloud(lambda: create_cluster(stack(POOLS), "test"))


@pytest.fixture(scope="module")
def existing():
    return run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"create": False, "name": "shared-gpu"}), "test"))


def node_group(evaluation, pool):
    return one(evaluation, "aws:eks/nodeGroup:NodeGroup", f"-{pool}-ng")


def launch_template(evaluation, pool):
    return one(evaluation, "aws:ec2/launchTemplate:LaunchTemplate", f"-{pool}-lt")


def role_policy(evaluation, role_part):
    return json.loads(one(evaluation, "aws:iam/rolePolicy:RolePolicy", role_part).inputs["policy"])


# --- GPU node groups ---------------------------------------------------------------------------


def gpu_node_groups(evaluation):
    return [g for g in evaluation.of_type("aws:eks/nodeGroup:NodeGroup") if g.inputs["amiType"] == eks.GPU_AMI_TYPE]


def test_every_gpu_node_group_carries_the_gpu_taint_with_the_exact_key_and_effect(created):
    groups = gpu_node_groups(created)
    assert sorted(g.name for g in groups) == ["llm-serving-h100-ng", "llm-serving-l4-ng"]
    for group in groups:
        assert group.inputs["taints"] == [
            {"key": contract.GPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}
        ]


def test_node_labels_are_the_placement_labels_workloads_select_on(created):
    cluster = created.result
    # EFA nodes carry one label more: the one the EFA device plugin's DaemonSet selects on.
    extra = {"l4": {}, "h100": {efa.EFA_NODE_LABEL: "true"}}
    for pool in ("l4", "h100"):
        placement = cluster.placements[pool]
        assert node_group(created, pool).inputs["labels"] == {**placement.node_selector, **extra[pool]}
        assert placement.node_selector == {contract.LABEL_POOL: pool, contract.LABEL_ACCELERATOR: placement.gpu.lower()}
        assert placement.toleration == {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def test_pool_with_min_zero_is_accepted_and_starts_empty(created):
    scaling = node_group(created, "l4").inputs["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (0, 0, 3)


def test_node_groups_use_the_nvidia_al2023_ami_and_the_catalog_instance_type(created):
    assert node_group(created, "l4").inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert node_group(created, "l4").inputs["instanceTypes"] == ["g6.xlarge"]
    assert node_group(created, "h100").inputs["instanceTypes"] == ["p5.48xlarge"]


def test_capacity_type_is_spelled_as_eks_wants_it(created):
    assert node_group(created, "l4").inputs["capacityType"] == "ON_DEMAND"
    assert node_group(created, "h100").inputs["capacityType"] == "SPOT"


def test_root_disk_is_sized_from_disk_gib_and_encrypted(created):
    (mapping,) = launch_template(created, "l4").inputs["blockDeviceMappings"]
    assert mapping["deviceName"] == eks.ROOT_DEVICE
    assert mapping["ebs"]["volumeSize"] == 300
    assert mapping["ebs"]["encrypted"] == "true"
    assert mapping["ebs"]["volumeType"] == "gp3"
    # A node group with a launch template must not also set disk_size (EKS refuses it).
    assert "diskSize" not in node_group(created, "l4").inputs
    group_template = node_group(created, "l4").inputs["launchTemplate"]
    assert group_template["id"].endswith("-l4-lt-id") and group_template["version"] == "1"


def test_node_role_has_exactly_the_three_node_policies_and_nothing_inline(created):
    attachments = [r for r in created.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "gpu-node" in r.name]
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(NODE_MANAGED_POLICIES.values())
    assert {a.inputs["role"] for a in attachments} == {"llm-serving-gpu-node"}
    assert not [p for p in created.of_type("aws:iam/rolePolicy:RolePolicy") if p.inputs["role"] == "llm-serving-gpu-node"]
    trust = json.loads(one(created, "aws:iam/role:Role", "gpu-node").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_efa_pool_gets_one_efa_interface_per_network_card_a_placement_group_and_one_subnet(created):
    template = launch_template(created, "h100").inputs
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == efa.EFA_INTERFACES["p5.48xlarge"] == 32
    assert {i["interfaceType"] for i in interfaces} == {"efa"}
    assert [i["networkCardIndex"] for i in interfaces] == list(range(len(interfaces)))
    assert interfaces[0]["deviceIndex"] == 0 and {i["deviceIndex"] for i in interfaces[1:]} == {1}
    efa_sg = one(created, "aws:ec2/securityGroup:SecurityGroup", "h100-efa")
    for interface in interfaces:
        assert interface["securityGroups"] == [MOCK_CLUSTER_SG, f"{efa_sg.name}-id"]
    assert efa_sg.inputs["ingress"][0]["self"] is True
    group = one(created, "aws:ec2/placementGroup:PlacementGroup", "h100-pg")
    assert group.inputs["strategy"] == "cluster"
    assert template["placement"]["groupName"] == group.name
    assert node_group(created, "h100").inputs["subnetIds"] == MOCK_SUBNETS[:1]
    assert created.result.placements["h100"].rdma is True


def test_efa_pool_exposes_the_efa_devices_its_pods_request_and_other_pools_none(created):
    assert created.result.rdma_attachments == {
        "h100": RdmaAttachment(resource="vpc.amazonaws.com/efa", count=efa.EFA_INTERFACES["p5.48xlarge"],
                                env=(("FI_PROVIDER", "efa"),)),
    }


def helm_releases(evaluation):
    return evaluation.of_type("kubernetes:helm.sh/v3:Release")


def test_efa_device_plugin_is_installed_pinned_on_efa_nodes_tolerating_the_gpu_taint(created):
    (release,) = helm_releases(created)
    inputs = release.inputs
    assert inputs["chart"] == "aws-efa-k8s-device-plugin"
    assert inputs["version"] == efa.EFA_CHART_VERSION == "v0.5.30"
    assert inputs["repositoryOpts"] == {"repo": "https://aws.github.io/eks-charts"}
    assert inputs["namespace"] == "kube-system"
    values = inputs["values"]
    # Only keys the chart's values.yaml (v0.5.30) has; Helm would silently ignore any other.
    assert set(values) <= {"nodeSelector", "tolerations"}
    # It runs exactly where the EFA pools' nodes are: their node group carries the selected label.
    (selector_key, selector_value), = values["nodeSelector"].items()
    assert node_group(created, "h100").inputs["labels"][selector_key] == selector_value
    assert selector_key not in node_group(created, "l4").inputs["labels"]
    assert values["tolerations"] == [created.result.placements["h100"].toleration]
    assert values["tolerations"][0]["key"] == contract.GPU_TAINT_KEY
    # Through the cluster's provider, like every Kubernetes resource of the stack.
    provider = one(created, "pulumi:providers:kubernetes")
    assert release.provider.split("::")[-2] == provider.name


def test_no_efa_device_plugin_without_an_efa_pool(existing):
    assert helm_releases(existing) == []
    assert existing.result.rdma_attachments == {}


def test_pool_without_efa_has_no_efa_interfaces(created):
    assert "networkInterfaces" not in launch_template(created, "l4").inputs
    assert node_group(created, "l4").inputs["subnetIds"] == MOCK_SUBNETS
    assert created.result.placements["l4"].rdma is False


# --- system node group ---------------------------------------------------------------------------


def test_created_cluster_has_an_untainted_cpu_system_node_group_for_everything_but_gpu_servers(created):
    group = node_group(created, "system").inputs
    assert not group.get("taints")
    assert group["labels"] == {contract.LABEL_POOL: "system"}
    assert group["amiType"] == "AL2023_x86_64_STANDARD"
    assert group["instanceTypes"] == [eks.DEFAULT_SYSTEM_INSTANCE_TYPE] == ["m6i.2xlarge"]
    assert group["capacityType"] == "ON_DEMAND"
    scaling = group["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (2, 2, 4)
    assert group["subnetIds"] == MOCK_SUBNETS
    # Its nodes join with the same role as the GPU nodes (the three node policies, nothing else).
    assert group["nodeRoleArn"] == node_group(created, "l4").inputs["nodeRoleArn"] == "arn:aws:mock:::llm-serving-gpu-node"
    # Its pool label value is no GPU pool's, so no GPU server's node selector can match it.
    assert "system" not in created.result.placements


def test_system_node_group_root_disk_is_encrypted_gp3_from_the_launch_template(created):
    (mapping,) = launch_template(created, "system").inputs["blockDeviceMappings"]
    assert (mapping["deviceName"], mapping["ebs"]["volumeSize"]) == (eks.ROOT_DEVICE, 200)
    assert (mapping["ebs"]["volumeType"], mapping["ebs"]["encrypted"]) == ("gp3", "true")
    assert launch_template(created, "system").inputs["metadataOptions"]["httpTokens"] == "required"
    assert "diskSize" not in node_group(created, "system").inputs
    assert node_group(created, "system").inputs["launchTemplate"]["id"].endswith("-system-lt-id")


def test_system_pool_sizes_and_instance_type_come_from_config():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"systemPool": {
        "machineType": "m7i.xlarge", "minNodes": 1, "maxNodes": 6, "diskGib": 120}}), "test"))
    group = node_group(evaluation, "system").inputs
    assert group["instanceTypes"] == ["m7i.xlarge"]
    scaling = group["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (1, 1, 6)
    assert launch_template(evaluation, "system").inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 120
    # The GPU pool is unchanged by it: still tainted, still the NVIDIA AMI.
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


def test_existing_cluster_gets_no_system_node_group(existing):
    # An existing cluster is assumed to have its own CPU nodes: only the GPU pool is added.
    assert [g.name for g in existing.of_type("aws:eks/nodeGroup:NodeGroup")] == ["shared-gpu-l4-ng"]
    assert [t.name for t in existing.of_type("aws:ec2/launchTemplate:LaunchTemplate")] == ["shared-gpu-l4-lt"]


# --- model bucket --------------------------------------------------------------------------------


def test_bucket_blocks_public_access_encrypts_versions_and_enforces_owner(created):
    block = one(created, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    (rule,) = one(created, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] in ("AES256", "aws:kms")
    assert one(created, "aws:s3/bucketVersioning:BucketVersioning").inputs["versioningConfiguration"]["status"] == "Enabled"
    ownership = one(created, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    bucket = one(created, "aws:s3/bucket:Bucket")
    assert not bucket.inputs.get("forceDestroy") and not bucket.inputs.get("acl")
    # Every sub-resource configures this bucket, not another one.
    for token in ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "aws:s3/bucketVersioning:BucketVersioning",
                  "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"):
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
    for action in ("s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutBucketPolicy", "s3:PutObjectAcl", "s3:DeleteBucket"):
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


@pytest.mark.parametrize("who,service_account", [("writer", MODEL_WRITER_SERVICE_ACCOUNT), ("reader", MODEL_READER_SERVICE_ACCOUNT)])
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
    assert (bucket.writer.namespace, bucket.writer.name, bucket.writer.annotations) == ("llm-serving", MODEL_WRITER_SERVICE_ACCOUNT, {})
    assert (bucket.reader.namespace, bucket.reader.name, bucket.reader.annotations) == ("llm-serving", MODEL_READER_SERVICE_ACCOUNT, {})


def test_created_cluster_uses_api_access_entries_and_installs_the_pod_identity_agent(created):
    cluster = one(created, "aws:eks/cluster:Cluster").inputs
    assert cluster["name"] == "llm-serving" and cluster["version"] == "1.33"
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    assert cluster["vpcConfig"]["subnetIds"] == MOCK_SUBNETS
    assert one(created, "aws:eks/addon:Addon", "pod-identity-agent").inputs["addonName"] == "eks-pod-identity-agent"


# --- Kubernetes provider -----------------------------------------------------------------------


def kubeconfig(evaluation):
    provider = one(evaluation, "pulumi:providers:kubernetes")
    return json.loads(provider.inputs["kubeconfig"])


def test_provider_kubeconfig_comes_from_the_cluster_and_mints_tokens_with_aws_cli(created):
    config = kubeconfig(created)
    assert config["clusters"][0]["cluster"] == {
        "server": "https://mock-eks-endpoint.example", "certificate-authority-data": "bW9jay1jYQ==",
    }
    (user,) = config["users"]
    assert set(user["user"]) == {"exec"}  # no static token or client key in state
    assert user["user"]["exec"]["command"] == "aws"
    assert user["user"]["exec"]["args"] == ["eks", "get-token", "--cluster-name", "llm-serving", "--region", "us-east-1", "--output", "json"]


def test_existing_cluster_is_looked_up_by_name_and_not_created(existing):
    assert not existing.of_type("aws:eks/cluster:Cluster")
    # The cluster's own add-ons are its owner's; only the EFS CSI driver (tests/test_cloud_aws_efs.py) is added.
    assert [a.inputs["addonName"] for a in existing.of_type("aws:eks/addon:Addon")] == ["aws-efs-csi-driver"]
    assert ("aws:eks/getCluster:getCluster", {"name": "shared-gpu", "region": "us-east-1"}) in existing.calls_made
    assert node_group(existing, "l4").inputs["clusterName"] == "shared-gpu"
    assert node_group(existing, "l4").inputs["subnetIds"] == MOCK_SUBNETS
    config = kubeconfig(existing)
    assert config["clusters"][0]["cluster"]["server"] == "https://mock-existing-eks-endpoint.example"
    assert "shared-gpu" in config["users"][0]["user"]["exec"]["args"]


def test_region_from_config_reaches_every_regional_resource():
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1], cluster={"region": "eu-west-1"}), "test"))
    regional = [r for r in evaluation.resources if r.type.startswith(("aws:eks/", "aws:ec2/", "aws:s3/", "aws:efs/"))]
    assert regional and {r.inputs.get("region") for r in regional} == {"eu-west-1"}


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
BLOCK_POOL = {"name": "block", "gpu": "H100-80GB", "gpusPerNode": 8, "capacityType": "capacity-block",
              "capacityReservationId": RESERVATION, "maxNodes": 2}


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
        return result

    monkeypatch.setattr(RecordingMocks, "call", call)


def block_in(zone, instance_type="p5.48xlarge"):
    """Look-up answers for a Capacity Block in `zone`, where the default VPC has subnet-mock-b."""
    def reservation(args):
        assert args["id"] == RESERVATION
        return {"id": RESERVATION, "availabilityZone": zone, "instanceType": instance_type}

    def subnets(args):
        zone_filter = [f for f in args.get("filters", []) if f["name"] == "availability-zone"]
        if not zone_filter:
            return None
        return {"id": "in-zone", "ids": ["subnet-mock-b"] if zone_filter[0]["values"] == ["us-east-1b"] else []}

    return {"aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation": reservation,
            "aws:ec2/getSubnets:getSubnets": subnets}


def test_capacity_block_pool_targets_its_reservation_from_the_launch_template(monkeypatch):
    answering(monkeypatch, block_in("us-east-1b"))
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
    # Only the subnet in the block's zone: launches elsewhere would fail.
    assert group["subnetIds"] == ["subnet-mock-b"]
    # Other pools keep every subnet, their instance types and no reservation.
    assert node_group(evaluation, "l4").inputs["subnetIds"] == MOCK_SUBNETS
    assert node_group(evaluation, "l4").inputs["instanceTypes"] == ["g6.xlarge"]
    assert "capacityReservationSpecification" not in launch_template(evaluation, "l4").inputs


def test_capacity_block_with_efa_uses_the_blocks_placement_not_a_placement_group_of_its_own(monkeypatch):
    answering(monkeypatch, block_in("us-east-1b"))
    evaluation = run_cloud(lambda: create_cluster(stack([{**BLOCK_POOL, "efa": True}]), "test"))
    template = launch_template(evaluation, "block").inputs
    assert len(template["networkInterfaces"]) == efa.EFA_INTERFACES["p5.48xlarge"]
    assert "placement" not in template
    assert not evaluation.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert node_group(evaluation, "block").inputs["subnetIds"] == ["subnet-mock-b"]


def test_capacity_block_in_a_zone_without_a_cluster_subnet_fails_naming_the_key(monkeypatch):
    answering(monkeypatch, block_in("us-east-1f"))
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack([BLOCK_POOL]), "test"))
    (problem,) = err.value.problems
    assert problem.startswith("Pulumi.test.yaml: pools[0].capacityReservationId: ")
    assert RESERVATION in problem and "us-east-1f" in problem


def test_capacity_block_of_another_instance_type_fails_naming_the_key(monkeypatch):
    answering(monkeypatch, block_in("us-east-1b", instance_type="p5en.48xlarge"))
    with pytest.raises(cfg.ConfigError) as err:
        run_cloud(lambda: create_cluster(stack([BLOCK_POOL]), "test"))
    (problem,) = err.value.problems
    assert "pools[0].capacityReservationId" in problem and "p5en.48xlarge" in problem and "p5.48xlarge" in problem


# --- subnets EKS refuses -------------------------------------------------------------------------


def test_created_cluster_leaves_out_default_subnets_in_zones_eks_does_not_support(monkeypatch):
    zone_ids = {"subnet-mock-a": "use1-az1", "subnet-mock-b": "use1-az3", "subnet-mock-c": "use1-az6"}
    answering(monkeypatch, {"aws:ec2/getSubnet:getSubnet": lambda args: {
        "id": args["id"], "availabilityZoneId": zone_ids[args["id"]]}})
    evaluation = run_cloud(lambda: create_cluster(stack(POOLS[:1]), "test"))
    kept = ["subnet-mock-a", "subnet-mock-c"]
    assert one(evaluation, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"] == kept
    assert node_group(evaluation, "l4").inputs["subnetIds"] == kept
    assert node_group(evaluation, "system").inputs["subnetIds"] == kept
    assert sorted(t.inputs["subnetId"] for t in evaluation.of_type("aws:efs/mountTarget:MountTarget")) == kept
