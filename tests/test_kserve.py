"""KServeModel under Pulumi mocks: the InferenceService and friends, checked against KServe v0.20's CRDs."""

from __future__ import annotations

import re

import pulumi
import pytest

from components import contract, kserve, probes
from components.mock_runtime import run_in_mocks, secret_paths
from components.platform import ModelBucket, ServiceAccountBinding
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
            plan=p, placement=placement(p), namespace=NAMESPACE, storage=storage,
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
    pp = probes.probe_plan(p, api_key=False)
    assert startup["failureThreshold"] == pp.startup_failure_threshold
    assert startup["httpGet"] == {"path": kserve.READY_PATH, "port": kserve.HTTP_PORT}
    assert model["livenessProbe"]["failureThreshold"] == probes.LIVENESS_FAILURE_THRESHOLD
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
    args = kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE, claim_name="llama-weights")
    ev = run_in_mocks(lambda: kserve.KServeModel("m", args))
    assert isvc(ev)["spec"]["predictor"]["model"]["storageUri"] == f"pvc://llama-weights/{p.repo}/{p.revision}"


def test_no_weights_source_is_a_clear_error():
    p = make_plan({"engine": "kserve", **LLAMA_8B})
    args = kserve.KServeModelArgs(plan=p, placement=placement(p), namespace=NAMESPACE)
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
    with pytest.raises(Exception, match="gated"):
        evaluate({**LLAMA_8B, "gated": True}, storage="hf", token=None)


def test_keda_autoscaling_uses_the_vllm_queue_signal_and_min_replicas():
    p, ev = evaluate({**LLAMA_8B, "autoscaling": {"enabled": True, "kind": "keda", "minReplicas": 2,
                                                  "maxReplicas": 4, "queueThreshold": 3}})
    obj = isvc(ev)
    assert obj["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    pred = obj["spec"]["predictor"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (2, 4)
    [metric] = pred["autoScaling"]["metrics"]
    ext = metric["external"]
    assert metric["type"] == "External" and ext["metric"]["backend"] == "prometheus"
    assert ext["metric"]["query"] == (f'sum(vllm:num_requests_waiting{{model_name="{p.served_name}", '
                                      f'namespace="{NAMESPACE}"}})')
    assert ext["target"] == {"type": "Value", "value": "3"}
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
    from components.config import ConfigError

    with pytest.raises(ConfigError, match="canaryTrafficPercent needs canaryBaselineRevision"):
        make_plan({"engine": "kserve", **LLAMA_8B, "canaryTrafficPercent": 10})


def test_multi_node_replica_is_refused_with_the_fix():
    with pytest.raises(kserve.KServeConfigError, match="engine: vllm"):
        evaluate(LLAMA_70B_TWO_NODES)


def test_component_type_token():
    _, ev = evaluate(LLAMA_8B)
    assert [r for r in ev.resources if r.type == "llm-serving:k8s:KServeModel"]
