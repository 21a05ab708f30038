"""The per-model plan: every number a deployment uses, and the refusals a user needs at plan time."""

from __future__ import annotations

import dataclasses
import json

import pytest

from common import gpus
from planner import plan
from planner.hub import ModelMetadata
from stack_config import parse_stack_config
from tests.support import paths

ROOT = paths.ROOT
LLAMA_8B = ("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659")
LLAMA_70B = ("meta-llama/Llama-3.3-70B-Instruct", "38ff4e01a70559264c95945aa04b900a11e68422")


def stack(models: list[dict], pool: dict | None = None, model_store: dict | None = None):
    raw = {
        "cloud": "aws",
        "pools": [pool or {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 2}],
        "models": [{"pool": "h100", **m} for m in models],
    }
    if model_store:
        raw["modelStore"] = model_store
    return parse_stack_config(raw, "Pulumi.test.yaml")


def model(which, **extra):
    repo, revision = which
    return {"repo": repo, "revision": revision, **extra}


def plans_for(models, **kwargs):
    return plan.build_plans(stack(models, **kwargs), plan.default_metadata_loader(None), source="Pulumi.test.yaml")


def test_auto_tensor_parallelism_is_the_smallest_that_fits():
    [small, big] = plans_for([model(LLAMA_8B, maxModelLen=32768), model(LLAMA_70B, maxModelLen=32768)])
    assert small.tensor_parallel_size == 1
    assert big.tensor_parallel_size == 4
    assert big.sizing.fits and big.sizing.kv_cache_tokens >= 32768
    # fp8 KV cache halves the bytes per token, so the same budget holds about twice the tokens.
    [big_fp8] = plans_for([model(LLAMA_70B, maxModelLen=32768, kvCacheDtype="fp8")])
    assert big_fp8.tensor_parallel_size == 4
    assert 1.9 < big_fp8.sizing.kv_cache_tokens / big.sizing.kv_cache_tokens < 2.1


def test_numbers_follow_the_gpu_and_the_context():
    [on_h100] = plans_for([model(LLAMA_8B, maxModelLen=8192)])
    [on_l4] = plans_for([model(LLAMA_8B, maxModelLen=8192, pool="l4")], pool={"name": "l4", "gpu": "L4", "maxNodes": 1})
    assert on_l4.sizing.kv_cache_tokens < on_h100.sizing.kv_cache_tokens / 5
    [long] = plans_for([model(LLAMA_8B, maxModelLen=65536)])
    assert long.max_model_len == 65536 and long.sizing.max_concurrency < on_h100.sizing.max_concurrency


def test_model_that_does_not_fit_names_the_smallest_tp_that_would():
    with pytest.raises(plan.PlanError) as info:
        plans_for([model(LLAMA_70B, maxModelLen=32768, tensorParallelSize=2)])
    [problem] = info.value.problems
    assert problem.startswith(
        "Pulumi.test.yaml: models[0]: meta-llama/Llama-3.3-70B-Instruct does not fit on 2 x H100-80GB"
    )
    assert problem.endswith("the smallest tensor-parallel size that fits is 4")


def test_auto_that_cannot_fit_in_one_node_says_what_to_change():
    with pytest.raises(plan.PlanError) as info:
        plans_for([model(LLAMA_70B, pool="l4")], pool={"name": "l4", "gpu": "L4", "gpusPerNode": 4, "maxNodes": 1})
    [problem] = info.value.problems
    # The weights alone overflow four L4s: a shorter context cannot help, so it is not suggested.
    assert "does not fit: even on 4 x L4 (pool l4) the weights" in problem
    assert "lower maxModelLen" not in problem
    assert "spread a replica over 4 nodes (tensorParallelSize 4, pipelineParallelSize 4)" in problem
    # When only the context does not fit, the context is what to change.
    with pytest.raises(plan.PlanError) as info:
        plans_for([model(LLAMA_8B, pool="l4")], pool={"name": "l4", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 1})
    [problem] = info.value.problems
    assert "the KV cache holds" in problem and "less than one 131072-token request; lower maxModelLen" in problem


def test_tensor_parallelism_stays_inside_a_node():
    with pytest.raises(plan.PlanError, match=r"models\[0\].tensorParallelSize: 16 exceeds the 8 GPUs per node"):
        plans_for([model(LLAMA_70B, tensorParallelSize=16)])


def test_context_longer_than_the_model_is_refused():
    with pytest.raises(
        plan.PlanError,
        match=r"models\[0\].maxModelLen: vLLM refuses to start: max_model_len 1,000,000 is greater than the model's "
        r"derived maximum \(max_position_embeddings=131,072",
    ):
        plans_for([model(LLAMA_8B, maxModelLen=1_000_000)])


def test_pool_capacity_is_checked_across_models():
    with pytest.raises(plan.PlanError) as info:
        plans_for([model(LLAMA_70B, maxModelLen=32768, replicas=5)])
    [problem] = info.value.problems
    assert problem == (
        "Pulumi.test.yaml: pools[0].maxNodes: the models on pool h100 need 20 GPUs at their minimum "
        "replicas but it has at most 16 (2 x 8); raise maxNodes to 3 or lower models[].replicas"
    )


def test_replicas_spanning_nodes_use_pipeline_stages():
    [p] = plans_for([model(LLAMA_70B, maxModelLen=32768, tensorParallelSize=8, pipelineParallelSize=2)])
    assert (p.gpus_per_replica, p.nodes_per_replica, p.gpus_per_pod) == (16, 2, 8)


def test_load_estimate_and_startup_budget_follow_the_read_path():
    [volume] = plans_for([model(LLAMA_70B, maxModelLen=32768)])
    [slow] = plans_for([model(LLAMA_70B, maxModelLen=32768)], model_store={"readMBps": 100})
    [bucket] = plans_for([model(LLAMA_70B, maxModelLen=32768)], model_store={"loadFrom": "bucket"})
    # 141 GB at 500 MB/s is over four minutes of reading before the engine starts.
    assert volume.weights_bytes / volume.read_bytes_per_second > 240
    assert bucket.load_seconds < volume.load_seconds < slow.load_seconds
    for p in (volume, slow, bucket):
        assert p.startup_budget_seconds >= p.load_seconds * plan.STARTUP_MARGIN
        assert p.startup_budget_seconds % plan.PROBE_PERIOD_SECONDS == 0


def test_weights_come_from_the_checkpoint_when_known_else_from_the_config():
    config = json.loads((ROOT / "tests/fixtures/model_configs/llama-3.1-8b-instruct/config.json").read_text())
    unknown = ModelMetadata(
        repo_id=LLAMA_8B[0],
        revision=LLAMA_8B[1],
        config=config,
        weights_bytes=None,
        has_chat_template=True,
        source="test",
    )
    [p] = plan.build_plans(stack([model(LLAMA_8B, maxModelLen=8192)]), lambda m: unknown)
    assert abs(p.weights_bytes - 16_060_522_496) / 16_060_522_496 < 0.02


def test_a_config_without_a_context_length_needs_max_model_len():
    config = json.loads((ROOT / "tests/fixtures/model_configs/llama-3.1-8b-instruct/config.json").read_text())
    config.pop("max_position_embeddings")
    meta = ModelMetadata(
        repo_id=LLAMA_8B[0],
        revision=LLAMA_8B[1],
        config=config,
        weights_bytes=16_060_522_496,
        has_chat_template=True,
        source="test",
    )
    with pytest.raises(plan.PlanError, match=r"models\[0\].maxModelLen: .* declares no max_position_embeddings"):
        plan.build_plans(stack([model(LLAMA_8B)]), lambda m: meta)
    [p] = plan.build_plans(stack([model(LLAMA_8B, maxModelLen=4096)]), lambda m: meta)
    assert p.max_model_len == 4096


def test_explicit_tensor_parallelism_must_shard_the_model():
    with pytest.raises(
        plan.PlanError,
        match=r"models\[0\].tensorParallelSize: vLLM cannot shard .* 3 ways .*valid sizes: 1, 2, 4, 8, or auto",
    ):
        plans_for([model(LLAMA_8B, maxModelLen=8192, tensorParallelSize=3)])


# --- issue 19: concurrency target, long context, unconfirmed CUDA totals, interconnect ----------


def test_auto_tensor_parallelism_grows_until_the_target_concurrency_fits():
    # Llama 3.1 8B at 128K on H100: one GPU holds ~3.3 full-length requests, two hold ~7.
    [default] = plans_for([model(LLAMA_8B, maxModelLen=131072)])
    assert default.model.targetConcurrentRequests == 4
    assert default.tensor_parallel_size == 2 and default.sizing.max_concurrency >= 4
    [one] = plans_for([model(LLAMA_8B, maxModelLen=131072, targetConcurrentRequests=1)])
    assert one.tensor_parallel_size == 1 and one.sizing.max_concurrency < 4
    [many] = plans_for([model(LLAMA_8B, maxModelLen=131072, targetConcurrentRequests=12)])
    assert many.tensor_parallel_size == 4 and many.sizing.max_concurrency >= 12


def test_a_target_no_size_in_the_node_reaches_takes_the_largest_and_warns_with_the_fixes():
    [p] = plans_for([model(LLAMA_8B, maxModelLen=8192, pool="l4")], pool={"name": "l4", "gpu": "L4", "maxNodes": 1})
    assert p.tensor_parallel_size == 1
    [warning] = [w for w in p.sizing_warnings if "targetConcurrentRequests" in w]
    assert f"holds {p.sizing.max_concurrency:.2f} requests of 8,192 tokens at once on 1 x L4" in warning
    assert "lower maxModelLen to" in warning and "set kvCacheDtype: fp8" in warning
    assert "use a pool with more than 1 GPU(s) per node" in warning
    # Broken variant: a target the replica meets draws no warning.
    [met] = plans_for(
        [model(LLAMA_8B, maxModelLen=8192, pool="l4", targetConcurrentRequests=3)],
        pool={"name": "l4", "gpu": "L4", "maxNodes": 1},
    )
    assert not [w for w in met.sizing_warnings if "targetConcurrentRequests" in w]


def test_a_fixed_tensor_parallel_size_below_the_target_suggests_the_next_size():
    [p] = plans_for([model(LLAMA_8B, maxModelLen=131072, tensorParallelSize=1)])
    [warning] = [w for w in p.sizing_warnings if "targetConcurrentRequests" in w]
    assert "raise tensorParallelSize to 2" in warning


def test_a_model_left_at_its_maximum_context_is_told_what_that_costs():
    [p] = plans_for([model(LLAMA_8B)])
    assert p.max_model_len == 131072
    [warning] = [w for w in p.sizing_warnings if "maxModelLen: left at" in w]
    assert "maximum of 131,072 tokens" in warning and "GiB of KV cache per GPU" in warning
    assert "at 8,192 tokens it would hold" in warning and "set maxModelLen" in warning
    # Broken variant: an explicit maxModelLen, even the maximum itself, is a decision, not a default.
    [chosen] = plans_for([model(LLAMA_8B, maxModelLen=131072)])
    assert not [w for w in chosen.sizing_warnings if "maxModelLen: left at" in w]


def test_an_unconfirmed_cuda_total_is_named_in_the_plan_with_the_command_that_measures_it(monkeypatch):
    # Every catalog GPU cites its total now (tests/common/test_gpu_catalog.py); one added without a source
    # must still be flagged, so the A10G stands in with its source removed.
    monkeypatch.setitem(gpus.CATALOG, "A10G", dataclasses.replace(gpus.CATALOG["A10G"], cuda_total_source=None))
    [p] = plans_for(
        [model(LLAMA_8B, maxModelLen=8192, pool="a10g", targetConcurrentRequests=1)],
        pool={"name": "a10g", "gpu": "A10G", "maxNodes": 1},
    )
    [warning] = [w for w in p.sizing_warnings if "CUDA total" in w]
    assert "A10G's CUDA total of 21.99 GiB, which no cited log confirms" in warning
    assert "torch.cuda.mem_get_info()[1]" in warning
    # Broken variant: a GPU whose total a log states draws no such warning.
    [h100] = plans_for([model(LLAMA_8B, maxModelLen=8192)])
    assert not [w for w in h100.sizing_warnings if "CUDA total" in w]


def test_the_pools_interconnect_reaches_the_sizing():
    [on_h100] = plans_for([model(LLAMA_70B, maxModelLen=32768)])
    assert on_h100.sizing.interconnect == "nvswitch"
    [on_l40s] = plans_for(
        [model(LLAMA_70B, maxModelLen=32768, pool="l40s", kvCacheDtype="fp8")],
        pool={"name": "l40s", "gpu": "L40S", "gpusPerNode": 8, "maxNodes": 1},
    )
    assert on_l40s.sizing.interconnect == "pcie"
    assert on_l40s.sizing.non_torch_gib < on_h100.sizing.non_torch_gib


@pytest.mark.parametrize("min_nodes, allowance", [(0, plan.NODE_PROVISIONING_ALLOWANCE_SECONDS), (1, 0)])
def test_deadlines_include_node_provisioning_when_the_pool_can_start_empty(min_nodes, allowance):
    pool = {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "minNodes": min_nodes, "maxNodes": 2}
    [p] = plans_for([model(LLAMA_70B, maxModelLen=32768)], pool=pool)
    assert p.node_provisioning_seconds == allowance
    assert (
        p.rollout_deadline_seconds == max(plan.MIN_ROLLOUT_DEADLINE_SECONDS, 2 * p.startup_budget_seconds) + allowance
    )
    assert p.server_wait_seconds == p.rollout_deadline_seconds + plan.WAIT_MARGIN_SECONDS
