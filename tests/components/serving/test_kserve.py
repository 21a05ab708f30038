"""KServeModel under Pulumi mocks: the InferenceService and friends, checked against KServe v0.20's CRDs."""

from __future__ import annotations

import re

import pulumi
import pytest

from common import contract, engine, images
from components.cluster.interface import ModelBucket, ServiceAccountBinding
from components.serving import engine_args as vllm_args
from components.serving import kserve, probes
from offline_plan.mock_runtime import run_in_mocks, secret_paths
from tests.support.addon_fixtures import crds_present
from tests.support.kserve_runs import BASELINE, NAMESPACE, TOKEN, evaluate, objects, s3_bucket
from tests.support.model_plans import LLAMA_8B, LLAMA_70B, LLAMA_70B_TWO_NODES, REVISION, make_plan, placement
from tests.support.schemas import validate_all


def isvc(ev) -> dict:
    found = objects(ev, "InferenceService")
    assert len(found) == 1
    return found[0]


def test_every_object_validates_against_the_upstream_schemas():
    for model, storage, extra in [
        (LLAMA_8B, "bucket", {}),
        (LLAMA_8B, "hf", {}),
        (
            {**LLAMA_70B, "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 1, "maxReplicas": 3}},
            "bucket",
            {},
        ),
        ({**LLAMA_70B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 3}}, "hf", {}),
        (
            {**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
            "hf",
            {"canary_baseline_revision": BASELINE},
        ),
        (
            {**LLAMA_8B, "canaryTrafficPercent": 25, "canaryBaselineRevision": BASELINE},
            "bucket",
            {"canary_baseline_revision": BASELINE},
        ),
    ]:
        _, ev = evaluate(model, storage=storage, **extra)
        objs = objects(ev)
        assert {"InferenceService", "PodMonitor"} <= {o["kind"] for o in objs}
        validate_all(objs)


def runtime(ev) -> dict:
    found = objects(ev, "ServingRuntime")
    assert len(found) == 1
    return found[0]


def test_standard_mode_on_the_programs_own_runtime_with_the_vllm_paths_command_line():
    p, ev = evaluate({**LLAMA_8B, "kvCacheDtype": "fp8", "dtype": "bfloat16"})
    obj = isvc(ev)
    assert obj["apiVersion"] == "serving.kserve.io/v1beta1"
    assert obj["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    model = obj["spec"]["predictor"]["model"]
    rt = runtime(ev)
    # The model selects the program's runtime, in the model's namespace, which lists its format
    # without auto-selection (only this InferenceService uses it).
    assert model["runtime"] == rt["metadata"]["name"] == f"{p.served_name}-vllm-runtime"
    assert rt["metadata"]["namespace"] == NAMESPACE
    assert model["modelFormat"] == {"name": "huggingface"}
    assert rt["spec"]["supportedModelFormats"] == [{"name": "huggingface", "autoSelect": False}]
    assert "runtimeVersion" not in model  # it would rewrite the image's tag (utils.go UpdateImageTag)
    # `vllm serve` on the weights the storage initializer put at /mnt/models, with the vLLM path's
    # flags: the same derivation, only the model dir and the port differ.
    [container] = rt["spec"]["containers"]
    assert container["command"] == ["vllm", "serve"] and "args" not in container
    args = model["args"]
    assert args == vllm_args.serve_args(p, model_dir="/mnt/models", port=kserve.HTTP_PORT)
    assert args[0] == "/mnt/models" and args[1:3] == ["--served-model-name", p.served_name]
    for flag, value in [
        ("--max-model-len", str(p.max_model_len)),
        ("--tensor-parallel-size", str(p.tensor_parallel_size)),
        ("--gpu-memory-utilization", "0.9"),
        ("--kv-cache-dtype", "fp8"),
        ("--dtype", "bfloat16"),
        ("--shutdown-timeout", str(probes.drain_seconds(p))),
        ("--port", "8080"),
    ]:
        assert args[args.index(flag) + 1] == value, flag
    # The weights are local: no bucket streaming, no huggingfaceserver flags.
    assert "--load-format" not in args
    assert not [a for a in args if a.startswith(("--model_name", "--backend"))]
    # The container port the predictor Service targets is vLLM's port.
    assert model["ports"][0]["containerPort"] == container["ports"][0]["containerPort"] == 8080
    assert obj["metadata"]["annotations"][contract.ANNOTATION_ENGINE_VERSION] == engine.VLLM_VERSION


def test_the_runtime_runs_the_pinned_vllm_image_through_the_pull_through_cache():
    _, ev = evaluate(LLAMA_8B)
    [container] = runtime(ev)["spec"]["containers"]
    assert container["image"] == images.reference("vllm") == engine.VLLM_IMAGE
    assert container["name"] == "kserve-container"  # the storage initializer mounts /mnt/models into it
    mirrors = {"docker.io": "123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub"}
    _, ev = evaluate(LLAMA_8B, image_mirrors=mirrors)
    [container] = runtime(ev)["spec"]["containers"]
    assert container["image"] == images.mirrored(engine.VLLM_IMAGE, mirrors)
    assert container["image"].startswith(mirrors["docker.io"] + "/vllm/vllm-openai:v0.32.0")
    # models[].image is honoured, as on the vLLM path.
    _, ev = evaluate({**LLAMA_8B, "image": "registry.example.com/vllm/vllm-openai:v0.32.0-patched"})
    assert runtime(ev)["spec"]["containers"][0]["image"] == "registry.example.com/vllm/vllm-openai:v0.32.0-patched"


def test_the_inference_service_waits_for_its_runtime():
    _, ev = evaluate(LLAMA_8B)
    [rt] = [r for r in ev.resources if r.is_kubernetes_object and r.inputs.get("kind") == "ServingRuntime"]
    [svc] = [r for r in ev.resources if r.is_kubernetes_object and r.inputs.get("kind") == "InferenceService"]
    assert rt.urn in svc.dependencies


def test_engine_flags_follow_the_plan_on_a_bigger_model():
    p, ev = evaluate(LLAMA_70B)
    assert p.tensor_parallel_size > 1
    args = isvc(ev)["spec"]["predictor"]["model"]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == str(p.tensor_parallel_size)
    limits = isvc(ev)["spec"]["predictor"]["model"]["resources"]["limits"]
    assert limits[contract.GPU_RESOURCE] == str(p.tensor_parallel_size)


def test_gpu_limits_equal_requests_and_pool_placement():
    p, ev = evaluate(LLAMA_8B)
    pred = isvc(ev)["spec"]["predictor"]
    res = pred["model"]["resources"]
    assert res["limits"][contract.GPU_RESOURCE] == res["requests"][contract.GPU_RESOURCE] == str(p.gpus_per_pod)
    place = placement(p)
    assert pred["nodeSelector"] == place.node_selector
    assert place.toleration in pred["tolerations"]
    assert pred["tolerations"][0]["key"] == contract.GPU_TAINT_KEY


def test_probe_budget_covers_the_load_estimate_with_the_vllm_path_numbers():
    p, ev = evaluate(LLAMA_70B)
    obj = isvc(ev)
    model = obj["spec"]["predictor"]["model"]
    startup = model["startupProbe"]
    budget = startup["periodSeconds"] * startup["failureThreshold"]
    assert budget == p.startup_budget_seconds >= p.load_seconds
    pp = probes.probe_plan(p)
    assert startup["failureThreshold"] == pp.startup_failure_threshold
    # vLLM's own /health on the runtime's port: it answers once the engine is built, turns 503 when
    # the engine dies, and is outside the API-key guard (components/serving/probes.py).
    health = {"path": "/health", "port": kserve.HTTP_PORT}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert model[probe]["httpGet"] == health, probe
    # Liveness keeps the vLLM path's lenient numbers: never kill a busy engine for one slow answer.
    assert model["livenessProbe"]["failureThreshold"] == probes.LIVENESS_FAILURE_THRESHOLD
    assert model["livenessProbe"]["periodSeconds"] == probes.LIVENESS_PERIOD_SECONDS
    # The load estimate rides on the ISVC and on the predictor pods (the policy pack reads it).
    for annotation_map in (obj["metadata"]["annotations"], obj["spec"]["predictor"]["annotations"]):
        assert annotation_map[contract.ANNOTATION_LOAD_SECONDS] == str(round(p.load_seconds))


def test_bucket_storage_pins_the_commit_and_reads_as_the_reader_identity():
    p, ev = evaluate(LLAMA_8B)
    pred = isvc(ev)["spec"]["predictor"]
    assert pred["model"]["storageUri"] == f"s3://team-models/models/{p.repo}/{p.revision}"
    assert pred["serviceAccountName"] == "model-reader"
    assert not objects(ev, "ClusterStorageContainer")
    assert not objects(ev, "Secret")


def test_gcs_bucket_uri():
    gcs = ModelBucket(
        scheme="gs",
        name="g-models",
        prefix="m",
        writer=ServiceAccountBinding(NAMESPACE, "w"),
        reader=ServiceAccountBinding(NAMESPACE, "r"),
    )
    p, ev = evaluate(LLAMA_8B, bucket=gcs)
    assert isvc(ev)["spec"]["predictor"]["model"]["storageUri"] == f"gs://g-models/m/{p.repo}/{REVISION}"


def test_without_a_bucket_the_model_store_claim_is_used():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(
        plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), claim_name="llama-weights"
    )
    ev = run_in_mocks(lambda: kserve.KServeModel("m", args))
    assert isvc(ev)["spec"]["predictor"]["model"]["storageUri"] == f"pvc://llama-weights/{p.repo}/{p.revision}"


def test_no_weights_source_is_a_clear_error():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present())
    with pytest.raises(kserve.KServeConfigError, match=r"models\[0\].*kserveStorage: hf"):
        kserve.storage_uri(args, p.revision)


def test_hf_storage_pins_the_commit_and_hands_the_token_to_the_initializer_by_reference():
    p, ev = evaluate(LLAMA_8B, storage="hf")
    pred = isvc(ev)["spec"]["predictor"]
    uri = pred["model"]["storageUri"]
    assert uri == f"hf://{p.repo}:{p.revision}" and re.search(r":[0-9a-f]{40}$", uri)
    [csc] = objects(ev, "ClusterStorageContainer")
    assert pred["storageContainerName"] == csc["metadata"]["name"]
    container = csc["spec"]["container"]
    assert container["name"] == "storage-initializer"
    [env] = container["env"]
    assert env["name"] == "HF_TOKEN" and "value" not in env
    [secret] = objects(ev, "Secret")
    assert env["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "HF_TOKEN",
        "optional": False,
    }
    # The regex claims this model's URI only, never every hf:// URI in the cluster.
    [fmt] = csc["spec"]["supportedUriFormats"]
    assert re.fullmatch(fmt["regex"], uri)
    assert not re.fullmatch(fmt["regex"], f"hf://{p.repo}:{BASELINE}")
    assert not re.fullmatch(fmt["regex"], "hf://other/model")
    # The token appears nowhere in the plan except as a Pulumi secret.
    raw = [r.inputs for r in ev.resources]
    assert TOKEN not in str(ev.kubernetes_objects)
    secret_resource = next(r for r in ev.resources if r.type == "kubernetes:core/v1:Secret")
    paths = secret_paths(secret_resource.inputs)
    assert paths and all(path.startswith("stringData") for path in paths)
    assert sum(TOKEN in str(r) for r in raw) == 1


def test_hf_on_a_public_model_without_token_uses_no_storage_container():
    _, ev = evaluate({"repo": "Qwen/Qwen2.5-7B-Instruct", "pool": "l4", "maxModelLen": 4096}, storage="hf", token=None)
    assert not objects(ev, "ClusterStorageContainer")
    assert "storageContainerName" not in isvc(ev)["spec"]["predictor"]


def test_gated_model_on_hf_without_token_is_refused():
    with pytest.raises(kserve.KServeConfigError, match=r"models\[0\].*gated"):
        evaluate({**LLAMA_8B, "gated": True}, storage="hf", token=None)


def test_keda_autoscaling_uses_the_vllm_queue_signal_and_min_replicas():
    p, ev = evaluate(
        {
            **LLAMA_8B,
            "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 2, "maxReplicas": 4, "queueThreshold": 3},
        }
    )
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    pred = obj["spec"]["predictor"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (2, 4)
    # One metric per signal; KServe v0.20 turns each into a KEDA trigger (keda_reconciler.go
    # getKedaMetrics loops over autoScaling.metrics), so the model scales on whichever saturates first.
    queue, kv = pred["autoScaling"]["metrics"]
    for metric in (queue, kv):
        assert metric["type"] == "External" and metric["external"]["metric"]["backend"] == "prometheus"
    assert queue["external"]["metric"]["query"] == (
        f'sum(vllm:num_requests_waiting{{model_name="{p.served_name}", namespace="{NAMESPACE}"}})'
    )
    assert queue["external"]["target"] == {"type": "Value", "value": "3"}
    assert kv["external"]["metric"]["query"] == (
        f'sum(vllm:kv_cache_usage_perc{{model_name="{p.served_name}", namespace="{NAMESPACE}"}})'
    )
    assert kv["external"]["target"] == {"type": "Value", "value": "0.8"}
    assert not objects(ev, "HorizontalPodAutoscaler")


def test_hpa_autoscaling_is_ours_on_the_predictor_deployment():
    p, ev = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 3}})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "external"
    assert "autoScaling" not in obj["spec"]["predictor"]
    [hpa] = objects(ev, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"{p.served_name}-predictor",
    }
    assert hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"] == {"model_name": p.served_name}


def test_fixed_replicas_without_autoscaling():
    _, ev = evaluate({**LLAMA_8B, "replicas": 2})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "none"
    assert (obj["spec"]["predictor"]["minReplicas"], obj["spec"]["predictor"]["maxReplicas"]) == (2, 2)


def test_canary_runs_the_new_commit_beside_the_baseline():
    p, ev = evaluate(
        {**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE}, canary_baseline_revision=BASELINE
    )
    spec = isvc(ev)["spec"]
    assert spec["predictor"]["model"]["storageUri"].endswith(f"/{BASELINE}")
    [canary] = spec["canary"]
    assert canary["trafficPercent"] == 10
    assert canary["predictor"]["name"] == kserve.CANARY_NAME
    assert canary["predictor"]["model"]["storageUri"].endswith(f"/{p.revision}")
    assert not {"minReplicas", "maxReplicas", "autoScaling"} & set(canary["predictor"])


def test_canary_without_baseline_is_refused_in_config():
    from stack_config import ConfigError

    with pytest.raises(ConfigError, match="canaryTrafficPercent needs canaryBaselineRevision"):
        make_plan({"engine": "kserve", **LLAMA_8B, "canaryTrafficPercent": 10})


def test_multi_node_replica_is_refused_with_the_fix():
    with pytest.raises(kserve.KServeConfigError, match="engine: vllm"):
        evaluate(LLAMA_70B_TWO_NODES)


def test_pipeline_parallelism_on_one_node_is_passed_to_vllm_as_on_the_vllm_path():
    # `vllm serve` takes the plan's parallelism as it is (v0.20's huggingfaceserver overrode TP).
    p = make_plan({"engine": "kserve", **LLAMA_70B, "tensorParallelSize": 4, "pipelineParallelSize": 2})
    assert p.nodes_per_replica == 1 and p.pipeline_parallel_size == 2
    kserve.check_servable(p)
    args = kserve.model_args(p)
    assert args[args.index("--tensor-parallel-size") + 1] == "4"
    assert args[args.index("--pipeline-parallel-size") + 1] == "2"


def _merge_list(base: list[dict], patch: list[dict], key: str) -> list[dict]:
    """Strategic merge of a list of objects by its patch merge key (what KServe's merge does)."""
    out = {item[key]: dict(item) for item in base}
    for item in patch:
        out[item[key]] = _merge_maps(out.get(item[key], {}), item)
    return list(out.values())


def _merge_maps(base: dict, patch: dict) -> dict:
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merge_maps(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def merged_container(runtime_container: dict, model: dict) -> dict:
    """The kserve-container KServe v0.20 builds (utils.go MergeRuntimeContainers): the runtime's
    container, the predictor's model container strategic-merged on top (maps by key, env by name,
    ports by containerPort, volumeMounts by mountPath), args concatenated runtime first."""
    model = {k: v for k, v in model.items() if k not in ("modelFormat", "runtime", "storageUri")}
    out = _merge_maps(
        runtime_container, {k: v for k, v in model.items() if k not in ("env", "ports", "volumeMounts", "args")}
    )
    for field, key in (("env", "name"), ("ports", "containerPort"), ("volumeMounts", "mountPath")):
        out[field] = _merge_list(runtime_container.get(field, []), model.get(field, []), key)
    out["args"] = [*runtime_container.get("args", []), *model.get("args", [])]
    return out


def quantity(value: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


@pytest.mark.parametrize("model", [LLAMA_8B, LLAMA_70B, {**LLAMA_8B, "pool": "l4x4"}])
def test_merged_with_the_runtime_the_container_is_the_vllm_paths(model):
    p, ev = evaluate(model, api_key="sk-k", api_key_next="sk-n")
    pred = isvc(ev)["spec"]["predictor"]
    [rc] = runtime(ev)["spec"]["containers"]
    c = merged_container(rc, pred["model"])
    # The pinned image runs the whole `vllm serve` command line, both keys included.
    assert c["image"] == engine.VLLM_IMAGE
    assert [*c["command"], *c["args"]] == ["vllm", "serve", *kserve.model_args(p, rotating=True)]
    res = c["resources"]
    for name, request in res["requests"].items():
        if name in res["limits"]:
            assert quantity(request) <= quantity(res["limits"][name]), (name, res)
    # GPUs limits == requests, and no CPU limit (as the vLLM path: throttling stalls the engine loop).
    assert res["limits"][contract.GPU_RESOURCE] == res["requests"][contract.GPU_RESOURCE] == str(p.gpus_per_pod)
    assert "cpu" not in res["limits"]
    assert [port["containerPort"] for port in c["ports"]] == [kserve.HTTP_PORT]
    # One bounded /dev/shm and the bounded HOME and /tmp emptyDirs of the read-only root.
    shm = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert len(shm) == 1
    volumes = pred["volumes"]
    assert "volumes" not in runtime(ev)["spec"]
    [volume] = [v for v in volumes if v["name"] == shm[0]["name"]]
    assert volume["emptyDir"]["medium"] == "Memory" and volume["emptyDir"]["sizeLimit"]
    assert all(v["emptyDir"].get("sizeLimit") for v in volumes) and len(volumes) == 3
    assert c["securityContext"] == rc["securityContext"] == pred["model"]["securityContext"]


def test_the_merge_check_sees_what_the_runtime_alone_would_run():
    # Guards the test above: the runtime on its own runs vLLM with no model, key or flags.
    _, ev = evaluate(LLAMA_8B)
    [rc] = runtime(ev)["spec"]["containers"]
    c = merged_container(rc, {"args": []})
    assert c["args"] == [] and "env" not in rc
    # What it does carry is the predictor's own (the pack checks the runtime on its own).
    model = isvc(ev)["spec"]["predictor"]["model"]
    for key in ("startupProbe", "readinessProbe", "livenessProbe", "securityContext"):
        assert rc[key] == model[key], key
    for part in ("requests", "limits"):
        assert rc["resources"][part] == {
            k: v for k, v in model["resources"][part].items() if k != contract.GPU_RESOURCE
        }


@pytest.mark.parametrize("storage", ["bucket", "hf"])
def test_downloaded_weights_get_ephemeral_storage(storage):
    p, ev = evaluate(LLAMA_70B, storage=storage)
    requests = isvc(ev)["spec"]["predictor"]["model"]["resources"]["requests"]
    assert quantity(requests["ephemeral-storage"]) >= p.weights_bytes * 1.1


def test_weights_on_a_claim_need_no_ephemeral_storage():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(
        plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), claim_name="llama-weights"
    )
    ev = run_in_mocks(lambda: kserve.KServeModel("m", args))
    assert "ephemeral-storage" not in isvc(ev)["spec"]["predictor"]["model"]["resources"]["requests"]


def _env(model: dict) -> dict[str, dict]:
    return {e["name"]: e for e in model["env"]}


def test_the_api_key_comes_from_a_secret_as_on_the_vllm_path():
    key = "sk-test-not-a-real-key-5e2a"
    p, ev = evaluate(LLAMA_8B, api_key=key)
    [secret] = objects(ev, "Secret")
    assert secret["metadata"]["name"] == f"{p.served_name}-api-key"
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert secret["stringData"] == {"api-key": key}
    model = isvc(ev)["spec"]["predictor"]["model"]
    env = _env(model)
    assert env["VLLM_API_KEY"] == {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "api-key"}},
    }
    assert "VLLM_API_KEY_NEXT" not in env and "--api-key" not in model["args"]
    # The key is a Pulumi secret in the Secret's data and nowhere else.
    secret_resource = next(r for r in ev.resources if r.type == "kubernetes:core/v1:Secret")
    paths = secret_paths(secret_resource.inputs)
    assert paths and all(path.startswith("stringData") for path in paths)
    assert sum(key in str(r.inputs) for r in ev.resources) == 1


def test_during_a_rotation_both_keys_are_valid():
    _, ev = evaluate(
        {**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
        canary_baseline_revision=BASELINE,
        api_key="sk-old",
        api_key_next="sk-new",
    )
    [secret] = objects(ev, "Secret")
    assert secret["stringData"] == {"api-key": "sk-old", "api-key-next": "sk-new"}
    spec = isvc(ev)["spec"]
    # The stable predictor and the canary alike.
    for model in (spec["predictor"]["model"], spec["canary"][0]["predictor"]["model"]):
        env = _env(model)
        assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "api-key"
        assert env["VLLM_API_KEY_NEXT"]["valueFrom"]["secretKeyRef"]["key"] == "api-key-next"
        assert model["args"][-3:] == ["--api-key", "$(VLLM_API_KEY)", "$(VLLM_API_KEY_NEXT)"]


def test_without_a_key_no_secret_and_no_key_env():
    _, ev = evaluate(LLAMA_8B)
    assert not objects(ev, "Secret")
    model = isvc(ev)["spec"]["predictor"]["model"]
    assert not [e for e in model["env"] if e["name"].startswith("VLLM_API_KEY")]
    assert "--api-key" not in model["args"]


def test_allow_unauthenticated_marks_the_predictor_pods_with_the_waiver():
    _, ev = evaluate(LLAMA_8B, allow_unauthenticated=True)
    assert isvc(ev)["spec"]["predictor"]["annotations"][contract.ANNOTATION_ALLOW_UNAUTHENTICATED] == "true"
    _, ev = evaluate(LLAMA_8B)
    assert contract.ANNOTATION_ALLOW_UNAUTHENTICATED not in isvc(ev)["spec"]["predictor"]["annotations"]


def test_no_warning_that_the_key_or_the_image_is_ignored():
    p = make_plan({"engine": "kserve", **LLAMA_8B, "image": "registry.example.com/vllm/vllm-openai:v0.32.0-patched"})
    holder = {}

    def program():
        holder["m"] = kserve.KServeModel(
            "m",
            kserve.KServeModelArgs(
                plan=p,
                placement=placement(p),
                namespace=NAMESPACE,
                crds=crds_present(),
                bucket=s3_bucket(),
                api_key=pulumi.Output.secret("k"),
                image_mirrors={"docker.io": "cache.example.com/hub"},
            ),
        )

    run_in_mocks(program)
    assert holder["m"].warnings == []


def test_the_endpoint_is_the_predictor_services_port_80_and_vllms_v1():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    holder = {}

    def program():
        holder["m"] = kserve.KServeModel(
            "m",
            kserve.KServeModelArgs(
                plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), bucket=s3_bucket()
            ),
        )

    run_in_mocks(program)
    assert holder["m"].endpoint == f"http://{p.served_name}-predictor.{NAMESPACE}.svc.cluster.local/v1"


def test_hpa_kind_exposes_the_adapter_rules_it_needs():
    from components.serving import scaling

    holders = {}
    for kind in ("hpa", "keda"):
        p = make_plan(
            {"engine": "kserve", **LLAMA_8B, "autoscaling": {"enabled": True, "kind": kind, "maxReplicas": 2}}
        )

        def program(p=p, kind=kind):
            holders[kind] = kserve.KServeModel(
                "m",
                kserve.KServeModelArgs(
                    plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), bucket=s3_bucket()
                ),
            )

        run_in_mocks(program)
    assert holders["hpa"].prometheus_adapter_rules == scaling.prometheus_adapter_rules()
    assert holders["keda"].prometheus_adapter_rules == []


def test_component_type_token():
    _, ev = evaluate(LLAMA_8B)
    assert [r for r in ev.resources if r.type == "llm-serving:k8s:KServeModel"]
