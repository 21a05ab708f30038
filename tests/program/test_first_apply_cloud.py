"""The clouds' first-apply rules hold for the committed stacks and the variants a platform team
builds, and each fires on the broken variant it exists for (the findings of issue 14)."""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

import stack_config.stack as stack_module
from common import driver_versions, engine
from common.facts import Fact
from components.cluster.aws import eks, network
from components.cluster.gcp import apis, bucket, gke
from components.cluster.gcp import network as gke_network
from offline_plan.mock_runtime import (
    MOCK_DEPLOYER_PRIVATE_SUBNETS,
    MOCK_PRIVATE_SUBNETS,
    MOCK_SCARCE_ZONES,
    evaluate_stack,
)
from tests.support import first_apply_cloud as rules
from tests.support.committed import committed_stack
from tests.support.first_apply import check
from tests.support.stack_variants import PROD_OWN_VPC, PROD_PULL_THROUGH, declared_enforcement

REVISION_8B = "0e9e39f249a16976918f6564b8830bc894c89659"
REVISION_70B = "38ff4e01a70559264c95945aa04b900a11e68422"
KSERVE_MODELS = [
    {
        "repo": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": REVISION_8B,
        "name": "llama-vllm",
        "pool": "l4",
        "maxModelLen": 8192,
    },
    {
        "repo": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": REVISION_8B,
        "name": "llama-kserve",
        "engine": "kserve",
        "pool": "l4",
        "maxModelLen": 8192,
    },
]
MULTI_NODE_MODELS = [
    {
        "repo": "meta-llama/Llama-3.3-70B-Instruct",
        "revision": REVISION_70B,
        "pool": "h100",
        "tensorParallelSize": 8,
        "pipelineParallelSize": 2,
        "maxModelLen": 32768,
    }
]
PROD_POOL = {
    "name": "h100",
    "gpu": "H100-80GB",
    "gpusPerNode": 8,
    "machineType": "p5.48xlarge",
    "minNodes": 1,
    "maxNodes": 2,
    "diskGib": 500,
    "efa": True,
}

VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "dev-kserve": (
        "dev",
        {"exposure": {}, "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}], "models": KSERVE_MODELS},
    ),
    "dev-private-nodes": (
        "dev",
        {"cluster": {"name": "llm-serving-dev", "region": "us-central1", "network": {"privateNodes": True}}},
    ),
    "dev-existing-cluster": (
        "dev",
        {
            "cluster": {"name": "shared-gpu", "region": "us-central1", "create": False},
            **declared_enforcement("dev", "gke-dataplane-v2"),
            "addons": {
                "preinstalled": ["prometheusOperator", "gatewayApi", "inferenceExtension", "llmdRouter", "certManager"]
            },
        },
    ),
    "prod-multi-node": ("prod", {"models": MULTI_NODE_MODELS}),
    "prod-existing-vpc": (
        "prod",
        {
            "cluster": {
                "name": "llm-serving-prod",
                "network": {"vpc": "existing", "privateSubnetIds": MOCK_PRIVATE_SUBNETS},
            }
        },
    ),
    "prod-per-zone-nat": ("prod", {"cluster": {"name": "llm-serving-prod", "network": {"natGateways": "per-zone"}}}),
    "prod-existing-cluster": (
        "prod",
        {
            "cluster": {"name": "shared-gpu", "create": False},
            **declared_enforcement("prod", "eks-vpc-cni"),
            "addons": {
                "preinstalled": [
                    "prometheusOperator",
                    "keda",
                    "gatewayApi",
                    "inferenceExtension",
                    "llmdRouter",
                    "certManager",
                    "agentgateway",
                ]
            },
        },
    ),
    "prod-default-vpc-no-efa": (
        "prod",
        {
            "cluster": {"name": "llm-serving-prod", "network": {"vpc": "default"}},
            "pools": [{**PROD_POOL, "efa": False}],
        },
    ),
    # images.pullThrough: every image through an ECR cache / Artifact Registry remote repository.
    "prod-pull-through": ("prod", PROD_PULL_THROUGH),
    "dev-pull-through": ("dev", {"images": {"pullThrough": True}}),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request):
    stack, overrides = VARIANTS[request.param]
    return request.param, evaluate_stack(stack, overrides=overrides)


def test_every_cloud_rule_holds_for_the_stacks_and_their_variants(variant):
    name, evaluation = variant
    assert check(evaluation, only=rules.CLOUD_RULES) == [], name


def fired(evaluation, rule_name):
    return [str(v) for v in check(evaluation, only=[rule_name])]


# --- cloud-api-enabled-before-use ----------------------------------------------------------------


def test_api_rule_fires_when_resources_do_not_wait_for_their_apis(monkeypatch):
    monkeypatch.setattr(apis.ProjectApis, "needs", lambda self, *names: [])
    found = fired(evaluate_stack("dev"), "cloud-api-enabled-before-use")
    assert any("gcp:container/cluster:Cluster" in v and "container.googleapis.com" in v for v in found), found
    assert any("gcp:storage/bucket:Bucket" in v and "storage.googleapis.com" in v for v in found), found
    assert any("gcp:serviceaccount/account:Account" in v and "iam.googleapis.com" in v for v in found), found


def test_regression_filestore_csi_on_without_the_filestore_api(monkeypatch):
    # Issue 14: the Filestore CSI add-on was on but file.googleapis.com never enabled, so the RWX
    # volume never bound and the mirror Job waited out its timeout.
    original = apis.needed_apis
    monkeypatch.setattr(apis, "needed_apis", lambda **kw: [a for a in original(**kw) if a != apis.FILESTORE])
    # ... and not for the model volume's claims either (what the Filestore CSI driver calls).
    monkeypatch.setitem(apis.CONTROLLER_APIS, apis.FILESTORE_CLAIM, ())
    found = fired(evaluate_stack("dev"), "cloud-api-enabled-before-use")
    assert found == [v for v in found if "file.googleapis.com" in v] and found, found
    assert "gcp:container/cluster:Cluster" in found[0]


def test_dev_enables_every_api_its_resources_need_and_never_disables_them_on_destroy():
    services = committed_stack("dev").of_type(rules.GCP_SERVICE)
    assert {s.inputs["service"] for s in services} >= {
        "container.googleapis.com",
        "compute.googleapis.com",
        "iam.googleapis.com",
        "storage.googleapis.com",
        "file.googleapis.com",
        "containerfilesystem.googleapis.com",
    }
    assert all(s.inputs["disableOnDestroy"] is False for s in services)


# --- identity-binding-waits-for-pool -------------------------------------------------------------


def test_regression_workload_identity_binding_before_the_cluster(monkeypatch):
    # Issue 14: the WI bindings did not wait for the cluster; GCP refuses them before the pool exists.
    real = bucket.GcsModelBucket
    monkeypatch.setattr(
        gke,
        "GcsModelBucket",
        lambda name, args, opts=None: real(name, dataclasses.replace(args, identity_pool_ready=[]), opts),
    )
    found = fired(evaluate_stack("dev"), "identity-binding-waits-for-pool")
    assert len(found) == 2 and all("workload-identity" in v for v in found), found


# --- multi-interface-nodes-in-private-subnets ----------------------------------------------------


def old_first_subnet(spec, zones, net):
    """What the program did before issue 14: the EFA pool took the first sorted node subnet."""
    subnets = sorted(net.node_subnets, key=lambda s: s.key)
    return subnets[:1] if spec.pool.efa else subnets


def test_regression_efa_nodes_in_the_default_vpcs_public_subnets(monkeypatch):
    # Issue 14: prod's EFA pool had 32 interfaces in a public default subnet: no public IP, no join.
    monkeypatch.setattr(stack_module, "network_problems", lambda stack: [])
    overrides = {"cluster": {"name": "llm-serving-prod", "network": {"vpc": "default"}}}
    # The cluster layer itself refuses it too (no private subnet in a zone offering p5) ...
    evaluation = evaluate_stack("prod", overrides=overrides, raise_errors=False)
    assert evaluation.error is not None
    assert "pools[0].efa" in str(evaluation.error) and "single interface" in str(evaluation.error)
    # ... and with that check removed as well, the rule catches the node group.
    monkeypatch.setattr(eks, "pool_subnets", old_first_subnet)
    found = fired(evaluate_stack("prod", overrides=overrides), "multi-interface-nodes-in-private-subnets")
    assert any(
        "aws:eks/nodeGroup:NodeGroup" in v and "subnet-mock-a" in v and "internet gateway" in v for v in found
    ), found


def test_config_refuses_efa_with_the_default_vpc_and_says_why():
    with pytest.raises(pulumi.RunError) as err:
        evaluate_stack("prod", overrides={"cluster": {"name": "p", "network": {"vpc": "default"}}})
    (problem,) = [p for p in str(err.value).splitlines() if "pools[0].efa" in p]
    assert problem.startswith("Pulumi.prod.yaml: pools[0].efa: ")
    assert "public" in problem and "single interface" in problem and "vpc create" in problem


def efa_node_group_zone(evaluation):
    (group,) = [g for g in evaluation.of_type("aws:eks/nodeGroup:NodeGroup") if "h100" in g.name]
    (subnet_id,) = group.inputs["subnetIds"]
    return subnet_id


@pytest.mark.parametrize(
    "overrides,expected",
    [
        # prod's VPC is its deployer stack's (looked up); the same choice in a VPC prod creates.
        ({}, MOCK_DEPLOYER_PRIVATE_SUBNETS[1]),
        (PROD_OWN_VPC, "subnet-mock-llm-serving-prod-network-private-us-east-1b"),
        (
            {
                "cluster": {"name": "shared-gpu", "create": False},
                **declared_enforcement("prod", "eks-vpc-cni"),
                "addons": {
                    "preinstalled": [
                        "prometheusOperator",
                        "keda",
                        "gatewayApi",
                        "inferenceExtension",
                        "llmdRouter",
                        "certManager",
                        "agentgateway",
                    ]
                },
            },
            MOCK_PRIVATE_SUBNETS[1],
        ),
        (
            {
                "cluster": {
                    "name": "llm-serving-prod",
                    "network": {"vpc": "existing", "privateSubnetIds": MOCK_PRIVATE_SUBNETS},
                }
            },
            MOCK_PRIVATE_SUBNETS[1],
        ),
    ],
)
def test_regression_efa_subnet_is_private_in_a_zone_offering_the_type_not_the_first_sorted(overrides, expected):
    # Issue 14: the EFA subnet was the first sorted subnet. The mock offers p5.48xlarge only in
    # zones b and d, so the first zone (a) would be wrong on every VPC kind.
    evaluation = evaluate_stack("prod", overrides=overrides)
    assert efa_node_group_zone(evaluation) == expected
    offered = [
        args for token, args in evaluation.calls if token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"
    ]
    assert {"name": "instance-type", "values": ["p5.48xlarge"]} in offered[0]["filters"]
    assert offered[0]["locationType"] == "availability-zone"
    assert expected[-1] in MOCK_SCARCE_ZONES


def test_multi_interface_rule_fires_on_a_karpenter_node_class_in_a_public_subnet(monkeypatch):
    def public_only(spec, zones, net):
        public = [dataclasses.replace(s, private=True) for s in net.public_subnets if s.zone in zones.acceptable]
        return public[:1]

    monkeypatch.setattr(eks, "pool_subnets", public_only)
    found = fired(evaluate_stack("prod", overrides=PROD_OWN_VPC), "multi-interface-nodes-in-private-subnets")
    assert any("EC2NodeClass" in v and "public-us-east-1b" in v for v in found), found


# --- private-nodes-wait-for-nat ------------------------------------------------------------------


def test_nat_rule_fires_when_nodes_do_not_wait_for_their_route_out(monkeypatch):
    real = network.EksVpc.__init__

    def no_egress(self, name, args, opts=None):
        real(self, name, args, opts)
        self.network.egress_ready = []

    monkeypatch.setattr(network.EksVpc, "__init__", no_egress)
    found = fired(evaluate_stack("prod", overrides=PROD_OWN_VPC), "private-nodes-wait-for-nat")
    assert any("system-ng" in v and "natGateway" not in v and "private" in v for v in found), found


def test_nat_rule_fires_when_private_gke_nodes_do_not_wait_for_cloud_nat(monkeypatch):
    real = gke_network.GkeVpc.__init__

    def no_egress(self, name, args, opts=None):
        real(self, name, args, opts)
        self.network.egress_ready = []

    monkeypatch.setattr(gke_network.GkeVpc, "__init__", no_egress)
    found = fired(evaluate_stack("dev", overrides=VARIANTS["dev-private-nodes"][1]), "private-nodes-wait-for-nat")
    assert len(found) == 2 and all("Cloud NAT" in v for v in found), found


# --- gpu-capacity-has-an-autoscaler --------------------------------------------------------------


def test_regression_eks_pool_counted_at_max_nodes_without_an_autoscaler(monkeypatch):
    # Issue 14: no autoscaler on EKS, yet the planner counted maxNodes; a rollout waited for GPUs
    # that never came.
    monkeypatch.setattr(eks.NodePoolSpec, "karpenter_nodes", property(lambda self: 0))
    found = fired(evaluate_stack("prod"), "gpu-capacity-has-an-autoscaler")
    assert found == [
        (
            "gpu-capacity-has-an-autoscaler: pool h100: the plan counts 2 node(s) but the stack can deliver 1 "
            "(node group llm-serving-prod-h100-ng: 1 node(s))"
        )
    ], found


def test_capacity_rule_fires_when_the_node_pool_does_not_wait_for_karpenter(monkeypatch):
    from components.cluster.aws import karpenter

    real = karpenter.KarpenterPool.__init__
    monkeypatch.setattr(
        karpenter.KarpenterPool,
        "__init__",
        lambda self, name, spec, provider, wait_for, opts=None: real(self, name, spec, provider, [], opts),
    )
    found = fired(evaluate_stack("prod"), "gpu-capacity-has-an-autoscaler")
    assert found and "without a Karpenter release before it" in found[0], found


# --- node-driver-runs-engine-cuda ----------------------------------------------------------------


def test_driver_rule_fires_when_the_pinned_ami_ships_an_older_driver(monkeypatch):
    old = dataclasses.replace(driver_versions.EKS_AMI_DRIVER, value="570.86.10")
    monkeypatch.setitem(driver_versions.EKS_AMI_DRIVERS, driver_versions.EKS_AMI_RELEASE, old)
    found = fired(evaluate_stack("prod"), "node-driver-runs-engine-cuda")
    assert found and all("needs driver >= 580.95.05" in v and "570.86.10" in v for v in found), found
    # Both node sources of the pool: the always-on node group and Karpenter's NodePool.
    assert any("h100-ng" in v for v in found) and any("nodepool" in v for v in found)


def test_driver_rule_fires_when_the_engine_needs_a_newer_cuda(monkeypatch):
    newer = Fact(subject="test", value="13.2", source="test")
    monkeypatch.setitem(engine.ENGINE_IMAGE_CUDA, engine.VLLM_IMAGE_TAGGED, newer)
    found = fired(evaluate_stack("prod"), "node-driver-runs-engine-cuda")
    assert found and all("CUDA 13.2, which needs driver >= 595.71.05" in v for v in found), found


def test_driver_rule_fires_on_a_node_image_without_a_pinned_release(monkeypatch):
    monkeypatch.setattr(driver_versions, "EKS_AMI_DRIVERS", {})
    found = fired(evaluate_stack("prod"), "node-driver-runs-engine-cuda")
    assert found and all("no recorded driver" in v for v in found), found


def test_gke_driver_is_unresolved_and_the_plan_says_how_to_resolve_it():
    evaluation = committed_stack("dev")
    checks = rules.driver_checks(rules.ApplyGraph(evaluation))
    assert checks and all(driver.value is None and not driver.established for *_, driver in checks)
    (row,) = evaluation.outputs["drivers"]
    assert row["verdict"] == "unknown" and "nvidia-smi" in row["toResolve"]
    assert "torch.version.cuda" in row["toResolve"]


# --- regional-gateway-has-its-gke-prerequisites -------------------------------------------------------


def test_a_regional_gke_gateway_without_proxy_only_subnet_or_gateway_api_fires():
    dev = committed_stack("dev")
    assert fired(dev, "regional-gateway-has-its-gke-prerequisites") == []

    no_subnet = _edited(
        dev, drop=lambda r: r.type == rules.GCP_SUBNETWORK and r.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"
    )
    [found] = fired(no_subnet, "regional-gateway-has-its-gke-prerequisites")
    assert "no ACTIVE proxy-only subnet (REGIONAL_MANAGED_PROXY) in us-central1" in found

    def gateway_api_off(r):
        if r.type == "gcp:container/cluster:Cluster":
            r.inputs.pop("gatewayApiConfig", None)

    [found] = fired(_edited(dev, edit=gateway_api_off), "regional-gateway-has-its-gke-prerequisites")
    assert "Gateway API is off" in found


# --- cluster API endpoint and Secrets encryption ------------------------------------------------------


def _edited(evaluation, edit=None, drop=None):
    import copy
    import dataclasses

    from offline_plan.mock_runtime import Evaluation

    out = []
    for r in evaluation.resources:
        if drop and drop(r):
            continue
        r = dataclasses.replace(r, inputs=copy.deepcopy(r.inputs))
        if edit:
            edit(r)
        out.append(r)
    return Evaluation(evaluation.stack, out, outputs=evaluation.outputs)


def test_eks_endpoint_settings_that_eks_refuses_or_ignores_fire():
    prod = committed_stack("prod")
    assert fired(prod, "eks-endpoint-accepted") == []

    def vpc(**changes):
        def edit(r):
            if r.type == "aws:eks/cluster:Cluster":
                r.inputs["vpcConfig"].update(changes)

        return edit

    [found] = fired(_edited(prod, vpc(endpointPrivateAccess=False)), "eks-endpoint-accepted")
    assert "no API endpoint" in found
    [found] = fired(_edited(prod, vpc(publicAccessCidrs=["44.0.0.0/24"])), "eks-endpoint-accepted")
    assert "EKS ignores them" in found
    many = [f"44.0.{i}.0/24" for i in range(41)]
    [found] = fired(_edited(prod, vpc(endpointPublicAccess=True, publicAccessCidrs=many)), "eks-endpoint-accepted")
    assert "above EKS's fixed quota of 40" in found
    [found] = fired(
        _edited(prod, vpc(endpointPublicAccess=True, publicAccessCidrs=["10.0.0.0/16"])), "eks-endpoint-accepted"
    )
    assert "reserved range" in found


def test_eks_secrets_key_without_the_role_permission_fires():
    prod = committed_stack("prod")
    assert fired(prod, "eks-secrets-key-usable") == []
    no_grant = _edited(prod, drop=lambda r: r.name.endswith("-cluster-secrets-key"))
    [found] = fired(no_grant, "eks-secrets-key-usable")
    assert "may not kms:Decrypt, kms:DescribeKey, kms:Encrypt" in found

    def elsewhere(r):
        if r.type == "aws:kms/key:Key":
            r.inputs["region"] = "eu-west-1"

    [found] = fired(_edited(prod, elsewhere), "eks-secrets-key-usable")
    assert "EKS needs a key of its own region" in found


def test_gke_secrets_key_must_be_granted_before_the_cluster():
    encrypted = evaluate_stack("dev", overrides={"security": {"secretsEncryption": {"enabled": True}}})
    assert fired(encrypted, "gke-secrets-key-granted-before-cluster") == []
    assert fired(encrypted, "cloud-api-enabled-before-use") == []
    no_grant = _edited(encrypted, drop=lambda r: r.type == "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    [found] = fired(no_grant, "gke-secrets-key-granted-before-cluster")
    assert "GKE service agent" in found

    def elsewhere(r):
        if r.type == "gcp:kms/keyRing:KeyRing":
            r.inputs["location"] = "europe-west4"

    [found] = fired(_edited(encrypted, elsewhere), "gke-secrets-key-granted-before-cluster")
    assert "must be in the cluster's location" in found


def test_kms_resources_wait_for_the_cloud_kms_api(monkeypatch):
    from components.cluster.gcp import apis

    monkeypatch.setattr(
        apis,
        "needed_apis",
        lambda filestore, image_streaming, image_cache=False, kms=False: [
            apis.CONTAINER,
            apis.COMPUTE,
            apis.IAM,
            apis.IAM_CREDENTIALS,
            apis.STORAGE,
            apis.FILESTORE,
            apis.CONTAINER_FILESYSTEM,
        ],
    )
    encrypted = evaluate_stack("dev", overrides={"security": {"secretsEncryption": {"enabled": True}}})
    found = fired(encrypted, "cloud-api-enabled-before-use")
    assert any("gcp:kms/keyRing:KeyRing" in v and "cloudkms.googleapis.com" in v for v in found), found
