"""KServeModel under Pulumi mocks: the InferenceService and friends, checked against KServe v0.20's CRDs."""

from __future__ import annotations

import re

import pulumi
import pytest

from common import contract
from components.cluster.interface import ModelBucket, ServiceAccountBinding
from components.serving import kserve, probes
from offline_plan.mock_runtime import run_in_mocks, secret_paths
from tests.addon_fixtures import crds_present
from tests.schemas import validate_all
from tests.vllm_server_fixtures import LLAMA_8B, LLAMA_70B, LLAMA_70B_TWO_NODES, REVISION, machine, make_plan, placement

NAMESPACE = "llm-serving"
TOKEN = "hf_test_not_a_real_token_5d1c"
BASELINE = "fedcba9876543210fedcba9876543210fedcba98"


def s3_bucket() -> ModelBucket:
    return ModelBucket(
        scheme="s3", name="team-models", prefix="models",
        writer=ServiceAccountBinding(NAMESPACE, "model-mirror"),
        reader=ServiceAccountBinding(NAMESPACE, "model-reader"),
    )


def evaluate(model: dict, *, storage: str = "bucket", bucket: ModelBucket | None = None, token: str | None = TOKEN,
             **extra):
    p = make_plan({"engine": "kserve", **model})

    def program():
        kserve.KServeModel("m", kserve.KServeModelArgs(
            plan=p, placement=placement(p), namespace=NAMESPACE, storage=storage, crds=crds_present(),
            bucket=bucket if bucket is not None else (s3_bucket() if storage == "bucket" else None),
            reader_service_account="model-reader", machine=machine(p),
            hf_token=pulumi.Output.secret(token) if token else None, **extra,
        ))

    ev = run_in_mocks(program)
    return p, ev


def unwrap(value):
    from tests.test_vllm_server import unwrap_secrets
    return unwrap_secrets(value)


def objects(ev, kind: str | None = None) -> list[dict]:
    objs = [unwrap(r.inputs) for r in ev.resources if r.is_kubernetes_object]
    return [o for o in objs if kind is None or o["kind"] == kind]


def isvc(ev) -> dict:
    found = objects(ev, "InferenceService")
    assert len(found) == 1
    return found[0]


def test_every_object_validates_against_the_upstream_schemas():
    for model, storage, extra in [
        (LLAMA_8B, "bucket", {}),
        (LLAMA_8B, "hf", {}),
        ({**LLAMA_70B, "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 1, "maxReplicas": 3}}, "bucket", {}),
        ({**LLAMA_70B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 3}}, "hf", {}),
        ({**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE}, "hf", {"canary_baseline_revision": BASELINE}),
        ({**LLAMA_8B, "canaryTrafficPercent": 25, "canaryBaselineRevision": BASELINE}, "bucket", {"canary_baseline_revision": BASELINE}),
    ]:
        _, ev = evaluate(model, storage=storage, **extra)
        objs = objects(ev)
        assert {"InferenceService", "PodMonitor"} <= {o["kind"] for o in objs}
        validate_all(objs)


def test_standard_mode_huggingface_runtime_and_engine_flags_from_the_plan():
    p, ev = evaluate({**LLAMA_8B, "kvCacheDtype": "fp8", "dtype": "bfloat16"})
    obj = isvc(ev)
    assert obj["apiVersion"] == "serving.kserve.io/v1beta1"
    assert obj["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    model = obj["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "huggingface"}
    assert model["runtimeVersion"] == "v0.20.0-gpu"
    args = model["args"]
    assert args[0] == f"--model_name={p.served_name}"
    assert f"--served-model-name={p.served_name}" in args and "--backend=vllm" in args
    assert f"--max-model-len={p.max_model_len}" in args
    assert f"--tensor-parallel-size={p.tensor_parallel_size}" in args
    assert "--gpu-memory-utilization=0.9" in args
    assert "--kv-cache-dtype=fp8" in args and "--dtype=bfloat16" in args
    # vllm-serve-only flags stay out: KServe owns the model dir, port and shutdown.
    assert not [a for a in args if a.startswith(("--port", "--host", "--load-format", "--shutdown-timeout"))]
    assert not [a for a in args if a.startswith("/")]


def test_engine_flags_follow_the_plan_on_a_bigger_model():
    p, ev = evaluate(LLAMA_70B)
    assert p.tensor_parallel_size > 1
    args = isvc(ev)["spec"]["predictor"]["model"]["args"]
    assert f"--tensor-parallel-size={p.tensor_parallel_size}" in args
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
    # The model's own health route: v0.20's /v2/health/ready and /live answer while the engine loads.
    health = {"path": f"/openai/v1/models/{p.served_name}", "port": kserve.HTTP_PORT}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert model[probe]["httpGet"] == health, probe
        assert "/v2/health" not in str(model[probe])
    # Liveness keeps the vLLM path's lenient numbers: never kill a busy engine for one slow answer.
    assert model["livenessProbe"]["failureThreshold"] == probes.LIVENESS_FAILURE_THRESHOLD
    assert model["livenessProbe"]["periodSeconds"] == probes.LIVENESS_PERIOD_SECONDS
    # The load estimate rides on the ISVC and on the predictor pods (the policy pack reads it).
    for annotations in (obj["metadata"]["annotations"], obj["spec"]["predictor"]["annotations"]):
        assert annotations[contract.ANNOTATION_LOAD_SECONDS] == str(round(p.load_seconds))


def test_bucket_storage_pins_the_commit_and_reads_as_the_reader_identity():
    p, ev = evaluate(LLAMA_8B)
    pred = isvc(ev)["spec"]["predictor"]
    assert pred["model"]["storageUri"] == f"s3://team-models/models/{p.repo}/{p.revision}"
    assert pred["serviceAccountName"] == "model-reader"
    assert not objects(ev, "ClusterStorageContainer")
    assert not objects(ev, "Secret")


def test_gcs_bucket_uri():
    gcs = ModelBucket(scheme="gs", name="g-models", prefix="m", writer=ServiceAccountBinding(NAMESPACE, "w"),
                      reader=ServiceAccountBinding(NAMESPACE, "r"))
    p, ev = evaluate(LLAMA_8B, bucket=gcs)
    assert isvc(ev)["spec"]["predictor"]["model"]["storageUri"] == f"gs://g-models/m/{p.repo}/{REVISION}"


def test_without_a_bucket_the_model_store_claim_is_used():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), claim_name="llama-weights")
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
    assert env["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "HF_TOKEN", "optional": False}
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
    p, ev = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 2,
                                                  "maxReplicas": 4, "queueThreshold": 3}})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    pred = obj["spec"]["predictor"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (2, 4)
    # One metric per signal; KServe v0.20 turns each into a KEDA trigger (keda_reconciler.go
    # getKedaMetrics loops over autoScaling.metrics), so the model scales on whichever saturates first.
    queue, kv = pred["autoScaling"]["metrics"]
    for metric in (queue, kv):
        assert metric["type"] == "External" and metric["external"]["metric"]["backend"] == "prometheus"
    assert queue["external"]["metric"]["query"] == (f'sum(vllm:num_requests_waiting{{model_name="{p.served_name}", '
                                                    f'namespace="{NAMESPACE}"}})')
    assert queue["external"]["target"] == {"type": "Value", "value": "3"}
    assert kv["external"]["metric"]["query"] == (f'sum(vllm:kv_cache_usage_perc{{model_name="{p.served_name}", '
                                                 f'namespace="{NAMESPACE}"}})')
    assert kv["external"]["target"] == {"type": "Value", "value": "0.8"}
    assert not objects(ev, "HorizontalPodAutoscaler")


def test_hpa_autoscaling_is_ours_on_the_predictor_deployment():
    p, ev = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "hpa", "maxReplicas": 3}})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "external"
    assert "autoScaling" not in obj["spec"]["predictor"]
    [hpa] = objects(ev, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": f"{p.served_name}-predictor"}
    assert hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"] == {"model_name": p.served_name}


def test_fixed_replicas_without_autoscaling():
    _, ev = evaluate({**LLAMA_8B, "replicas": 2})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "none"
    assert (obj["spec"]["predictor"]["minReplicas"], obj["spec"]["predictor"]["maxReplicas"]) == (2, 2)


def test_canary_runs_the_new_commit_beside_the_baseline():
    p, ev = evaluate({**LLAMA_8B, "canaryTrafficPercent": 10, "canaryBaselineRevision": BASELINE},
                     canary_baseline_revision=BASELINE)
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


def test_pipeline_parallelism_is_refused_even_on_one_node():
    # 4 × 2 = 8 GPUs fits one 8-GPU node, but the runtime would set TP to all 8 GPUs and ask for 16.
    p = make_plan({"engine": "kserve", **LLAMA_70B, "tensorParallelSize": 4, "pipelineParallelSize": 2})
    assert p.nodes_per_replica == 1 and p.pipeline_parallel_size == 2
    with pytest.raises(kserve.KServeConfigError) as err:
        kserve.check_servable(p)
    message = str(err.value)
    assert message.startswith("models[0].pipelineParallelSize:") and "engine: vllm" in message
    assert "\n" not in message


# The container of KServe v0.20.0's kserve-huggingfaceserver ClusterServingRuntime, as far as the
# merge with the predictor matters (resources, volume mounts) and the runtime's pod volumes.
# Source: https://github.com/kserve/kserve/blob/v0.20.0/config/runtimes/kserve-huggingfaceserver.yaml
# (commit 1fb781055dd1567164358233e1125142ca6ef1fe); the Helm chart's copy
# (charts/kserve-runtime-configs/files/runtimes/resources.yaml) carries the same values.
RUNTIME_CONTAINER_V0_20 = {
    "name": "kserve-container",
    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    "volumeMounts": [{"name": "devshm", "mountPath": "/dev/shm"}],
}
RUNTIME_VOLUMES_V0_20 = [{"name": "devshm", "emptyDir": {"medium": "Memory"}}]


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


def merged_predictor_pod(predictor: dict) -> tuple[dict, list[dict]]:
    """The kserve-container and pod volumes KServe v0.20 builds: runtime, then predictor on top
    (MergeRuntimeContainers / MergePodSpec, strategic merge: maps by key, volumeMounts by
    mountPath, volumes by name)."""
    model = predictor["model"]
    container = {
        "resources": _merge_maps(RUNTIME_CONTAINER_V0_20["resources"], model["resources"]),
        "volumeMounts": _merge_list(RUNTIME_CONTAINER_V0_20["volumeMounts"], model["volumeMounts"], "mountPath"),
    }
    return container, _merge_list(RUNTIME_VOLUMES_V0_20, predictor["volumes"], "name")


def quantity(value: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


@pytest.mark.parametrize("model", [LLAMA_8B, LLAMA_70B, {**LLAMA_8B, "pool": "l4x4"}])
def test_merged_with_the_runtime_the_pod_is_valid(model):
    p, ev = evaluate(model)
    ours = isvc(ev)["spec"]["predictor"]
    assert quantity(ours["model"]["resources"]["requests"]["cpu"]) > 1  # more than the runtime's limit
    container, volumes = merged_predictor_pod(ours)
    res = container["resources"]
    for name, request in res["requests"].items():
        if name in res["limits"]:
            assert quantity(request) <= quantity(res["limits"][name]), (name, res)
    # GPUs still limits == requests, and one bounded /dev/shm (the runtime's unbounded one replaced).
    assert res["limits"][contract.GPU_RESOURCE] == res["requests"][contract.GPU_RESOURCE] == str(p.gpus_per_pod)
    shm = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    assert len(shm) == 1
    [volume] = [v for v in volumes if v["name"] == shm[0]["name"]]
    assert volume["emptyDir"]["medium"] == "Memory" and volume["emptyDir"]["sizeLimit"]
    # No unbounded volume is left: the other two are the HOME and /tmp emptyDirs of the read-only
    # root (components/serving/writable.py), each with a size limit.
    assert [v for v in volumes if v["emptyDir"].get("medium") == "Memory"] == [volume]
    assert all(v["emptyDir"].get("sizeLimit") for v in volumes) and len(volumes) == 3


def test_the_merge_check_catches_a_cpu_request_above_the_runtime_limit():
    # Guards the test above: without our CPU limit the runtime's "1" would remain.
    p, ev = evaluate(LLAMA_70B)
    predictor = isvc(ev)["spec"]["predictor"]
    del predictor["model"]["resources"]["limits"]["cpu"]
    res = merged_predictor_pod(predictor)[0]["resources"]
    assert quantity(res["requests"]["cpu"]) > quantity(res["limits"]["cpu"]) == 1


@pytest.mark.parametrize("storage", ["bucket", "hf"])
def test_downloaded_weights_get_ephemeral_storage(storage):
    p, ev = evaluate(LLAMA_70B, storage=storage)
    requests = isvc(ev)["spec"]["predictor"]["model"]["resources"]["requests"]
    assert quantity(requests["ephemeral-storage"]) >= p.weights_bytes * 1.1


def test_weights_on_a_claim_need_no_ephemeral_storage():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), claim_name="llama-weights")
    ev = run_in_mocks(lambda: kserve.KServeModel("m", args))
    assert "ephemeral-storage" not in isvc(ev)["spec"]["predictor"]["model"]["resources"]["requests"]


def _warnings(model: dict, **extra) -> list[str]:
    p = make_plan({"engine": "kserve", **model})
    return kserve.engine_warnings(kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), **extra))


def test_api_key_and_custom_image_are_reported_as_not_applied():
    assert _warnings(LLAMA_8B) == []
    [key] = _warnings(LLAMA_8B, api_key_configured=True)
    assert key.startswith("models[0]:") and "apiKey" in key and "engine: vllm" in key
    [image] = _warnings({**LLAMA_8B, "image": "registry.example.com/vllm/vllm-openai:v0.32.0-patched"})
    assert image.startswith("models[0].image:") and "registry.example.com" in image
    # The component reports them in its warnings output.
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    holder = {}

    def program():
        holder["m"] = kserve.KServeModel("m", kserve.KServeModelArgs(
            plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), bucket=s3_bucket(),
            api_key_configured=True))

    run_in_mocks(program)
    assert any("apiKey" in w for w in holder["m"].warnings)


def test_hpa_kind_exposes_the_adapter_rules_it_needs():
    from components.serving import scaling

    holders = {}
    for kind in ("hpa", "keda"):
        p = make_plan({"engine": "kserve", **LLAMA_8B, "autoscaling": {"enabled": True, "kind": kind, "maxReplicas": 2}})

        def program(p=p, kind=kind):
            holders[kind] = kserve.KServeModel("m", kserve.KServeModelArgs(
                plan=p, placement=placement(p), namespace=NAMESPACE, crds=crds_present(), bucket=s3_bucket()))

        run_in_mocks(program)
    assert holders["hpa"].prometheus_adapter_rules == scaling.prometheus_adapter_rules()
    assert holders["keda"].prometheus_adapter_rules == []


def test_component_type_token():
    _, ev = evaluate(LLAMA_8B)
    assert [r for r in ev.resources if r.type == "llm-serving:k8s:KServeModel"]
