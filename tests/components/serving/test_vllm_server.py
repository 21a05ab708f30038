"""VllmServer under Pulumi mocks: what it asks the cluster for, validated against the real schemas."""

from __future__ import annotations

import json

import pulumi
import pytest

from common import contract
from components.serving import engine_args as vllm_args
from components.serving.vllm import GatewayExposure, ServerStorage, VllmServer, VllmServerArgs
from offline_plan.mock_runtime import run_in_mocks, secret_paths
from tests.support.addon_fixtures import crds_present
from tests.support.model_plans import LLAMA_8B, LLAMA_70B, LLAMA_70B_TWO_NODES, placement
from tests.support.schemas import validate_all
from tests.support.unwrap import unwrap_secrets
from tests.support.vllm_runs import API_KEY_VALUE, NAMESPACE, evaluate


def raw_objects(ev):
    return [r.inputs for r in ev.resources if r.is_kubernetes_object]


def kind(objects, k):
    return [o for o in objects if o["kind"] == k]


def one(objects, k):
    found = kind(objects, k)
    assert len(found) == 1, f"expected one {k}, got {len(found)}"
    return found[0]


def containers(pod_template):
    return pod_template["spec"]["containers"]


def test_single_node_model_is_a_deployment_with_gpu_placement():
    p, _, objs = evaluate(LLAMA_70B)
    assert not kind(objs, "LeaderWorkerSet")
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]
    c = containers(pod)[0]
    assert c["command"] == ["vllm", "serve"]
    assert c["args"] == vllm_args.serve_args(p)
    # The numbers the plan decided, read back from the container as vLLM will parse them.
    args = c["args"]
    value = lambda flag: args[args.index(flag) + 1]  # noqa: E731
    assert args[0] == f"{contract.MODEL_MOUNT_PATH}/{p.repo}/{p.revision}"
    assert (value("--tensor-parallel-size"), value("--max-model-len")) == ("4", str(p.max_model_len))
    assert value("--served-model-name") == p.served_name
    assert c["image"] == p.model.image and not c["image"].endswith(":latest")
    gpus = str(p.gpus_per_pod)
    assert p.gpus_per_pod == 4
    assert c["resources"]["limits"][contract.GPU_RESOURCE] == gpus == c["resources"]["requests"][contract.GPU_RESOURCE]
    # Toleration matches the pool's taint; node selector is the pool's labels.
    pl = placement(p)
    tol = pod["spec"]["tolerations"]
    assert any(t["key"] == pl.taint_key and t["effect"] == pl.taint_effect and t["operator"] == "Exists" for t in tol)
    assert pod["spec"]["nodeSelector"] == pl.node_selector
    # /dev/shm is memory-backed with a size limit, mounted in the server.
    shm = next(v for v in pod["spec"]["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"] == "8Gi"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    # Weights from the read-only claim at the contract's mount path.
    models = next(v for v in pod["spec"]["volumes"] if v["name"] == "models")
    assert models["persistentVolumeClaim"] == {"claimName": "models-rwx", "readOnly": True}
    assert {"name": "models", "mountPath": contract.MODEL_MOUNT_PATH, "readOnly": True} in c["volumeMounts"]
    assert pod["spec"]["serviceAccountName"] == "model-reader"
    spread = pod["spec"]["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "kubernetes.io/hostname"


def test_startup_budget_covers_the_load_estimate_and_is_annotated():
    p, _, objs = evaluate(LLAMA_70B)
    dep = one(objs, "Deployment")
    c = containers(dep["spec"]["template"])[0]
    s = c["startupProbe"]
    assert s["httpGet"]["path"] == "/health" and "initialDelaySeconds" not in s
    assert s["failureThreshold"] * s["periodSeconds"] >= p.startup_budget_seconds >= p.load_seconds
    for meta in (dep["metadata"], dep["spec"]["template"]["metadata"]):
        assert meta["annotations"][contract.ANNOTATION_LOAD_SECONDS] == str(round(p.load_seconds))
    assert dep["spec"]["template"]["metadata"]["labels"][contract.LABEL_REVISION] == p.revision
    # Readiness works with the API key set (vLLM guards /v1/*, not /health).
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert c["livenessProbe"]["failureThreshold"] * c["livenessProbe"]["periodSeconds"] >= 120
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    drain = int(c["args"][c["args"].index("--shutdown-timeout") + 1])
    assert grace > drain + c["lifecycle"]["preStop"]["sleep"]["seconds"]


def test_no_literal_secret_anywhere():
    _, ev, objs = evaluate(LLAMA_8B)
    dep = one(objs, "Deployment")
    env = containers(dep["spec"]["template"])[0]["env"]
    key = next(e for e in env if e["name"] == "VLLM_API_KEY")
    assert "value" not in key and key["valueFrom"]["secretKeyRef"]["key"] == "api-key"
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in env
    # The key only travels inside the Secret's data, as a Pulumi secret, never in the workload or args.
    for obj in raw_objects(ev):
        if obj["kind"] == "Secret":
            assert secret_paths(obj) == ["stringData"]
            assert unwrap_secrets(obj)["stringData"] == {"api-key": API_KEY_VALUE}
        else:
            assert secret_paths(obj) == [], obj["kind"]
            assert API_KEY_VALUE not in json.dumps(unwrap_secrets(obj), default=str), obj["kind"]
    secret = one(objs, "Secret")
    assert secret["metadata"]["name"] == key["valueFrom"]["secretKeyRef"]["name"]


def test_readiness_checks_the_engine_with_or_without_api_key():
    # /health awaits the engine's health check in 0.32; /v1/models would pass with a dead engine.
    _, _, with_key = evaluate(LLAMA_8B)
    _, _, without = evaluate(LLAMA_8B, api_key=None)
    probes_of = [containers(one(objs, "Deployment")["spec"]["template"])[0] for objs in (with_key, without)]
    assert [c["readinessProbe"]["httpGet"]["path"] for c in probes_of] == ["/health", "/health"]
    assert probes_of[0]["readinessProbe"] == probes_of[1]["readinessProbe"]
    assert not any(e["name"] == "VLLM_API_KEY" for e in probes_of[1]["env"])
    assert not kind(without, "Secret")


def test_model_spanning_nodes_is_a_leader_worker_set():
    p, _, objs = evaluate(LLAMA_70B_TWO_NODES)
    assert not kind(objs, "Deployment")
    lws = one(objs, "LeaderWorkerSet")
    tpl = lws["spec"]["leaderWorkerTemplate"]
    assert tpl["size"] == p.nodes_per_replica == 2
    assert tpl["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader = containers(tpl["leaderTemplate"])[0]
    worker = containers(tpl["workerTemplate"])[0]
    assert "ray start --head" in leader["command"][2]
    assert leader["args"] == vllm_args.serve_args(p)
    args = leader["args"]
    assert args[args.index("--pipeline-parallel-size") + 1] == "2"
    assert args[args.index("--distributed-executor-backend") + 1] == "ray"
    assert "$LWS_LEADER_ADDRESS" in worker["command"][2]
    for c in (leader, worker):
        assert c["resources"]["limits"][contract.GPU_RESOURCE] == "8"
        assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert leader["startupProbe"]["httpGet"]["path"] == "/health"
    # Workers serve no HTTP; their probes watch the raylet's fixed port.
    assert worker["startupProbe"]["tcpSocket"]["port"] == "ray-node"
    assert "--node-manager-port=6380" in worker["command"][2]
    # The leader waits for the whole group to join Ray before loading, and its budget counts that.
    assert "LWS_GROUP_SIZE" in leader["command"][2] and "ray.nodes()" in leader["command"][2]
    assert leader["command"][2].index("LWS_GROUP_SIZE") < leader["command"][2].index("exec vllm serve")
    probe = leader["startupProbe"]
    assert probe["failureThreshold"] * probe["periodSeconds"] >= p.load_seconds * 1.5 + p.worker_wait_seconds > 0
    # The Service reaches only leaders (workers serve no HTTP).
    svc = one(objs, "Service")
    assert (
        svc["spec"]["selector"][contract.LABEL_COMPONENT]
        == tpl["leaderTemplate"]["metadata"]["labels"][contract.LABEL_COMPONENT]
    )
    assert (
        tpl["workerTemplate"]["metadata"]["labels"][contract.LABEL_COMPONENT]
        != svc["spec"]["selector"][contract.LABEL_COMPONENT]
    )


def test_client_service_never_takes_the_leader_worker_sets_name():
    # The LWS controller owns a headless Service named after the LeaderWorkerSet.
    _, ev, objs = evaluate(LLAMA_70B_TWO_NODES)
    lws, svc = one(objs, "LeaderWorkerSet"), one(objs, "Service")
    assert svc["metadata"]["name"] != lws["metadata"]["name"]
    assert svc["metadata"]["name"] == f"{lws['metadata']['name']}-api"
    assert ev.server["endpoint"] == f"http://{svc['metadata']['name']}.{NAMESPACE}.svc.cluster.local:8000/v1"
    # Deployments are named alike, so every model's API Service is <model>-api.
    _, _, single = evaluate(LLAMA_8B)
    assert one(single, "Service")["metadata"]["name"] == f"{one(single, 'Deployment')['metadata']['name']}-api"


def test_bucket_loading_has_no_volume_and_streams():
    storage = ServerStorage(
        weights_uri="s3://bucket/models/meta-llama/Llama-3.1-8B-Instruct/rev", service_account="reader"
    )
    _, _, objs = evaluate(LLAMA_8B, storage=storage)
    pod = one(objs, "Deployment")["spec"]["template"]
    c = containers(pod)[0]
    assert c["args"][0].startswith("s3://") and "runai_streamer" in c["args"]
    assert not any(v["name"] == "models" for v in pod["spec"]["volumes"])
    assert pod["spec"]["serviceAccountName"] == "reader"


def test_chat_template_is_mounted_from_a_config_map():
    _, _, objs = evaluate({**LLAMA_8B, "chatTemplate": "{{ messages }}"}, has_chat_template=False)
    cm = next(o for o in kind(objs, "ConfigMap") if vllm_args.CHAT_TEMPLATE_FILE in o.get("data", {}))
    pod = one(objs, "Deployment")["spec"]["template"]
    vol = next(v for v in pod["spec"]["volumes"] if v["name"] == "chat-template")
    assert vol["configMap"]["name"] == cm["metadata"]["name"]


def test_replicas_get_pdb_and_surge_rollout():
    _, _, objs = evaluate({**LLAMA_70B, "replicas": 2})
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    _, _, single = evaluate(LLAMA_70B)
    assert not kind(single, "PodDisruptionBudget")


def test_pool_without_room_for_a_surge_replica_recreates():
    _, _, objs = evaluate({**LLAMA_70B_TWO_NODES, "pool": "h100", "replicas": 2})
    assert one(objs, "LeaderWorkerSet")["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] == 0
    _, _, objs = evaluate({**LLAMA_70B, "pool": "h100-one", "replicas": 2})
    assert one(objs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}


def test_keda_scaled_object_from_cold_start():
    model = {**LLAMA_70B, "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "queueThreshold": 8}}
    p, _, objs = evaluate(model)
    so = one(objs, "ScaledObject")
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": p.served_name}
    assert spec["minReplicaCount"] == 1 and spec["maxReplicaCount"] == 3
    # Two triggers, one per signal: the HPA KEDA manages scales on whichever asks for more replicas.
    queue, kv = spec["triggers"]
    assert (queue["name"], kv["name"]) == ("queue-depth", "kv-cache-usage")
    assert queue["metadata"]["threshold"] == "8" and kv["metadata"]["threshold"] == "0.8"
    assert all(
        t["metricType"] == "AverageValue" and f'model_name="{p.served_name}"' in t["metadata"]["query"]
        for t in (queue, kv)
    )
    assert queue["metadata"]["query"].startswith("sum(vllm:num_requests_waiting{")
    assert kv["metadata"]["query"].startswith("sum(vllm:kv_cache_usage_perc{")
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= p.load_seconds
    assert not kind(objs, "HorizontalPodAutoscaler")
    backlog = next(
        r
        for r in one(objs, "PrometheusRule")["spec"]["groups"][0]["rules"]
        if r.get("alert") == "VllmRequestQueueBacklog"
    )
    assert backlog["expr"].endswith("> 8")


def test_hpa_kind_uses_external_metric():
    model = {**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 2}}
    p, _, objs = evaluate(model)
    hpa = one(objs, "HorizontalPodAutoscaler")
    queue, kv = (m["external"] for m in hpa["spec"]["metrics"])
    assert (queue["metric"]["name"], kv["metric"]["name"]) == ("vllm_num_requests_waiting", "vllm_kv_cache_usage_perc")
    assert (
        queue["metric"]["selector"]["matchLabels"]
        == kv["metric"]["selector"]["matchLabels"]
        == {"model_name": p.served_name}
    )
    assert queue["target"] == {"type": "AverageValue", "averageValue": "5"}
    assert kv["target"] == {"type": "AverageValue", "averageValue": "0.8"}
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= p.load_seconds
    assert not kind(objs, "ScaledObject")


def test_scaled_leader_worker_set_targets_the_lws():
    model = {**LLAMA_70B_TWO_NODES, "autoscaling": {"enabled": True, "maxReplicas": 2}}
    _, _, objs = evaluate(model)
    assert one(objs, "ScaledObject")["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"


def test_gateway_route_and_monitoring():
    _, _, objs = evaluate(
        LLAMA_8B,
        gateway=GatewayExposure(name="public", namespace="gateways", hostname="llm.example.com"),
        monitoring_labels={"release": "kube-prometheus-stack"},
    )
    route = one(objs, "HTTPRoute")
    assert route["spec"]["parentRefs"][0]["name"] == "public"
    assert route["spec"]["hostnames"] == ["llm.example.com"]
    svc = one(objs, "Service")
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["ports"][0]["name"] == "http"
    assert all(rule["backendRefs"][0]["name"] == svc["metadata"]["name"] for rule in route["spec"]["rules"])
    sm = one(objs, "ServiceMonitor")
    assert sm["spec"]["endpoints"][0] == {"port": "http", "path": "/metrics", "interval": "15s"}
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert all(sm["spec"]["selector"]["matchLabels"][k] == v for k, v in svc["spec"]["selector"].items())
    groups = one(objs, "PrometheusRule")["spec"]["groups"]
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    assert {
        "VllmNoReadyReplica",
        "VllmRequestErrors",
        "VllmKvCacheNearlyFull",
        "VllmPreemptions",
        "VllmStartupRestartLoop",
        "VllmTimeToFirstTokenSloFastBurn",
        "VllmInterTokenLatencySloSlowBurn",
    } <= alerts
    assert sum("record" in r for g in groups for r in g["rules"]) == 2 * 5  # two SLIs x five windows
    board = next(o for o in kind(objs, "ConfigMap") if o["metadata"]["labels"].get("grafana_dashboard") == "1")
    assert json.loads(next(iter(board["data"].values())))["panels"]


def route_request(route: dict, path: str) -> str | None:
    """The path an HTTPRoute hands its backend for a request path (Gateway API semantics), or None.

    PathPrefix matches whole path segments; ReplacePrefixMatch swaps the matched prefix.
    """
    for rule in route["spec"]["rules"]:
        for match in rule["matches"]:
            prefix = match["path"]["value"]
            assert match["path"]["type"] == "PathPrefix"
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                rewrite = next(
                    (f["urlRewrite"]["path"] for f in rule.get("filters", []) if f["type"] == "URLRewrite"), None
                )
                if rewrite is None:
                    return path
                assert rewrite["type"] == "ReplacePrefixMatch"
                rest = path[len(prefix) :]
                return (rewrite["replacePrefixMatch"].rstrip("/") + rest) or "/"
    return None


def test_each_model_has_its_own_gateway_path_and_never_exposes_metrics():
    gw = GatewayExposure(name="public", namespace="gateways", hostname="llm.example.com")
    routes = {}
    for model in (LLAMA_8B, {**LLAMA_8B, "name": "llama-8b-long", "maxModelLen": 16384}):
        p, ev, objs = evaluate(model, gateway=gw)
        routes[p.served_name] = one(objs, "HTTPRoute")
        # The public endpoint carries the model's path; the in-cluster one is the Service's.
        assert ev.server["endpoint"] == f"https://llm.example.com/{p.served_name}/v1"
        assert ev.server["internal_endpoint"].startswith(f"http://{p.served_name}-api.{NAMESPACE}.svc")
        for rule in routes[p.served_name]["spec"]["rules"]:
            # Gateway API's CEL rule: a ReplacePrefixMatch rewrite needs exactly one PathPrefix match.
            assert len(rule["matches"]) == 1 and rule["matches"][0]["path"]["type"] == "PathPrefix"
    (a, ra), (b, rb) = routes.items()
    assert route_request(ra, f"/{a}/v1/chat/completions") == "/v1/chat/completions"
    assert route_request(ra, f"/{a}/v1") == "/v1"
    assert route_request(ra, f"/{a}/health") == "/health"
    assert route_request(rb, f"/{b}/v1/models") == "/v1/models"
    # Each route takes its own model's traffic only, and neither serves /metrics or unprefixed paths.
    assert route_request(ra, f"/{b}/v1/chat/completions") is None
    assert route_request(rb, f"/{a}/v1/chat/completions") is None
    for route, name in ((ra, a), (rb, b)):
        for path in (f"/{name}/metrics", "/metrics", "/v1/models", f"/{name}/v1x", f"/{name}/"):
            assert route_request(route, path) is None, path
    validate_all([routes[a], routes[b]])


def test_gateway_without_hostname_keeps_the_in_cluster_endpoint():
    p, ev, _ = evaluate(LLAMA_8B, gateway=GatewayExposure(name="public", namespace="gateways"))
    assert (
        ev.server["endpoint"]
        == ev.server["internal_endpoint"]
        == f"http://{p.served_name}-api.{NAMESPACE}.svc.cluster.local:8000/v1"
    )


def test_hpa_kind_exposes_the_adapter_rule_it_needs():
    _, ev, _ = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 2}})
    from components.serving import scaling

    assert ev.server["server"].prometheus_adapter_rules == scaling.prometheus_adapter_rules()
    _, keda, _ = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "maxReplicas": 2}})
    assert keda.server["server"].prometheus_adapter_rules == []


@pytest.mark.parametrize(
    "model,extra",
    [
        (LLAMA_8B, {}),
        ({**LLAMA_70B, "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 3}}, {}),
        (
            {**LLAMA_70B_TWO_NODES, "autoscaling": {"enabled": True, "maxReplicas": 2}},
            {"gateway": GatewayExposure(name="gw", namespace="gateways")},
        ),
        ({**LLAMA_8B, "chatTemplate": "{{ x }}", "autoscaling": {"enabled": True, "kind": "hpa"}}, {}),
    ],
)
def test_every_object_validates_against_its_schema(model, extra):
    _, ev, objs = evaluate(model, has_chat_template=False, **extra)
    assert objs
    validate_all([unwrap_secrets(o) for o in raw_objects(ev)])


def _stack_plans(stack: str):
    import stack_config as config
    from offline_plan import mock_runtime
    from planner import plan

    values, secrets = mock_runtime.stack_file_config(stack)
    raw, _ = config.decode_config_values(values, set(secrets))
    sc = config.parse_stack_config(raw, f"Pulumi.{stack}.yaml")
    return sc, plan.build_plans(sc, plan.default_metadata_loader())


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_startup_budget_covers_load_for_every_model_in_the_stacks(stack, monkeypatch):
    import stack_config as config
    from offline_plan import mock_runtime

    if not (mock_runtime.ROOT / f"Pulumi.{stack}.yaml").exists():
        pytest.skip(f"no Pulumi.{stack}.yaml")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # committed model-metadata only, no Hub call
    sc, plans = _stack_plans(stack)
    served = [p for p in plans if p.model.engine == "vllm"]
    assert served
    for p in served:

        def program(p=p):
            VllmServer(
                p.served_name,
                VllmServerArgs(
                    plan=p,
                    placement=placement(p),
                    namespace=sc.modelStore.namespace,
                    crds=crds_present(),
                    storage=ServerStorage(claim_name="models"),
                    machine=config.pool_machine(sc.cloud, p.pool),
                    api_key=pulumi.Output.secret("k"),
                ),
            )

        ev = run_in_mocks(program)
        workload = next(o for o in raw_objects(ev) if o["kind"] in ("Deployment", "LeaderWorkerSet"))
        spec = workload["spec"]
        pod = spec["template"] if workload["kind"] == "Deployment" else spec["leaderWorkerTemplate"]["leaderTemplate"]
        probe = containers(pod)[0]["startupProbe"]
        assert probe["failureThreshold"] * probe["periodSeconds"] >= p.load_seconds * 1.5, p.served_name
        assert int(workload["metadata"]["annotations"][contract.ANNOTATION_LOAD_SECONDS]) == round(p.load_seconds)
        validate_all([unwrap_secrets(o) for o in raw_objects(ev)])


@pytest.mark.parametrize(
    "model",
    [
        LLAMA_70B,
        {**LLAMA_8B, "replicas": 2},
        {**LLAMA_70B_TWO_NODES, "autoscaling": {"enabled": True, "maxReplicas": 2}},
    ],
)
def test_the_project_policy_pack_finds_nothing_mandatory(model):
    from policies.check import check_objects
    from policies.registry import MANDATORY

    _, ev, _ = evaluate(model)
    verdicts = check_objects([unwrap_secrets(o) for o in raw_objects(ev)], None)
    blocking = [f"{v.kind}/{v.name}: {v.policy}: {v.message}" for v in verdicts if v.level == MANDATORY]
    assert not blocking


def test_storage_without_weights_is_refused():
    with pytest.raises(ValueError, match=r"claim_name .* or weights_uri"):
        evaluate(LLAMA_8B, storage=ServerStorage(service_account="reader"))
