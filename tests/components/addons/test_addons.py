"""Add-ons: which a stack needs and why, how they are installed (pinned, values checked), and how an
existing cluster's are looked up so a missing one fails `pulumi preview` by name."""

from __future__ import annotations

import pytest

import stack_config as cfg
from common import contract
from components.addons import (
    CATALOG,
    CrdSources,
    MissingCrdSource,
    needed_addons,
    prometheus_operator,
    undeclared_problems,
)
from components.addons.catalog import HelmChart, Manifests
from components.addons.install import lookup_name
from components.addons.needs import BY_KEY, install_commands
from offline_plan.mock_runtime import MissingResourceError, evaluate_stack
from tests.support.committed import committed_stack
from tests.support.helm_values import addon_value_keys, check_chart_values
from tests.support.stack_variants import (
    DEV_MODELS,
    EXISTING,
    EXISTING_CLUSTER,
    GATEWAY,
    KEDA_DEV,
    KSERVE,
    MULTI_NODE,
    failing_variant,
    variant,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def needs_of(evaluation) -> list[str]:
    return [row["addon"] for row in evaluation.outputs["addons"]]


@pytest.fixture(scope="module")
def dev():
    return committed_stack("dev")


@pytest.fixture(scope="module")
def prod():
    return committed_stack("prod")


ENTRANCE_ADDONS = ["gatewayApi", "inferenceExtension", "llmdRouter", "certManager"]
# On GKE the entrance's certificate is Google-managed (components/entrance/google_cert.py): no cert-manager.
GKE_ENTRANCE_ADDONS = [a for a in ENTRANCE_ADDONS if a != "certManager"]


def test_committed_stacks_install_what_their_objects_need(dev, prod):
    assert needs_of(dev) == ["prometheusOperator", *GKE_ENTRANCE_ADDONS]
    assert needs_of(prod) == ["prometheusOperator", "keda", *ENTRANCE_ADDONS, "agentgateway"]
    [keda] = [row for row in prod.outputs["addons"] if row["addon"] == "keda"]
    assert keda["version"] == "2.20.2" and "models[0] (llama-3-1-8b-instruct)" in keda["reasons"][0]


def test_the_entrance_gets_gkes_gateway_on_dev_and_agentgateway_after_its_crds_on_prod(dev, prod):
    rows = {row["addon"]: row for row in dev.outputs["addons"]}
    # GKE's own Gateway controller: turned on with the cluster, nothing to install.
    assert rows["gatewayApi"]["how"].startswith("provided by GKE") and "entrance" in rows["gatewayApi"]["how"]
    assert rows["inferenceExtension"]["how"] == "installed: inference-extension-v1 v1.6.0"
    installed = releases(prod)
    assert installed["agentgateway"]["values"]["inferenceExtension"] == {"enabled": True}
    # cert-manager watches Gateways only with its Gateway API support on.
    assert installed["cert-manager"]["values"]["config"]["gatewayAPI"] == {"enabled": True}
    agentgateway = next(r for r in prod.of_type(RELEASE) if r.inputs["name"] == "agentgateway")
    crds_first = [
        r
        for r in prod.resources
        if r.type == "kubernetes:yaml/v2:ConfigFile" and ("gateway-api" in r.name or "inference-extension" in r.name)
    ]
    assert len(crds_first) == 2 and all(prod_waits(prod, agentgateway, r) for r in crds_first)


def prod_waits(evaluation, later, earlier) -> bool:
    from tests.support.first_apply import ApplyGraph

    return ApplyGraph(evaluation).waits_for(later, earlier)


@pytest.mark.parametrize(
    "name, expected",
    [
        (KSERVE, ["prometheusOperator", "certManager", "kserve"]),
        (MULTI_NODE, ["prometheusOperator", "leaderWorkerSet", *ENTRANCE_ADDONS, "agentgateway"]),
        (GATEWAY, ["prometheusOperator", "gatewayApi"]),
        (KEDA_DEV, ["prometheusOperator", "keda", *GKE_ENTRANCE_ADDONS]),
    ],
)
def test_variants_need_their_add_ons_in_install_order(name, expected):
    assert needs_of(variant(name)) == expected


def test_nothing_is_needed_without_monitoring_autoscaling_routes_or_custom_workloads():
    stack = cfg.parse_stack_config(
        {
            "cloud": "gcp",
            "cluster": {"gcpProject": "mock-project"},
            "pools": [{"name": "l4", "gpu": "L4"}],
            "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
            "monitoring": {"enabled": False},
            "operators": {"gpuOperator": {"dcgmServiceMonitor": False}},
        },
        "Pulumi.test.yaml",
    )
    assert needed_addons(stack, []) == []


def test_gke_from_1_34_provides_the_gateway_api_crds_itself():
    raw = {
        "cloud": "gcp",
        "cluster": {"gcpProject": "mock-project", "kubernetesVersion": "1.34"},
        "pools": [{"name": "l4", "gpu": "L4"}],
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
        "exposure": {"gateway": {"name": "gw", "namespace": "gw"}},
    }
    [*_, gateway] = needed_addons(cfg.parse_stack_config(raw, "Pulumi.test.yaml"), [])
    assert gateway.key == "gatewayApi" and gateway.provided_by.startswith("GKE 1.34")
    raw["cluster"]["kubernetesVersion"] = "1.33"
    [*_, gateway] = needed_addons(cfg.parse_stack_config(raw, "Pulumi.test.yaml"), [])
    assert gateway.provided_by is None


# --- installed: pinned releases, checked values, on the system pool -------------------------------


def releases(evaluation) -> dict[str, dict]:
    return {r.inputs["name"]: r.inputs for r in evaluation.of_type(RELEASE)}


@pytest.mark.parametrize("name", ["dev", "prod", KSERVE, MULTI_NODE, KEDA_DEV])
def test_every_add_on_release_is_pinned_awaited_and_its_values_exist_in_the_chart(name, dev, prod):
    evaluation = {"dev": dev, "prod": prod}.get(name) or variant(name)
    charts = {step.release: step for addon in CATALOG for step in addon.steps if isinstance(step, HelmChart)}
    installed = {n: r for n, r in releases(evaluation).items() if n in charts}
    assert installed, "no add-on release"
    for release_name, inputs in installed.items():
        chart = charts[release_name]
        assert (inputs["chart"], inputs["version"], inputs["namespace"]) == (
            chart.chart,
            chart.version,
            chart.namespace,
        )
        assert inputs["atomic"] and not inputs["skipAwait"] and inputs["timeout"] >= 300
        assert check_chart_values(inputs["chart"], inputs.get("values") or {}, inputs["version"]) == []


def test_add_on_controllers_are_pinned_to_the_untainted_system_pool(prod):
    system = {contract.LABEL_POOL: contract.SYSTEM_POOL}
    values = releases(prod)
    assert values["kube-prometheus-stack"]["values"]["prometheusOperator"]["nodeSelector"] == system
    assert values["kube-prometheus-stack"]["values"]["prometheus"]["prometheusSpec"]["nodeSelector"] == system
    assert values["keda"]["values"]["nodeSelector"] == system
    kserve = releases(variant(KSERVE))
    assert kserve["cert-manager"]["values"]["global"]["nodeSelector"] == system
    assert kserve["kserve-resources"]["values"]["kserve"]["controller"]["nodeSelector"] == system


def test_prometheus_selects_every_monitor_and_rule_and_keda_queries_it(prod):
    spec = releases(prod)["kube-prometheus-stack"]["values"]["prometheus"]["prometheusSpec"]
    assert not any(
        spec[k]
        for k in (
            "serviceMonitorSelectorNilUsesHelmValues",
            "podMonitorSelectorNilUsesHelmValues",
            "ruleSelectorNilUsesHelmValues",
        )
    )
    # The chart names the Prometheus Service <fullname>-prometheus, fullname being the release name
    # when it contains the chart name, cut to 26 characters (templates/_helpers.tpl at the tag).
    chart = prometheus_operator.STACK_CHART
    assert chart.chart in chart.release and len(chart.release) <= 26
    assert f"http://{chart.release}-prometheus.{chart.namespace}.svc:9090" == contract.PROMETHEUS_URL
    assert cfg.AutoscalingConfig().prometheusUrl == contract.PROMETHEUS_URL
    [scaled] = [o for o in prod.kubernetes_objects if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["triggers"][0]["metadata"]["serverAddress"] == contract.PROMETHEUS_URL


def test_kserve_is_installed_after_cert_manager_in_standard_mode():
    evaluation = variant(KSERVE)
    order = [r.inputs["name"] for r in evaluation.of_type(RELEASE)]
    by_name = {r.inputs["name"]: r for r in evaluation.of_type(RELEASE)}
    for later, earlier in (
        ("kserve-crd", "cert-manager"),
        ("kserve-resources", "kserve-crd"),
        ("kserve-runtime-configs", "kserve-resources"),
    ):
        assert by_name[earlier].urn in by_name[later].dependencies, (later, earlier)
    assert by_name["kserve-resources"].inputs["values"]["kserve"]["controller"]["deploymentMode"] == "Standard"
    assert by_name["kserve-runtime-configs"].inputs["values"] == {"kserve": {"servingruntime": {"enabled": True}}}
    assert by_name["cert-manager"].inputs["values"]["crds"] == {"enabled": True}
    assert set(order) >= {"cert-manager", "kserve-crd", "kserve-resources", "kserve-runtime-configs"}


def test_gateway_api_crds_come_from_the_pinned_release_asset():
    [bundle] = variant(GATEWAY).of_type("kubernetes:yaml/v2:ConfigFile")
    assert (
        bundle.inputs["file"]
        == "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml"
    )


def test_the_value_check_catches_a_misspelt_key_a_shape_error_and_a_stale_key_list():
    assert check_chart_values("keda", {"nodeSelektor": {}}) == [
        "keda: nodeSelektor: not a key the chart's values.yaml has (the transcribed key list in tests/fixtures/helm)"
    ]
    assert check_chart_values(
        "oci://ghcr.io/kserve/charts/kserve-resources", {"kserve": {"controller": {"deploymentMode": {"x": 1}}}}
    ) == ["kserve-resources: kserve.controller.deploymentMode: the chart has a str here, got a mapping"]
    assert check_chart_values("keda", {}, "2.21.0") == [
        "keda: version 2.21.0: the key list was transcribed from 2.20.2; regenerate it"
    ]


def test_every_add_on_chart_has_a_transcribed_key_list_with_its_source():
    listed = addon_value_keys()
    for addon in CATALOG:
        for step in addon.steps:
            if isinstance(step, HelmChart):
                name = step.chart.rsplit("/", 1)[-1]
                assert listed[name]["source"] == step.values_url and str(listed[name]["version"]) == step.version
                assert len(listed[name]["sha256"]) == 64


# --- existing cluster: declared, looked up, a missing one named -----------------------------------


def test_an_undeclared_add_on_on_an_existing_cluster_is_a_config_error_naming_the_fix():
    evaluation = evaluate_stack(
        "dev",
        overrides={**EXISTING_CLUSTER, "models": DEV_MODELS, "pools": [{"name": "l4", "gpu": "L4"}]},
        raise_errors=False,
    )
    message = str(evaluation.error)
    assert "addons.preinstalled: this stack needs Prometheus Operator" in message
    assert "helm upgrade --install kube-prometheus-stack kube-prometheus-stack" in message
    assert "add `prometheusOperator` to addons.preinstalled" in message
    assert evaluation.of_type(RELEASE) == []


def test_declared_add_ons_are_looked_up_not_installed_and_objects_wait_for_the_lookup():
    evaluation = variant(EXISTING)
    reads = {r.read_id: r for r in evaluation.resources if r.type == CRD}
    assert set(reads) == {
        "servicemonitors.monitoring.coreos.com",
        "podmonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
        "scaledobjects.keda.sh",
    }
    assert [r for r in evaluation.of_type(RELEASE) if r.inputs["name"] in ("keda", "kube-prometheus-stack")] == []
    [monitor] = [r for r in evaluation.resources if r.is_kubernetes_object and r.inputs["kind"] == "ServiceMonitor"]
    assert reads["servicemonitors.monitoring.coreos.com"].urn in monitor.dependencies
    # Read through the existing cluster's provider (its kubeconfig), which is known at preview.
    [provider] = evaluation.of_type("pulumi:providers:kubernetes")
    assert {r.provider.rsplit("::", 1)[0] for r in reads.values()} == {provider.urn}


def test_a_declared_but_missing_crd_fails_the_preview_naming_the_add_on_and_its_install_command():
    present = {
        "servicemonitors.monitoring.coreos.com",
        "podmonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
    }
    error = failing_variant(EXISTING, present)
    assert error["type"] == MissingResourceError.__name__
    assert error["resource_id"] == "scaledobjects.keda.sh"
    # What the CLI prints: the read resource's name above the engine's message.
    assert error["name"] == lookup_name(BY_KEY["keda"], BY_KEY["keda"].crds[0])
    message = error["message"]
    assert (
        "KEDA 2.20.2" in message
        and "helm upgrade --install keda keda --repo https://kedacore.github.io/charts" in message
    )
    assert "Preview failed: resource 'scaledobjects.keda.sh' does not exist" in message


def test_every_declared_crd_present_lets_the_existing_cluster_stack_through():
    everything = {crd.name for key in ("prometheusOperator", "keda") for crd in BY_KEY[key].crds}
    assert variant(EXISTING, cluster_crds=everything).error is None


def test_kserve_on_an_existing_cluster_names_cert_manager_first():
    commands = install_commands(BY_KEY["kserve"])
    assert (
        commands[0].startswith("helm upgrade --install cert-manager cert-manager")
        and "crds.enabled=true" in commands[0]
    )
    assert "kserve.controller.deploymentMode=Standard" in " ".join(commands)


def test_preinstalled_add_ons_on_a_created_cluster_are_refused():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(
            {
                "cloud": "gcp",
                "cluster": {"gcpProject": "mock-project"},
                "pools": [{"name": "l4", "gpu": "L4"}],
                "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
                "addons": {"preinstalled": ["keda"]},
            },
            "Pulumi.test.yaml",
        )
    assert any("addons.preinstalled" in p and "remove addons.preinstalled" in p for p in err.value.problems)


def test_an_unknown_or_repeated_add_on_name_is_refused():
    base = {
        "cloud": "existing",
        "cluster": {"kubeconfig": "/k", "rwxStorageClass": "nfs"},
        "pools": [{"name": "l4", "gpu": "L4"}],
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
    }
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config({**base, "addons": {"preinstalled": ["kedaa"]}}, "Pulumi.test.yaml")
    assert any("addons.preinstalled" in p and "keda" in p for p in err.value.problems)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config({**base, "addons": {"preinstalled": ["keda", "keda"]}}, "Pulumi.test.yaml")
    assert any("listed twice" in p for p in err.value.problems)


def test_undeclared_problems_are_empty_on_a_created_cluster(prod):
    stack = cfg.parse_stack_config(
        {
            "cloud": "aws",
            "pools": [{"name": "l4", "gpu": "L4"}],
            "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
        },
        "Pulumi.test.yaml",
    )
    assert undeclared_problems(stack, needed_addons(stack, []), "Pulumi.test.yaml") == []


def test_a_kind_nobody_provides_is_a_wiring_error_naming_it():
    crds = CrdSources()
    crds.provide("keda.sh", "ScaledObject", [], "test")
    assert crds.depends_on("keda.sh/v1alpha1", "ScaledObject") == []
    with pytest.raises(MissingCrdSource, match=r"LeaderWorkerSet \(leaderworkerset.x-k8s.io\).*needs.py"):
        crds.depends_on("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def test_manifests_install_server_side():
    [step] = BY_KEY["gatewayApi"].steps
    assert isinstance(step, Manifests) and step.install_command.startswith("kubectl apply --server-side -f ")
