"""Real ModelPlans for the vLLM server tests, from the committed model configs.

The plans go through the real config validation and sizing engine (planner.plan.plan_model),
so a test that changes the GPU or max-model-len sees the flags and budgets the program would emit.
Only the Hub read is replaced: the metadata comes from tests/fixtures/model_configs.
"""

from __future__ import annotations

import json
from typing import Any

import stack_config as config
from components.cluster.interface import GpuPlacement, pool_node_labels
from planner import hub, plan
from tests.support import paths

MODEL_CONFIGS = paths.FIXTURES / "model_configs"

REPOS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
}
REVISION = "0123456789abcdef0123456789abcdef01234567"

POOLS = [
    {"name": "l4", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 4},
    {"name": "l4x4", "gpu": "L4", "gpusPerNode": 4, "maxNodes": 2},
    {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 4},
    {"name": "h100-one", "gpu": "H100-80GB", "gpusPerNode": 8, "maxNodes": 1},
]


def metadata_loader(has_chat_template: bool | None = True):
    def load(model: config.ModelConfig) -> hub.ModelMetadata:
        cfg = json.loads((MODEL_CONFIGS / REPOS[model.repo] / "config.json").read_text())
        return hub.ModelMetadata(
            repo_id=model.repo,
            revision=model.revision,
            config=cfg,
            weights_bytes=None,
            has_chat_template=has_chat_template,
            source="tests/fixtures/model_configs",
        )

    return load


def stack(
    model: dict[str, Any] | list[dict[str, Any]], *, cloud: str = "aws", model_store: dict[str, Any] | None = None
) -> config.StackConfig:
    models = model if isinstance(model, list) else [model]
    raw = {"cloud": cloud, "pools": POOLS, "models": [{"revision": REVISION, **m} for m in models]}
    if model_store:
        raw["modelStore"] = model_store
    if cloud == "existing":
        raw["cluster"] = {"kubeconfig": "/dev/null", "rwxStorageClass": "nfs"}
    return config.parse_stack_config(raw, "test stack")


def make_plan(
    model: dict[str, Any],
    *,
    has_chat_template: bool | None = True,
    cloud: str = "aws",
    model_store: dict[str, Any] | None = None,
) -> plan.ModelPlan:
    sc = stack(model, cloud=cloud, model_store=model_store)
    return plan.build_plans(sc, metadata_loader(has_chat_template))[0]


def make_plans(models: list[dict[str, Any]], *, has_chat_template: bool | None = True) -> list[plan.ModelPlan]:
    """Several models in one stack: the plans see each other (shared pools)."""
    return plan.build_plans(stack(models), metadata_loader(has_chat_template))


def placement(p: plan.ModelPlan) -> GpuPlacement:
    return GpuPlacement(
        pool=p.pool.name,
        gpu=p.gpu.name,
        gpus_per_node=p.pool.gpusPerNode,
        max_nodes=p.pool.maxNodes,
        node_labels=pool_node_labels(p.pool.name, p.gpu.name),
    )


def machine(p: plan.ModelPlan, cloud: str = "aws"):
    return config.pool_machine(config.Cloud(cloud), p.pool)


LLAMA_8B = {"repo": "meta-llama/Llama-3.1-8B-Instruct", "pool": "l4", "maxModelLen": 8192}
LLAMA_70B = {"repo": "meta-llama/Llama-3.1-70B-Instruct", "pool": "h100", "maxModelLen": 32768}
# 8 × H100 per stage, two stages: one replica spans two nodes.
LLAMA_70B_TWO_NODES = {
    "repo": "meta-llama/Llama-3.1-70B-Instruct",
    "name": "llama-70b-pp",
    "pool": "h100",
    "tensorParallelSize": 8,
    "pipelineParallelSize": 2,
}
