"""The real vLLM startup logs the sizing engine is scored on, and how one becomes a SizingRequest.

Two sets, split by source (tests/fixtures/vllm_logs/README.md says which source is on which side):
`CALIBRATION` (cases.yaml: the sources constants may be chosen on) and `HELD_OUT` (held_out_by_source.yaml:
sources no constant was ever chosen on). Both go through the same `request_for`, so a flag a log states
reaches the engine the same way whichever set it sits in.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import yaml

from planner.model_arch import ModelArch
from planner.sizing import GiB, SizingRequest, SizingResult, size, total_weights_from_first_stage
from tests.support import paths

FIXTURES = paths.FIXTURES
LOGS = FIXTURES / "vllm_logs"
CALIBRATION: list[dict] = yaml.safe_load((LOGS / "cases.yaml").read_text())["cases"]
HELD_OUT: list[dict] = yaml.safe_load((LOGS / "held_out_by_source.yaml").read_text())["cases"]

# The case fields that map one to one onto a SizingRequest field of the same name.
_SAME_NAME = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "max_num_batched_tokens",
    "max_num_seqs",
    "enforce_eager",
    "interconnect",
    "expert_parallel",
    "speculative_tokens",
    "enable_prefix_caching",
    "flashinfer_sampler",
)


@cache
def _arch_from(path: str) -> ModelArch:
    return ModelArch.from_hf_config(json.loads(Path(path).read_text()))


def config_path(case: dict) -> Path:
    """cases.yaml names configs under vllm_logs/configs/, held_out_by_source.yaml under fixtures/."""
    if case in CALIBRATION:
        return LOGS / "configs" / case["config"]
    return FIXTURES / case["config"]


def arch_of(case: dict) -> ModelArch:
    return _arch_from(str(config_path(case).resolve()))


def request_for(case: dict, *, with_weights: bool = True, model: ModelArch | None = None) -> SizingRequest:
    """The sizing request a logged case describes; `model` when its config lives elsewhere."""
    observed = case["observed"]
    fields = {f.name for f in dataclasses.fields(SizingRequest)}
    kwargs = {name: case[name] for name in _SAME_NAME if name in fields and case.get(name) is not None}
    req = SizingRequest(
        arch=model or arch_of(case),
        gpu_memory_gib=case["gpu_memory_gib"],
        gpu_name=case["gpu"],
        vllm_version=case["vllm_version"],
        **kwargs,
    )
    if with_weights and observed.get("weights_gib_per_gpu"):
        # "Model loading took X GiB" is one GPU's (the first pipeline stage's where there are
        # several); the request takes the checkpoint total. A log without that line leaves the
        # weights to the estimate from config.json.
        total = total_weights_from_first_stage(req, observed["weights_gib_per_gpu"] * GiB)
        req = dataclasses.replace(req, weights_bytes=int(total))
    return req


def source_of(case: dict) -> str:
    """The operator a case comes from: the GitHub owner/repository, or the site."""
    url = case["source"]
    parts = url.split("/")
    return "/".join(parts[3:5]) if url.startswith("https://github.com/") else parts[2]


def in_scope(case: dict) -> bool:
    """False for a case outside what the planner deploys (its `out_of_scope` says why: an external KV connector,
    a release before 0.10, a summary table instead of a log). Such a case is still scored and reported apart."""
    return not case.get("out_of_scope")


def starts(case: dict) -> bool:
    """False for a run whose KV budget was negative: vLLM refused to start."""
    return case.get("starts", True)


def predicted(case: dict, **kw) -> SizingResult:
    return size(request_for(case, **kw))


def relative_error(case: dict, **kw) -> float:
    """Error of the token count, or of the KV memory where the source states only that."""
    observed = case["observed"]
    result = predicted(case, **kw)
    if observed.get("kv_cache_tokens"):
        return (result.kv_cache_tokens - observed["kv_cache_tokens"]) / observed["kv_cache_tokens"]
    return (result.kv_cache_gib_per_gpu - observed["kv_cache_gib"]) / observed["kv_cache_gib"]


# --- the groups the report breaks the error down by -------------------------------------------


def gpu_type(case: dict) -> str:
    return case["gpu"]


def release_band(case: dict) -> str:
    major, minor = (int(p) for p in str(case["vllm_version"]).split(".")[:2])
    if (major, minor) < (0, 11):
        return "0.8-0.10"
    if (major, minor) < (0, 17):
        return "0.11-0.16"
    if (major, minor) < (0, 21):
        return "0.17-0.20"
    return "0.21+"


def architecture_family(case: dict) -> str:
    """One family per case, the most specific first: hybrid state layers, MLA, sliding window, MoE, dense."""
    arch = arch_of(case)
    raw = json.loads(config_path(case).read_text())
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    declared = {str(t) for t in text.get("layer_types") or ()}
    if any("linear" in t or "mamba" in t for t in declared) or text.get("hybrid_override_pattern"):
        return "hybrid (linear/SSM)"
    if arch.is_mla:
        return "MLA"
    if "sliding" in set(arch.layer_types):
        return "sliding window"
    if arch.is_moe:
        return "MoE"
    return "dense"
