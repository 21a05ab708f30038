"""The `vllm serve` command line of one model: THE one place engine flags are derived.

Pure Python (no Pulumi): the server component, the offline plan, the policy pack and the tests all
call `serve_args`. Every number comes from the `ModelPlan` (sizing decided it) or from the probe
plan (drain time), never from a second computation here.

Flag spellings are those of vLLM 0.32 (common/engine.py): boolean engine flags are
argparse BooleanOptionalAction, so prefix caching is `--enable-prefix-caching` /
`--no-enable-prefix-caching` (vllm/engine/arg_utils.py). tests/components/serving/test_vllm_args.py parses the argv
with 0.32's own parser when the project's vLLM test environment (.venv-vllm) is present.
"""

from __future__ import annotations

from typing import Any

from common import contract
from components.serving import probes
from planner.plan import ModelPlan

SERVE_COMMAND = ["vllm", "serve"]
# A chat template from the stack config is mounted from a ConfigMap at this path.
CHAT_TEMPLATE_DIR = "/etc/vllm"
CHAT_TEMPLATE_FILE = "chat-template.jinja"
CHAT_TEMPLATE_PATH = f"{CHAT_TEMPLATE_DIR}/{CHAT_TEMPLATE_FILE}"
# vLLM's loader that streams safetensors straight from S3/GCS into GPU memory.
RUNAI_STREAMER = "runai_streamer"
# Environment variable vLLM 0.32 reads the API key from when --api-key is absent
# (vllm/envs.py VLLM_API_KEY; vllm/entrypoints/serve/middleware/register.py). Passing it through the
# environment keeps the key out of the argv, which `ps` and the pod spec would show.
API_KEY_ENV = contract.API_KEY_ENV
API_KEY_NEXT_ENV = contract.API_KEY_NEXT_ENV


def api_key_args(rotating: bool) -> list[str]:
    """Flags for a server that accepts two keys while clients move from one to the other.

    vLLM 0.32's `--api-key` takes several values (vllm/entrypoints/launchers/cli_args.py:325
    `api_key: list[str] | None`, and the middleware accepts any of them,
    vllm/entrypoints/serve/middleware/register.py:33), but VLLM_API_KEY holds one. The kubelet
    expands `$(VAR)` in args from the container's env (secretKeyRef), so the pod spec names only
    the variables; the keys then sit in the process's argv inside the container, which is why one
    key stays in the environment alone outside a rotation.
    """
    if not rotating:
        return []
    return ["--api-key", f"$({API_KEY_ENV})", f"$({API_KEY_NEXT_ENV})"]


def serve_args(
    plan: ModelPlan, *, weights_uri: Any = None, model_dir: str | None = None, port: int = contract.SERVER_PORT
) -> list[Any]:
    """Arguments after `vllm serve` for this plan.

    `weights_uri`: when the model loads from the bucket, its s3:// or gs:// URI (a string or a
    Pulumi Output); vLLM then streams the weights with the Run:ai streamer instead of reading the
    mounted volume at `plan.model_path`.
    `model_dir`, `port`: where another front end put the weights and which port it routes to (the
    KServe path: its storage initializer's /mnt/models and the runtime's 8080).
    """
    local = model_dir if model_dir is not None else plan.model_path
    args: list[Any] = [weights_uri if weights_uri is not None else local]
    args += ["--served-model-name", plan.served_name]
    args += engine_args(plan)
    if needs_chat_template_file(plan):
        args += ["--chat-template", CHAT_TEMPLATE_PATH]
    if weights_uri is not None:
        args += ["--load-format", RUNAI_STREAMER]
    args += lora_args(plan)
    # Finish in-flight streams on SIGTERM instead of aborting them (0.32's default is abort).
    args += ["--shutdown-timeout", str(probes.drain_seconds(plan))]
    args += ["--host", "0.0.0.0", "--port", str(port)]
    return args


def engine_args(plan: ModelPlan) -> list[str]:
    """The engine flags sizing decided (`--flag value` pairs and switches)."""
    model = plan.model
    args: list[str] = ["--max-model-len", str(plan.max_model_len)]
    args += ["--gpu-memory-utilization", _num(model.gpuMemoryUtilization)]
    args += ["--tensor-parallel-size", str(plan.tensor_parallel_size)]
    if plan.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(plan.pipeline_parallel_size)]
    if plan.nodes_per_replica > 1:
        # Across nodes the engine's workers are Ray actors on the group's pods (LeaderWorkerSet).
        args += ["--distributed-executor-backend", "ray"]
    if model.kvCacheDtype != "auto":
        args += ["--kv-cache-dtype", model.kvCacheDtype]
    if model.quantization:
        args += ["--quantization", model.quantization]
    if model.dtype != "auto":
        args += ["--dtype", model.dtype]
    # Only when set: otherwise vLLM picks its per-GPU defaults, which is what sizing assumed.
    if model.maxNumSeqs is not None:
        args += ["--max-num-seqs", str(model.maxNumSeqs)]
    if model.maxNumBatchedTokens is not None:
        args += ["--max-num-batched-tokens", str(model.maxNumBatchedTokens)]
    # Explicit either way, so a change of vLLM's default never changes behaviour silently.
    args.append("--enable-prefix-caching" if model.enablePrefixCaching else "--no-enable-prefix-caching")
    return args


def lora_args(plan: ModelPlan) -> list[str]:
    """LoRA flags from the plan (planner/lora.py derived them from the adapters' adapter_config.json).

    Each adapter is one `--lora-modules name=path` argument (vLLM 0.32's LoRAParserAction takes
    `name=path` or one JSON object per argument; vllm/entrypoints/launchers/cli_args.py): the path is
    the mirrored, verified copy at its pinned commit on the model volume, never a Hub repo id, which
    vLLM would download from the moving default branch. /v1/models lists each adapter with the base
    model's served name as its parent.
    """
    lora = getattr(plan, "lora", None)
    if lora is None:
        return []
    args = [
        "--enable-lora",
        "--max-loras",
        str(lora.max_loras),
        "--max-lora-rank",
        str(lora.max_lora_rank),
        "--max-cpu-loras",
        str(lora.max_cpu_loras),
        "--lora-modules",
    ]
    args += [f"{a.name}={a.path}" for a in lora.adapters]
    return args


def command_line(plan: ModelPlan, *, weights_uri: Any = None) -> list[Any]:
    return [*SERVE_COMMAND, *serve_args(plan, weights_uri=weights_uri)]


def needs_chat_template_file(plan: ModelPlan) -> bool:
    """A configured chat template is used only when the model ships none."""
    return bool(plan.model.chatTemplate) and plan.metadata.has_chat_template is False


def plan_warnings(plan: ModelPlan) -> list[str]:
    """Things that deploy fine but a user will trip over; shown in the plan and stack outputs."""
    key = f"models[{plan.index}]"
    warnings: list[str] = []
    has_template = plan.metadata.has_chat_template
    if has_template is False and not plan.model.chatTemplate:
        warnings.append(
            f"{key}: {plan.repo} ships no chat template, so /v1/chat/completions requests will fail; "
            f"set {key}.chatTemplate or use /v1/completions only"
        )
    elif has_template and plan.model.chatTemplate:
        warnings.append(f"{key}.chatTemplate: ignored, {plan.repo} ships its own chat template")
    elif has_template is None and plan.model.chatTemplate:
        warnings.append(
            f"{key}.chatTemplate: ignored, whether {plan.repo} ships a chat template is unknown; "
            "record it in the model's metadata (planner/hub.py) to use yours"
        )
    a = plan.model.autoscaling
    if a.enabled and a.minReplicas == 0:
        warnings.append(
            f"{key}.autoscaling.minReplicas: 0 is raised to 1; with no replica running no request can "
            "queue, so queue depth could never scale the model back up"
        )
    return warnings


def _num(value: float) -> str:
    return f"{value:g}"
