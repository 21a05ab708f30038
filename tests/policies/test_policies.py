"""Each rule of the pack on good and bad inputs, called through pulumi_policy's analyzer servicer
exactly as the engine calls it (see tests/support/policy_engine.py)."""

from __future__ import annotations

import copy

import pytest

from common.contract import ANNOTATION_LOAD_SECONDS, LABEL_REVISION
from tests.support.policy_engine import (
    GOOD_SERVER,
    UNKNOWN_STRING,
    analyze,
    analyze_k8s,
    analyze_stack,
    k8s_stack_entry,
    load_fixture,
    secret,
)

SHA = "0e9e39f249a16976918f6564b8830bc894c89659"
GOOD_PDB = load_fixture("good", "vllm-deployment.yaml")[1]


def server(**changes) -> dict:
    d = copy.deepcopy(GOOD_SERVER)
    for k, v in changes.items():
        d[k] = v
    return d


def container(d: dict) -> dict:
    return d["spec"]["template"]["spec"]["containers"][0]


def pod_spec(d: dict) -> dict:
    return d["spec"]["template"]["spec"]


def pod(containers: list[dict], **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}


@pytest.mark.parametrize(
    "fixture",
    [
        "vllm-deployment.yaml",
        "mirror-job.yaml",
        "web-and-cron.yaml",
        "lws-and-kserve.yaml",
        "list-kind.yaml",
        "namespaces.yaml",
    ],
)
def test_good_fixtures_have_no_violations_through_the_engine(fixture):
    for obj in load_fixture("good", fixture):
        items = obj.get("items", [obj])
        for item in items:
            assert analyze_k8s(item).violations == [], item["metadata"]["name"]


# Every broken variant is caught by the rule it breaks, and only by that rule.
@pytest.mark.parametrize(
    "fixture,policy",
    [
        ("image-tag-pinned.yaml", "image-tag-pinned"),
        ("resources-declared.yaml", "resources-declared"),
        ("gpu-in-limits.yaml", "gpu-in-limits"),
        ("gpu-taint-tolerated.yaml", "gpu-taint-tolerated"),
        ("probes-declared.yaml", "probes-declared"),
        ("startup-probe-budget.yaml", "startup-probe-budget"),
        ("model-revision-pinned.yaml", "model-revision-pinned"),
        ("mirror-job-unpinned.yaml", "model-revision-pinned"),
        ("kserve-hf-uri.yaml", "model-revision-pinned"),
        ("model-revision-pinned-serve.yaml", "model-revision-pinned"),
        ("hub-offline-serving.yaml", "hub-offline-serving"),
        ("no-literal-secrets.yaml", "no-literal-secrets"),
        ("shm-size-limited.yaml", "shm-size-limited"),
        ("helm-release.yaml", "helm-chart-pinned"),
        ("adapter-revision-pinned.yaml", "adapter-revision-pinned"),
        ("pod-security-context.yaml", "pod-security-context"),
        ("namespace-pod-security.yaml", "namespace-pod-security"),
    ],
)
def test_bad_fixture_is_caught_by_its_rule(fixture, policy):
    (obj,) = load_fixture("bad", fixture)
    result = analyze_k8s(obj)
    assert result.policies() == {policy}
    d = result.of(policy)[0]
    assert d.level == "mandatory"
    # A whole sentence naming the resource.
    assert d.message.startswith(f"{obj['kind']}/{obj['metadata']['name']}: ") and d.message.endswith(".")


# image-tag-pinned ---------------------------------------------------------------------------------


def test_image_tag_pinned_checks_init_containers_and_names_the_container():
    p = pod([{"name": "app", "image": "nginx:1.27.2"}], initContainers=[{"name": "init", "image": "busybox"}])
    (d,) = analyze_k8s(p).of("image-tag-pinned")
    assert "init container 'init'" in d.message and "has no tag" in d.message


def test_require_digest_option():
    p = pod([{"name": "app", "image": "nginx:1.27.2"}])
    assert analyze_k8s(p).of("image-tag-pinned") == []
    assert len(analyze_k8s(p, config={"image-tag-pinned": {"requireDigest": True}}).of("image-tag-pinned")) == 1
    digest = pod([{"name": "app", "image": "nginx@sha256:" + "a" * 64}])
    assert analyze_k8s(digest, config={"image-tag-pinned": {"requireDigest": True}}).of("image-tag-pinned") == []


def test_image_unknown_during_preview_is_not_a_violation():
    p = pod([{"name": "app", "image": UNKNOWN_STRING}])
    result = analyze_k8s(p)
    assert result.of("image-tag-pinned") == []


def test_container_without_image_is_reported_except_the_kserve_model_container():
    # checkov CKV_K8S_14 fails a container without `image` (bridgecrewio/checkov
    # checkov/kubernetes/checks/resource/k8s/ImageTagFixed.py @26aff1f: `else: return FAILED`).
    p = pod([{"name": "app"}], initContainers=[{"name": "init", "image": None}])
    messages = sorted(d.message for d in analyze_k8s(p).of("image-tag-pinned"))
    assert len(messages) == 2
    assert "container 'app' has no image" in messages[0] and "init container 'init' has no image" in messages[1]
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "m"},
        "spec": {
            "predictor": {
                "model": {"modelFormat": {"name": "huggingface"}, "runtime": "vllm", "storageUri": "pvc://models/llama"}
            }
        },
    }
    assert analyze_k8s(isvc).of("image-tag-pinned") == []
    # A custom predictor container is not the model container: it needs its image.
    isvc["spec"]["predictor"]["containers"] = [{"name": "kserve-container"}]
    (d,) = analyze_k8s(isvc).of("image-tag-pinned")
    assert "container 'kserve-container' has no image" in d.message


def test_enforcement_level_comes_from_pack_config():
    p = pod([{"name": "app", "image": "nginx:latest"}])
    (d,) = analyze_k8s(p, config={"image-tag-pinned": {"enforcementLevel": "advisory"}}).of("image-tag-pinned")
    assert d.level == "advisory"


def test_rules_are_not_applicable_to_objects_without_pods():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    result = analyze_k8s(svc)
    assert result.violations == []
    assert {"image-tag-pinned", "probes-declared", "bucket-private", "helm-chart-pinned"} <= result.not_applicable


# resources-declared -------------------------------------------------------------------------------


def test_resources_declared_cpu_limit_only_when_asked():
    c = {
        "name": "app",
        "image": "a:1",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
    }
    assert analyze_k8s(pod([c])).of("resources-declared") == []
    (d,) = analyze_k8s(pod([c]), config={"resources-declared": {"requireCpuLimit": True}}).of("resources-declared")
    assert "resources.limits.cpu" in d.message


def test_resources_declared_skips_ephemeral_containers():
    ok = {
        "name": "app",
        "image": "a:1",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
    }
    p = pod([ok], ephemeralContainers=[{"name": "debug", "image": "busybox:1.36"}])
    assert analyze_k8s(p).of("resources-declared") == []


# gpu-in-limits ------------------------------------------------------------------------------------


def test_gpu_requests_must_equal_limits():
    d = server()
    container(d)["resources"]["requests"]["nvidia.com/gpu"] = 2
    (v,) = analyze_k8s(d).of("gpu-in-limits")
    assert "GPUs cannot be overcommitted" in v.message


def test_gpu_quantity_as_string_or_number_is_the_same():
    d = server()
    container(d)["resources"]["requests"]["nvidia.com/gpu"] = "1"
    assert analyze_k8s(d).of("gpu-in-limits") == []


def test_other_gpu_vendors_count_as_gpus():
    d = server()
    res = container(d)["resources"]
    del res["limits"]["nvidia.com/gpu"], res["requests"]["nvidia.com/gpu"]
    res["requests"]["amd.com/gpu"] = 1
    assert analyze_k8s(d).policies() >= {"gpu-in-limits"}


# gpu-taint-tolerated ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tolerations,ok",
    [
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}], True),
        ([{"operator": "Exists"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], False),
        ([{"key": "example.com/other", "operator": "Exists"}], False),
        ([], False),
    ],
)
def test_gpu_taint_toleration_matching(tolerations, ok):
    d = server()
    pod_spec(d)["tolerations"] = tolerations
    assert (analyze_k8s(d).of("gpu-taint-tolerated") == []) is ok


# probes-declared ----------------------------------------------------------------------------------


def test_probes_not_required_for_jobs_or_init_containers():
    (job,) = load_fixture("good", "mirror-job.yaml")
    assert analyze_k8s(job).of("probes-declared") == []
    d = server()
    pod_spec(d)["initContainers"] = [
        {
            "name": "init",
            "image": "busybox:1.36",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        }
    ]
    assert analyze_k8s(d).of("probes-declared") == []


def test_null_or_handlerless_probe_counts_as_missing():
    c = {"name": "web", "image": "nginx:1.27.2", "livenessProbe": None, "readinessProbe": {"periodSeconds": 5}}
    (d,) = analyze_k8s(pod([c])).of("probes-declared")
    assert "livenessProbe, readinessProbe" in d.message


def test_native_sidecar_needs_probes():
    sidecar = {"name": "proxy", "image": "envoyproxy/envoy:v1.31.2", "restartPolicy": "Always"}
    web = {
        "name": "web",
        "image": "nginx:1.27.2",
        "livenessProbe": {"tcpSocket": {"port": 80}},
        "readinessProbe": {"tcpSocket": {"port": 80}},
    }
    (d,) = analyze_k8s(pod([web], initContainers=[sidecar])).of("probes-declared")
    assert "init container 'proxy'" in d.message


# startup-probe-budget -----------------------------------------------------------------------------


def test_startup_budget_uses_kubernetes_defaults():
    d = server()
    container(d)["startupProbe"] = {"httpGet": {"path": "/health", "port": 8000}}  # 3 x 10 s = 30 s
    (v,) = analyze_k8s(d).of("startup-probe-budget")
    assert "budget of 30 s" in v.message and "at least 240 s" in v.message


def test_startup_budget_reads_the_pod_template_annotation():
    d = server()
    del d["metadata"]["annotations"][ANNOTATION_LOAD_SECONDS]
    d["spec"]["template"]["metadata"]["annotations"] = {ANNOTATION_LOAD_SECONDS: "400"}
    (v,) = analyze_k8s(d).of("startup-probe-budget")  # 30 x 10 = 300 < 400
    assert "400 s" in v.message


def test_startup_budget_minimum_is_configurable():
    d = server()
    assert analyze_k8s(d).of("startup-probe-budget") == []  # 300 s >= max(180, 240)
    assert analyze_k8s(d, config={"startup-probe-budget": {"minimumSeconds": 600}}).of("startup-probe-budget")


def test_liveness_is_lenient_with_configurable_minimum():
    d = server()
    container(d)["livenessProbe"] = {"httpGet": {"path": "/health", "port": 8000}}  # defaults: 30 s
    (v,) = analyze_k8s(d).of("startup-probe-budget")
    assert "liveness probe restarts the server after 30 s" in v.message
    assert (
        analyze_k8s(d, config={"startup-probe-budget": {"livenessMinimumSeconds": 30}}).of("startup-probe-budget") == []
    )


def test_without_startup_probe_the_liveness_window_is_the_budget():
    (d,) = load_fixture("bad", "probes-declared.yaml")
    assert analyze_k8s(d).of("startup-probe-budget") == []  # 600 s initial delay covers 240 s
    container(d)["livenessProbe"]["initialDelaySeconds"] = 30
    (v,) = analyze_k8s(d).of("startup-probe-budget")
    assert "there is no startup probe" in v.message


def test_non_numeric_load_annotation_is_reported():
    d = server()
    d["metadata"]["annotations"][ANNOTATION_LOAD_SECONDS] = "ten minutes"
    (v,) = analyze_k8s(d).of("startup-probe-budget")
    assert "not a number" in v.message


# model-revision-pinned ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,ok",
    [
        (["--revision", SHA], True),
        ([f"--revision={SHA}"], True),
        (["--revision", "v1.0"], False),
        (["--tokenizer-revision", "main"], False),
        ([f"--revision={SHA.upper()}"], False),
        ([f"--revision={SHA[:12]}"], False),
        (["--revision", "$(MODEL_REVISION)"], True),  # from a ConfigMap; cannot be judged here
    ],
)
def test_revision_flags(args, ok):
    d = server()
    container(d)["args"] = ["--model=/models/x", *args]
    assert (analyze_k8s(d).of("model-revision-pinned") == []) is ok


@pytest.mark.parametrize(
    "command,args,ok",
    [
        # The vllm-openai image's entrypoint is `vllm serve`: the first argument is the model.
        (None, ["meta-llama/Llama-3.1-8B-Instruct"], False),
        (None, ["meta-llama/Llama-3.1-8B-Instruct", "--revision", SHA], True),
        (["vllm", "serve", "Qwen/Qwen3-8B"], [], False),
        (["/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B", f"--revision={SHA}"], [], True),
        (["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", "Qwen/Qwen3-8B"], False),
        (["sh", "-c", "exec vllm serve Qwen/Qwen3-8B --port 8000"], [], False),
        # Paths are mirrored weights, not Hub ids; a served name is not the model.
        (None, ["/models/meta-llama/Llama-3.1-8B-Instruct", "--served-model-name", "meta-llama/x"], True),
        (None, ["--model=/models/x"], True),
        (None, ["$(MODEL)"], True),  # from elsewhere; cannot be judged here
        (["vllm", "serve", "--model=Qwen/Qwen3-8B"], [], False),
        (["vllm", "serve"], ["--model", "/models/Qwen3-8B"], True),
        # argparse takes the positional anywhere among the options.
        (["vllm", "serve", "--port", "8000", "meta-llama/Llama-3.1-8B-Instruct"], [], False),
        (["vllm", "serve", "--port", "8000", "/models/x"], [], True),
        (["vllm", "serve", "--served-model-name", "meta-llama/x", "/models/x"], [], True),
        # No model at all: vLLM loads its default Hub model, unpinned.
        (["vllm", "serve"], ["--port", "8000"], False),
        (None, ["--port", "8000"], False),
    ],
)
def test_a_hub_model_served_without_a_revision_is_unpinned(command, args, ok):
    d = server()
    c = container(d)
    c.pop("command", None)
    if command is not None:
        c["command"] = command
    c["args"] = args
    found = analyze_k8s(d).of("model-revision-pinned")
    assert (found == []) is ok, [v.message for v in found]
    if not ok:
        assert "with no --revision" in found[0].message


@pytest.mark.parametrize(
    "command,args",
    [
        (["vllm", "serve", "$(VLLM_MODEL)"], []),
        (None, ["--model", "$(MODEL_ID)"]),
        (None, ["--model=$(VLLM_MODEL)"]),
        (["sh", "-c", "exec vllm serve $MODEL_ID --port 8000"], []),
        (["sh", "-c", "exec vllm serve ${VLLM_MODEL}"], []),
    ],
)
def test_a_hub_model_named_through_a_literal_env_value_is_unpinned(command, args):
    d = server()
    c = container(d)
    c.pop("command", None)
    if command is not None:
        c["command"] = command
    c["args"] = args
    c["env"] += [
        {"name": "VLLM_MODEL", "value": "meta-llama/Llama-3.1-8B-Instruct"},
        {"name": "MODEL_ID", "value": "meta-llama/Llama-3.1-8B-Instruct"},
    ]
    (found,) = analyze_k8s(d).of("model-revision-pinned")
    assert "Hub model 'meta-llama/Llama-3.1-8B-Instruct' with no --revision" in found.message
    # The same env pointing at the mirrored weights is a path, not a Hub id.
    for e in c["env"]:
        if e["name"] in ("VLLM_MODEL", "MODEL_ID"):
            e["value"] = "/models/meta-llama/Llama-3.1-8B-Instruct"
    assert analyze_k8s(d).of("model-revision-pinned") == []


def test_no_model_named_names_vllms_default():
    d = server()
    c = container(d)
    c["command"], c["args"] = ["vllm", "serve"], ["--port", "8000"]
    (found,) = analyze_k8s(d).of("model-revision-pinned")
    assert "no model, so vLLM's default Hub model 'Qwen/Qwen3-0.6B'" in found.message


def test_revision_flag_resolved_through_literal_env():
    d = server()
    container(d)["args"] = ["--revision", "$(MODEL_REVISION)"]
    container(d)["env"].append({"name": "MODEL_REVISION", "value": "main"})
    assert analyze_k8s(d).of("model-revision-pinned")


def test_revision_label_must_be_a_commit():
    d = server()
    d["spec"]["template"]["metadata"]["labels"][LABEL_REVISION] = "main"
    (v,) = analyze_k8s(d).of("model-revision-pinned")
    assert LABEL_REVISION in v.message


def test_hf_download_in_shell_script_with_pinned_revision_passes():
    (job,) = load_fixture("good", "mirror-job.yaml")
    assert analyze_k8s(job).of("model-revision-pinned") == []


def test_hf_uri_with_tag_is_rejected():
    (isvc,) = load_fixture("bad", "kserve-hf-uri.yaml")
    isvc["spec"]["predictor"]["model"]["storageUri"] = "hf://Qwen/Qwen2.5-7B-Instruct:v1.0"
    (v,) = analyze_k8s(isvc).of("model-revision-pinned")
    assert "'v1.0'" in v.message


# hub-offline-serving ------------------------------------------------------------------------------


def test_hub_offline_applies_to_non_gpu_containers_mounting_the_model_path():
    c = {
        "name": "cpu-server",
        "image": "vllm/vllm-openai:v0.11.0",
        "volumeMounts": [{"name": "m", "mountPath": "/models"}],
    }
    assert analyze_k8s(pod([c])).of("hub-offline-serving")
    c["env"] = [{"name": "HF_HUB_OFFLINE", "value": "true"}]
    assert analyze_k8s(pod([c])).of("hub-offline-serving") == []


def test_hub_offline_zero_is_not_offline():
    d = server()
    container(d)["env"][0]["value"] = "0"
    assert analyze_k8s(d).of("hub-offline-serving")


def test_hub_offline_not_required_for_mirror_jobs():
    (job,) = load_fixture("good", "mirror-job.yaml")
    assert analyze_k8s(job).of("hub-offline-serving") == []


# no-literal-secrets -------------------------------------------------------------------------------


def test_secret_output_as_literal_env_value_is_caught():
    # A Pulumi secret placed in a literal env value reaches the pack unwrapped: still a leak.
    d = server()
    container(d)["env"].append({"name": "HUGGING_FACE_HUB_TOKEN", "value": secret("hf_" + "a" * 34)})
    (v,) = analyze_k8s(d).of("no-literal-secrets")
    assert "HUGGING_FACE_HUB_TOKEN" in v.message and "hf_aaaa" not in v.message


@pytest.mark.parametrize(
    "env,flagged",
    [
        ({"name": "OPENAI_API_KEY", "value": "abc"}, True),
        ({"name": "DB_PASSWORD", "value": "pw"}, True),
        ({"name": "SOMETHING", "value": "sk-" + "b" * 40}, True),
        ({"name": "MAX_NUM_BATCHED_TOKENS", "value": "8192"}, False),
        ({"name": "TOKENIZERS_PARALLELISM", "value": "false"}, False),
        ({"name": "HF_TOKEN_PATH", "value": "/var/run/secrets/hf/token"}, False),
        ({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}, False),
    ],
)
def test_secret_env_names_and_values(env, flagged):
    d = server()
    container(d)["env"].append(env)
    assert bool(analyze_k8s(d).of("no-literal-secrets")) is flagged


def test_api_key_literal_in_args():
    d = server()
    args = container(d)["args"]
    args[args.index("$(VLLM_API_KEY)")] = "my-key-123"
    (v,) = analyze_k8s(d).of("no-literal-secrets")
    assert "--api-key" in v.message


# shm-size-limited ---------------------------------------------------------------------------------


def test_shm_rule_ignores_disk_backed_and_other_mounts():
    d = server()
    pod_spec(d)["volumes"][1]["emptyDir"] = {}  # disk-backed: not a tmpfs
    assert analyze_k8s(d).of("shm-size-limited") == []


# helm-chart-pinned --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version,ok",
    [
        ("25.3.4", True),
        ("v1.17.2", True),
        ("1.0.0-rc.1", True),
        ("", False),
        (None, False),
        ("^1.2.0", False),
        ("~1.2", False),
        ("1.x", False),
        (">=24.0.0", False),
        ("1.2", False),
    ],
)
def test_helm_release_version(version, ok):
    props = {"chart": "gpu-operator", "repositoryOpts": {"repo": "https://helm.ngc.nvidia.com/nvidia"}}
    if version is not None:
        props["version"] = version
    result = analyze("kubernetes:helm.sh/v3:Release", props, "gpu-operator")
    assert (result.of("helm-chart-pinned") == []) is ok
    assert (analyze("kubernetes:helm.sh/v4:Chart", props, "gpu-operator").of("helm-chart-pinned") == []) is ok


def test_local_chart_needs_no_version():
    assert analyze("kubernetes:helm.sh/v4:Chart", {"chart": "./charts/router"}, "router").violations == []


# bucket-private -----------------------------------------------------------------------------------


def test_s3_public_access_block():
    full = {
        "bucket": "models",
        "blockPublicAcls": True,
        "blockPublicPolicy": True,
        "ignorePublicAcls": True,
        "restrictPublicBuckets": True,
    }
    t = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    assert analyze(t, full).violations == []
    (v,) = analyze(t, {**full, "restrictPublicBuckets": False}).of("bucket-private")
    assert "restrictPublicBuckets" in v.message


def test_s3_encryption_configuration():
    t = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    good = {"bucket": "models", "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]}
    assert analyze(t, good).violations == []
    assert analyze(t, {"bucket": "models", "rules": [{"bucketKeyEnabled": True}]}).of("bucket-private")


def test_s3_bucket_public_acl():
    assert analyze("aws:s3/bucket:Bucket", {"acl": "public-read"}).of("bucket-private")
    assert analyze("aws:s3/bucket:Bucket", {"forceDestroy": True}).violations == []


def test_gcs_bucket():
    t = "gcp:storage/bucket:Bucket"
    assert (
        analyze(
            t, {"location": "US", "publicAccessPrevention": "enforced", "uniformBucketLevelAccess": True}
        ).violations
        == []
    )
    result = analyze(t, {"location": "US", "publicAccessPrevention": "inherited"})
    assert len(result.of("bucket-private")) == 2


# bucket-public-access-block-present (stack) -------------------------------------------------------

S3 = "aws:s3/bucket:Bucket"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
FLAGS = {"blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True, "restrictPublicBuckets": True}
SSE_PROPS = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}


@pytest.mark.parametrize("bucket_type", [S3, "aws:s3/bucketV2:BucketV2"])
def test_bare_s3_bucket_fails_the_stack_rule_but_not_bucket_private(bucket_type):
    result = analyze_stack([(bucket_type, "models", {"bucket": "models-1a2b3c4"})])
    (v,) = result.of("bucket-public-access-block-present")
    assert v.level == "mandatory" and v.urn.endswith("::models") and "no public access block" in v.message
    assert analyze(bucket_type, {"bucket": "models-1a2b3c4"}).of("bucket-private") == []


@pytest.mark.parametrize(
    "block_bucket",
    [
        "models-1a2b3c4",  # the bucket's (auto-)name, known once the bucket exists
        "models",  # the bucket's Pulumi name
        "models-5e6f7a8",  # an auto-name of `models` (`<name>-<suffix>`)
    ],
)
def test_block_matches_its_bucket_by_name(block_bucket):
    stack = [(S3, "models", {"bucket": "models-1a2b3c4"}), (PAB, "models-pab", {"bucket": block_bucket, **FLAGS})]
    assert analyze_stack(stack).violations == []


def test_block_of_another_bucket_does_not_cover():
    stack = [(S3, "models", {}), (S3, "models-logs", {}), (PAB, "logs-pab", {"bucket": "models-logs-1a2b3c4", **FLAGS})]
    (v,) = analyze_stack(stack).of("bucket-public-access-block-present")
    assert v.urn.endswith("::models")  # the longer name `models-logs` owns the block, not `models`
    # An encryption configuration is not a public access block.
    stack[2] = (SSE, "models-sse", {"bucket": "models-1a2b3c4", **SSE_PROPS})
    assert len(analyze_stack(stack).of("bucket-public-access-block-present")) == 2


def test_unknown_bucket_during_preview_uses_property_dependency_then_counts():
    # Preview of a new stack: the block's `bucket` is the bucket's id, unknown until it exists.
    a, b = (S3, "a", {"bucket": "a-1111111"}), (S3, "b", {"bucket": "b-2222222"})
    block_a = (PAB, "a-pab", {"bucket": UNKNOWN_STRING, **FLAGS}, {"bucket": [(S3, "a")]})
    (v,) = analyze_stack([a, b, block_a]).of("bucket-public-access-block-present")
    assert v.urn.endswith("::b")
    # No dependency information: blocks of unknown buckets cover as many buckets as there are blocks.
    anonymous = (PAB, "x-pab", {"bucket": UNKNOWN_STRING, **FLAGS})
    assert analyze_stack([a, b, anonymous, (PAB, "y-pab", {"bucket": UNKNOWN_STRING, **FLAGS})]).violations == []
    short = analyze_stack([a, b, anonymous]).of("bucket-public-access-block-present")
    assert len(short) == 2 and "only 1 block whose bucket is not known yet" in short[0].message


def test_missing_encryption_configuration_is_not_a_violation():
    # S3 encrypts every new object with SSE-S3 since January 2023 (see policies/README.md).
    stack = [(S3, "models", {}), (PAB, "models-pab", {"bucket": "models-1a2b3c4", **FLAGS})]
    assert analyze_stack(stack).violations == []


def test_account_level_block_covers_every_bucket():
    account = ("aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock", "account", dict(FLAGS))
    assert analyze_stack([(S3, "models", {}), account]).violations == []
    half = (account[0], "account", {**FLAGS, "restrictPublicBuckets": False})
    assert analyze_stack([(S3, "models", {}), half]).policies() == {"bucket-public-access-block-present"}


def test_bucket_rule_not_applicable_without_s3_buckets():
    result = analyze_stack(
        [("gcp:storage/bucket:Bucket", "m", {"publicAccessPrevention": "enforced", "uniformBucketLevelAccess": True})]
    )
    assert result.violations == [] and "bucket-public-access-block-present" in result.not_applicable


# gpu-pool-tainted ---------------------------------------------------------------------------------

EKS = "aws:eks/nodeGroup:NodeGroup"
GKE = "gcp:container/nodePool:NodePool"
EKS_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


@pytest.mark.parametrize(
    "props,ok",
    [
        ({"instanceTypes": ["g6e.2xlarge"]}, False),
        ({"instanceTypes": ["p4d.24xlarge"], "taints": EKS_TAINT}, True),
        ({"instanceTypes": ["g4dn.xlarge"]}, False),  # not in the catalog, known GPU family
        ({"amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["x9.large"]}, False),
        ({"instanceTypes": ["m7i.large"]}, True),  # no GPUs: no taint needed
        (
            {"instanceTypes": ["g5.xlarge"], "taints": [{"key": "nvidia.com/gpu", "effect": "PREFER_NO_SCHEDULE"}]},
            False,
        ),
    ],
)
def test_eks_gpu_node_group_taint(props, ok):
    assert (analyze(EKS, {"clusterName": "c", **props}).of("gpu-pool-tainted") == []) is ok


@pytest.mark.parametrize(
    "node_config,ok",
    [
        ({"machineType": "g2-standard-8", "guestAccelerators": [{"type": "nvidia-l4", "count": 1}]}, False),
        ({"machineType": "a3-highgpu-8g"}, False),
        ({"machineType": "n2-standard-8"}, True),
        (
            {
                "machineType": "g2-standard-8",
                "guestAccelerators": [{"type": "nvidia-l4", "count": 1}],
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
            },
            True,
        ),
    ],
)
def test_gke_gpu_node_pool_taint(node_config, ok):
    assert (analyze(GKE, {"cluster": "c", "nodeConfig": node_config}).of("gpu-pool-tainted") == []) is ok


# stack rules --------------------------------------------------------------------------------------


def _eks_pool(taints):
    return (EKS, "gpu", {"clusterName": "c", "instanceTypes": ["g6e.2xlarge"], "taints": taints})


def test_toleration_must_match_a_pool_taint_value():
    d = server()
    pod_spec(d)["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    result = analyze_stack([_eks_pool(EKS_TAINT), k8s_stack_entry(d), k8s_stack_entry(GOOD_PDB)])
    (v,) = result.of("gpu-toleration-matches-pool")
    assert "NodeGroup/gpu" in v.message and v.urn.endswith("::llama-8b")
    pod_spec(d)["tolerations"][0]["value"] = "present"
    assert analyze_stack([_eks_pool(EKS_TAINT), k8s_stack_entry(d), k8s_stack_entry(GOOD_PDB)]).violations == []


def test_toleration_rule_needs_every_hard_taint_of_the_pool():
    extra = [*EKS_TAINT, {"key": "dedicated", "value": "llm", "effect": "NO_EXECUTE"}]
    result = analyze_stack([_eks_pool(extra), k8s_stack_entry(server()), k8s_stack_entry(GOOD_PDB)])
    assert result.policies() == {"gpu-toleration-matches-pool"}


def test_pdb_required_for_replicated_gpu_servers():
    d = server()
    assert analyze_stack([k8s_stack_entry(d), k8s_stack_entry(GOOD_PDB)]).violations == []
    result = analyze_stack([k8s_stack_entry(d)])
    assert result.policies() == {"server-disruption-budget"}
    other_ns = copy.deepcopy(GOOD_PDB)
    other_ns["metadata"]["namespace"] = "elsewhere"
    assert analyze_stack([k8s_stack_entry(d), k8s_stack_entry(other_ns)]).policies() == {"server-disruption-budget"}
    single = server()
    single["spec"]["replicas"] = 1
    assert analyze_stack([k8s_stack_entry(single)]).violations == []


def test_toleration_rule_not_applicable_without_gpu_pools():
    result = analyze_stack([k8s_stack_entry(server()), k8s_stack_entry(GOOD_PDB)])
    assert result.violations == [] and "gpu-toleration-matches-pool" in result.not_applicable


def test_unknowns_during_preview_do_not_crash_or_accuse():
    d = server()
    d["metadata"]["namespace"] = UNKNOWN_STRING
    container(d)["env"].append({"name": "HF_TOKEN", "value": UNKNOWN_STRING})
    container(d)["args"].append(UNKNOWN_STRING)
    pod_spec(d)["tolerations"][0]["key"] = UNKNOWN_STRING
    assert analyze_k8s(d).violations == []
    assert analyze_stack([k8s_stack_entry(d), k8s_stack_entry(GOOD_PDB)]).violations == []


# the README's rules table ------------------------------------------------------------------------


def test_policy_table_lists_every_rule_with_level_and_fix():
    from policies.docs import policy_table_markdown
    from policies.registry import RULES

    table = policy_table_markdown()
    header, rule_line, *rows = table.splitlines()
    assert header == "| rule | level | what it catches | how to fix |" and rule_line == "|---|---|---|---|"
    assert len(rows) == len(RULES)
    for rule, row in zip(RULES, rows, strict=True):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 4 and cells[0].startswith(f"`{rule.name}`") and cells[1] == rule.level
        assert cells[3] and cells[3].endswith(".") and "<" not in row


# the entrance and LoRA adapters ------------------------------------------------------------------

ENTRANCE = load_fixture("good", "entrance.yaml")
POOL, SERVER, PICKER, PICKER_PDB = ENTRANCE


def entrance_stack(*objs) -> list:
    return [k8s_stack_entry(o) for o in objs]


def test_the_entrance_fixture_passes_every_rule():
    for obj in ENTRANCE:
        assert analyze_k8s(obj).violations == [], obj["metadata"]["name"]
    assert analyze_stack(entrance_stack(*ENTRANCE)).violations == []


def test_adapters_from_the_hub_or_an_unnamed_commit_are_caught():
    (obj,) = load_fixture("bad", "adapter-revision-pinned.yaml")
    result = analyze_k8s(obj)
    assert result.policies() == {"adapter-revision-pinned"}
    [message] = [v.message for v in result.of("adapter-revision-pinned")]
    assert "adapter 'sql' from 'example-org/sql-lora', a Hub repo id" in message
    unnamed = copy.deepcopy(SERVER)
    args = container(unnamed)["args"]
    args[args.index("--lora-modules") + 1] = "sql=/models/example-org/sql-lora/main"
    [v] = analyze_k8s(unnamed).of("adapter-revision-pinned")
    assert "from '/models/example-org/sql-lora/main', which does not end in the 40-hex commit" in v.message
    script = copy.deepcopy(SERVER)
    container(script)["command"] = ["/bin/sh", "-c", "exec vllm serve /m --lora-modules sql=org/sql-lora"]
    container(script)["args"] = []
    assert analyze_k8s(script).policies() == {"adapter-revision-pinned"}
    runtime = copy.deepcopy(SERVER)
    container(runtime)["env"].append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    assert any(
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING" in v.message for v in analyze_k8s(runtime).of("adapter-revision-pinned")
    )


def test_a_pool_that_selects_no_server_or_the_wrong_port_is_caught():
    stray = copy.deepcopy(POOL)
    stray["spec"]["selector"]["matchLabels"]["llm-serving.io/model"] = "llama-70b"
    result = analyze_stack(entrance_stack(stray, SERVER, PICKER, PICKER_PDB))
    assert result.policies() == {"inference-pool-selects-its-servers"}
    assert "matches no server pod in namespace 'serving'" in result.of("inference-pool-selects-its-servers")[0].message
    wrong_port = copy.deepcopy(POOL)
    wrong_port["spec"]["targetPorts"] = [{"number": 8080}]
    [v] = analyze_stack(entrance_stack(wrong_port, SERVER, PICKER, PICKER_PDB)).of("inference-pool-selects-its-servers")
    assert "port 8080 of Deployment/llama-8b" in v.message and "(8000)" in v.message
    elsewhere = copy.deepcopy(SERVER)
    elsewhere["metadata"]["namespace"] = "other"
    assert analyze_stack(entrance_stack(POOL, elsewhere, PICKER, PICKER_PDB)).policies() == {
        "inference-pool-selects-its-servers"
    }


def test_a_single_picker_or_one_without_a_budget_is_caught():
    single = copy.deepcopy(PICKER)
    single["spec"]["replicas"] = 1
    [v] = analyze_stack(entrance_stack(POOL, SERVER, single, PICKER_PDB)).of("picker-highly-available")
    assert "runs 1 replica" in v.message
    [v] = analyze_stack(entrance_stack(POOL, SERVER, PICKER)).of("picker-highly-available")
    assert (
        "no PodDisruptionBudget in namespace 'serving' selects its pods (llm-d-router-gateway=llama-8b-epp)"
        in v.message
    )


def test_the_picker_rules_read_the_chart_release_the_program_creates():
    values = {
        "router": {
            "modelServers": {
                "matchLabels": {"llm-serving.io/model": "llama-8b", "llm-serving.io/component": "vllm-server"},
                "targetPorts": [{"number": 8000}],
            },
            "epp": {"replicas": 2},
        }
    }
    release = (
        "kubernetes:helm.sh/v3:Release",
        "llama-8b",
        {
            "chart": "oci://ghcr.io/llm-d/charts/llm-d-router-gateway",
            "version": "v0.10.0",
            "name": "llama-8b",
            "namespace": "serving",
            "values": values,
        },
    )
    assert analyze_stack([release, *entrance_stack(SERVER, PICKER_PDB)]).violations == []
    values["router"]["epp"]["replicas"] = 1
    values["router"]["modelServers"]["matchLabels"]["llm-serving.io/model"] = "typo"
    result = analyze_stack([release, *entrance_stack(SERVER)])
    assert result.policies() == {"picker-highly-available", "inference-pool-selects-its-servers"}
    assert len(result.of("picker-highly-available")) == 2  # one replica, and no budget


def test_a_serving_runtime_gets_its_model_from_the_inference_service_not_vllms_default():
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"containers": [{"name": "kserve-container", "image": "vllm/vllm-openai:v0.32.0"}]},
    }
    c = runtime["spec"]["containers"][0]
    c["command"] = ["vllm", "serve"]  # the InferenceService's model args are merged in at admission
    assert analyze_k8s(runtime).of("model-revision-pinned") == []
    c["args"] = ["Qwen/Qwen3-8B"]  # a model the runtime itself names is still judged
    (found,) = analyze_k8s(runtime).of("model-revision-pinned")
    assert "Hub model 'Qwen/Qwen3-8B' with no --revision" in found.message
