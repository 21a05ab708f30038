"""The entrance: one Gateway, an InferencePool and highly available endpoint picker per base model,
HTTPS with an HTTP redirect, timeouts that let a long generation finish, body-based routing where
several base models share it; on the committed stacks and their variants."""

from __future__ import annotations

import json

import pytest

import stack_config as cfg
from common import contract, images
from components.entrance import body_routing, picker
from components.entrance.entrance import AWS_IDLE_TIMEOUT_ANNOTATION
from components.serving import probes
from stack_config.entrance import AGENTGATEWAY_CLASS, GKE_GATEWAY_CLASS
from tests.support.committed import committed_stack
from tests.support.helm_values import check_chart_values
from tests.support.schemas import SchemaError, validate_all, validate_object
from tests.support.stack_variants import (
    ADAPTERS,
    DEV_ADAPTERS,
    DEV_TWO_MODELS,
    EXISTING_ENTRANCE,
    MULTI_NODE,
    PROD_TWO_MODELS,
    variant,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
ENTRANCE_VARIANTS = [
    "dev",
    "prod",
    ADAPTERS,
    DEV_ADAPTERS,
    EXISTING_ENTRANCE,
    MULTI_NODE,
    DEV_TWO_MODELS,
    PROD_TWO_MODELS,
]


@pytest.fixture(scope="module")
def evaluations():
    return {"dev": committed_stack("dev"), "prod": committed_stack("prod")}


def evaluation(name, evaluations):
    return evaluations.get(name) or variant(name)


def objects(ev, kind):
    return [o for o in ev.kubernetes_objects if o["kind"] == kind]


def pickers(ev) -> dict[str, dict]:
    return {r.inputs["name"]: r.inputs for r in ev.of_type(RELEASE) if r.inputs["chart"] == picker.CHART}


def render_inference_pool(release: str, namespace: str, values: dict) -> dict:
    """The InferencePool llm-d-router-gateway v0.10.0 renders from these values
    (config/charts/routerlib/templates/_inferencepool.yaml at the tag, provider none)."""
    router = values["router"]
    servers = router["modelServers"]
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": release, "namespace": namespace},
        "spec": {
            "targetPorts": [{"number": p["number"]} for p in servers["targetPorts"]],
            "appProtocol": {"http": "http", "grpc": "kubernetes.io/h2c"}[servers["protocol"]],
            "selector": {"matchLabels": {k: str(v) for k, v in servers["matchLabels"].items()}},
            "endpointPickerRef": {
                "name": contract.picker_name(release),
                "port": {"number": picker.EXT_PROC_PORT},
                "failureMode": router["inferencePool"]["failureMode"],
            },
        },
    }


def server_pods(ev) -> list[tuple[dict, list[int]]]:
    """(pod labels, container ports) of every vLLM server pod template (workers included)."""
    out = []
    for obj in ev.kubernetes_objects:
        spec = obj.get("spec") or {}
        templates = [spec.get("template")]
        lws = spec.get("leaderWorkerTemplate") or {}
        templates += [lws.get("leaderTemplate"), lws.get("workerTemplate")]
        for t in filter(None, templates):
            if (t["metadata"]["labels"] or {}).get(contract.LABEL_PART_OF) != contract.PART_OF:
                continue
            if obj["kind"] not in ("Deployment", "LeaderWorkerSet"):
                continue
            ports = [p["containerPort"] for c in t["spec"]["containers"] for p in c.get("ports", [])]
            out.append((t["metadata"]["labels"], ports))
    return out


# --- what each committed stack gets ----------------------------------------------------------------


def test_dev_enters_through_the_gke_gateway_and_prod_through_agentgateway(evaluations):
    [dev_gw] = objects(evaluations["dev"], "Gateway")
    [prod_gw] = objects(evaluations["prod"], "Gateway")
    assert dev_gw["spec"]["gatewayClassName"] == GKE_GATEWAY_CLASS
    assert prod_gw["spec"]["gatewayClassName"] == AGENTGATEWAY_CLASS
    # The GKE cluster runs its Gateway controller, in a network with a proxy-only subnet.
    [cluster] = evaluations["dev"].of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    [subnet] = [
        s
        for s in evaluations["dev"].of_type("gcp:compute/subnetwork:Subnetwork")
        if s.inputs.get("purpose") == "REGIONAL_MANAGED_PROXY"
    ]
    assert subnet.inputs["role"] == "ACTIVE" and subnet.inputs["region"] == "us-central1"


@pytest.mark.parametrize("name", ENTRANCE_VARIANTS)
def test_every_entrance_object_validates_against_its_upstream_schema(name, evaluations):
    ev = evaluation(name, evaluations)
    kinds = {
        "Gateway",
        "HTTPRoute",
        "Issuer",
        "AgentgatewayPolicy",
        "HealthCheckPolicy",
        "GCPBackendPolicy",
        "PodDisruptionBudget",
        "InferenceModelRewrite",
    }
    validate_all([o for o in ev.kubernetes_objects if o["kind"] in kinds])
    # And the InferencePool each picker release renders.
    for release, inputs in pickers(ev).items():
        validate_object(render_inference_pool(release, inputs["namespace"], inputs["values"]))


@pytest.mark.parametrize("name", ENTRANCE_VARIANTS)
def test_every_picker_value_is_a_key_of_the_chart(name, evaluations):
    for release, inputs in pickers(evaluation(name, evaluations)).items():
        assert (inputs["chart"], inputs["version"]) == (picker.CHART, picker.VERSION)
        assert check_chart_values(inputs["chart"], inputs["values"], inputs["version"]) == [], release


def test_a_misspelt_picker_key_or_a_bad_failure_mode_is_caught(evaluations):
    inputs = pickers(evaluations["prod"])["llama-3-1-8b-instruct"]
    values = json.loads(json.dumps(inputs["values"]))
    values["router"]["epp"]["replica"] = 2
    assert check_chart_values(inputs["chart"], values, inputs["version"]) == [
        (
            "llm-d-router-gateway: router.epp.replica: not a key the chart's values.yaml has "
            "(the transcribed key list in tests/fixtures/helm)"
        )
    ]
    values = json.loads(json.dumps(inputs["values"]))
    values["router"]["inferencePool"]["failureMode"] = "FailClosed"  # the chart README's spelling
    with pytest.raises(SchemaError, match="failureMode"):
        validate_object(render_inference_pool("m", "ns", values))


@pytest.mark.parametrize("name", ENTRANCE_VARIANTS)
def test_each_pool_selects_exactly_its_servers_on_the_server_port(name, evaluations):
    ev = evaluation(name, evaluations)
    pods = server_pods(ev)
    for release, inputs in pickers(ev).items():
        pool = render_inference_pool(release, inputs["namespace"], inputs["values"])
        selector = pool["spec"]["selector"]["matchLabels"]
        selected = [(labels, ports) for labels, ports in pods if all(labels.get(k) == v for k, v in selector.items())]
        assert selected, f"pool {release} selects no server pod"
        for labels, ports in selected:
            assert labels[contract.LABEL_MODEL] == release
            # Only pods that serve HTTP: a multi-node replica's workers must not be picked.
            assert labels[contract.LABEL_COMPONENT] == "vllm-server"
            assert [p["number"] for p in pool["spec"]["targetPorts"]] == [contract.SERVER_PORT]
            assert contract.SERVER_PORT in ports


def test_the_pickers_run_highly_available_with_a_budget_and_an_explicit_failure_mode(evaluations):
    ev = evaluations["prod"]
    pdbs = {p["metadata"]["name"]: p for p in objects(ev, "PodDisruptionBudget")}
    for release, inputs in pickers(ev).items():
        router = inputs["values"]["router"]
        assert router["epp"]["replicas"] == 2
        assert router["inferencePool"]["failureMode"] == "FailOpen"  # Pulumi.prod.yaml says so
        assert router["epp"]["image"] == picker.IMAGE and picker.IMAGE["tag"].partition("@")[0] == picker.VERSION
        # Pinned by the digest of common/images.py once it is resolved: the chart renders
        # registry/repository:tag, so the digest rides in the tag.
        digest = images.IMAGES["endpoint-picker"].digest.value
        assert picker.IMAGE["tag"] == (f"{picker.VERSION}@{digest}" if digest else picker.VERSION)
        # Not awaited (leader election), but still bounded.
        assert inputs["skipAwait"] is True and inputs["timeout"] > 0
        pdb = pdbs[contract.picker_name(release)]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"] == {contract.PICKER_POD_LABEL: contract.picker_name(release)}
        # The pickers' metrics are scraped by the Prometheus the program installs, each release with
        # its own token Secret (one shared name would make the second release fail).
        assert router["monitoring"]["prometheus"]["enabled"] is True
        assert router["monitoring"]["provider"]["name"] == "prometheusoperator"
    secrets = [p["values"]["router"]["monitoring"]["prometheus"]["auth"]["secretName"] for p in pickers(ev).values()]
    assert len(set(secrets)) == len(secrets) == 2


def test_https_with_the_acme_certificate_and_a_redirect_from_http(evaluations):
    ev = evaluations["prod"]
    [gateway] = objects(ev, "Gateway")
    listeners = {listener["name"]: listener for listener in gateway["spec"]["listeners"]}
    assert (listeners["http"]["port"], listeners["https"]["port"]) == (80, 443)
    assert listeners["https"]["tls"]["mode"] == "Terminate"
    [secret_ref] = listeners["https"]["tls"]["certificateRefs"]
    [issuer] = objects(ev, "Issuer")
    # cert-manager's gateway-shim reads the annotation and writes the Secret the listener serves.
    assert gateway["metadata"]["annotations"]["cert-manager.io/issuer"] == issuer["metadata"]["name"]
    assert secret_ref == {"group": "", "kind": "Secret", "name": "llm-serving-tls"}
    solver = issuer["spec"]["acme"]["solvers"][0]["http01"]["gatewayHTTPRoute"]["parentRefs"][0]
    assert (solver["name"], solver["sectionName"]) == (gateway["metadata"]["name"], "http")
    assert issuer["spec"]["acme"]["server"] == "https://acme-v02.api.letsencrypt.org/directory"
    routes = {r["metadata"]["name"]: r for r in objects(ev, "HTTPRoute")}
    redirect = routes["llm-serving-redirect"]
    assert redirect["spec"]["parentRefs"][0]["sectionName"] == "http"
    assert redirect["spec"]["rules"] == [
        {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
    ]
    assert routes["llm-serving"]["spec"]["parentRefs"][0]["sectionName"] == "https"


def test_a_provided_secret_needs_no_cert_manager():
    ev = variant(EXISTING_ENTRANCE)
    [gateway] = objects(ev, "Gateway")
    assert not objects(ev, "Issuer") and "annotations" not in gateway["metadata"]
    assert gateway["spec"]["listeners"][1]["tls"]["certificateRefs"][0]["name"] == "llm-tls"
    assert "certManager" not in [row["addon"] for row in ev.outputs["addons"]]
    assert all(p["values"]["router"]["inferencePool"]["failureMode"] == "FailClose" for p in pickers(ev).values())


def test_a_long_generation_is_not_cut_by_the_route_the_load_balancer_or_gke(evaluations):
    prod = evaluations["prod"]
    drains = {
        row["model"]: probes.drain_seconds(type("P", (), {"max_model_len": row["maxModelLen"]})())
        for row in prod.outputs["sizing"]
    }
    [route] = [r for r in objects(prod, "HTTPRoute") if r["metadata"]["name"] == "llm-serving"]
    for rule in route["spec"]["rules"]:
        pool = rule["backendRefs"][0]["name"]
        assert rule["timeouts"]["request"] == f"{drains[pool]}s"
    # A request that is not streamed is silent until it ends: the load balancer's idle timeout
    # outlasts the longest one.
    [gateway] = objects(prod, "Gateway")
    idle = int(gateway["spec"]["infrastructure"]["annotations"][AWS_IDLE_TIMEOUT_ANNOTATION])
    assert idle > max(drains.values())
    # GKE takes the whole-response timeout from the backend policy, not the route.
    dev = evaluations["dev"]
    [dev_route] = [r for r in objects(dev, "HTTPRoute") if r["metadata"]["name"] == "llm-serving"]
    assert "timeouts" not in dev_route["spec"]["rules"][0]
    [backend] = objects(dev, "GCPBackendPolicy")
    [row] = dev.outputs["sizing"]
    assert (
        backend["spec"]["default"]["timeoutSec"]
        == probes.drain_seconds(type("P", (), {"max_model_len": row["maxModelLen"]})())
        > 300
    )  # the chart's own policy had 300
    [health] = objects(dev, "HealthCheckPolicy")
    check = health["spec"]["default"]
    assert check["config"]["httpHealthCheck"] == {"requestPath": probes.HEALTH_PATH, "port": contract.SERVER_PORT}
    assert check["timeoutSec"] <= check["checkIntervalSec"]  # the CRD calls a longer timeout invalid


def test_several_base_models_route_on_the_bodys_model_adapters_to_their_base():
    ev = variant(ADAPTERS)
    [policy] = objects(ev, "AgentgatewayPolicy")
    spec = policy["spec"]
    # PreRouting policies may only target a Gateway or ListenerSet (the CRD's CEL rule).
    assert spec["traffic"]["phase"] == "PreRouting" and {t["kind"] for t in spec["targetRefs"]} == {"Gateway"}
    [header] = spec["traffic"]["transformation"]["request"]["set"]
    assert header["name"] == contract.BASE_MODEL_HEADER
    literal, _, index = header["value"].rpartition("[")
    assert index == "json(request.body).model]"
    # Aliases too: the picker rewrites them only inside the pool the Gateway chose.
    assert json.loads(literal) == {
        "llama-3-1-8b-instruct": "llama-3-1-8b-instruct",
        "llama-sql": "llama-3-1-8b-instruct",
        "llama-chat": "llama-3-1-8b-instruct",
        "meta-llama/Llama-3.1-8B-Instruct": "llama-3-1-8b-instruct",
        "sql": "llama-3-1-8b-instruct",
        "llama-3-3-70b-instruct": "llama-3-3-70b-instruct",
    }
    [route] = [r for r in objects(ev, "HTTPRoute") if r["metadata"]["name"] == "llm-serving"]
    matched = {
        rule["matches"][0]["headers"][0]["value"]: rule["backendRefs"][0]["name"] for rule in route["spec"]["rules"]
    }
    assert matched == {
        "llama-3-1-8b-instruct": "llama-3-1-8b-instruct",
        "llama-3-3-70b-instruct": "llama-3-3-70b-instruct",
    }
    assert ev.outputs["endpoints"]["models"] == [
        "llama-3-1-8b-instruct",
        "llama-sql",
        "llama-chat",
        "llama-3-3-70b-instruct",
    ]
    assert ev.outputs["endpoints"]["baseUrl"] == "https://llm.example.com/v1"


def test_one_base_model_needs_no_body_routing_so_v1_models_works_too():
    ev = variant(DEV_ADAPTERS)
    assert not objects(ev, "AgentgatewayPolicy")
    [route] = [r for r in objects(ev, "HTTPRoute") if r["metadata"]["name"] == "llm-serving"]
    [rule] = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]


def test_a_name_served_twice_cannot_reach_the_routing_map():
    with pytest.raises(ValueError, match="served twice"):
        body_routing.base_model_map({"a": ["x"], "b": ["x"]})


# --- config errors ---------------------------------------------------------------------------------

BASE = {
    "cloud": "gcp",
    "cluster": {"gcpProject": "acme-llm-dev"},
    "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}],
    "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4"}],
}
ENTRANCE = {"hostname": "llm.acme.io", "picker": {"failureMode": "FailOpen"}}


def problems(raw: dict) -> list[str]:
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")
    return err.value.problems


def test_the_failure_mode_must_be_chosen_and_spelt_as_the_crd_spells_it():
    assert problems({**BASE, "exposure": {"entrance": {"hostname": "llm.acme.io", "picker": {}}}}) == [
        "Pulumi.test.yaml: exposure.entrance.picker.failureMode: required key is missing"
    ]
    [line] = problems({**BASE, "exposure": {"entrance": {**ENTRANCE, "picker": {"failureMode": "FailClosed"}}}})
    assert "exposure.entrance.picker.failureMode" in line and "use FailClose" in line
    [line] = problems(
        {**BASE, "exposure": {"entrance": {**ENTRANCE, "picker": {"failureMode": "FailOpen", "replicas": 1}}}}
    )
    assert "exposure.entrance.picker.replicas" in line


def test_several_base_models_share_the_gke_gateway_and_agentgateway_alike():
    two = {
        **BASE,
        "models": [
            {"repo": "a/b", "revision": "0" * 40, "pool": "l4", "name": "m1"},
            {"repo": "a/b", "revision": "0" * 40, "pool": "l4", "name": "m2"},
        ],
        "exposure": {"entrance": ENTRANCE},
    }
    # GKE through the Body-Based Router (components/entrance/bbr.py), EKS through agentgateway;
    # tests/components/entrance/test_body_routing.py follows the requests of both.
    cfg.parse_stack_config(two, "Pulumi.test.yaml")
    cfg.parse_stack_config(
        {**two, "cloud": "aws", "cluster": {}, "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}]},
        "Pulumi.test.yaml",
    )


@pytest.mark.parametrize(
    "raw, key, words",
    [
        (
            {**BASE, "exposure": {"entrance": {**ENTRANCE, "gatewayClass": "mine"}}},
            "exposure.entrance.gatewayClass",
            "cloud existing only",
        ),
        (
            {**BASE, "exposure": {"entrance": ENTRANCE, "gateway": {"name": "g", "namespace": "n"}}},
            "exposure.gateway",
            "remove exposure.gateway",
        ),
        (
            {
                **BASE,
                "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4", "engine": "kserve"}],
                "exposure": {"entrance": ENTRANCE},
            },
            "models[0].engine",
            "use engine vllm",
        ),
        (
            {
                **BASE,
                "cloud": "existing",
                "cluster": {"kubeconfig": "/k", "rwxStorageClass": "nfs"},
                "exposure": {"entrance": ENTRANCE},
            },
            "exposure.entrance.gatewayClass",
            "name the GatewayClass",
        ),
        (
            {**BASE, "exposure": {"entrance": {**ENTRANCE, "tls": {"certificate": "secret"}}}},
            "exposure.entrance.tls",
            "name the kubernetes.io/tls Secret in secretName",
        ),
        (
            {**BASE, "exposure": {"entrance": {**ENTRANCE, "hostname": "https://llm.acme.io/"}}},
            "exposure.entrance.hostname",
            "is not a hostname",
        ),
    ],
)
def test_entrance_config_errors_name_the_key_and_the_fix(raw, key, words):
    found = problems(raw)
    assert any(line.startswith(f"Pulumi.test.yaml: {key}") and words in line for line in found), found


def test_a_documentation_host_name_is_a_warning_in_the_plan(evaluations):
    assert any("llm.example.com is a documentation domain" in w for w in evaluations["prod"].outputs["warnings"])


def test_the_plan_shows_the_entrance_and_what_is_not_established(evaluations):
    from offline_plan.write import render_plan

    prod = render_plan(evaluations["prod"], [], [])
    assert "## Entrance" in prod and "- **Base URL (every model and adapter)**: https://llm.example.com/v1" in prod
    assert "helm show chart oci://ghcr.io/llm-d/charts/llm-d-router-gateway --version v0.10.0" in prod
    assert "helm show chart oci://cr.agentgateway.dev/charts/agentgateway --version v1.4.1" in prod
    assert "aws elb describe-load-balancer-attributes" in prod
    dev = render_plan(evaluations["dev"], [], [])
    assert (
        "gcloud certificate-manager certificates describe <name> --location <region>" in dev
        and "agentgateway" not in dev.split("## Entrance")[1].split("## ")[0]
    )


def test_aliases_are_rewritten_by_the_picker_of_their_own_pool():
    ev = variant(ADAPTERS)
    rewrites = {r["metadata"]["name"]: r for r in objects(ev, "InferenceModelRewrite")}
    assert set(rewrites) == {"llama-3-1-8b-instruct-aliases"}  # the 70B model has no alias in this variant
    spec = rewrites["llama-3-1-8b-instruct-aliases"]["spec"]
    assert spec["poolRef"] == {
        "group": "inference.networking.k8s.io",
        "kind": "InferencePool",
        "name": "llama-3-1-8b-instruct",
    }
    targets = {
        rule["targets"][0]["modelRewrite"]: [m["model"]["value"] for m in rule["matches"]] for rule in spec["rules"]
    }
    assert targets == {"llama-3-1-8b-instruct": ["meta-llama/Llama-3.1-8B-Instruct"], "llama-sql": ["sql"]}
    assert ev.outputs["endpoints"]["aliases"] == {
        "meta-llama/Llama-3.1-8B-Instruct": "llama-3-1-8b-instruct",
        "sql": "llama-sql",
    }
    # The pickers find the kind when they start: its CRDs come before the picker releases.
    from tests.support.first_apply import ApplyGraph

    graph = ApplyGraph(ev)
    crds = [r for r in ev.resources if r.type == "kubernetes:yaml/v2:ConfigFile" and "llm-d-router" in r.name]
    releases = [r for r in ev.of_type(RELEASE) if r.inputs["chart"] == picker.CHART]
    assert crds and releases and all(graph.waits_for(rel, crds[0]) for rel in releases)


def test_the_committed_stacks_accept_the_hub_repo_id_as_an_alias(evaluations):
    for name in ("dev", "prod"):
        aliases = evaluations[name].outputs["endpoints"]["aliases"]
        assert aliases["meta-llama/Llama-3.1-8B-Instruct"] == "llama-3-1-8b-instruct"


@pytest.mark.parametrize(
    "aliases, key, words",
    [
        (["has space"], "models[0].aliases", "not a usable model name"),
        (["m1"], "models[0].aliases[0]", "is already the name of models[0]"),
    ],
)
def test_bad_or_duplicate_aliases_are_refused(aliases, key, words):
    raw = {
        **BASE,
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4", "name": "m1", "aliases": aliases}],
        "exposure": {"entrance": ENTRANCE},
    }
    found = problems(raw)
    assert any(line.startswith(f"Pulumi.test.yaml: {key}") and words in line for line in found), found


def test_aliases_need_the_entrance():
    raw = {**BASE, "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4", "aliases": ["org/b"]}]}
    assert problems(raw) == [
        (
            "Pulumi.test.yaml: models[0].aliases: aliases are rewritten by the entrance's endpoint "
            "picker; they need exposure.entrance"
        )
    ]
