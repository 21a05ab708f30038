"""One vLLM model and one KServe model in one stack: they share the pool, operators and model store."""

from __future__ import annotations

from common import contract
from offline_plan.mock_runtime import evaluate_stack
from tests.support.schemas import validate_all

REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"  # any pinned commit with committed metadata works
VLLM_MODEL = {
    "repo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": REVISION,
    "name": "llama-vllm",
    "pool": "l4",
    "maxModelLen": 8192,
}
KSERVE_MODEL = {
    "repo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": REVISION,
    "name": "llama-kserve",
    "engine": "kserve",
    "pool": "l4",
    "maxModelLen": 8192,
}
POOLS = [{"name": "l4", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 4}]


def test_vllm_and_kserve_models_share_pool_operators_and_store():
    ev = evaluate_stack("dev", overrides={"exposure": {}, "pools": POOLS, "models": [VLLM_MODEL, KSERVE_MODEL]})
    objs = ev.kubernetes_objects
    validate_all(objs)

    [deployment] = [
        o
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"].get("labels", {}).get(contract.LABEL_MODEL) == "llama-vllm"
    ]
    [isvc] = [o for o in objs if o["kind"] == "InferenceService"]
    assert isvc["metadata"]["name"] == "llama-kserve"
    # Same pool: identical node selector and toleration.
    pod = deployment["spec"]["template"]["spec"]
    predictor = isvc["spec"]["predictor"]
    assert (
        pod["nodeSelector"]
        == predictor["nodeSelector"]
        == {contract.LABEL_POOL: "l4", contract.LABEL_ACCELERATOR: "l4"}
    )
    toleration = {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": contract.GPU_TAINT_EFFECT}
    assert toleration in pod["tolerations"] and toleration in predictor["tolerations"]
    # One operator install and one shared namespace for both engines.
    assert len(ev.of_type("llm-serving:k8s:ServingNamespace")) == 1
    # The GPU Operator is installed exactly once for both engines (the mock runtime does not record
    # dependsOn, so the wiring that makes both servers wait for it is __main__'s operators_ready).
    assert len(ev.of_type("llm-serving:k8s:GpuOperator")) == 1
    assert len([r for r in ev.resources if r.type.startswith("kubernetes:helm.sh") and "gpu-operator" in r.name]) == 1
    # Both models have their weights mirrored by the same model-store code, pinned to the commit.
    stores = ev.of_type("llm-serving:k8s:ModelStore")
    assert len(stores) == 2
    assert predictor["model"]["storageUri"].endswith(f"/models/meta-llama/Llama-3.1-8B-Instruct/{REVISION}")
    assert predictor["model"]["storageUri"].startswith("gs://")


def test_servers_wait_for_the_mirror_and_the_operators_and_operators_for_the_cluster():
    ev = evaluate_stack("dev", overrides={"exposure": {}, "pools": POOLS, "models": [VLLM_MODEL, KSERVE_MODEL]})
    by_type = lambda t: [r for r in ev.resources if r.type == t]  # noqa: E731
    [release] = [r for r in by_type("kubernetes:helm.sh/v3:Release") if "gpu-operator" in r.name]
    # The mirror Jobs, one per model (the stack's verification Job checks every model and has no model label).
    jobs = {
        r.inputs["metadata"]["labels"][contract.LABEL_MODEL]: r
        for r in by_type("kubernetes:batch/v1:Job")
        if contract.LABEL_MODEL in r.inputs["metadata"]["labels"]
    }
    [deployment] = by_type("kubernetes:apps/v1:Deployment")
    [isvc] = by_type("kubernetes:serving.kserve.io/v1beta1:InferenceService")
    for server, model in ((deployment, "llama-vllm"), (isvc, "llama-kserve")):
        assert jobs[model].urn in server.dependencies, f"{model} does not wait for its mirror Job"
        assert release.urn in server.dependencies, f"{model} does not wait for the GPU Operator"
    # The operators wait for the cluster layer: depending on the component means on each of its
    # children, the GPU node pool among them.
    [operator] = by_type("llm-serving:k8s:GpuOperator")
    gpu_pool = "llm-serving-dev-l4-np"
    assert gpu_pool in [r.name for r in by_type("gcp:container/nodePool:NodePool")]
    assert any(dep.endswith(f"gcp:container/nodePool:NodePool::{gpu_pool}") for dep in operator.dependencies)
