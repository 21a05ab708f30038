"""The cluster-side first-apply rules hold for the committed stacks and their variants, and each fires
on a broken variant; the defects the rules were written for are regression tests here."""

from __future__ import annotations

import copy
import dataclasses

import pulumi_kubernetes as k8s
import pytest

from common import contract
from components.addons import install as addons_install
from offline_plan.mock_runtime import Evaluation, RecordedResource, evaluate_stack
from tests.support import first_apply_k8s
from tests.support.committed import committed_stack
from tests.support.first_apply import check
from tests.support.stack_variants import (
    ADAPTERS,
    DEV_ADAPTERS,
    DEV_TWO_MODELS,
    EXISTING,
    EXISTING_ENTRANCE,
    EXISTING_RDMA,
    GATEWAY,
    KEDA_DEV,
    KSERVE,
    MULTI_NODE,
    PROD_TWO_MODELS,
    VARIANTS,
    variant,
)

RULES = [
    "crd-before-custom-resource",
    "chart-renders-after-its-crds",
    "custom-resource-waits-are-real",
    "waits-cover-the-plan",
    "service-does-not-outwait-its-pods",
    "picker-release-does-not-wait-for-its-standby",
    "picker-starts-after-the-kinds-it-discovers",
]
ALL = [
    "dev",
    "prod",
    KSERVE,
    MULTI_NODE,
    GATEWAY,
    KEDA_DEV,
    EXISTING,
    EXISTING_RDMA,
    ADAPTERS,
    DEV_ADAPTERS,
    EXISTING_ENTRANCE,
    DEV_TWO_MODELS,
    PROD_TWO_MODELS,
]


@pytest.fixture(scope="module")
def committed():
    return {"dev": committed_stack("dev"), "prod": committed_stack("prod")}


def evaluation_of(name: str, committed) -> Evaluation:
    return committed[name] if name in committed else variant(name)


@pytest.mark.parametrize("name", ALL)
def test_every_rule_holds(name, committed):
    assert [str(v) for v in check(evaluation_of(name, committed), only=RULES)] == []


def test_the_variants_exercise_every_kind_the_rules_guard(committed):
    kinds = {
        r.inputs["kind"] for name in ALL for r in evaluation_of(name, committed).resources if r.is_kubernetes_object
    }
    assert {
        "ServiceMonitor",
        "PrometheusRule",
        "PodMonitor",
        "ScaledObject",
        "LeaderWorkerSet",
        "InferenceService",
        "ClusterStorageContainer",
        "HTTPRoute",
        "NicClusterPolicy",
        "IPPool",
        "MacvlanNetwork",
        "Gateway",
        "Issuer",
        "AgentgatewayPolicy",
        "HealthCheckPolicy",
        "GCPBackendPolicy",
    } <= kinds


# --- editing a recorded evaluation: the broken variants ------------------------------------------


def edited(evaluation: Evaluation, edit) -> Evaluation:
    """A copy of `evaluation` with `edit(resource)` applied to each resource (returning it or a new one)."""
    resources = [
        edit(dataclasses.replace(r, inputs=copy.deepcopy(r.inputs), custom_timeouts=dict(r.custom_timeouts)))
        for r in evaluation.resources
    ]
    return Evaluation(evaluation.stack, resources, outputs=copy.deepcopy(evaluation.outputs))


def of_kind(kind: str):
    return lambda r: r.is_kubernetes_object and r.inputs.get("kind") == kind


def without_annotation(evaluation: Evaluation, match, key: str) -> Evaluation:
    def edit(r: RecordedResource) -> RecordedResource:
        if match(r):
            (r.inputs.get("metadata") or {}).get("annotations", {}).pop(key, None)
        return r

    return edited(evaluation, edit)


def without_dependency(evaluation: Evaluation, match, on) -> Evaluation:
    drop = {r.urn for r in evaluation.resources if on(r)}

    def edit(r: RecordedResource) -> RecordedResource:
        return dataclasses.replace(r, dependencies=tuple(d for d in r.dependencies if d not in drop)) if match(r) else r

    return edited(evaluation, edit)


def fired(evaluation: Evaluation, rule_name: str) -> list[str]:
    return [str(v) for v in check(evaluation, only=[rule_name])]


# --- crd-before-custom-resource ------------------------------------------------------------------


@pytest.fixture
def nothing_installed(monkeypatch):
    """The program before add-ons: every kind 'provided', but by nothing that installs a CRD."""

    def install_nothing(self, addon, *_args):
        return k8s.core.v1.ConfigMap(
            f"{addon.key}-not-installed",
            data={"add-on": addon.key},
            opts=addons_install.pulumi.ResourceOptions(parent=self),
        )

    monkeypatch.setattr(addons_install.AddOns, "_install", install_nothing)


@pytest.mark.parametrize(
    "name, kinds",
    [
        ("prod", {"ServiceMonitor", "PrometheusRule", "ScaledObject"}),
        (KSERVE, {"InferenceService", "PodMonitor", "ServiceMonitor", "PrometheusRule"}),
        (MULTI_NODE, {"LeaderWorkerSet"}),
        (GATEWAY, {"HTTPRoute"}),
    ],
)
def test_regression_custom_resources_on_a_created_cluster_with_nothing_installing_their_crds(
    name, kinds, nothing_installed
):
    stack, overrides = ("prod", {}) if name == "prod" else VARIANTS[name]
    messages = fired(evaluate_stack(stack, overrides=overrides), "crd-before-custom-resource")
    for kind in kinds:
        assert any(f"({kind})" in m and "installs its CRD" in m for m in messages), (kind, messages)


def test_an_existing_cluster_object_without_its_lookup_fires():
    broken = without_dependency(
        variant(EXISTING), of_kind("ScaledObject"), lambda r: r.read_id == "scaledobjects.keda.sh"
    )
    assert any("(ScaledObject)" in m for m in fired(broken, "crd-before-custom-resource"))


def test_regression_ip_pool_relying_on_a_run_time_crd():
    """The IPPool's CRD is applied by the Network Operator; only an awaited-ready policy proves it is served."""
    broken = without_annotation(variant(EXISTING_RDMA), of_kind("NicClusterPolicy"), contract.PULUMI_WAIT_FOR)
    assert any("(IPPool)" in m for m in fired(broken, "crd-before-custom-resource"))
    assert any(
        "(NicClusterPolicy)" in m and "readiness matters" in m for m in fired(broken, "custom-resource-waits-are-real")
    )


# --- chart-renders-after-its-crds -----------------------------------------------------------------


def test_a_release_rendering_service_monitors_before_their_crds_fires(committed):
    def prometheus(r):
        return r.type == first_apply_k8s.RELEASE and first_apply_k8s.chart_of(r) in (
            "prometheus-operator-crds",
            "kube-prometheus-stack",
        )

    def gpu(r):
        return r.type == first_apply_k8s.RELEASE and first_apply_k8s.chart_of(r) == "gpu-operator"

    messages = fired(without_dependency(committed["prod"], gpu, prometheus), "chart-renders-after-its-crds")
    assert any("gpu-operator" in m and "ServiceMonitor" in m for m in messages), messages


def test_kserve_resources_before_cert_manager_fires():
    # KServe installed without waiting for cert-manager: nothing depends on its release any more.
    def cert_manager(r):
        return r.type == first_apply_k8s.RELEASE and first_apply_k8s.chart_of(r) == "cert-manager"

    messages = fired(without_dependency(variant(KSERVE), lambda r: True, cert_manager), "chart-renders-after-its-crds")
    assert any("kserve-resources" in m and "Certificate" in m for m in messages), messages


# --- custom-resource-waits-are-real ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind", [(MULTI_NODE, "LeaderWorkerSet"), (KSERVE, "InferenceService"), (EXISTING_RDMA, "MacvlanNetwork")]
)
def test_regression_custom_timeouts_without_wait_for_do_nothing(name, kind):
    messages = fired(
        without_annotation(variant(name), of_kind(kind), contract.PULUMI_WAIT_FOR), "custom-resource-waits-are-real"
    )
    assert any(f"({kind})" in m and "readiness matters" in m for m in messages), messages
    if kind != "MacvlanNetwork":  # the workloads carry the plan's customTimeouts
        assert any(f"({kind})" in m and "bound nothing" in m for m in messages), messages


# --- waits-cover-the-plan -------------------------------------------------------------------------


def with_timeout(evaluation: Evaluation, match, seconds: int) -> Evaluation:
    def edit(r: RecordedResource) -> RecordedResource:
        if match(r):
            r.custom_timeouts = {"create": f"{seconds}s", "update": f"{seconds}s"}
        return r

    return edited(evaluation, edit)


def test_the_pool_that_starts_empty_gets_the_provisioning_allowance():
    [row] = variant(KEDA_DEV).outputs["sizing"]
    assert row["nodeProvisioningSeconds"] == 900  # pool l4 has minNodes 0
    # Pool h100 keeps one p5 node (8 GPUs), but the 8B model at its 4 replicas, the 70B model at TP 4
    # and a surge replica need 12: some pod may wait for Karpenter's second node, so both models wait.
    prod_rows = committed_stack("prod").outputs["sizing"]
    assert {r["nodeProvisioningSeconds"] for r in prod_rows} == {900}


def test_a_wait_that_leaves_no_time_for_the_node_fires():
    evaluation = variant(KEDA_DEV)
    [row] = evaluation.outputs["sizing"]
    short = row["startupBudgetSeconds"] + 60  # the old deadline arithmetic: no node provisioning
    messages = fired(with_timeout(evaluation, of_kind("Deployment"), short), "waits-cover-the-plan")
    assert any("less than the startup budget plus node provisioning" in m for m in messages), messages

    def short_deadline(r: RecordedResource) -> RecordedResource:
        if of_kind("Deployment")(r):
            r.inputs["spec"]["progressDeadlineSeconds"] = short
        return r

    assert any(
        "progressDeadlineSeconds" in m for m in fired(edited(evaluation, short_deadline), "waits-cover-the-plan")
    )


def test_a_mirror_job_waited_for_less_than_it_may_run_fires(committed):
    messages = fired(with_timeout(committed["prod"], of_kind("Job"), 600), "waits-cover-the-plan")
    assert any("(Job)" in m and "may run" in m for m in messages), messages


# --- service-does-not-outwait-its-pods ------------------------------------------------------------


def test_a_service_that_waits_for_endpoints_beside_its_workload_fires(committed):
    broken = without_annotation(committed["prod"], of_kind("Service"), contract.PULUMI_SKIP_AWAIT)
    messages = fired(broken, "service-does-not-outwait-its-pods")
    assert len(messages) == 2 and all("skipAwait" in m for m in messages)


# --- the entrance: charts that render custom resources, and the pickers' wait ---------------------


def picker_release(r) -> bool:
    return r.type == first_apply_k8s.RELEASE and r.inputs.get("chart", "").endswith(contract.PICKER_CHART)


def test_a_picker_release_before_the_inference_pool_crd_fires(committed):
    broken = without_dependency(
        committed["prod"],
        picker_release,
        lambda r: r.type == first_apply_k8s.CONFIG_FILE and "inference-extension" in r.name,
    )
    found = fired(broken, "chart-renders-after-its-crds")
    assert any("InferencePool (inference.networking.k8s.io)" in v for v in found), found


def test_an_awaited_picker_release_with_a_standby_fires(committed):
    def awaited(r: RecordedResource) -> RecordedResource:
        if picker_release(r):
            r.inputs["skipAwait"] = False
        return r

    found = fired(edited(committed["dev"], awaited), "picker-release-does-not-wait-for-its-standby")
    assert found and "leader election" in found[0]


def test_gke_policies_on_a_cluster_without_its_gateway_api_fire(committed):
    def gateway_off(r: RecordedResource) -> RecordedResource:
        if r.type == first_apply_k8s.GKE_CLUSTER:
            r.inputs.pop("gatewayApiConfig", None)
        return r

    found = fired(edited(committed["dev"], gateway_off), "crd-before-custom-resource")
    assert any("HealthCheckPolicy" in v for v in found) and any("(Gateway)" in v for v in found), found


def test_a_picker_started_before_the_rewrite_crds_fires(committed):
    broken = without_dependency(
        committed["dev"], picker_release, lambda r: r.type == first_apply_k8s.CONFIG_FILE and "llm-d-router" in r.name
    )
    found = fired(broken, "picker-starts-after-the-kinds-it-discovers")
    assert any("InferenceModelRewrite (llm-d.ai)" in v for v in found), found
