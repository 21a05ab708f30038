"""`python -m components.sizing`: will this model fit on that GPU, and how much KV cache is left?

Exit codes: 0 it fits; 1 it does not fit (the report, then one line on stderr saying why and, when a
larger tensor-parallel size would fit, which one); 2 unusable input: a bad flag or value, an
unreadable or implausible config.json, or a request vLLM itself would refuse to start with (one line
on stderr naming the flag or key).

GPU: --gpu names a catalog GPU (common/gpus.py) and brings its traits (the interconnect of its
multi-GPU machines, unified memory, vLLM's batch defaults for it); --gpu-memory-gib alone is a
measured CUDA total, taken as the catalog GPU within 0.5% of it (common/gpus.py:match_cuda_total,
which says where that tolerance comes from); a total near no catalog GPU, or near two, is refused
unless --interconnect describes the machine. The GPU taken is printed (and is "gpu" in --json). A log
whose custom all-reduce says the GPUs lack NVLink or P2P sets --interconnect pcie (planner/startup_log.py).

--explain prints every term of the memory budget with its size, the release behaviour it follows and
its vLLM source line (planner/sizing_explain.py); --from-log FILE sets the inputs from a vLLM V1
startup log (planner/startup_log.py) and prints predicted against logged, term by term. Flags given
on the command line win over what the log states.

--usage-context (openai-server, what the program deploys, or llm-class for an offline LLM(...) script) and
--performance-mode set vLLM's default batch limits and capture sizes (planner/vllm_releases.py:USAGE_CONTEXTS,
PERFORMANCE_MODES); --from-log takes both from the log where it says, and says when the usage context is assumed.

Limits: config.json is read only from a regular file of at most 16 MiB, nested at most 100 levels;
its numbers must be whole and in range (planner/model_arch.py); a startup log from a regular file of
at most 64 MiB of UTF-8 text; flags are bounded (--help).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from common.engine import QUANTIZATION_METHODS, VLLM_VERSION
from common.gpus import CATALOG, CUDA_TOTAL_TOLERANCE, Gpu, UnknownGpuError, get_gpu, match_cuda_total
from common.untrusted import MAX_MODEL_CONFIG_BYTES, InputLimitError, excerpt, loads_json, read_text_file
from planner import sizing_explain, startup_log
from planner.checkpoint import dtype_problem, loaded_weight_bytes, quantization_problem
from planner.hub import checkpoint_bytes_beside
from planner.model_arch import MAX_CONTEXT, MAX_LAYERS, ModelArch, SizingError
from planner.sizing import (
    INTERCONNECTS,
    MAX_BATCHED_TOKENS,
    MAX_BLOCK_SIZE,
    MAX_GPU_MEMORY_GIB,
    MAX_NUM_SEQS,
    MAX_TENSOR_PARALLEL,
    MAX_WEIGHT_BYTES,
    GiB,
    SizingRequest,
    SizingResult,
    auto_tensor_parallel_size,
    context_problem,
    heads_problem,
    size,
    total_weights_from_first_stage,
    valid_tensor_parallel_sizes,
)
from planner.vision_encoders import DEFAULT_MM_LIMIT_PER_PROMPT
from planner.vllm_releases import PERFORMANCE_MODES, USAGE_CONTEXTS
from stack_config.formats import did_you_mean
from stack_config.models import DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_TARGET_CONCURRENT_REQUESTS

BAR_WIDTH = 50
CLOUDS = ("aws", "gcp")


def gpus_per_node(gpu: Gpu | None) -> int:
    """The most GPUs one cloud machine of this GPU carries (of any catalog GPU when the GPU is not in
    the catalog): the largest tensor-parallel size a node offers. The plan takes the pool's gpusPerNode."""
    pool = [gpu] if gpu is not None and any(gpu.machines(c) for c in CLOUDS) else list(CATALOG.values())
    return max(m.gpus for g in pool for cloud in CLOUDS for m in g.machines(cloud))


DTYPES = ["auto", "bfloat16", "float16", "float32"]
KV_CACHE_DTYPES = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


class DoesNotFit(Exception):
    """The model does not fit: printed as one line after the report, exit code 1."""


def _image_limit(text: str) -> int:
    """The image count of a --limit-mm-per-prompt value: a JSON object ('{"image": 2}') or 'image=2'."""
    try:
        value = json.loads(text)
    except ValueError:
        value = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    count = value.get("image", DEFAULT_MM_LIMIT_PER_PROMPT) if isinstance(value, dict) else None
    try:
        whole = int(count) if count is not None and not isinstance(count, bool) else -1
    except (TypeError, ValueError):
        whole = -1
    if not 0 <= whole <= 2**20:
        raise argparse.ArgumentTypeError(
            f"{excerpt(text)} does not give an image count from 0 to {2**20:,}; use e.g. '{{\"image\": 2}}'"
        )
    return whole


def _whole(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high:,}")
        return value

    return parse


def _finite(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a number") from None
        # float() accepts "nan" and "inf"; neither is a size, and NaN compares false with every bound.
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a finite {name}")
        return value

    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of usage + error
        raise CliError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m components.sizing",
        description=__doc__.splitlines()[0],
        epilog="exit status: 0 it fits; 1 it does not fit; 2 unusable input (a bad flag or value, an "
        "unreadable or implausible config.json, or a request vLLM refuses to start with)",
    )
    p.add_argument(
        "--model-config", required=True, help="path to a config.json, or a Hub repo id (then --revision is required)"
    )
    p.add_argument("--revision", help="40-hex commit of the Hub repo (with a repo id)")
    p.add_argument(
        "--gpu", help="GPU name from the catalog (common/gpus.py), e.g. H100-80GB: its CUDA total and traits"
    )
    p.add_argument(
        "--gpu-memory-gib",
        type=_finite("GiB"),
        help=f"CUDA-reported total memory per GPU, GiB (above 0, at most {MAX_GPU_MEMORY_GIB:g}); alone, the "
        f"catalog GPU within {CUDA_TOTAL_TOLERANCE:.1%}% of it; with --gpu, that GPU measured",
    )
    p.add_argument(
        "--tensor-parallel-size",
        type=_whole(-(2**31), 2**31),
        help=f"1 to {MAX_TENSOR_PARALLEL} (default 1, or the log's)",
    )
    p.add_argument(
        "--pipeline-parallel-size",
        type=_whole(-(2**31), 2**31),
        help="1 to the model's number of layers (default 1, or the log's)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=_finite("fraction"),
        help=f"in (0, 1]; default {DEFAULT_GPU_MEMORY_UTILIZATION:g}, what the program deploys "
        f"(models[].gpuMemoryUtilization); with --from-log the log's, else the logged release's own default "
        f"(0.92 from vLLM 0.20, 0.9 before), which a bare `vllm serve` runs with",
    )
    p.add_argument("--max-model-len", type=_whole(-(2**63), 2**63), help="default: the model's max_position_embeddings")
    p.add_argument("--dtype", choices=DTYPES, help="default auto, or the log's")
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, help="default auto, or the log's")
    p.add_argument(
        "--quantization",
        help="vLLM --quantization (fp8, awq, gptq, mxfp4, ...): one the deployed "
        "release knows, that the checkpoint can use",
    )
    p.add_argument(
        "--weights-gib",
        type=_finite("GiB"),
        metavar="TOTAL",
        help="TOTAL weight memory across all GPUs in GiB (e.g. the log's per-GPU "
        "'Model loading took X GiB' × TP × PP); default: estimated from the config",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=_whole(1, MAX_BATCHED_TOKENS),
        help=f"1 to {MAX_BATCHED_TOKENS:,}; default: vLLM's default for the GPU",
    )
    p.add_argument(
        "--max-num-seqs",
        type=_whole(1, MAX_NUM_SEQS),
        help=f"1 to {MAX_NUM_SEQS:,}; default: vLLM's default for the GPU",
    )
    p.add_argument(
        "--block-size",
        type=_whole(1, MAX_BLOCK_SIZE),
        default=16,
        help=f"tokens per KV-cache block, 1 to {MAX_BLOCK_SIZE} (default 16)",
    )
    p.add_argument(
        "--target-concurrent-requests",
        type=_whole(1, 4096),
        default=DEFAULT_TARGET_CONCURRENT_REQUESTS,
        help=f"full-length requests one replica should hold, for the TP the plan would pick (models[]."
        f"targetConcurrentRequests, default {DEFAULT_TARGET_CONCURRENT_REQUESTS})",
    )
    p.add_argument(
        "--gpus-per-node",
        type=_whole(1, MAX_TENSOR_PARALLEL),
        help="GPUs in one node, the largest TP the plan would pick (pools[].gpusPerNode; default: the most a "
        "catalog machine of the GPU carries)",
    )
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    p.add_argument("--vllm-version", help="vLLM release to model (default: the deployed one)")
    p.add_argument(
        "--interconnect",
        choices=list(INTERCONNECTS),
        help="what joins the GPUs (default: the catalog GPU's multi-GPU machines); required for a GPU "
        "outside the catalog: nvswitch counts NCCL's NVLS buffers (Hopper or newer), nvlink and pcie "
        "ring buffers only, unified treats it as unified memory (like a GB10)",
    )
    p.add_argument(
        "--limit-mm-per-prompt",
        type=_image_limit,
        dest="mm_images_per_prompt",
        metavar="JSON",
        help="vLLM's --limit-mm-per-prompt, e.g. '{\"image\": 2}': the images a prompt may carry, which caps the "
        "vision encoder's profiling batch (0: images off, the encoder is not profiled; default: vLLM's 999)",
    )
    p.add_argument(
        "--skip-mm-profiling",
        action="store_true",
        default=None,
        help="vLLM's --skip-mm-profiling: the vision encoder is left out of the memory profile",
    )
    p.add_argument(
        "--mm-encoder-tp-mode",
        choices=("weights", "data"),
        help="vLLM's --mm-encoder-tp-mode: data runs the whole vision tower on every GPU (default weights: sharded)",
    )
    p.add_argument(
        "--usage-context",
        choices=USAGE_CONTEXTS,
        help="who builds the engine: openai-server (`vllm serve`, what the program deploys; the default) or "
        "llm-class (an offline LLM(...) script), whose default batch limits are larger; with --from-log, the log's "
        "when it says",
    )
    p.add_argument(
        "--performance-mode",
        choices=PERFORMANCE_MODES,
        help="vLLM's --performance-mode (from 0.17): balanced (default), interactivity (CUDA graphs for every batch "
        "size up to 32) or throughput (doubles the default max_num_batched_tokens and max_num_seqs); with "
        "--from-log, the log's",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print every term of the memory budget with its size, the release it follows and the vLLM source line",
    )
    p.add_argument(
        "--from-log",
        metavar="FILE",
        help="a vLLM V1 startup log: take the GPU total, release, parallelism, batch limits, dtypes and weights "
        "it states and print predicted against logged, term by term",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def canonical_gpu_name(name: str) -> str:
    """The catalog name for common spellings ("h100", "NVIDIA A100-SXM4-80GB", "l40s", "A100 80GB").

    Only unambiguous spellings map; anything else is returned as given, so the catalog lookup still
    rejects it with the known names listed.
    """
    if name in CATALOG:
        return name
    key = name.upper().replace("NVIDIA", "").replace("_", "-").replace(" ", "-").strip("-")
    key = "-".join(
        part for part in key.split("-") if part and part not in ("SXM", "SXM4", "SXM5", "PCIE", "HBM3", "HBM2E")
    )
    # The catalog's RTX-PRO-6000 is the Server Edition ("NVIDIA RTX PRO 6000 Blackwell Server Edition").
    key = key.replace("-BLACKWELL-SERVER-EDITION", "")
    for known in CATALOG:
        if key == known.upper():
            return known
    by_family = {known.split("-")[0].upper(): known for known in CATALOG}
    family, _, size = key.partition("-")
    size = size.replace("GIB", "GB").replace("G", "GB") if size and not size.endswith("GB") else size
    if f"{family}-{size}" in {k.upper() for k in CATALOG}:
        return next(k for k in CATALOG if k.upper() == f"{family}-{size}")
    # A family with a single catalog entry (H100, H200, L4, ...) is unambiguous without a size.
    families = [known for known in CATALOG if known.split("-")[0].upper() == family]
    if len(families) == 1 and (not size or families[0].upper().endswith(size)):
        return by_family[family]
    return name


def load_config(source: str, revision: str | None) -> dict[str, Any]:
    if os.path.exists(source):
        path = os.path.join(source, "config.json") if os.path.isdir(source) else source
        if os.path.isdir(source) and not os.path.exists(path):
            raise CliError(f"--model-config: no config.json in {source}")
        try:
            text = read_text_file(path, MAX_MODEL_CONFIG_BYTES, path)
            return loads_json(text, path, max_bytes=MAX_MODEL_CONFIG_BYTES)
        except InputLimitError as exc:
            raise CliError(f"--model-config: {exc}") from None
    looks_like_repo = source.count("/") == 1 and not source.endswith(".json") and not source.startswith((".", "/"))
    if not looks_like_repo:
        raise CliError(f"--model-config: {excerpt(source)} does not exist (give a config.json path or a Hub repo id)")
    if not revision:
        raise CliError(f"--revision is required with the Hub repo id {excerpt(source)} (a 40-character commit SHA)")
    try:
        from planner.hub import load_model_config  # optional: only needed for Hub ids
    except ImportError:
        raise CliError(
            "--model-config: Hub repo ids need planner/hub.py, which is not installed; pass a config.json path"
        ) from None
    try:
        return load_model_config(source, revision)
    except Exception as exc:  # the hub module's own errors carry the reason
        raise CliError(f"--model-config: {exc}") from None


def _release_number(version: str) -> str | None:
    match = re.match(r"\d{1,4}\.\d{1,4}(\.\d{1,4})?", version)
    return match.group() if match else None


_LOG_DTYPES = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
}


def apply_log(args: argparse.Namespace, log: startup_log.StartupLog) -> list[str]:
    """Set every flag left unset to what the log states; the names of the flags taken from the log."""
    taken = []

    def take(attr: str, value: object) -> None:
        if value is not None and getattr(args, attr) is None:
            setattr(args, attr, value)
            taken.append("--" + attr.replace("_", "-"))

    for attr in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "max_model_len",
        "max_num_batched_tokens",
        "max_num_seqs",
    ):
        take(attr, getattr(log, attr))
    take("gpu_memory_gib", log.cuda_total_gib)
    take("vllm_version", _release_number(log.version) if log.version else None)
    take("dtype", _LOG_DTYPES.get(log.dtype or ""))
    take("kv_cache_dtype", log.kv_cache_dtype if log.kv_cache_dtype in KV_CACHE_DTYPES else None)
    take("interconnect", log.interconnect)
    take("mm_images_per_prompt", log.mm_images_per_prompt)
    take("skip_mm_profiling", log.skip_mm_profiling)
    take("mm_encoder_tp_mode", log.mm_encoder_tp_mode)
    take("performance_mode", log.performance_mode)
    take("usage_context", log.usage_context)
    if log.weights and args.weights_gib is None:
        taken.append("--weights-gib")  # one GPU's "Model loading took"; request_from_args takes the total
    if log.enforce_eager and not args.enforce_eager:
        args.enforce_eager = True
        taken.append("--enforce-eager")
    return taken


def _gpu_from_log_name(log: startup_log.StartupLog | None) -> Gpu | None:
    """The catalog GPU a log names (a fused-MoE config path's device_name=NVIDIA_H100_80GB_HBM3), if any."""
    if log is None or not log.device_name:
        return None
    name = canonical_gpu_name(log.device_name.replace("_", " "))
    return CATALOG.get(name)


def resolve_gpu(args: argparse.Namespace, log: startup_log.StartupLog | None) -> tuple[Gpu | None, float, str]:
    """(catalog GPU or None, CUDA total, one line saying which GPU was taken and why)."""
    if args.gpu:
        try:
            gpu = get_gpu(canonical_gpu_name(args.gpu))
        except UnknownGpuError:
            # The option that begins with what was typed first: `H100` is `H100-80GB`, not `H200`.
            raise CliError(
                f"--gpu: unknown GPU {excerpt(args.gpu)}{did_you_mean(args.gpu, CATALOG)}; known GPUs: "
                f"{', '.join(CATALOG)}"
            ) from None
        if args.gpu_memory_gib is None:
            if not gpu.cuda_total_confirmed:
                print(
                    f"warning: {gpu.name}'s CUDA total ({gpu.cuda_total_gib} GiB) is not confirmed by a cited log "
                    f'(common/gpus.py); measure it on the GPU with python3 -c "import torch; '
                    f'print(torch.cuda.mem_get_info()[1] / 1024**3)" and pass --gpu-memory-gib',
                    file=sys.stderr,
                )
            return gpu, gpu.cuda_total_gib, f"{gpu.name} (--gpu), its catalog CUDA total {gpu.cuda_total_gib:g} GiB"
        _check_total(args.gpu_memory_gib)
        return gpu, args.gpu_memory_gib, f"{gpu.name} (--gpu) with a measured total of {args.gpu_memory_gib:g} GiB"
    named = _gpu_from_log_name(log)
    if args.gpu_memory_gib is None and named is not None:
        return (
            named,
            named.cuda_total_gib,
            f"{named.name}, as the log names it, its catalog CUDA total (the log states none)",
        )
    if args.gpu_memory_gib is None:
        raise CliError(
            "give --gpu NAME or --gpu-memory-gib TOTAL"
            + (" (the log states no CUDA total)" if log is not None else " (or --from-log with a startup log)")
        )
    memory = args.gpu_memory_gib
    _check_total(memory)
    match = match_cuda_total(memory)
    if named is not None:
        # The device the log names (its fused-MoE config path) outranks what its total is near.
        return named, memory, f"{named.name}, as the log names it ({match.describe()})"
    if match.gpu is not None:
        return match.gpu, memory, match.describe()
    what = "the log's CUDA total" if log is not None and log.cuda_total_gib == memory else "--gpu-memory-gib"
    if args.interconnect:
        return None, memory, f"{match.describe()}: a GPU outside the catalog, on --interconnect {args.interconnect}"
    known = ", ".join(f"{g.name} {g.cuda_total_gib:g}" for g in CATALOG.values())
    if match.candidates:
        choices = " or ".join(f"--gpu {g.name}" for g in match.candidates)
        raise CliError(f"{what} {memory:g}: {match.describe()}, so the GPU is unknown; pass {choices}")
    raise CliError(
        f"{what} {memory:g}: {match.describe()} ({known});"
        f" pass --gpu NAME for a catalog GPU (with --gpu-memory-gib for the measured total), or describe the machine "
        f"with --interconnect {'|'.join(INTERCONNECTS)} (nvswitch counts NCCL's NVLS buffers, unified sizes unified "
        f"memory like a GB10)"
    )


def _check_total(memory: float) -> None:
    if not 0 < memory <= MAX_GPU_MEMORY_GIB:
        raise CliError(f"--gpu-memory-gib must be above 0 and at most {MAX_GPU_MEMORY_GIB:g}")


def request_from_args(
    args: argparse.Namespace, log: startup_log.StartupLog | None = None
) -> tuple[SizingRequest, str, str]:
    """(request, the GPU's display name, which GPU was taken and why)."""
    args.tensor_parallel_size = 1 if args.tensor_parallel_size is None else args.tensor_parallel_size
    args.pipeline_parallel_size = 1 if args.pipeline_parallel_size is None else args.pipeline_parallel_size
    args.dtype = args.dtype or "auto"
    args.kv_cache_dtype = args.kv_cache_dtype or "auto"
    for flag, high in (("tensor_parallel_size", MAX_TENSOR_PARALLEL), ("pipeline_parallel_size", MAX_LAYERS)):
        if getattr(args, flag) < 1:
            raise CliError(f"--{flag.replace('_', '-')} must be at least 1")
        if getattr(args, flag) > high:
            raise CliError(f"--{flag.replace('_', '-')} must be at most {high}")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise CliError("--gpu-memory-utilization must be in (0, 1], e.g. 0.9")
    if args.quantization is not None and args.quantization not in QUANTIZATION_METHODS:
        raise CliError(
            f"--quantization {excerpt(args.quantization)} is not a method vLLM {VLLM_VERSION} knows; "
            f"use one of {', '.join(QUANTIZATION_METHODS)}"
        )
    if args.vllm_version is not None and not re.fullmatch(
        r"v?\d{1,4}\.\d{1,4}(\.\d{1,4})?([.+-][0-9A-Za-z.+-]{1,32})?", args.vllm_version
    ):
        raise CliError(f"--vllm-version {excerpt(args.vllm_version)} is not a release number like 0.19.0")
    gpu, memory, resolution = resolve_gpu(args, log)
    gpu_name = gpu.name if gpu is not None else f"{memory:g} GiB GPU"
    tp = args.tensor_parallel_size
    if gpu is not None and args.interconnect is None and tp > 1 and gpu.interconnect(tp) == "nvswitch":
        # A PCIe card of the same GPU reports the same total: say which machine was assumed.
        print(
            f"warning: {gpu.name} x{tp} sized as an NVSwitch machine (NCCL's NVLS buffers on Hopper and "
            f"newer); for PCIe cards pass --interconnect pcie",
            file=sys.stderr,
        )
    # What vLLM's batch defaults look at (the "a100" check) and the traits the engine reads.
    device_name = gpu.name if gpu is not None else None
    if args.weights_gib is not None and not 0 < args.weights_gib * GiB <= MAX_WEIGHT_BYTES:
        raise CliError("--weights-gib must be positive (TOTAL GiB across all GPUs) and at most 1 PiB")
    if args.max_model_len is not None and args.max_model_len < 1:
        raise CliError("--max-model-len must be a positive number of tokens")
    if args.max_model_len is not None and args.max_model_len > MAX_CONTEXT:
        raise CliError(f"--max-model-len must be at most {MAX_CONTEXT:,} tokens")
    arch = ModelArch.from_hf_config(load_config(args.model_config, args.revision))
    runtime_quantization = log.quantization if log is not None and not arch.quant_method else None
    if args.quantization is None and runtime_quantization in QUANTIZATION_METHODS:
        # A checkpoint without its own quantization config, quantized at load (--quantization fp8).
        args.quantization = runtime_quantization
    if args.pipeline_parallel_size > arch.layers:
        raise CliError(
            f"--pipeline-parallel-size {args.pipeline_parallel_size} exceeds the model's {arch.layers} "
            f"decoder layers; every pipeline stage needs at least one layer"
        )
    for flag, problem in (
        ("--quantization", quantization_problem(arch, args.quantization)),
        ("--dtype", dtype_problem(arch, args.dtype, args.quantization)),
    ):
        if problem:
            raise CliError(f"{flag}: {problem}")
    too_long = context_problem(arch, args.max_model_len) if args.max_model_len is not None else None
    if too_long:
        raise CliError(f"--max-model-len: {too_long}")
    heads = heads_problem(arch, args.tensor_parallel_size)
    if heads:
        raise CliError(f"--tensor-parallel-size: {heads}")
    valid = valid_tensor_parallel_sizes(arch, max_tp=max(args.tensor_parallel_size, 8))
    if args.tensor_parallel_size not in valid:
        # A warning, not an error: the numbers are still what vLLM would compute if it started.
        print(
            f"warning: vLLM refuses --tensor-parallel-size {args.tensor_parallel_size} for this model "
            f"({arch.heads} attention heads, {arch.kv_heads} KV heads); valid: {', '.join(map(str, valid))}",
            file=sys.stderr,
        )
    req = SizingRequest(
        arch=arch,
        gpu_memory_gib=memory,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        # The program's default, so the CLI's numbers are the plan's for the same model and GPU; a logged
        # run that states none ran with its release's own default (None: the release's).
        gpu_memory_utilization=(
            args.gpu_memory_utilization
            if args.gpu_memory_utilization is not None
            else (None if log is not None else DEFAULT_GPU_MEMORY_UTILIZATION)
        ),
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        weights_bytes=int(args.weights_gib * GiB) if args.weights_gib else None,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        block_size=args.block_size,
        enforce_eager=args.enforce_eager,
        gpu_name=device_name,
        vllm_version=args.vllm_version,
        interconnect=args.interconnect,
        mm_images_per_prompt=args.mm_images_per_prompt,
        skip_mm_profiling=bool(args.skip_mm_profiling),
        mm_encoder_tp_mode=args.mm_encoder_tp_mode or "weights",
        usage_context=args.usage_context or "openai-server",
        performance_mode=args.performance_mode or "balanced",
    )
    if req.weights_bytes is None and log is None and os.path.exists(args.model_config):
        # The weights the plan sizes for the same checkpoint (planner/plan.py: the folder's listed bytes,
        # cast to the served dtype), not an estimate from config.json alone.
        listed = checkpoint_bytes_beside(args.model_config)
        if listed is not None:
            req = replace(req, weights_bytes=loaded_weight_bytes(listed, arch, args.dtype, args.quantization))
    if log is not None:
        req = replace(
            req,
            flashinfer_sampler=log.flashinfer_sampler,
            expert_parallel=bool(log.expert_parallel),
            enable_prefix_caching=log.enable_prefix_caching,
        )
        if args.weights_gib is None and log.weights:
            # "Model loading took" is one GPU's, of the first pipeline stage; the request takes the total.
            req = replace(req, weights_bytes=int(total_weights_from_first_stage(req, log.weights * GiB)))
    return req, gpu_name, resolution


def usage_context_note(args: argparse.Namespace, log: startup_log.StartupLog | None, taken: list[str]) -> str:
    """Where the usage context came from; with a log that does not say, that it is assumed and how to set it."""
    if log is None or "--usage-context" in taken:
        if log is not None:
            return f"{args.usage_context or 'openai-server'}, from the log: {excerpt(log.lines['usage_context'], 160)}"
        return f"{args.usage_context or 'openai-server'}" + (" (--usage-context)" if args.usage_context else "")
    if args.usage_context:
        return f"{args.usage_context} (--usage-context)"
    return (
        "openai-server, assumed: the log has no 'Defaulting max_num_batched_tokens to N for X usage context' "
        "line and no API server marker; for an offline LLM(...) script pass --usage-context llm-class"
    )


def planner_pick_hint(args: argparse.Namespace, req: SizingRequest, result: SizingResult) -> str:
    """The TP `tensorParallelSize: auto` would deploy for this model, GPU and context: the plan's own
    rule (planner/sizing.py auto_tensor_parallel_size), not merely the smallest size that fits."""
    max_tp = args.gpus_per_node or gpus_per_node(CATALOG.get(req.gpu_name or ""))
    tp = auto_tensor_parallel_size(
        replace(req, tensor_parallel_size=1), max_tp=max_tp, target_concurrency=args.target_concurrent_requests
    )
    if tp is None:
        return (
            f"no tensor-parallel size up to {max_tp} (GPUs per node) fits; use a larger GPU or a shorter max_model_len"
        )
    return (
        f"tensorParallelSize auto picks {tp} (smallest of up to {max_tp} GPUs holding "
        f"{args.target_concurrent_requests} × {result.max_model_len:,}-token requests)"
    )


def render_bar(result: SizingResult, gpu_name: str) -> str:
    """The seed's "Will it fit?" bar, one per GPU: weights, runtime overhead, KV cache, spare."""
    total = result.gpu_memory_gib
    overhead = result.overhead_gib
    kv = result.kv_cache_gib_per_gpu
    spare = max(total - result.weights_gib_per_gpu - overhead - kv, 0.0)
    parts = [("W", result.weights_gib_per_gpu), ("R", overhead), ("K", kv), (".", spare)]
    cells = "".join(ch * round(BAR_WIDTH * gib / total) for ch, gib in parts)[:BAR_WIDTH].ljust(BAR_WIDTH, ".")
    gpus = result.tensor_parallel_size * result.pipeline_parallel_size
    lines = [
        (
            f"Will it fit? {'yes' if result.fits else 'NO'} - {gpus} × {gpu_name} "
            f"({total:.2f} GiB CUDA total), TP {result.tensor_parallel_size} × PP {result.pipeline_parallel_size}, "
            f"max_model_len {result.max_model_len:,}, interconnect {result.interconnect}"
        ),
    ]
    for gpu in range(gpus):
        lines.append(f"  GPU {gpu} [{cells}]")
    graphs = "" if result.cuda_graph_in_budget else f" (+ CUDA graphs {result.cuda_graph_gib:.2f} GiB from spare)"
    lines += [
        f"  W weights          {result.weights_gib_per_gpu:7.2f} GiB per GPU",
        f"  R runtime overhead {overhead:7.2f} GiB (activations {result.activation_gib:.2f}, "
        f"non-torch {result.non_torch_gib:.2f}"
        + (f", CUDA graphs {result.cuda_graph_gib:.2f}" if result.cuda_graph_in_budget else "")
        + ")",
        (
            f"  K KV cache         {kv:7.2f} GiB = {result.kv_cache_tokens:,} tokens "
            f"({result.kv_bytes_per_token_per_gpu:,} B/token/GPU), {result.max_concurrency:.2f}× "
            f"{result.max_model_len:,}-token requests"
        ),
        f"  . spare            {spare:7.2f} GiB (outside gpu_memory_utilization){graphs}",
    ]
    if not result.fits:
        lines.append(f"  {result.reason}")
    return "\n".join(lines)


# The log's figure for each budget term: planner/sizing_explain.py key -> (StartupLog field, the flag
# it sets when the log is the input rather than a figure to compare with).
LOGGED_TERMS = {
    "utilization": ("gpu_memory_utilization", "--gpu-memory-utilization"),
    "requested": ("requested", ""),
    "max_num_batched_tokens": ("max_num_batched_tokens", "--max-num-batched-tokens"),
    "max_num_seqs": ("max_num_seqs", "--max-num-seqs"),
    "weights": ("weights", "--weights-gib"),
    "activation": ("activation", ""),
    "non_torch": ("non_torch", ""),
    "cuda_graphs": ("cuda_graphs", ""),
    "kv_memory": ("kv_memory", ""),
    "kv_tokens": ("kv_tokens", ""),
    "activation.vision_encoder.budget": ("encoder_budget_tokens", ""),
    "activation.vision_encoder.items": ("encoder_items", ""),
}


def compare(
    terms: list[sizing_explain.Term], log: startup_log.StartupLog, taken: list[str], modelled: str
) -> dict[str, Any]:
    """Predicted against logged for every term the log reports, and the error on the token count."""
    rows = []
    for term in terms:
        if term.key not in LOGGED_TERMS:
            continue
        field, flag = LOGGED_TERMS[term.key]
        logged = getattr(log, field)
        if logged is None:
            continue
        rows.append(
            {
                "term": term.key,
                "label": term.label,
                "unit": term.unit,
                "predicted": round(term.value, 4),
                "logged": logged,
                "difference": round(term.value - logged, 4),
                "input": bool(flag) and flag in taken,
                "log_line": excerpt(log.lines.get(field, ""), 300),
            }
        )
    tokens = next((t.value for t in terms if t.key == "kv_tokens"), None)
    error = (tokens - log.kv_tokens) / log.kv_tokens if tokens is not None and log.kv_tokens else None
    kv = next((t.value for t in terms if t.key == "kv_memory"), None)
    # A run that did not start logs a negative budget; the engine's KV memory stops at 0, so no ratio.
    logged_kv = log.kv_memory
    kv_error = (kv - logged_kv) / logged_kv if kv is not None and logged_kv is not None and logged_kv > 0 else None
    return {
        "version": log.version,
        "modelled_release": modelled,
        "model": log.model,
        "taken_from_log": taken,
        "terms": rows,
        "kv_tokens_error": None if error is None else round(error, 4),
        "kv_memory_error": None if kv_error is None else round(kv_error, 4),
    }


def render_comparison(comparison: dict[str, Any]) -> str:
    taken = ", ".join(comparison["taken_from_log"]) or "nothing"
    version = comparison["version"] or f"release not stated, modelled as {comparison['modelled_release']}"
    model = comparison["model"] or "not stated"
    lines = [f"Predicted against the log (vLLM {version}, model {model}; taken from the log: {taken}):"]
    for row in comparison["terms"]:
        fmt = (
            (lambda v: f"{v:10.2f} GiB")
            if row["unit"] == "GiB"
            else (lambda v: f"{v:>10,}" if isinstance(v, int) else f"{v:10.3f}")
        )
        predicted = row["predicted"] if row["unit"] != "tokens" else int(row["predicted"])
        diff = (
            f"{row['difference']:+,.0f}"
            if row["unit"] in ("tokens", "sequences", "images")
            else f"{row['difference']:+.2f}"
        )
        note = "  (input from the log)" if row["input"] else f"  difference {diff}"
        lines.append(f"  {row['label']:<48} predicted {fmt(predicted)}  logged {fmt(row['logged'])}{note}")
    if comparison["kv_tokens_error"] is not None:
        lines.append(f"  error on the KV-cache tokens: {comparison['kv_tokens_error']:+.2%}")
    elif comparison["kv_memory_error"] is not None:
        lines.append(f"  error on the KV memory (the log states no token count): {comparison['kv_memory_error']:+.2%}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        log = startup_log.read(args.from_log) if args.from_log else None
        taken = apply_log(args, log) if log is not None else []
        req, gpu_name, resolution = request_from_args(args, log)
        result = size(req)
        terms = sizing_explain.terms(req, result) if (args.explain or log is not None) else None
        comparison = None
        if log is not None and terms is not None:
            comparison = compare(terms, log, taken, req.vllm_version or VLLM_VERSION)
        if args.json:
            out = result.to_dict()
            out["gpu"] = req.gpu_name
            out["gpu_resolution"] = resolution
            out["usage_context"] = req.usage_context
            out["usage_context_source"] = usage_context_note(args, log, taken)
            out["performance_mode"] = req.performance_mode
            if terms is not None and args.explain:
                out["terms"] = [t.to_dict() for t in terms]
            if comparison is not None:
                out["log"] = comparison
            print(json.dumps(out, indent=None, sort_keys=True))
        else:
            print(render_bar(result, gpu_name))
            print(f"  GPU: {resolution}")
            print(f"  TP: {planner_pick_hint(args, req, result)}")
            if log is not None or args.usage_context or args.performance_mode:
                # Said where it may differ from `vllm serve`'s: a log's run, or a usage context or mode asked for.
                print(
                    f"  Usage context: {usage_context_note(args, log, taken)}; performance mode {req.performance_mode}"
                )
            if terms is not None and args.explain:
                print(sizing_explain.render(terms, result.binding_stage if req.pipeline_parallel_size > 1 else None))
            if comparison is not None:
                print(render_comparison(comparison))
        if not result.fits:
            raise DoesNotFit(f"does not fit: {result.reason}; {planner_pick_hint(args, req, result)}")
        return 0
    except DoesNotFit as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (CliError, SizingError, startup_log.StartupLogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of the sizing.
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
