"""LoRA adapters of one model: what vLLM loads, the flags derived from the adapters' own
adapter_config.json, and the GPU memory their slots take.

Every replica loads every adapter at start (`--lora-modules`), so any replica can serve any adapter
and the endpoint picker needs no adapter affinity. The flags follow from the adapters:

- `--max-lora-rank`: the smallest value vLLM accepts (common/engine.py LORA_MAX_RANKS) that holds
  the largest rank of any adapter (`r`, or a value of `rank_pattern`); vLLM refuses to load an
  adapter above it;
- `--max-loras` (adapters in one batch, GPU slots) and `--max-cpu-loras` (adapters kept loaded in
  host memory, at least max-loras): the number of adapters, so a request for any adapter never waits
  for a slot and no adapter is ever evicted and reloaded from the volume.

GPU memory: vLLM allocates every slot's A and B buffers when it wraps the model for LoRA, inside
"model loading", so they come out of the KV-cache budget (vllm 0.32.0 v1/worker/gpu_model_runner.py
load_model -> lora_model_runner_mixin.py load_lora_model). The buffers are sized by
--max-lora-rank and --max-loras, not by the adapters' own ranks: each wrapped linear layer holds,
per slot and slice, A (max_lora_rank x input) and B (output x max_lora_rank) in the model's dtype,
with the tensor-parallel shard's sizes (vllm/lora/layers/base_linear.py:104-154,
column_parallel_linear.py); every linear layer is wrapped when --lora-target-modules is unset
(vllm/lora/model_manager.py:_create_lora_modules, utils.py:get_supported_lora_modules, "all linear
layers support LoRA"), and so are the input embedding and the LM head of models that declare them
(Llama's `embedding_modules`; vocab_parallel_embedding.py and logits_processor.py:84-112).
`lora_buffer_bytes` adds these up; it is derived from the shapes, not measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.engine import (
    LORA_INIT_SUPPORTED,
    LORA_MAX_RANKS,
    LORA_MODULES_TO_SAVE_ALLOWED,
    LORA_UNSUPPORTED_FLAGS,
    VLLM_VERSION,
)
from planner.hub import AdapterMetadata
from planner.model_arch import ModelArch, SizingError


@dataclass(frozen=True)
class AdapterPlan:
    name: str
    """What clients send as `model`; vLLM's LoRA name."""
    repo: str
    revision: str
    rank: int
    """The adapter's largest rank: `r`, or the largest value of `rank_pattern`."""
    path: str
    """Where the mirrored adapter sits inside the servers (the model volume)."""
    source: str
    """Where its adapter_config.json was read."""
    bytes_bound: int
    """An upper bound of its files' size, for the volume and the mirror's deadline: every linear
    layer, the embedding and the LM head at its rank in float32 (`adapter_bytes_bound`)."""


@dataclass(frozen=True)
class LoraPlan:
    adapters: tuple[AdapterPlan, ...]
    max_lora_rank: int
    max_loras: int
    max_cpu_loras: int

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.adapters]


AdapterLoader = Callable[[str, str], AdapterMetadata]


def smallest_allowed_rank(rank: int) -> int | None:
    """The smallest --max-lora-rank vLLM accepts that holds `rank`, None above the largest."""
    return next((r for r in LORA_MAX_RANKS if r >= rank), None)


def adapter_problems(config: dict[str, Any]) -> list[str]:
    """Why vLLM would refuse this adapter_config.json (empty when it loads), each with the fix."""
    problems: list[str] = []
    peft_type = config.get("peft_type")
    if peft_type is not None and str(peft_type).upper() != "LORA":
        problems.append(f"peft_type is {peft_type!r}; vLLM serves LoRA adapters only")
    missing = [k for k in ("r", "lora_alpha", "target_modules") if k not in config]
    if missing:
        problems.append(f"adapter_config.json lacks {', '.join(missing)}, which vLLM requires")
    r = config.get("r")
    if "r" in config and (isinstance(r, bool) or not isinstance(r, int) or r <= 0):
        problems.append(f"r is {r!r}; a LoRA rank is a positive whole number")
    pattern = config.get("rank_pattern") or {}
    if not isinstance(pattern, dict) or any(
        isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in pattern.values()
    ):
        problems.append(f"rank_pattern {pattern!r} must map module patterns to positive whole ranks")
    for flag, why in LORA_UNSUPPORTED_FLAGS.items():
        if config.get(flag):
            problems.append(f"{flag} is set: {why} (vLLM {VLLM_VERSION})")
    if config.get("bias", "none") != "none":
        problems.append(f"bias is {config.get('bias')!r}: vLLM {VLLM_VERSION} supports adapters with bias none only")
    extra = [m for m in (config.get("modules_to_save") or []) if m not in LORA_MODULES_TO_SAVE_ALLOWED]
    if extra:
        problems.append(
            f"modules_to_save names {extra}; vLLM loads only classification heads "
            f"({', '.join(LORA_MODULES_TO_SAVE_ALLOWED)})"
        )
    init = config.get("init_lora_weights", True)
    if isinstance(init, str) and init.lower() not in LORA_INIT_SUPPORTED:
        problems.append(
            f"init_lora_weights is {init!r}, which changes the base weights; vLLM refuses it "
            "(convert the adapter to a plain LoRA with PEFT first)"
        )
    return problems


def adapter_rank(config: dict[str, Any]) -> int:
    pattern = config.get("rank_pattern") or {}
    return max([int(config["r"]), *(int(v) for v in pattern.values())])


def adapter_bytes_bound(arch: ModelArch, rank: int) -> int:
    """At most what an adapter of this rank weighs on disk: A and B of every module vLLM could wrap,
    unsharded, in float32 (adapters are saved in float32 at most)."""
    per_layer, vocab_ends = lora_buffer_units(arch, tp=1)
    return int(rank * 4 * (arch.layers * per_layer + vocab_ends))


def plan_lora(
    key: str, adapters: list[Any], load: AdapterLoader, path_of: Callable[[str, str], str], arch: ModelArch
) -> tuple[LoraPlan | None, list[str]]:
    """The LoRA plan of one model (None without adapters) and the problems, each naming the
    adapter's key (`models[i].adapters[j]`) and the fix."""
    if not adapters:
        return None, []
    problems: list[str] = []
    planned: list[AdapterPlan] = []
    for j, adapter in enumerate(adapters):
        where = f"{key}.adapters[{j}]"
        try:
            meta = load(adapter.repo, adapter.revision)
        except Exception as err:  # HubError and friends: the message already says what to do
            problems.append(f"{where} ({adapter.repo}): {err}")
            continue
        found = adapter_problems(meta.config)
        if found:
            problems += [
                f"{where} ({adapter.repo}@{adapter.revision[:12]}): {p} (read from {meta.source})" for p in found
            ]
            continue
        rank = adapter_rank(meta.config)
        if smallest_allowed_rank(rank) is None:
            problems.append(
                f"{where} ({adapter.repo}): rank {rank} is above the largest --max-lora-rank vLLM "
                f"{VLLM_VERSION} accepts ({LORA_MAX_RANKS[-1]}), so it cannot be served; use an adapter "
                f"trained with r <= {LORA_MAX_RANKS[-1]} or remove it"
            )
            continue
        try:
            bound = adapter_bytes_bound(arch, rank)
        except SizingError as err:
            problems.append(f"{where}: {err}; serve adapters on a dense model")
            continue
        planned.append(
            AdapterPlan(
                adapter.name,
                adapter.repo,
                adapter.revision,
                rank,
                path_of(adapter.repo, adapter.revision),
                meta.source,
                bound,
            )
        )
    if problems:
        return None, problems
    largest = max(a.rank for a in planned)
    count = len(planned)
    max_lora_rank = smallest_allowed_rank(largest)
    assert max_lora_rank is not None  # every planned adapter's rank passed smallest_allowed_rank above
    return LoraPlan(tuple(planned), max_lora_rank=max_lora_rank, max_loras=count, max_cpu_loras=count), []


def lora_buffer_units(arch: ModelArch, tp: int) -> tuple[float, float]:
    """Elements per slot and per rank unit: (per decoder layer, for the embedding and LM head).

    Per layer (TP shard): the fused QKV projection (3 slices, A: hidden each, B: (q + 2 kv) / TP),
    the output projection (A: q / TP, B: hidden), the MLP (gated: gate_up 2 slices, A: 2 hidden,
    B: 2 intermediate / TP, and down, A: intermediate / TP, B: hidden; ungated: up and down).
    Embedding and LM head: vocabulary + hidden each (not divided by TP: the bound is kept high).
    """
    if arch.is_moe or arch.is_mla or arch.is_hybrid:
        raise SizingError(
            f"LoRA slot memory is modelled for dense attention models only, not "
            f"{arch.architecture or 'this architecture'} (MoE, MLA or hybrid layers)"
        )
    h, inter = arch.hidden, arch.intermediate
    q = arch.heads * arch.head_dim
    kv = arch.kv_heads * arch.head_dim
    attention = 3 * h + (q + 2 * kv) / tp + q / tp + h
    gate_up = 2 * h + 2 * inter / tp if arch.gated_mlp else h + inter / tp
    mlp = gate_up + inter / tp + h
    vocab_ends = 2 * (arch.vocab + h)
    return attention + mlp, vocab_ends


def lora_buffer_bytes(
    arch: ModelArch,
    *,
    tp: int,
    max_loras: int,
    max_lora_rank: int,
    dtype_bytes: int,
    layers: int | None = None,
    first_stage: bool = True,
    last_stage: bool = True,
) -> float:
    """GPU bytes of the LoRA slots on one GPU holding `layers` decoder layers (all by default)."""
    if max_loras <= 0:
        return 0.0
    per_layer, vocab_ends = lora_buffer_units(arch, tp)
    layers = arch.layers if layers is None else layers
    ends = vocab_ends / 2 * (int(first_stage) + int(last_stage))
    return max_loras * max_lora_rank * dtype_bytes * (layers * per_layer + ends)
