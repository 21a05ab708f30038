"""The lifecycle rules (tests/support/rules_lifecycle.py) hold for both committed stacks and every
shared variant, and each fires on the broken variant it exists for; `modelStore.onDestroy` decides
what destroy does with the model bucket, and plan.md says it."""

from __future__ import annotations

import copy
import dataclasses

import pulumi
import pulumi_aws
import pulumi_gcp
import pulumi_kubernetes as k8s
import pytest

from components.cluster.aws import karpenter
from components.entrance import entrance
from offline_plan import lifecycle
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from tests.support import rules_lifecycle as rules
from tests.support.adapter_fixtures import offline_cache
from tests.support.committed import STACKS, committed_stack
from tests.support.first_apply import RULE_INFO, check
from tests.support.stack_variants import PROD_OWN_VPC, VARIANTS, variant

PROD_POOL = {
    "name": "h100",
    "gpu": "H100-80GB",
    "gpusPerNode": 8,
    "machineType": "p5.48xlarge",
    "minNodes": 1,
    "maxNodes": 2,
    "capacityType": "on-demand",
    "diskGib": 500,
    "efa": True,
}


def fired(evaluation: Evaluation, name: str) -> list[str]:
    return [str(v) for v in check(evaluation, only=[name])]


def test_every_lifecycle_rule_is_registered_as_one():
    assert {RULE_INFO[name].kind for name in rules.LIFECYCLE_RULES} == {"lifecycle"}
    assert not any(RULE_INFO[name].self_consistency for name in rules.LIFECYCLE_RULES)


@pytest.mark.parametrize("stack", STACKS)
def test_lifecycle_rules_hold_for_the_committed_stacks(stack):
    assert check(committed_stack(stack), only=rules.LIFECYCLE_RULES) == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_lifecycle_rules_hold_for_every_variant(name):
    # The adapter variants read their fixture adapters from a Hugging Face cache, and the weekly
    # rule evaluates each variant again.
    with offline_cache():
        assert check(variant(name), only=rules.LIFECYCLE_RULES) == [], name


# --- destroy-leaves-nothing-billable-unexplained ---------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_the_model_bucket_is_retained_by_default_with_its_privacy_settings(stack):
    evaluation = committed_stack(stack)
    (bucket,) = evaluation.of_type("aws:s3/bucket:Bucket") + evaluation.of_type("gcp:storage/bucket:Bucket")
    assert bucket.retain_on_delete and bucket.inputs.get("forceDestroy") is False
    siblings = [r for r in evaluation.resources if r.parent_urn == bucket.parent_urn and r is not bucket]
    # The identities go; on S3 the settings that keep the bucket private stay with it.
    assert all(not r.retain_on_delete for r in siblings if r.type.startswith(("aws:iam/", "gcp:serviceaccount/")))
    assert all(r.retain_on_delete for r in siblings if r.type.startswith("aws:s3/"))


@pytest.mark.parametrize("stack", STACKS)
def test_on_destroy_empty_force_destroys_the_bucket_and_retains_nothing(stack):
    evaluation = evaluate_stack(stack, overrides={"modelStore": {"onDestroy": "empty"}})
    buckets = evaluation.of_type("aws:s3/bucket:Bucket") + evaluation.of_type("gcp:storage/bucket:Bucket")
    assert [(b.retain_on_delete, b.inputs.get("forceDestroy")) for b in buckets] == [(False, True)]
    assert not any(r.retain_on_delete for r in evaluation.resources)
    assert fired(evaluation, "destroy-leaves-nothing-billable-unexplained") == []
    section = "\n".join(lifecycle.destroy_section(evaluation))
    assert "Nothing: `modelStore.onDestroy: empty`" in section


def test_on_destroy_refuses_other_values_naming_the_key():
    evaluation = evaluate_stack("dev", overrides={"modelStore": {"onDestroy": "delete"}}, raise_errors=False)
    assert evaluation.error is not None
    message = str(evaluation.error)
    assert "modelStore.onDestroy" in message and "'retain'" in message and "'empty'" in message


@pytest.mark.parametrize("stack, module, token", [("prod", pulumi_aws.s3, "aws"), ("dev", pulumi_gcp.storage, "gcp")])
def test_regression_a_filled_bucket_without_force_destroy_or_retain(monkeypatch, stack, module, token):
    # Issue 25: the buckets were versioned, filled and had neither, so `pulumi destroy` failed.
    real = module.Bucket

    def unprotected(resource_name, *args, opts=None, **kwargs):
        kwargs["force_destroy"] = False
        return real(
            resource_name,
            *args,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=False)),
            **kwargs,
        )

    monkeypatch.setattr(module, "Bucket", unprotected)
    found = fired(evaluate_stack(stack), "destroy-leaves-nothing-billable-unexplained")
    assert len(found) == 1 and f"{token}:" in found[0] and "modelStore.onDestroy" in found[0], found


def test_a_retained_type_without_removal_commands_fires(monkeypatch):
    monkeypatch.delitem(lifecycle.RETAINED, "gcp:storage/bucket:Bucket")
    found = fired(committed_stack("dev"), "destroy-leaves-nothing-billable-unexplained")
    assert len(found) == 1 and "RETAINED" in found[0], found


@pytest.mark.parametrize("stack", STACKS)
def test_plan_names_every_retained_bucket_with_the_commands_that_remove_it(stack):
    evaluation = committed_stack(stack)
    section = "\n".join(lifecycle.destroy_section(evaluation))
    for bucket in [r for r in evaluation.resources if r.retain_on_delete and r.type in lifecycle.RETAINED]:
        assert f"`{bucket.name}`" in section
        for command in lifecycle.RETAINED[bucket.type].commands:
            assert command.split("{", 1)[0] in section


# --- karpenter-objects-go-before-karpenter ---------------------------------------------------


def test_regression_karpenter_objects_that_do_not_wait_for_karpenter(monkeypatch):
    real = karpenter.KarpenterPool.__init__

    def no_wait(self, name, spec, provider, wait_for, opts=None):
        real(self, name, spec, provider, [], opts)

    monkeypatch.setattr(karpenter.KarpenterPool, "__init__", no_wait)
    found = fired(evaluate_stack("prod"), "karpenter-objects-go-before-karpenter")
    assert any("NodePool" in v and "karpenter-release" in v for v in found), found
    assert any("EC2NodeClass" in v for v in found), found


# --- load-balancers-go-before-cluster-and-network --------------------------------------------


def test_regression_a_gateway_that_does_not_wait_for_its_controller(monkeypatch):
    real = entrance.Entrance.__init__

    def early(self, name, args, opts=None):
        real(self, name, dataclasses.replace(args, implementation_ready=[]), opts)

    monkeypatch.setattr(entrance.Entrance, "__init__", early)
    found = fired(evaluate_stack("prod"), "load-balancers-go-before-cluster-and-network")
    assert len(found) == 1 and "Gateway" in found[0] and "agentgateway-release" in found[0], found


def _detached(evaluation: Evaluation, kind: str) -> Evaluation:
    """A copy in which every `kind` object waits for nothing but the stack (as if created through an
    ambient kubeconfig, with no depends_on): what the rules must catch."""
    broken = copy.deepcopy(evaluation)
    for r in broken.resources:
        if r.is_kubernetes_object and r.inputs.get("kind") == kind:
            r.dependencies, r.provider, r.parent_urn = (), None, ""
    return broken


@pytest.mark.parametrize("stack", STACKS)
def test_a_gateway_outside_the_graph_fires(stack):
    # prod in its own VPC, so the stack holds subnets the Gateway's load balancer must go before.
    evaluation = (
        committed_stack(stack)
        if stack == "dev"
        else evaluate_stack(
            "prod",
            overrides=PROD_OWN_VPC,
        )
    )
    found = fired(_detached(evaluation, "Gateway"), "load-balancers-go-before-cluster-and-network")
    cluster = "gcp:container/cluster:Cluster" if stack == "dev" else "aws:eks/cluster:Cluster"
    assert found and all(cluster in v for v in found), found
    assert any("ubnet" in v for v in found), found


def test_a_load_balancer_service_is_held_to_the_same_order():
    broken = _detached(committed_stack("prod"), "Service")
    services = [r for r in broken.resources if r.is_kubernetes_object and r.inputs.get("kind") == "Service"]
    services[0].inputs.setdefault("spec", {})["type"] = "LoadBalancer"
    found = fired(broken, "load-balancers-go-before-cluster-and-network")
    assert len(found) == 1 and "(Service)" in found[0], found


# --- dynamic-volumes-go-before-their-driver --------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_a_claim_outside_the_graph_fires(stack):
    found = fired(_detached(committed_stack(stack), "PersistentVolumeClaim"), "dynamic-volumes-go-before-their-driver")
    assert found and all("PersistentVolumeClaim" in v for v in found), found
    if stack == "prod":
        assert all("efs-storage-class" in v for v in found), found


def test_a_storage_class_that_retains_its_volumes_fires():
    broken = copy.deepcopy(committed_stack("prod"))
    (sc,) = broken.of_type(rules.STORAGE_CLASS)
    sc.inputs["reclaimPolicy"] = "Retain"
    found = fired(broken, "dynamic-volumes-go-before-their-driver")
    assert len(found) == 1 and "reclaimPolicy Retain" in found[0], found


def test_a_storage_class_that_does_not_wait_for_the_csi_driver_fires():
    broken = _detached(committed_stack("prod"), "StorageClass")
    found = fired(broken, "dynamic-volumes-go-before-their-driver")
    assert any("StorageClass" in v and "efs-csi-driver" in v for v in found), found


# --- cluster-deletable -----------------------------------------------------------------------


def test_a_gke_cluster_with_deletion_protection_fires(monkeypatch):
    real = pulumi_gcp.container.Cluster

    def protected(resource_name, *args, **kwargs):
        kwargs.pop("deletion_protection", None)
        return real(resource_name, *args, **kwargs)

    monkeypatch.setattr(pulumi_gcp.container, "Cluster", protected)
    found = fired(evaluate_stack("dev"), "cluster-deletable")
    assert len(found) == 1 and "deletion_protection" in found[0], found


# --- weekly-changes-replace-only-what-must ---------------------------------------------------


def test_regression_a_revision_label_in_the_deployment_selector_replaces_the_servers(monkeypatch):
    # A selector is immutable (pulumi-kubernetes lists .spec.selector as forceNew for Deployments):
    # putting the revision label in it turns every new revision into a replacement of the servers.
    real = k8s.apps.v1.Deployment

    def revision_in_selector(resource_name, *args, spec=None, **kwargs):
        labels = spec["template"]["metadata"]["labels"]
        revision = {k: v for k, v in labels.items() if "revision" in k}
        selector = {**spec["selector"], "matchLabels": {**spec["selector"]["matchLabels"], **revision}}
        return real(resource_name, *args, spec={**spec, "selector": selector}, **kwargs)

    monkeypatch.setattr(k8s.apps.v1, "Deployment", revision_in_selector)
    found = fired(evaluate_stack("dev"), "weekly-changes-replace-only-what-must")
    assert any("Deployment" in v and "new model revision" in v and ".spec.selector" in v for v in found), found


def test_regression_a_node_pool_named_after_its_size_is_replaced_by_more_replicas(monkeypatch):
    # A node pool's name is replace-on-change (the table's terraform-provider-google entry): a name
    # that carries the pool's size turns "more replicas" into a new pool.
    real = pulumi_gcp.container.NodePool

    def sized_name(resource_name, *args, **kwargs):
        kwargs["name"] = f"{resource_name}-max{kwargs['autoscaling']['total_max_node_count']}"
        return real(resource_name, *args, **kwargs)

    monkeypatch.setattr(pulumi_gcp.container, "NodePool", sized_name)
    found = fired(evaluate_stack("dev"), "weekly-changes-replace-only-what-must")
    assert any(
        "gcp:container/nodePool:NodePool" in v and "more replicas: replaced" in v and ".name" in v for v in found
    ), found
