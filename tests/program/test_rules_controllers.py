"""What the clouds' controllers need and what enforces what the stack declares (environment rules
of tests/support/rules_controllers.py): each holds for both committed stacks and every shared
variant, and fires on the broken variant it exists for."""

from __future__ import annotations

import pytest

from common import contract
from components.cluster.aws import eks
from components.cluster.gcp import gke
from components.network_policy import enforcement
from offline_plan.mock_runtime import evaluate_stack
from stack_config import parse_stack_config
from tests.support import rules_controllers as rules
from tests.support.committed import committed_stack
from tests.support.config_edits import SOURCE, base, edit, problems_of
from tests.support.first_apply import RULE_INFO, check
from tests.support.stack_variants import EXISTING, VARIANTS, variant


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
