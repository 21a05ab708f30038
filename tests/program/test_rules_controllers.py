"""What the clouds' controllers need and what enforces what the stack declares (environment rules
of tests/support/rules_controllers.py): each holds for both committed stacks and every shared
variant, and fires on the broken variant it exists for."""

from __future__ import annotations

import pytest

import stack_config.stack as stack_module
from common import contract
from components.cluster.aws import eks
from components.cluster.gcp import apis, filestore, gke
from components.network_policy import enforcement
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from stack_config import parse_stack_config
from tests.support import rules_controllers as rules
from tests.support.committed import committed_stack
from tests.support.config_edits import SOURCE, base, edit, problems_of
from tests.support.first_apply import RULE_INFO, check
from tests.support.stack_variants import DEV_MODELS, EXISTING, PROD_OWN_VPC, VARIANTS, declared_enforcement, variant


def fired(evaluation, rule_name):
    return [str(v) for v in check(evaluation, only=[rule_name])]


def test_controller_rules_are_environment_rules_of_a_real_cloud():
    assert all(RULE_INFO[name].kind == "environment" for name in rules.CONTROLLER_RULES)
    assert not any(RULE_INFO[name].self_consistency for name in rules.CONTROLLER_RULES)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_controller_rule_holds_for_the_committed_stacks(stack):
    assert check(committed_stack(stack), only=rules.CONTROLLER_RULES) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_controller_rule_holds_for_the_shared_variants(name):
    assert check(variant(name), only=rules.CONTROLLER_RULES) == [], name


# --- network-policies-enforced ---------------------------------------------------------------------


def test_created_clusters_turn_enforcement_on():
    (cluster,) = committed_stack("dev").of_type(rules.GKE_CLUSTER)
    assert cluster.inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    prod = committed_stack("prod")
    (cni,) = [a for a in prod.of_type(rules.EKS_ADDON) if a.inputs["addonName"] == "vpc-cni"]
    assert cni.inputs["configurationValues"] == '{"enableNetworkPolicy": "true"}'
    # EKS bootstraps a self-managed VPC CNI; the managed add-on must be allowed to take it over.
    assert cni.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
    # Every node starts with the agent: the node groups wait for the add-on.
    graph = rules.ApplyGraph(prod)
    assert all(graph.waits_for(g, cni) for g in prod.of_type("aws:eks/nodeGroup:NodeGroup"))


def test_regression_gke_cluster_without_dataplane_v2(monkeypatch):
    # Issue 25: the default-deny NetworkPolicies were created on a GKE cluster with the legacy
    # dataplane and no network policy enforcement: API objects nothing enforced.
    monkeypatch.setattr(gke, "DATAPATH_PROVIDER", None)
    [found] = fired(evaluate_stack("dev"), "network-policies-enforced")
    assert "gcp:container/cluster:Cluster" in found and "unset (LEGACY_DATAPATH)" in found


def test_regression_eks_vpc_cni_without_its_network_policy_agent(monkeypatch):
    # Issue 25: on EKS the VPC CNI's network policy agent is off unless enableNetworkPolicy is set.
    monkeypatch.setattr(eks, "VPC_CNI_CONFIGURATION", {})
    [found] = fired(evaluate_stack("prod"), "network-policies-enforced")
    assert "aws:eks/cluster:Cluster" in found and "network policy agent off" in found


def test_a_vpc_cni_add_on_older_than_the_network_policy_agent_fires():
    prod = committed_stack("prod")
    for addon in prod.of_type(rules.EKS_ADDON):
        if addon.inputs["addonName"] == "vpc-cni":
            addon.inputs["addonVersion"] = "v1.13.4-eksbuild.1"
    [found] = fired(prod, "network-policies-enforced")
    assert "v1.14.0+" in found


def test_an_existing_cluster_without_a_declared_enforcer_fires(monkeypatch):
    assert fired(variant(EXISTING), "network-policies-enforced") == []
    monkeypatch.setattr(enforcement, "namespace_annotations", lambda stack: {})
    stack, overrides = VARIANTS[EXISTING]
    from tests.support.adapter_fixtures import offline_cache

    with offline_cache():
        found = fired(evaluate_stack(stack, overrides=overrides), "network-policies-enforced")
    assert found and all("declares no enforcer" in v for v in found), found


@pytest.mark.parametrize(
    "raw",
    [
        {k: v for k, v in base("existing").items() if k != "security"},
        edit(base("aws"), "cluster", {"create": False}),
        edit(base("gcp"), "cluster", {"create": False}),
    ],
)
def test_config_refuses_network_policies_on_a_cluster_it_cannot_make_enforce_them(raw):
    (problem,) = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: security.networkPolicyEnforcement: security.networkPolicies is on but ")
    assert "gke-dataplane-v2" in problem and "set security.networkPolicies false" in problem
    parse_stack_config(edit(raw, "security", {"networkPolicyEnforcement": "cilium"}), SOURCE)
    parse_stack_config(edit(raw, "security", {"networkPolicies": False}), SOURCE)


def test_the_serving_namespace_names_what_enforces_its_policies():
    key = contract.NETWORK_POLICY_ENFORCEMENT_ANNOTATION
    for stack, enforcer in (("dev", contract.GKE_DATAPLANE_V2), ("prod", contract.EKS_VPC_CNI)):
        declared = {
            (o["metadata"].get("annotations") or {}).get(key)
            for o in committed_stack(stack).kubernetes_objects
            if o.get("kind") == "Namespace" and key in (o["metadata"].get("annotations") or {})
        }
        assert declared == {enforcer}, stack


# --- filestore-volume-on-the-stack-network ----------------------------------------------------------


def _claims(evaluation):
    return [
        r for r in evaluation.resources if r.is_kubernetes_object and r.inputs.get("kind") == "PersistentVolumeClaim"
    ]


def test_dev_model_volume_gets_a_filestore_class_on_the_stacks_network():
    dev = committed_stack("dev")
    (klass,) = [r for r in dev.resources if r.is_kubernetes_object and r.inputs.get("kind") == "StorageClass"]
    assert klass.inputs["provisioner"] == "filestore.csi.storage.gke.io"
    assert klass.inputs["parameters"] == {
        "tier": "standard",
        "network": "llm-serving-dev",
        "connect-mode": "DIRECT_PEERING",
    }
    assert {c.inputs["spec"]["storageClassName"] for c in _claims(dev)} == {"llm-serving-filestore"}
    assert rules.gke_cluster_network(rules.ApplyGraph(dev)) == "llm-serving-dev"


def test_on_the_default_network_gke_standard_rwx_is_right():
    evaluation = evaluate_stack(
        "dev", overrides={"cluster": {"name": "llm-serving-dev", "network": {"vpc": "default"}}}
    )
    assert {c.inputs["spec"]["storageClassName"] for c in _claims(evaluation)} == {"standard-rwx"}
    assert fired(evaluation, "filestore-volume-on-the-stack-network") == []


def test_regression_filestore_instance_on_the_default_network_of_a_stack_with_its_own(monkeypatch):
    # Issue 25: the model volume used standard-rwx, whose Filestore instance goes on `default`, while
    # the nodes were on the stack's own VPC: the mirror Job's volume never mounted.
    overrides = {"cluster": {"name": "llm-serving-dev", "rwxStorageClass": "standard-rwx"}}
    with pytest.raises(Exception, match=r"cluster.rwxStorageClass: standard-rwx is one of GKE's Filestore classes"):
        evaluate_stack("dev", overrides=overrides)
    monkeypatch.setattr(stack_module, "filestore_network_problems", lambda stack: [])
    found = fired(evaluate_stack("dev", overrides=overrides), "filestore-volume-on-the-stack-network")
    assert found and all("network default, but the cluster's nodes are on llm-serving-dev" in v for v in found), found


def test_a_filestore_class_without_the_network_parameter_fires(monkeypatch):
    monkeypatch.setattr(
        filestore,
        "storage_class_parameters",
        lambda network: {"tier": filestore.TIER, "connect-mode": "DIRECT_PEERING"},
    )
    found = fired(evaluate_stack("dev"), "filestore-volume-on-the-stack-network")
    assert found and all("network default" in v for v in found), found


def test_a_cluster_without_the_filestore_csi_add_on_fires():
    dev = committed_stack("dev")
    for r in dev.resources:
        if r.type == rules.GKE_CLUSTER:
            r.inputs["addonsConfig"] = {}
    found = fired(dev, "filestore-volume-on-the-stack-network")
    assert found and all("needs the Filestore CSI add-on" in v for v in found), found


def test_config_refuses_gkes_own_filestore_classes_on_a_network_the_stack_creates():
    for klass in ("standard-rwx", "premium-rwx"):
        (problem,) = problems_of(edit(base("gcp"), "cluster", {"rwxStorageClass": klass}))
        assert problem.startswith(f"{SOURCE}: cluster.rwxStorageClass: {klass} is one of GKE's Filestore classes")
    parse_stack_config(edit(base("gcp"), "cluster", {"rwxStorageClass": "team-filestore"}), SOURCE)
    parse_stack_config(
        edit(base("gcp"), "cluster", {"rwxStorageClass": "standard-rwx", "network": {"vpc": "default"}}), SOURCE
    )


# --- controller-apis-enabled -----------------------------------------------------------------------


def test_dev_enables_what_gkes_controllers_call_for_its_objects():
    services = {s.inputs["service"] for s in committed_stack("dev").of_type(rules.GCP_SERVICE)}
    assert {"networkservices.googleapis.com", "file.googleapis.com", "compute.googleapis.com"} <= services


def test_regression_inference_gateway_without_the_network_services_api(monkeypatch):
    # Issue 25: the GKE Inference Gateway's InferencePool backends need networkservices.googleapis.com,
    # which the stack never enabled.
    monkeypatch.setitem(apis.CONTROLLER_APIS, apis.INFERENCE_POOL_GKE, (apis.COMPUTE,))
    found = fired(evaluate_stack("dev"), "controller-apis-enabled")
    assert found and all("networkservices.googleapis.com" in v for v in found), found
    assert any("llm-d-router-gateway" in v or "picker" in v for v in found), found


def test_an_existing_gke_cluster_still_enables_the_filestore_api_its_claims_need(monkeypatch):
    overrides = {
        "cluster": {"name": "shared-gpu", "region": "us-central1", "create": False},
        **declared_enforcement("dev", "gke-dataplane-v2"),
        "exposure": {},
        "models": DEV_MODELS,
        "addons": {"preinstalled": ["prometheusOperator"]},
    }
    evaluation = evaluate_stack("dev", overrides=overrides)
    assert fired(evaluation, "controller-apis-enabled") == []
    assert "file.googleapis.com" in {s.inputs["service"] for s in evaluation.of_type(rules.GCP_SERVICE)}
    monkeypatch.setitem(apis.CONTROLLER_APIS, apis.FILESTORE_CLAIM, ())
    found = fired(evaluate_stack("dev", overrides=overrides), "controller-apis-enabled")
    assert found and all("PersistentVolumeClaim" in v and "file.googleapis.com" in v for v in found), found


# --- aws-controllers-have-what-they-need -----------------------------------------------------------


def _edited(evaluation, keep):
    return Evaluation(evaluation.stack, [r for r in evaluation.resources if keep(r)], outputs=evaluation.outputs)


def test_efs_claims_without_a_provisioner_identity_fire():
    prod = committed_stack("prod")
    assert fired(prod, "aws-controllers-have-what-they-need") == []
    no_policy = _edited(prod, lambda r: not (r.type.endswith("RolePolicyAttachment") and "efs" in r.name))
    [found] = fired(no_policy, "aws-controllers-have-what-they-need")
    assert "StorageClass" in found and "no identity with AmazonEFSCSIDriverPolicy" in found
    no_addon = _edited(
        prod, lambda r: not (r.type == rules.EKS_ADDON and r.inputs.get("addonName") == "aws-efs-csi-driver")
    )
    [found] = fired(no_addon, "aws-controllers-have-what-they-need")
    assert "no aws-efs-csi-driver add-on" in found


def test_a_load_balancer_without_elb_tagged_public_subnets_fires():
    # In its own VPC (prod's committed stack takes the deployer stack's, whose subnets it does not create).
    prod = evaluate_stack("prod", overrides=PROD_OWN_VPC)
    tagged = [
        s for s in prod.of_type("aws:ec2/subnet:Subnet") if "kubernetes.io/role/elb" in (s.inputs.get("tags") or {})
    ]
    assert tagged and all("public" in s.name for s in tagged)
    for s in tagged:
        s.inputs["tags"].pop("kubernetes.io/role/elb")
    [found] = fired(prod, "aws-controllers-have-what-they-need")
    assert "Gateway" in found and "kubernetes.io/role/elb" in found


def test_an_existing_gke_cluster_whose_look_up_shows_the_legacy_dataplane_fires(monkeypatch):
    from offline_plan import mock_runtime

    overrides = {
        "cluster": {"name": "shared-gpu", "region": "us-central1", "create": False},
        **declared_enforcement("dev", "gke-dataplane-v2"),
        "exposure": {},
        "models": DEV_MODELS,
        "addons": {"preinstalled": ["prometheusOperator"]},
    }
    answer = mock_runtime._CALL_RESULTS["gcp:container/getCluster:getCluster"]
    monkeypatch.setitem(
        mock_runtime._CALL_RESULTS,
        "gcp:container/getCluster:getCluster",
        {**answer, "datapathProvider": "ADVANCED_DATAPATH"},
    )
    assert fired(evaluate_stack("dev", overrides=overrides), "network-policies-enforced") == []
    monkeypatch.setitem(
        mock_runtime._CALL_RESULTS,
        "gcp:container/getCluster:getCluster",
        {**answer, "datapathProvider": "LEGACY_DATAPATH"},
    )
    [found] = fired(evaluate_stack("dev", overrides=overrides), "network-policies-enforced")
    assert "existing GKE cluster shared-gpu" in found and "LEGACY_DATAPATH" in found


def test_a_gateway_serving_certificate_manager_certificates_without_that_api_fires():
    dev = committed_stack("dev")
    kept = _edited(
        dev, lambda r: not (r.type == rules.GCP_SERVICE and r.inputs.get("service") == rules.CERTIFICATE_MANAGER)
    )
    found = fired(kept, "controller-apis-enabled")
    assert found and all("Gateway" in v and rules.CERTIFICATE_MANAGER in v for v in found), found
