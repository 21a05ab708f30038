"""Every invalid stack config gets the intended one-line message naming the file and the key."""

from __future__ import annotations

import json

import pulumi
import pytest

import stack_config as cfg
from offline_plan.mock_runtime import run_in_mocks
from stack_config import ConfigError, parse_stack_config
from tests.support.config_edits import SOURCE, base, edit, problems_of


def test_valid_configs_parse_with_defaults():
    for cloud in ("gcp", "aws", "existing"):
        stack = parse_stack_config(base(cloud), SOURCE)
        model = stack.models[0]
        assert model.tensorParallelSize == "auto"
        assert model.gpuMemoryUtilization == 0.9
        assert model.engine == "vllm"
        assert model.served_name == "qwen2-5-1-5b-instruct"
        assert ":" in model.image and not model.image.endswith(":latest")
        assert stack.pools[0].minNodes == 0


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("models[0].revision", "main", "models[0].revision: 'main' is a branch or tag; pin a 40-character commit SHA"),
        ("models[0].revision", "v1.0", "models[0].revision: 'v1.0' is a branch or tag"),
        ("models[0].revision", "0e9e39f", "models[0].revision: '0e9e39f' is a short SHA; pin the full 40-character"),
        ("models[0].revision", "A" * 40, "has upper-case letters"),
        ("models[0].repo", "llama-3", "models[0].repo: 'llama-3' is not a Hub repo id; write it as `org/name`"),
        ("models[0].pool", "l44", "models[0].pool: no pool named 'l44' (did you mean 'l4'?); pools: l4"),
        ("models[0].engine", "tgi", "models[0].engine: 'tgi' is not allowed; use 'vllm' or 'kserve'"),
        (
            "models[0].tensorParallelSize",
            "four",
            "models[0].tensorParallelSize: 'four' is not allowed; use `auto` or a whole number",
        ),
        ("models[0].tensorParallelSize", 0, "models[0].tensorParallelSize: 0 is not allowed"),
        ("models[0].gpuMemoryUtilization", 1.5, "models[0].gpuMemoryUtilization: must be less than or equal to 0.99"),
        ("models[0].maxModelLenght", 4096, "models[0].maxModelLenght: unknown key (did you mean 'maxModelLen'?)"),
        ("models[0].kvCacheDtype", "int8", "models[0].kvCacheDtype: 'int8' is not allowed; use 'auto', 'fp8'"),
        (
            "models[0].image",
            "vllm/vllm-openai:latest",
            "models[0].image: 'vllm/vllm-openai:latest' uses the floating tag latest",
        ),
        ("models[0].image", "vllm/vllm-openai", "models[0].image: 'vllm/vllm-openai' has no tag or digest"),
        ("models[0].name", "My_Model", "models[0].name: 'My_Model' is not a valid name"),
        ("models[0].replicas", 0, "models[0].replicas: must be greater than or equal to 1"),
        (
            "models[0].canaryTrafficPercent",
            10,
            "models[0]: Value error, canaryTrafficPercent applies to engine: kserve only",
        ),
        ("pools[0].gpu", "H100", "pools[0].gpu: unknown GPU 'H100'"),
        ("pools[0].minNodes", 3, "pools[0]: Value error, minNodes (3) is greater than maxNodes (1)"),
        ("pools[0].capacityType", "preemptible", "pools[0].capacityType: 'preemptible' is not allowed"),
        ("pools[0].gpusPerNode", 3, "pools[0].gpusPerNode: no gcp machine has 3 x L4; choose one of [1, 2, 4, 8]"),
        (
            "pools[0].machineType",
            "n2-standard-8",
            "pools[0].machineType: 'n2-standard-8' is not a GPU machine type on gcp",
        ),
        ("pools[0].efa", True, "pools[0].efa: EFA is an AWS feature; remove it on gcp"),
        ("cloud", "azure", "cloud: 'azure' is not allowed; use 'aws', 'gcp' or 'existing'"),
        ("cluster.nmae", "x", "cluster.nmae: unknown key (did you mean 'name'?)"),
        (
            "modelStore.loadFrom",
            "existing-claim",
            "modelStore: Value error, loadFrom is existing-claim but existingClaim is not set",
        ),
        ("operators.gpuOperator.migStrategy", "all", "operators.gpuOperator.migStrategy: 'all' is not allowed"),
    ],
)
def test_invalid_values_name_the_key_and_the_fix(path, value, expected):
    problems = problems_of(edit(base(), path, value))
    assert any(expected.replace("Value error, ", "") in p for p in problems), problems


def test_gpu_not_offered_on_the_cloud():
    raw = base("gcp")
    raw["pools"][0]["gpu"] = "A10G"
    [problem] = problems_of(raw)
    assert problem.startswith(f"{SOURCE}: pools[0].gpu: A10G is not offered on gcp (only on aws); GPUs on gcp: L4,")
    # A catalog GPU without cloud machines (GB10, RTX PRO 6000) points at existing clusters.
    raw["pools"][0]["gpu"] = "GB10"
    [problem] = problems_of(raw)
    assert "GB10 is not offered on gcp (the catalog lists no cloud machine for it; use cloud: existing)" in problem


def test_aws_machine_checks():
    raw = base("aws")
    raw["pools"][0].update(machineType="g5.xlarge")
    assert problems_of(raw) == [f"{SOURCE}: pools[0].machineType: g5.xlarge carries A10G, not H100-80GB"]
    raw["pools"][0].update(machineType="p5.4xlarge", gpusPerNode=8)
    assert problems_of(raw) == [
        f"{SOURCE}: pools[0].gpusPerNode: p5.4xlarge has 1 GPU(s); set gpusPerNode to 1 or drop machineType"
    ]
    raw["pools"][0].update(machineType="m5.large", gpusPerNode=1)
    assert "pools[0].machineType: 'm5.large' is not a GPU machine type on aws" in problems_of(raw)[0]
    raw["pools"][0] = {"name": "l4", "gpu": "L4", "efa": True}
    raw["models"][0]["pool"] = "l4"
    assert "pools[0].efa: g6.xlarge does not support EFA; EFA instance types: p4d.24xlarge" in problems_of(raw)[0]
    raw["pools"][0] = {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "efa": True}
    raw["models"][0]["pool"] = "h100"
    assert parse_stack_config(raw, SOURCE).pools[0].efa


def test_existing_cluster_needs_a_kubeconfig_and_a_storage_class():
    raw = base("existing")
    raw["cluster"] = {}
    problems = problems_of(raw)
    assert any("cluster.kubeconfig: cloud is existing: give the kubeconfig path" in p for p in problems)
    assert any("cluster.rwxStorageClass: cloud is existing and models load from a volume" in p for p in problems)


def test_duplicates_are_named():
    raw = base()
    raw["models"].append(dict(raw["models"][0]))
    assert any("two models are served as 'qwen2-5-1-5b-instruct'" in p for p in problems_of(raw))
    raw = base()
    raw["pools"].append(dict(raw["pools"][0]))
    assert any("pool name 'l4' is used twice" in p for p in problems_of(raw))


def test_required_keys_and_wrong_shapes():
    assert problems_of({"pools": base()["pools"], "models": base()["models"]}) == [
        f"{SOURCE}: cloud: required key is missing"
    ]
    assert any(
        "models: Input should be a valid list" in p for p in problems_of(edit(base(), "models", {"repo": "a/b"}))
    )
    assert problems_of("not a mapping") == [f"{SOURCE}: the config must be a mapping of keys, got str"]  # type: ignore[arg-type]


def test_default_model_name_is_a_dns_label():
    assert cfg.default_model_name("meta-llama/Llama-3.1-8B-Instruct") == "llama-3-1-8b-instruct"
    assert cfg.default_model_name("org/7B_model") == "m-7b-model"


def _config_values(raw: dict, secrets: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    values = {f"llm-serving:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
    for key, value in (secrets or {}).items():
        values[f"llm-serving:{key}"] = value
    if raw.get("cloud") == "gcp":
        values["gcp:project"] = "test-project"  # a GKE stack needs one (stack_config/gcp_project.py)
    return values, [f"llm-serving:{k}" for k in (secrets or {})]


def _load(values, secret_keys):
    loaded = {}
    run_in_mocks(lambda: loaded.setdefault("cfg", cfg.load()), stack="dev", config=values, secret_keys=secret_keys)
    return loaded["cfg"]


def test_load_reads_structured_pulumi_config_and_keeps_secrets_secret():
    raw = base()
    raw["models"][0]["gated"] = True
    values, secret_keys = _config_values(raw, {"hfToken": "hf_example", "apiKey": "sk-example"})
    loaded = _load(values, secret_keys)
    assert loaded.source == "Pulumi.dev.yaml"
    assert loaded.config.models[0].gated
    assert loaded.hub_token == "hf_example"
    assert isinstance(loaded.hf_token, pulumi.Output) and isinstance(loaded.api_key, pulumi.Output)


def test_gated_model_without_token_says_how_to_set_it():
    raw = base()
    raw["models"][0]["gated"] = True
    values, secret_keys = _config_values(raw)
    with pytest.raises(ConfigError) as info:
        _load(values, secret_keys)
    assert info.value.problems == [
        (
            "Pulumi.dev.yaml: hfToken: models[0] (Qwen/Qwen2.5-1.5B-Instruct) is gated and needs a Hugging Face token; "
            "set it with `pulumi config set --secret hfToken hf_... -s dev`"
        )
    ]


def test_secret_set_as_plain_config_is_refused():
    values, _ = _config_values(base(), {"apiKey": "sk-plain"})
    with pytest.raises(ConfigError) as info:
        _load(values, [])
    assert info.value.problems == [
        (
            "Pulumi.dev.yaml: apiKey: is set as plain text; secrets must be encrypted: "
            "`pulumi config rm apiKey && pulumi config set --secret apiKey <value> -s dev` "
            "(and rotate it if the stack file was shared)"
        )
    ]


def test_operator_options_that_cannot_work_are_refused():
    raw = base("existing")
    raw["operators"] = {"gpuOperator": {"driver": "auto"}}
    assert any(
        "operators.gpuOperator.driver: cloud is existing, so say who installs the GPU driver" in p
        for p in problems_of(raw)
    )
    raw = base("gcp")
    raw["operators"] = {"gpuOperator": {"timeSlicingReplicas": 4}}
    assert any(
        "operators.gpuOperator.timeSlicingReplicas: on GKE with GKE-managed drivers" in p for p in problems_of(raw)
    )
    raw = base("gcp")
    raw["operators"] = {"gpuOperator": {"driver": "operator"}}
    assert any(
        "`operator` on GKE needs pools with gkeDriverVersion INSTALLATION_DISABLED" in p for p in problems_of(raw)
    )
    raw["pools"][0]["gkeDriverVersion"] = "INSTALLATION_DISABLED"
    assert parse_stack_config(raw, SOURCE).operators.gpuOperator.driver == "operator"
    raw = base("aws")
    raw["operators"] = {"networkOperator": {"enabled": True}}
    assert any(
        "operators.networkOperator.enabled: on EKS, multi-node NCCL goes over EFA" in p for p in problems_of(raw)
    )
    raw = base("existing")
    raw["operators"] = {"gpuOperator": {"driver": "preinstalled", "timeSlicingReplicas": 4}}
    raw["models"][0]["tensorParallelSize"] = 2
    assert any(
        "models[0].tensorParallelSize: GPU time-slicing gives each pod one shared GPU" in p for p in problems_of(raw)
    )


def test_misspelt_top_level_key_in_the_stack_file_is_reported():
    values, secret_keys = _config_values({**base(), "modells": []})
    with pytest.raises(ConfigError) as info:
        _load(values, secret_keys)
    assert info.value.problems == [
        (
            "Pulumi.dev.yaml: modells: unknown key (did you mean 'models'?); allowed here: cloud, cluster, pools, "
            "operators, modelStore, models, exposure, monitoring, addons, images, security, deployer, policyConfig, "
            "role"
        )
    ]


def test_system_pool_is_cpu_only_and_its_name_reserved():
    raw = base("aws")
    raw["cluster"] = {"systemPool": {"machineType": "p5.48xlarge"}}
    assert any(
        "cluster.systemPool.machineType: p5.48xlarge is a GPU machine type (8 x H100-80GB)" in p
        for p in problems_of(raw)
    )
    raw = base("aws")
    raw["pools"][0]["name"] = "system"
    raw["models"][0]["pool"] = "system"
    assert any("pools[0].name: 'system' is reserved for the CPU system pool" in p for p in problems_of(raw))


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (
            "pools[0].capacityType",
            "capacity-block",
            "pools[0].capacityType: capacity-block is an AWS EC2 Capacity Block",
        ),
        ("pools[0].zones", [], "pools[0].zones: List should have at least 1 item"),
        ("cluster.kubernetesVersion", "banana", "cluster.kubernetesVersion: String should match pattern"),
        ("cluster.name", "a" * 41, "cluster.name: GKE cluster names have at most 40 characters"),
        (
            "operators.gpuOperator.chartVersion",
            "latest",
            "operators.gpuOperator.chartVersion: 'latest' is not an exact chart version",
        ),
        ("operators.networkOperator.chartVersion", "^26.4", "'^26.4' is not an exact chart version"),
        (
            "operators.networkOperator.ipRange",
            "10.0.0.1/24",
            "operators.networkOperator.ipRange: '10.0.0.1/24' is not a network in CIDR form",
        ),
        ("operators.namespace", "Bad NS", "operators.namespace: 'Bad NS' is not a valid name"),
        ("modelStore.bucketName", "Bad_Name!", "modelStore.bucketName: 'Bad_Name!' is not a valid bucket name"),
        ("modelStore.prefix", "/models/", "modelStore.prefix: String should match pattern"),
        ("modelStore.mirrorPool", "cpu", "modelStore.mirrorPool: no pool named 'cpu'; pools: l4"),
        ("monitoring.labels", {"bad key!": "x"}, "monitoring.labels: 'bad key!' is not a valid Kubernetes label key"),
        (
            "models[0].quantization",
            "awk",
            "models[0].quantization: 'awk' is not a vLLM quantization method (did you mean 'awq'?)",
        ),
        ("models[0].replicas", 3, None),
    ],
)
def test_keys_that_would_only_fail_at_pulumi_up_fail_here(path, value, expected):
    raw = edit(base(), path, value)
    if path == "cluster.name":
        raw["cluster"]["name"] = value
    if expected is None:
        # replicas alone is fine; with autoscaling it belongs to the autoscaler.
        parse_stack_config(raw, SOURCE)
        raw["models"][0]["autoscaling"] = {"enabled": True}
        expected = "replicas is decided by the autoscaler when autoscaling is enabled"
    problems = problems_of(raw)
    assert any(expected in p for p in problems), problems


def test_capacity_block_needs_its_reservation_on_aws():
    raw = base("aws")
    raw["pools"][0]["capacityType"] = "capacity-block"
    assert any(
        "pools[0].capacityReservationId: capacityType is capacity-block: give the Capacity Block's reservation id" in p
        for p in problems_of(raw)
    )
    raw["pools"][0]["capacityReservationId"] = "cr-0123456789abcdef0"
    assert parse_stack_config(raw, SOURCE).pools[0].capacityReservationId == "cr-0123456789abcdef0"
    raw["pools"][0]["capacityReservationId"] = "cr-nope"
    assert any("pools[0].capacityReservationId: String should match pattern" in p for p in problems_of(raw))


def test_cloud_only_pool_options_are_refused_on_an_existing_cluster_and_a_second_driver_on_eks():
    raw = base("existing")
    raw["pools"][0].update(efa=True, zones=["us-central1-a"])
    problems = problems_of(raw)
    assert any("pools[0].efa: applies to pools this program creates on aws or gcp" in p for p in problems)
    assert any("pools[0].zones: applies to pools this program creates on aws or gcp" in p for p in problems)
    raw = base("aws")
    raw["operators"] = {"gpuOperator": {"driver": "operator"}}
    assert any(
        "operators.gpuOperator.driver: on EKS the GPU node groups run the AL2023 NVIDIA AMI" in p
        for p in problems_of(raw)
    )


def test_a_misspelt_project_namespace_is_reported_and_provider_namespaces_pass():
    values, secret_keys = _config_values(base())
    values["llm-servng:models"] = "[]"
    values["aws:region"] = "eu-west-1"
    with pytest.raises(ConfigError) as info:
        _load(values, secret_keys)
    assert info.value.problems == [
        "Pulumi.dev.yaml: llm-servng:models: unknown namespace 'llm-servng' (did you mean 'llm-serving'?)"
    ]


def test_gpu_name_in_the_wrong_case_gets_a_hint():
    assert any(
        "pools[0].gpu: unknown GPU 'l4' (did you mean 'L4'?)" in p
        for p in problems_of(edit(base(), "pools[0].gpu", "l4"))
    )


# ---------------------------------------------------------------------------------------------
# Latency SLOs, alerting and the second scaling signal


def test_slo_defaults_are_chat_targets_on_bucket_bounds():
    model = parse_stack_config(base(), SOURCE).models[0]
    assert (
        model.slo.enabled,
        model.slo.timeToFirstToken.seconds,
        model.slo.timeToFirstToken.objective,
        model.slo.interTokenLatency.seconds,
        model.slo.interTokenLatency.objective,
    ) == (True, 2.5, 0.99, 0.1, 0.99)
    assert model.autoscaling.kvCacheThreshold == 0.8
    ok = edit(
        base(),
        "models[0].slo",
        {
            "timeToFirstToken": {"seconds": 1, "objective": 0.995},
            "interTokenLatency": {"seconds": 0.075, "objective": 0.95},
        },
    )
    slo = parse_stack_config(ok, SOURCE).models[0].slo
    assert (slo.timeToFirstToken.seconds, slo.interTokenLatency.objective) == (1.0, 0.95)


@pytest.mark.parametrize(
    "path,value,expected",
    [
        (
            "models[0].slo.timeToFirstToken.seconds",
            3,
            (
                "models[0].slo.timeToFirstToken.seconds: 3 s is not a bucket bound of "
                "vllm:time_to_first_token_seconds in vLLM 0.32.0, so no series counts the requests under it; use a "
                "bound (nearest: 2.5 or 5)"
            ),
        ),
        (
            "models[0].slo.interTokenLatency.seconds",
            0.12,
            "models[0].slo.interTokenLatency.seconds: 0.12 s is not a bucket bound of vllm:inter_token_latency_seconds",
        ),
        ("models[0].slo.interTokenLatency.seconds", 100, "(nearest: 80)"),
        (
            "models[0].slo.timeToFirstToken.objective",
            0.9,
            "models[0].slo.timeToFirstToken.objective: 0.9 must be above 0.9306 and below 1",
        ),
        ("models[0].slo.timeToFirstToken.objective", 1, "must be above 0.9306 and below 1"),
        ("models[0].slo.timeToFirstToken.secs", 3, "models[0].slo.timeToFirstToken.secs"),
        (
            "monitoring.ttftP95Seconds",
            2.0,
            "monitoring: ttftP95Seconds was replaced by per-model latency SLOs: set models[].slo.timeToFirstToken",
        ),
        ("monitoring.runbookUrl", "file:///runbook.md", "monitoring.runbookUrl: 'file:///runbook.md' is neither"),
        ("monitoring.runbookUrl", "docs/runbook.md#top", "monitoring.runbookUrl:"),
        ("monitoring.errorRateAlert", 1, "monitoring.errorRateAlert"),
        ("models[0].autoscaling.kvCacheThreshold", 0, "models[0].autoscaling.kvCacheThreshold"),
    ],
)
def test_slo_and_alerting_values_name_the_key_and_the_fix(path, value, expected):
    problems = problems_of(edit(base(), path, value))
    assert len(problems) == 1 and expected in problems[0], problems


def test_runbook_url_may_be_relative_or_a_web_address():
    for url in ("docs/runbook.md", "https://github.com/acme/llm-serving/blob/main/docs/runbook.md"):
        assert parse_stack_config(edit(base(), "monitoring.runbookUrl", url), SOURCE).monitoring.runbookUrl == url


def test_kv_cache_scaling_must_act_before_the_kv_cache_alert():
    raw = edit(base(), "models[0].autoscaling", {"enabled": True, "kvCacheThreshold": 0.95})
    [problem] = problems_of(raw)
    assert problem == (
        f"{SOURCE}: models[0].autoscaling.kvCacheThreshold: 0.95 is not below monitoring.kvCacheUsageAlert "
        "(0.95): the KV-cache alert would fire before the autoscaler adds a replica; lower the threshold "
        "or raise the alert"
    )
    assert parse_stack_config(edit(raw, "monitoring.kvCacheUsageAlert", 0.98), SOURCE)


def test_slo_applies_to_kserve_models_too():
    # KServe models run the pinned vLLM (their own ServingRuntime), so its latency histograms are the
    # vLLM path's and the same objectives apply.
    raw = edit(edit(base(), "models[0].engine", "kserve"), "models[0].slo", {"enabled": False})
    assert parse_stack_config(raw, SOURCE).models[0].slo.enabled is False
