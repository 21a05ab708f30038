"""Several base models and their adapters behind one entrance, on GKE and on EKS.

The route matches the base-model header, so what matters is who writes it and from what: on GKE the
Body-Based Router (its chart rendered by Helm's own engine, its ConfigMaps), on EKS agentgateway's
CEL map. Each test follows a request's `model` through the writer's own lookup to the rule it
matches and the InferencePool that rule names, and on to the server pods that pool selects.
"""

from __future__ import annotations

import functools
import json
from datetime import timedelta

import pytest
import yaml

import stack_config as cfg
from common import contract, images
from common import pod_security as common_pod_security
from components.entrance import bbr
from components.network_policy.rules import API_SERVER_PORTS
from offline_plan import helm
from offline_plan.helm import pod_security
from offline_plan.helm.pods import summaries
from tests.support.helm_entrance import entrance_problems
from tests.support.helm_values import check_chart_values
from tests.support.netpol_eval import Cluster, Endpoint
from tests.support.schemas import validate_object
from tests.support.stack_variants import DEV_TWO_MODELS, PROD_TWO_MODELS, variant

RELEASE = "kubernetes:helm.sh/v3:Release"
BASE_8B, BASE_70B, ADAPTER, ALIAS = (
    "llama-3-1-8b-instruct",
    "llama-3-3-70b-instruct",
    "llama-sql",
    "meta-llama/Llama-3.1-8B-Instruct",
)
# Every name a client may send, and the pool it must reach.
EXPECTED = {BASE_8B: BASE_8B, ADAPTER: BASE_8B, BASE_70B: BASE_70B}


@functools.cache
def _rendered(name: str):
    ev = variant(name)
    return ev, helm.rendered(ev)


def objects(ev, kind):
    return [o for o in ev.kubernetes_objects if o["kind"] == kind]


def router_release(rendered):
    [release] = [r for r in rendered if r.release.chart_name == "body-based-routing"]
    return release


def inference_route(ev):
    [route] = [r for r in objects(ev, "HTTPRoute") if r["metadata"]["name"] == "llm-serving"]
    return route


def route_to_pool(route: dict, headers: dict[str, str]) -> str | None:
    """The pool a /v1 request with these headers reaches: the first rule whose every header match
    holds (Gateway API: within a match every condition must hold; the header names are
    case-insensitive)."""
    folded = {k.lower(): v for k, v in headers.items()}
    for rule in route["spec"]["rules"]:
        for match in rule["matches"]:
            assert match["path"] == {"type": "PathPrefix", "value": "/v1"}
            if all(folded.get(h["name"].lower()) == h["value"] for h in match.get("headers", [])):
                [backend] = rule["backendRefs"]
                assert (backend["group"], backend["kind"]) == ("inference.networking.k8s.io", "InferencePool")
                return backend["name"]
    return None


def bbr_base_model(configmaps: list[dict], model: str) -> str:
    """BBR v1.5.0's lookup (pkg/bbr/plugins/basemodelextractor/adapters_store.go getBaseModel):
    an adapter listed in a managed ConfigMap -> its baseModel; a baseModel -> itself; else ""."""
    adapters: dict[str, str] = {}
    bases: set[str] = set()
    for cm in configmaps:
        if cm["metadata"].get("labels", {}).get(bbr.MANAGED_LABEL) != "true":
            continue
        base = cm["data"]["baseModel"].strip()
        bases.add(base)
        for name in yaml.safe_load(cm["data"].get("adapters") or "[]") or []:
            adapters[str(name).strip()] = base
    model = model.strip()
    return adapters.get(model) or (model if model in bases else "")


# --- GKE: the Body-Based Router ------------------------------------------------------------------


def test_gke_two_base_models_and_an_adapter_plan_with_one_gateway_and_one_router():
    ev, _ = _rendered(DEV_TWO_MODELS)
    [gateway] = objects(ev, "Gateway")
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-regional-external-managed"
    [release] = [r for r in ev.of_type(RELEASE) if r.inputs["chart"] == bbr.CHART]
    inputs = release.inputs
    assert (inputs["version"], inputs["name"]) == (bbr.VERSION, bbr.RELEASE)
    values = inputs["values"]
    assert values["provider"] == {"name": "gke"}
    assert values["inferenceGateway"] == {"name": gateway["metadata"]["name"]}
    assert values["bbr"]["replicas"] >= 2
    # The image of common/images.py, pinned by its digest once that is resolved.
    digest = images.IMAGES["body-based-router"].digest.value
    assert values["bbr"]["image"]["tag"] == (f"{bbr.VERSION}@{digest}" if digest else bbr.VERSION)
    assert check_chart_values("body-based-routing", values, bbr.VERSION) == []
    # No agentgateway on GKE, and the plan says which writer and what is not established.
    assert not objects(ev, "AgentgatewayPolicy")
    summary = ev.outputs["entrance"]
    assert "Body-Based Router" in summary["bodyRouting"]
    commands = [u["resolveWith"] for u in summary["unresolved"]]
    assert any(c.startswith(f"helm show chart {bbr.CHART} --version {bbr.VERSION}") for c in commands)
    assert any("gcproutingextensions.networking.gke.io" in c for c in commands)
    assert ev.outputs["endpoints"]["models"] == [BASE_8B, ADAPTER, BASE_70B]


def test_the_router_chart_renders_a_routing_extension_on_the_gateway_that_calls_its_service():
    ev, rendered = _rendered(DEV_TWO_MODELS)
    release = router_release(rendered)
    by_kind: dict[str, list[dict]] = {}
    for o in release.objects:
        by_kind.setdefault(o["kind"], []).append(o)
    [ext] = by_kind["GCPRoutingExtension"]
    [service] = by_kind["Service"]
    [deployment] = by_kind["Deployment"]
    [gateway] = objects(ev, "Gateway")
    assert ext["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway["metadata"]["name"]}
    ]
    assert ext["metadata"]["namespace"] == gateway["metadata"]["namespace"] == release.release.namespace
    [chain] = ext["spec"]["extensionChains"]
    [call] = chain["extensions"]
    ref = call["backendRef"]
    assert (ref["kind"], ref["name"], ref["port"]) == ("Service", service["metadata"]["name"], bbr.EXT_PROC_PORT)
    assert [p["port"] for p in service["spec"]["ports"]] == [bbr.EXT_PROC_PORT]
    # The Service selects the router's pods, which listen on the ext_proc and health ports.
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"] == bbr.POD_LABELS == pod["metadata"]["labels"]
    ports = {p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert ports == {bbr.EXT_PROC_PORT, bbr.HEALTH_CHECK_PORT}
    # Two or more routers, and a budget that selects exactly them: a drain keeps one up.
    assert deployment["spec"]["replicas"] >= 2
    [pdb] = [p for p in objects(ev, "PodDisruptionBudget") if p["metadata"]["name"] == bbr.ROUTER_NAME]
    assert pdb["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] and pdb["spec"]["maxUnavailable"] == 1
    # The plugins the program wrote out are the arguments the router starts with.
    [container] = pod["spec"]["containers"]
    assert container["image"] == images.IMAGES["body-based-router"].reference
    plugin_args = [container["args"][i + 1] for i, a in enumerate(container["args"]) if a == "--plugin"]
    extractor = json.dumps({"fieldName": "model", "headerName": bbr.MODEL_HEADER}, separators=(",", ":"))
    assert plugin_args == [
        f"body-field-to-header:model-extractor:{extractor}",
        "base-model-to-header:base-model-mapper",
    ]
    # GKE health-checks the router's gRPC health port.
    [health] = by_kind["HealthCheckPolicy"]
    assert health["spec"]["targetRef"]["name"] == service["metadata"]["name"]
    assert health["spec"]["default"]["config"]["grpcHealthCheck"]["port"] == bbr.HEALTH_CHECK_PORT


def test_the_routing_extension_validates_against_its_crd_and_its_rules():
    _, rendered = _rendered(DEV_TWO_MODELS)
    release = router_release(rendered)
    for obj in release.objects:
        validate_object(obj)  # strict, against tests/fixtures/crds and the Kubernetes schemas
    [ext] = [o for o in release.objects if o["kind"] == "GCPRoutingExtension"]
    # The CRD's x-kubernetes-validations on an extension (CEL, which the schema check does not run),
    # GoogleCloudPlatform/gke-gateway-api@fc40d606 config/crd/networking.gke.io_gcproutingextensions.yaml.
    for chain in ext["spec"]["extensionChains"]:
        assert len(chain["extensions"]) == 1  # "GCPRoutingExtension chains are limited to 1 Extension"
        for e in chain["extensions"]:
            timeout = e["timeout"]
            assert timeout.endswith("s") and not timeout.endswith("ms")
            assert timedelta(milliseconds=10) <= timedelta(seconds=int(timeout[:-1])) <= timedelta(milliseconds=10000)
            assert "backendRef" in e and e.get("authority")  # authority must be set if backendRef is set
            assert "googleAPIServiceName" not in e
            if e.get("requestBodySendMode") == "FullDuplexStreamed":
                assert {"RequestBody", "RequestTrailers"} <= set(e["supportedEvents"])
                # And only request events for a routing extension (the supportedEvents description).
                assert set(e["supportedEvents"]) <= {"RequestHeaders", "RequestBody", "RequestTrailers"}


def test_a_wrong_routing_extension_is_refused_by_the_crd():
    _, rendered = _rendered(DEV_TWO_MODELS)
    [ext] = [o for o in router_release(rendered).objects if o["kind"] == "GCPRoutingExtension"]
    broken = json.loads(json.dumps(ext))
    broken["spec"]["extensionChains"][0]["extensions"][0]["backendRef"]["kind"] = "Pod"
    with pytest.raises(AssertionError, match="backendRef"):
        validate_object(broken)


def test_every_name_reaches_its_base_models_pool_through_the_routers_configmaps():
    ev, rendered = _rendered(DEV_TWO_MODELS)
    configmaps = [c for c in objects(ev, "ConfigMap") if bbr.MANAGED_LABEL in c["metadata"].get("labels", {})]
    assert sorted(c["data"]["baseModel"] for c in configmaps) == [BASE_8B, BASE_70B]
    for obj in [
        *configmaps,
        *[p for p in objects(ev, "PodDisruptionBudget") if p["metadata"]["name"] == "body-router"],
    ]:
        validate_object(obj)
    assert {c["metadata"]["namespace"] for c in configmaps} == {router_release(rendered).release.namespace}
    route = inference_route(ev)
    for name, pool in {**EXPECTED, ALIAS: BASE_8B}.items():
        header = bbr_base_model(configmaps, name)
        assert header == pool, name
        assert route_to_pool(route, {contract.BASE_MODEL_HEADER: header, bbr.MODEL_HEADER: name}) == pool, name
    # A name nobody serves gets an empty header and matches no rule.
    assert bbr_base_model(configmaps, "nope") == ""
    assert route_to_pool(route, {contract.BASE_MODEL_HEADER: "", bbr.MODEL_HEADER: "nope"}) is None
    # Each pool is the InferencePool its picker release renders, selecting that model's servers.
    assert entrance_problems(ev, rendered) == []
    # The walk can fail: a ConfigMap that forgot the adapter leaves it without a pool.
    forgetful = json.loads(json.dumps(configmaps))
    for cm in forgetful:
        cm["data"].pop("adapters", None)
    assert route_to_pool(route, {contract.BASE_MODEL_HEADER: bbr_base_model(forgetful, ADAPTER)}) is None


def test_the_rendered_router_pods_are_admitted_by_the_namespace():
    ev, rendered = _rendered(DEV_TWO_MODELS)
    levels = pod_security.namespace_levels(ev.kubernetes_objects)
    release = router_release(rendered)
    pods = summaries(release.objects)
    assert pods
    for pod in pods:
        assert pod_security.admitted(pod.level, levels[release.release.namespace]), pod.ref
    [ns] = [o for o in objects(ev, "Namespace") if o["metadata"]["name"] == release.release.namespace]
    assert "Body-Based Router" in ns["metadata"]["annotations"][common_pod_security.LEVEL_REASON_ANNOTATION]


def test_network_policies_admit_the_gateway_to_the_router_and_nothing_else():
    ev, rendered = _rendered(DEV_TWO_MODELS)
    policies = objects(ev, "NetworkPolicy")
    assert "default-deny" in {p["metadata"]["name"] for p in policies}
    cluster = Cluster(policies)
    release = router_release(rendered)
    [deployment] = [o for o in release.objects if o["kind"] == "Deployment"]
    # The router's pod as the chart renders it, in the serving namespace.
    router = Endpoint(
        "body router", "10.4.5.5", release.release.namespace, deployment["spec"]["template"]["metadata"]["labels"]
    )
    proxy = Endpoint("GKE regional load balancer proxy", "10.9.0.17")  # the proxy-only subnet dev creates
    checker = Endpoint("Google health checker", "35.191.4.4")
    internet = Endpoint("client on the internet", "198.51.100.7")
    stranger = Endpoint("a pod of another team", "10.4.7.7", "team-a", {"app": "x"})
    api = Endpoint("Kubernetes API", "10.0.12.34")
    assert cluster.can_reach(proxy, router, bbr.EXT_PROC_PORT)
    assert cluster.can_reach(checker, router, bbr.HEALTH_CHECK_PORT)
    assert not cluster.can_reach(proxy, router, 8080)
    assert not cluster.can_reach(internet, router, bbr.EXT_PROC_PORT)
    assert not cluster.can_reach(stranger, router, bbr.EXT_PROC_PORT)
    # It watches its ConfigMaps through the API server (named by port only, as for the pickers), and
    # reaches no other port.
    assert all(cluster.can_reach(router, api, port) for port in API_SERVER_PORTS)
    assert not cluster.can_reach(router, internet, 80)
    # Without the policy the router would be closed by default-deny: it is what admits the hop.
    closed = Cluster([p for p in policies if p["metadata"]["name"] != "body-router"])
    assert not closed.can_reach(proxy, router, bbr.EXT_PROC_PORT)


def test_one_base_model_on_gke_needs_no_router():
    from tests.support.committed import committed_stack

    ev = committed_stack("dev")
    assert not [r for r in ev.of_type(RELEASE) if r.inputs["chart"] == bbr.CHART]
    assert not [p for p in objects(ev, "NetworkPolicy") if p["metadata"]["name"] == "body-router"]
    assert not [c for c in objects(ev, "ConfigMap") if bbr.MANAGED_LABEL in c["metadata"].get("labels", {})]


# --- EKS: agentgateway's own body routing ---------------------------------------------------------


def test_eks_two_base_models_and_an_adapter_plan_with_one_gateway_and_its_cel_map():
    ev, rendered = _rendered(PROD_TWO_MODELS)
    [gateway] = objects(ev, "Gateway")
    assert gateway["spec"]["gatewayClassName"] == "agentgateway"
    assert not [r for r in ev.of_type(RELEASE) if r.inputs["chart"] == bbr.CHART]
    [policy] = objects(ev, "AgentgatewayPolicy")
    validate_object(policy)
    [header] = policy["spec"]["traffic"]["transformation"]["request"]["set"]
    assert header["name"] == contract.BASE_MODEL_HEADER
    literal, _, index = header["value"].rpartition("[")
    assert index == "json(request.body).model]"
    table = json.loads(literal)
    route = inference_route(ev)
    validate_object(route)
    for name, pool in EXPECTED.items():
        assert route_to_pool(route, {contract.BASE_MODEL_HEADER: table[name]}) == pool, name
    assert "nope" not in table  # the CEL lookup fails, the header stays unset, no rule matches
    assert route_to_pool(route, {}) is None
    assert entrance_problems(ev, rendered) == []
    assert ev.outputs["endpoints"]["models"] == [BASE_8B, ADAPTER, BASE_70B]
    assert not [p for p in objects(ev, "NetworkPolicy") if p["metadata"]["name"] == "body-router"]


# --- config ---------------------------------------------------------------------------------------

BASE = {
    "cloud": "gcp",
    "cluster": {"gcpProject": "acme-llm-dev"},
    "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}],
    "exposure": {"entrance": {"hostname": "llm.acme.io", "picker": {"failureMode": "FailOpen"}}},
}


def _models(n: int) -> list[dict]:
    return [{"repo": "a/b", "revision": "0" * 40, "pool": "l4", "name": f"m{i}"} for i in range(n)]


def test_gke_and_an_existing_gke_gateway_take_several_base_models():
    cfg.parse_stack_config({**BASE, "models": _models(2)}, "Pulumi.test.yaml")
    existing = {
        **BASE,
        "cloud": "existing",
        "cluster": {"kubeconfig": "/k", "rwxStorageClass": "nfs"},
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        "security": {"networkPolicyEnforcement": "calico"},
        "models": _models(2),
        "exposure": {
            "entrance": {
                **BASE["exposure"]["entrance"],
                "implementation": "gke",
                "tls": {"certificate": "secret", "secretName": "llm-tls"},
            }
        },
    }
    cfg.parse_stack_config(existing, "Pulumi.test.yaml")


def test_an_unknown_gateway_implementation_still_refuses_several_base_models_with_the_fix():
    raw = {
        **BASE,
        "cloud": "existing",
        "cluster": {"kubeconfig": "/k", "rwxStorageClass": "nfs"},
        "operators": {"gpuOperator": {"driver": "preinstalled"}},
        "security": {"networkPolicyEnforcement": "calico"},
        "models": _models(2),
        "exposure": {
            "entrance": {
                **BASE["exposure"]["entrance"],
                "gatewayClass": "mine",
                "tls": {"certificate": "secret", "secretName": "llm-tls"},
            }
        },
    }
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")
    [line] = err.value.problems
    assert line.startswith("Pulumi.test.yaml: exposure.entrance: 2 base models (m0, m1)")
    assert "exposure.entrance.implementation" in line and "agentgateway or gke" in line


def test_more_base_models_than_route_rules_are_refused():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config({**BASE, "models": _models(17)}, "Pulumi.test.yaml")
    assert any(
        "at most 16 rules" in p and p.startswith("Pulumi.test.yaml: exposure.entrance:") for p in err.value.problems
    )


def test_only_a_stack_with_several_base_models_on_gke_needs_the_routing_extension_kind():
    from components.addons.needs import needed_addons

    def gateway_kinds(raw: dict) -> set[str]:
        stack = cfg.parse_stack_config(raw, "Pulumi.test.yaml")
        [need] = [n for n in needed_addons(stack, []) if n.key == "gatewayApi"]
        return {c.kind for c in need.addon.crds}

    assert "GCPRoutingExtension" in gateway_kinds({**BASE, "models": _models(2)})
    # One base model: nothing creates one, so an existing cluster is not asked to serve the kind.
    assert "GCPRoutingExtension" not in gateway_kinds({**BASE, "models": _models(1)})
