"""The planner: from a model's own config.json to every number the deployment needs.

Owns: `hub` (model metadata at a pinned commit), `model_arch` (what sizing reads from config.json),
`sizing` (vLLM's memory budget, pure), `kv_layout` (the KV-cache manager's pages, blocks and groups),
`vllm_releases` (what changes with the vLLM release, each switch with its source line) and the
command line `sizing_cli`, and `plan` (one `ModelPlan` per model: tensor parallelism, KV cache,
load time, probe budgets, replica bounds, pool capacity, node-provisioning allowance and rollout
deadline), and `driver_check` (the engine image's CUDA against the nodes' NVIDIA driver).
May import: `common`, `stack_config`. No Pulumi: the program, the CLI and the tests share it.
Imported by: the components, `__main__.py`, the offline plan.
"""
