"""The committed dev and prod stacks, evaluated as the real program under mocks.

What a platform engineer relies on before `pulumi up`: every object is valid for the API server,
the policy pack has nothing mandatory to say, the numbers come from the model, and a deliberately
broken variant of each thing the gate guards is caught by the intended rule.
"""

from __future__ import annotations

import copy

import pytest

from common import contract
from offline_plan.mock_runtime import evaluate_stack, secret_paths
from policies.check import check_objects
from tests.support.committed import committed_stack
from tests.support.policy_engine import cloud_records
from tests.support.schemas import validate_all

STACKS = ("dev", "prod")


@pytest.fixture(scope="module", params=STACKS)
def stack(request):
    return request.param, evaluate_stack(request.param)


def kinds(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def test_every_object_validates_against_the_kubernetes_and_crd_schemas(stack):
    _, evaluation = stack
    validate_all(evaluation.kubernetes_objects)


def test_policy_pack_finds_nothing_mandatory(stack):
    _, evaluation = stack
    verdicts = check_objects(evaluation.kubernetes_objects + cloud_records(evaluation))
    assert [v for v in verdicts if v.level == "mandatory"] == []


def test_every_model_is_served_pinned_tolerated_and_probed_from_its_numbers(stack):
    _, evaluation = stack
    objects = evaluation.kubernetes_objects
    sizing = {row["model"]: row for row in evaluation.outputs["sizing"]}
    servers = [d for d in kinds(objects, "Deployment") if d["metadata"]["labels"].get(contract.LABEL_MODEL) in sizing]
    assert len(servers) == len(sizing)
    for deployment in servers:
        row = sizing[deployment["metadata"]["labels"][contract.LABEL_MODEL]]
        assert deployment["metadata"]["labels"][contract.LABEL_REVISION] == row["revision"]
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["image"].endswith(":v0.32.0")
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        assert limits[contract.GPU_RESOURCE] == requests[contract.GPU_RESOURCE] == str(row["tensorParallelSize"])
        assert {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        startup = container["startupProbe"]
        budget = startup.get("initialDelaySeconds", 0) + startup["failureThreshold"] * startup["periodSeconds"]
        assert budget >= row["loadSecondsEstimate"] and budget == row["startupBudgetSeconds"]
        args = container["args"]
        assert args[args.index("--tensor-parallel-size") + 1] == str(row["tensorParallelSize"])
        assert args[args.index("--max-model-len") + 1] == str(row["maxModelLen"])
        assert {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]
        assert any(m["mountPath"] == contract.MODEL_MOUNT_PATH and m.get("readOnly") for m in container["volumeMounts"])


def test_mirror_jobs_pin_the_commit(stack):
    _, evaluation = stack
    revisions = {row["model"]: row["revision"] for row in evaluation.outputs["sizing"]}
    # The mirror Jobs (the verification Job, which checks every model, carries no model label).
    jobs = [
        j
        for j in kinds(evaluation.kubernetes_objects, "Job")
        if j["metadata"]["labels"].get(contract.LABEL_COMPONENT) == "model-mirror"
    ]
    assert len(jobs) == len(revisions)
    for job in jobs:
        model = job["metadata"]["labels"][contract.LABEL_MODEL]
        pod = job["spec"]["template"]["spec"]
        argv = [
            a
            for c in pod.get("initContainers", []) + pod["containers"]
            for a in c.get("command", []) + c.get("args", [])
        ]
        pinned = argv[argv.index("--revision") + 1]
        assert pinned == revisions[model] and len(pinned) == 40 and all(ch in "0123456789abcdef" for ch in pinned)


def test_tokens_stay_secret_end_to_end(stack):
    _, evaluation = stack
    for resource in evaluation.resources:
        if resource.type == "kubernetes:core/v1:Secret":
            assert secret_paths(resource.inputs), f"{resource.name} holds a value that is not marked secret"
    for obj in evaluation.kubernetes_objects:
        for pod in _pod_specs(obj):
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                for env in container.get("env", []):
                    if any(word in env["name"] for word in ("TOKEN", "API_KEY")):
                        assert "valueFrom" in env and "value" not in env, (obj["metadata"]["name"], env)


def test_prod_serves_the_70b_model_across_gpus_and_the_8b_on_two_warm_replicas():
    evaluation = committed_stack("prod")
    sizing = {row["model"]: row for row in evaluation.outputs["sizing"]}
    assert sizing["llama-3-3-70b-instruct"]["tensorParallelSize"] >= 2
    assert sizing["llama-3-1-8b-instruct"]["minReplicas"] >= 2
    objects = evaluation.kubernetes_objects
    big = next(d for d in kinds(objects, "Deployment") if d["metadata"]["name"] == "llama-3-3-70b-instruct")
    shm = [v for v in big["spec"]["template"]["spec"]["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    assert shm and shm[0]["emptyDir"]["sizeLimit"]
    assert any(p["metadata"]["name"].startswith("llama-3-1-8b-instruct") for p in kinds(objects, "PodDisruptionBudget"))


def _pod_specs(obj):
    spec = obj.get("spec") or {}
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        return [spec["template"]["spec"]]
    if obj["kind"] == "Pod":
        return [spec]
    return []


def _first(objects, kind, model=None):
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] == kind and (model is None or labels.get(contract.LABEL_MODEL) == model):
            return obj
    raise AssertionError(f"no {kind}")


def _server(objects):
    return _first(
        [
            o
            for o in objects
            if o["kind"] == "Deployment"
            and "vllm" in str(o["spec"]["template"]["spec"]["containers"][0].get("command"))
        ],
        "Deployment",
    )


def _break_latest_tag(objects):
    _server(objects)["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:latest"


def _break_gpu_only_in_requests(objects):
    resources = _server(objects)["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"].pop(contract.GPU_RESOURCE)


def _break_short_startup_budget(objects):
    server = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "llama-3-3-70b-instruct")
    server["spec"]["template"]["spec"]["containers"][0]["startupProbe"].update(periodSeconds=10, failureThreshold=6)


def _break_unpinned_revision(objects):
    job = _first(objects, "Job")
    for container in (
        job["spec"]["template"]["spec"].get("initContainers", []) + job["spec"]["template"]["spec"]["containers"]
    ):
        for field in ("command", "args"):
            values = container.get(field) or []
            if "--revision" in values:
                values[values.index("--revision") + 1] = "main"
                return
    raise AssertionError("no --revision in the mirror Job")


def _break_token_in_env(objects):
    _server(objects)["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz0123456789"}
    )


@pytest.mark.parametrize(
    "breaker, policy",
    [
        (_break_latest_tag, "image-tag-pinned"),
        (_break_gpu_only_in_requests, "gpu-in-limits"),
        (_break_short_startup_budget, "startup-probe-budget"),
        (_break_unpinned_revision, "model-revision-pinned"),
        (_break_token_in_env, "no-literal-secrets"),
    ],
)
def test_a_broken_variant_of_prod_is_caught_by_the_intended_rule(breaker, policy):
    evaluation = committed_stack("prod")
    objects = copy.deepcopy(evaluation.kubernetes_objects)
    breaker(objects)
    mandatory = {v.policy for v in check_objects(objects + cloud_records(evaluation)) if v.level == "mandatory"}
    assert policy in mandatory, mandatory


def test_multi_node_replica_joins_the_rdma_fabric_of_the_network_operator():
    overrides = {
        "cloud": "existing",
        "cluster": {"kubeconfig": "/etc/kubeconfig", "rwxStorageClass": "nfs"},
        "security": {"profile": "production", "networkPolicyEnforcement": "calico"},
        "exposure": {},
        "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 2}],
        "operators": {
            "gpuOperator": {"driver": "preinstalled"},
            "networkOperator": {"enabled": True, "interface": "ens1f0"},
        },
        "addons": {"preinstalled": ["prometheusOperator", "leaderWorkerSet"]},
        "models": [
            {
                "repo": "meta-llama/Llama-3.3-70B-Instruct",
                "revision": "38ff4e01a70559264c95945aa04b900a11e68422",
                "gated": True,
                "pool": "h100",
                "tensorParallelSize": 8,
                "pipelineParallelSize": 2,
                "maxModelLen": 32768,
            }
        ],
    }
    evaluation = evaluate_stack("prod", overrides=overrides)
    objects = evaluation.kubernetes_objects
    # The Network Operator's IPPool and MacvlanNetwork CRDs are not among tests/fixtures/crds.
    validate_all([o for o in objects if o["kind"] not in ("IPPool", "MacvlanNetwork")])
    [lws] = kinds(objects, "LeaderWorkerSet")
    [network] = kinds(objects, "MacvlanNetwork")
    templates = lws["spec"]["leaderWorkerTemplate"]
    for template in (templates["leaderTemplate"], templates["workerTemplate"]):
        assert template["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == network["metadata"]["name"]
        resources = template["spec"]["containers"][0]["resources"]
        assert (
            resources["limits"]["rdma/rdma_shared_device_a"]
            == resources["requests"]["rdma/rdma_shared_device_a"]
            == "1"
        )
    # A replica inside one node needs no fabric.
    single = evaluate_stack(
        "prod",
        overrides={
            **overrides,
            "models": [{**overrides["models"][0], "tensorParallelSize": 4, "pipelineParallelSize": 1}],
        },
    )
    [deployment] = list(kinds(single.kubernetes_objects, "Deployment"))
    assert (
        "rdma/rdma_shared_device_a"
        not in deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    )


def test_multi_node_replica_on_eks_uses_every_efa_interface_of_its_nodes():
    model = {
        "repo": "meta-llama/Llama-3.3-70B-Instruct",
        "revision": "38ff4e01a70559264c95945aa04b900a11e68422",
        "gated": True,
        "pool": "h100",
        "tensorParallelSize": 8,
        "pipelineParallelSize": 2,
        "maxModelLen": 32768,
    }
    evaluation = evaluate_stack("prod", overrides={"models": [model]})
    [lws] = kinds(evaluation.kubernetes_objects, "LeaderWorkerSet")
    releases = [
        r
        for r in evaluation.resources
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs.get("chart") == "aws-efa-k8s-device-plugin"
    ]
    assert len(releases) == 1
    for template in (
        lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"],
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"],
    ):
        container = template["spec"]["containers"][0]
        # p5.48xlarge has 32 EFA interfaces; one pod per node takes them all.
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]
