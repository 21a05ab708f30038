"""What a vLLM V1 startup log states about the run and its memory budget, read within limits.

`python -m components.sizing --from-log FILE` sets its inputs from this (GPU total, release,
parallelism, batch limits, dtypes, weights) and sets each logged term beside the engine's figure.
The lines are the ones vLLM V1 prints at start-up, as the project's collected logs quote them
(tests/fixtures/vllm_logs/*.yaml `log_lines`; tests/planner/test_startup_log.py reads every one of
those excerpts back into the numbers its case records):

- the release: "vLLM API server version X", the banner's "version X", "Initializing a V1 LLM engine (vX)";
- the run: "non-default args: {...}" and the engine's "with config: ... tensor_parallel_size=N, ...";
- the GPU: "Free memory on device (F/T GiB) on startup", "total_memory=T GiB" (the worker's memory
  snapshot), "Free memory F/T GiB is less than desired", a fused-MoE config path's "device_name=...";
- the budget: "Model loading took X GiB", "Memory profiling takes ... torch peak memory increase: ...;
  non-torch forward increase memory: ...", "Desired GPU memory utilization is (U, R GiB). Actual
  usage is ...", "Estimated CUDA graph memory: X GiB total", "Available KV cache memory: X GiB",
  "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per request: Cx";
- the usage context and --performance-mode: "Defaulting max_num_batched_tokens to N for X usage context"
  (DEBUG), an API server's marker, "Performance mode set to 'M'";
- the vision encoder's profiling batch: "Encoder cache will be initialized with a budget of N tokens, and
  profiled with M image items of the maximum feature size".

Every worker prints its own budget lines; the engine keeps the smallest KV cache, and so does this.
Pure Python, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from common.untrusted import InputLimitError, excerpt, read_text_file

# A startup log is tens of KB; a server's log that has served for a while carries request lines too.
# 64 MiB holds days of those and is read line by line with literal-anchored patterns (linear time).
MAX_STARTUP_LOG_BYTES = 64 * 1024 * 1024
# Only the start of a very long line is searched (vLLM's longest, the engine config, is a few KB).
MAX_LINE_CHARS = 64 * 1024


class StartupLogError(ValueError):
    """A file that is not a usable vLLM V1 startup log; the message is one line."""


_NUM = r"(-?\d{1,9}(?:\.\d{1,9})?)"
_INT = r"(\d{1,3}(?:,\d{3}){0,5}|\d{1,15})"
_VERSION = r"v?(\d{1,4}\.\d{1,4}(?:\.\d{1,4})?(?:[.+-][0-9A-Za-z.+-]{1,40})?)"


@dataclass
class StartupLog:
    version: str | None = None
    model: str | None = None
    device_name: str | None = None
    cuda_total_gib: float | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_model_len: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    enforce_eager: bool | None = None
    expert_parallel: bool | None = None
    enable_prefix_caching: bool | None = None
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    flashinfer_sampler: bool | None = None
    interconnect: str | None = None  # "pcie" when custom all-reduce says the GPUs lack NVLink or P2P
    # The budget terms, named as planner/sizing_explain.py names them (GiB, tokens).
    weights: float | None = None  # one GPU's "Model loading took" (the first one printed)
    requested: float | None = None
    activation: float | None = None
    non_torch: float | None = None
    cuda_graphs: float | None = None
    kv_memory: float | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    # The vision encoder's profiling batch: "Encoder cache will be initialized with a budget of N tokens,
    # and profiled with M image items of the maximum feature size" (planner/vision_encoders.py).
    encoder_budget_tokens: int | None = None
    encoder_items: int | None = None
    # The flags that change it, from "non-default args": --limit-mm-per-prompt's image count,
    # --skip-mm-profiling, --mm-encoder-tp-mode.
    mm_images_per_prompt: int | None = None
    skip_mm_profiling: bool | None = None
    mm_encoder_tp_mode: str | None = None
    # --performance-mode: the "non-default args" key or "Performance mode set to '%s'." (vllm v0.17.0 ... v0.32.0
    # config/vllm.py:VllmConfig.__post_init__, printed when it is not "balanced").
    performance_mode: str | None = None
    # Who built the engine ("openai-server" or "llm-class", planner/vllm_releases.py:USAGE_CONTEXTS): the DEBUG
    # line "Defaulting max_num_batched_tokens to %d for %s usage context." (vllm v0.32.0 engine/arg_utils.py:
    # _set_default_max_num_seqs_and_batched_tokens_args) when it is there, else "openai-server" where the log
    # carries an API server's marker ("vLLM API server version", "(APIServer pid=", "'model_tag':", the
    # argument `vllm serve MODEL` sets); None when neither says.
    usage_context: str | None = None
    # The line each figure was read from (field name -> line), for the report.
    lines: dict[str, str] = field(default_factory=dict)

    def stated(self) -> dict[str, object]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "lines" and getattr(self, f.name) is not None
        }


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _bool(text: str) -> bool:
    return text == "True"


# UsageContext's values (vllm v0.29.0 usage/usage_lib.py) as planner/vllm_releases.py:USAGE_CONTEXTS names them.
_USAGE_CONTEXTS = {"LLM_CLASS": "llm-class", "OPENAI_API_SERVER": "openai-server"}

# (pattern, [(field, converter)], keep): "first" keeps the first value, "min" the smallest.
_LINE_PATTERNS: list[tuple[str, re.Pattern[str], list[tuple[str, Any]], str]] = [
    ("vLLM API server version", re.compile(r"vLLM API server version " + _VERSION), [("version", str)], "first"),
    ("LLM engine (v", re.compile(r"Initializing a V1 LLM engine \(" + _VERSION + r"\)"), [("version", str)], "first"),
    (
        "version",
        re.compile(r"\[(?:[\w/]*utils|api_utils)\.py:\d+\][^\n]*?\bversion " + _VERSION + r"\s*$"),
        [("version", str)],
        "first",
    ),
    (
        "Free memory on device",
        re.compile(r"Free memory on device \(" + _NUM + r"/" + _NUM + r" GiB\)"),
        [("", None), ("cuda_total_gib", float)],
        "first",
    ),
    ("total_memory=", re.compile(r"\btotal_memory=" + _NUM + r"\s*GiB"), [("cuda_total_gib", float)], "first"),
    (
        "is less than desired",
        re.compile(r"Free memory " + _NUM + r"/" + _NUM + r" GiB is less than desired"),
        [("", None), ("cuda_total_gib", float)],
        "first",
    ),
    (
        "device_name=",
        re.compile(r"device_name=(NVIDIA_[A-Za-z0-9_-]{1,60}?)(?:,|\.json|\s|$)"),
        [("device_name", str)],
        "first",
    ),
    (
        "Desired GPU memory utilization is",
        re.compile(r"Desired GPU memory utilization is \(" + _NUM + r", " + _NUM + r" GiB\)"),
        [("gpu_memory_utilization", float), ("requested", float)],
        "first",
    ),
    (
        "GiB for peak activation",
        re.compile(r"\b" + _NUM + r" GiB for peak activation"),
        [("activation", float)],
        "first",
    ),
    (
        "GiB for non-torch memory",
        re.compile(r"\b" + _NUM + r" GiB for non-torch memory"),
        [("non_torch", float)],
        "first",
    ),
    (
        "GiB for CUDAGraph memory",
        re.compile(r"\b" + _NUM + r"\s+GiB for CUDAGraph memory"),
        [("cuda_graphs", float)],
        "first",
    ),
    ("Model loading took", re.compile(r"Model loading took " + _NUM + r" GiB"), [("weights", float)], "first"),
    (
        "torch peak memory increase",
        re.compile(r"torch peak memory increase: " + _NUM + r"\s*GiB"),
        [("activation", float)],
        "first",
    ),
    (
        "non-torch forward increase memory",
        re.compile(r"non-torch forward increase memory: " + _NUM + r"\s*GiB"),
        [("non_torch", float)],
        "first",
    ),
    (
        "Estimated CUDA graph memory",
        re.compile(r"Estimated CUDA graph memory: " + _NUM + r" GiB"),
        [("cuda_graphs", float)],
        "first",
    ),
    (
        "Available KV cache memory",
        re.compile(r"Available KV cache memory: " + _NUM + r" GiB"),
        [("kv_memory", float)],
        "min",
    ),
    ("GPU KV cache size", re.compile(r"GPU KV cache size: " + _INT + r" tokens"), [("kv_tokens", _int)], "min"),
    (
        "Maximum concurrency for",
        re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x"),
        [("", None), ("max_concurrency", float)],
        "min",
    ),
    (
        "Encoder cache will be initialized",
        re.compile(
            r"Encoder cache will be initialized with a budget of " + _INT + r" tokens, and profiled with (\d{1,9}) "
        ),
        [("encoder_budget_tokens", _int), ("encoder_items", int)],
        "first",
    ),
    (
        "max_num_batched_tokens",
        re.compile(r"(?:enabled with max_num_batched_tokens=|Defaulting max_num_batched_tokens to )(\d{1,9})"),
        [("max_num_batched_tokens", int)],
        "first",
    ),
    (
        "Performance mode set to",
        re.compile(r"Performance mode set to '(balanced|interactivity|throughput)'"),
        [("performance_mode", str)],
        "first",
    ),
    (
        "usage context",
        re.compile(r"Defaulting max_num_batched_tokens to \d{1,9} for (LLM_CLASS|OPENAI_API_SERVER) usage context"),
        [("usage_context", lambda value: _USAGE_CONTEXTS[value])],
        "first",
    ),
    (
        "Using FlashInfer for top-p & top-k sampling",
        re.compile(r"Using FlashInfer for top-p & top-k sampling"),
        [],
        "first",
    ),
    ("FlashInfer is not available", re.compile(r"FlashInfer is not available"), [], "first"),
    # From 0.21 FlashInfer top-k/top-p is on by default; these say it was not (vllm v0.21.0 ... v0.28.0
    # v1/sample/ops/topk_topp_sampler.py: "disabled via VLLM_USE_FLASHINFER_SAMPLER=0", "not supported
    # on compute capability", v0.25.1 on "unavailable").
    (
        "FlashInfer top-p/top-k sampling",
        re.compile(r"FlashInfer top-p/top-k sampling (?:disabled via|not supported on|unavailable)"),
        [],
        "first",
    ),
    # vLLM's custom all-reduce turns itself off on GPUs that NVLink does not fully connect (more than
    # two) or that fail its peer-to-peer test; either way the GPUs are not on an NVSwitch, so NCCL
    # has no NVLS buffers (vllm v0.28.0 distributed/device_communicators/custom_all_reduce.py,
    # CustomAllreduce.__init__: `same_node and world_size > 2 and not fully_connected` and
    # `not _can_p2p(rank, world_size)`; dennislee22's vLLM 0.10.1.1 logs in the calibration set print the second).
    (
        "Custom allreduce is disabled because",
        re.compile(
            r"Custom allreduce is disabled because (?:it's not supported on more than two PCIe-only GPUs"
            r"|your platform lacks GPU P2P capability)"
        ),
        [],
        "first",
    ),
]

# Keys of "non-default args: {...}" (the flags as given) and of the engine's "with config: ..." line.
_ARGS_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "model": (r"'model': '([^']{1,300})'", str),
    "tensor_parallel_size": (r"'tensor_parallel_size': (\d{1,4})", int),
    "pipeline_parallel_size": (r"'pipeline_parallel_size': (\d{1,4})", int),
    "max_model_len": (r"'max_model_len': (\d{1,9})", int),
    "gpu_memory_utilization": (r"'gpu_memory_utilization': " + _NUM, float),
    "kv_cache_dtype": (r"'kv_cache_dtype': '(\w{1,20})'", str),
    "dtype": (r"'dtype': '(\w{1,20})'", str),
    "quantization": (r"'quantization': '([\w-]{1,40})'", str),
    "max_num_seqs": (r"'max_num_seqs': (\d{1,9})", int),
    "max_num_batched_tokens": (r"'max_num_batched_tokens': (\d{1,9})", int),
    "enforce_eager": (r"'enforce_eager': (True|False)", _bool),
    "expert_parallel": (r"'enable_expert_parallel': (True|False)", _bool),
    "enable_prefix_caching": (r"'enable_prefix_caching': (True|False)", _bool),
    "mm_images_per_prompt": (r"'limit_mm_per_prompt': \{[^}]{0,200}?'image': (\d{1,7})", int),
    "skip_mm_profiling": (r"'skip_mm_profiling': (True|False)", _bool),
    "mm_encoder_tp_mode": (r"'mm_encoder_tp_mode': '(weights|data)'", str),
    "performance_mode": (r"'performance_mode': '(balanced|interactivity|throughput)'", str),
}
_CONFIG_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "model": (r"\bmodel='([^']{1,300})'", str),
    "tensor_parallel_size": (r"\btensor_parallel_size=(\d{1,4})", int),
    "pipeline_parallel_size": (r"\bpipeline_parallel_size=(\d{1,4})", int),
    "max_model_len": (r"\bmax_seq_len=(\d{1,9})", int),
    "dtype": (r"\bdtype=torch\.(\w{1,20})", str),
    "quantization": (r"\bquantization=([\w-]{1,40})", str),
    "enforce_eager": (r"\benforce_eager=(True|False)", _bool),
    "kv_cache_dtype": (r"\bkv_cache_dtype=(\w{1,20})", str),
    "enable_prefix_caching": (r"\benable_prefix_caching=(True|False)", _bool),
}
_Converter = Callable[[str], Any]
_COMPILED_ARGS: dict[str, tuple[re.Pattern[str], _Converter]] = {
    k: (re.compile(p), conv) for k, (p, conv) in _ARGS_KEYS.items()
}
_COMPILED_CONFIG: dict[str, tuple[re.Pattern[str], _Converter]] = {
    k: (re.compile(p), conv) for k, (p, conv) in _CONFIG_KEYS.items()
}


# What only the OpenAI server prints (vllm v0.29.0 entrypoints/cli/serve.py; `vllm serve MODEL` sets model_tag).
_API_SERVER_MARKERS = ("vLLM API server version", "(APIServer pid=", "'model_tag': ")


def _set(log: StartupLog, name: str, value: Any, line: str, keep: str = "first") -> None:
    current = getattr(log, name)
    if current is None or (keep == "min" and value < current):
        setattr(log, name, value)
        log.lines[name] = line


def parse(text: str) -> StartupLog:
    """The figures a log states; nothing is guessed (a figure the log does not state stays None)."""
    log = StartupLog()
    for raw in text.splitlines():
        line = raw[:MAX_LINE_CHARS]
        for anchor, pattern, targets, keep in _LINE_PATTERNS:
            if anchor not in line:
                continue
            match = pattern.search(line)
            if not match:
                continue
            if anchor == "Using FlashInfer for top-p & top-k sampling":
                _set(log, "flashinfer_sampler", True, line)
            elif anchor in ("FlashInfer is not available", "FlashInfer top-p/top-k sampling"):
                _set(log, "flashinfer_sampler", False, line)
            elif anchor == "Custom allreduce is disabled because":
                _set(log, "interconnect", "pcie", line)
            for group, (name, conv) in enumerate(targets, start=1):
                if name:
                    _set(log, name, conv(match.group(group)), line, keep)
        for anchor, keys in (("non-default args: {", _COMPILED_ARGS), ("with config: ", _COMPILED_CONFIG)):
            if anchor in line:
                part = line[line.index(anchor) :]
                for name, (pattern, conv) in keys.items():
                    match = pattern.search(part)
                    if match:
                        _set(log, name, conv(match.group(1)), line)
        if log.usage_context is None and "server_marker" not in log.lines:
            marker = next((m for m in _API_SERVER_MARKERS if m in line), None)
            if marker is not None:
                log.lines["server_marker"] = line
    if log.usage_context is None and "server_marker" in log.lines:
        log.usage_context = "openai-server"
        log.lines["usage_context"] = log.lines["server_marker"]
    log.lines.pop("server_marker", None)
    if log.quantization == "None":
        log.quantization = None
    return log


# What marks a file as a vLLM V1 startup log at all, and what marks it as finished.
_VLLM_MARKERS = ("vLLM API server version", "Initializing a V1 LLM engine", "Model loading took", "non-default args: {")
_BUDGET_MARKERS = ("Available KV cache memory", "GPU KV cache size")


def read(path: str) -> StartupLog:
    """Read and parse a startup log; StartupLogError (one line) for a file that is not one."""
    try:
        text = read_text_file(path, MAX_STARTUP_LOG_BYTES, path)
    except InputLimitError as exc:
        raise StartupLogError(f"--from-log: {exc}") from None
    if "\x00" in text:
        raise StartupLogError(f"--from-log: {excerpt(path)} holds NUL bytes: a binary file, not a vLLM startup log")
    if not any(marker in text for marker in _VLLM_MARKERS + _BUDGET_MARKERS):
        raise StartupLogError(
            f"--from-log: {excerpt(path)} is not a vLLM startup log (none of the lines vLLM V1 prints at start-up: "
            "'vLLM API server version', 'Initializing a V1 LLM engine', 'Model loading took', "
            "'Available KV cache memory')"
        )
    if "Initializing a V0 LLM engine" in text or "Initializing an LLM engine (v" in text:
        raise StartupLogError(f"--from-log: {excerpt(path)} is a V0 engine's log; the sizing models vLLM's V1 engine")
    log = parse(text)
    if log.kv_memory is None and log.kv_tokens is None:
        raise StartupLogError(
            f"--from-log: {excerpt(path)} ends before vLLM reported its KV cache (no 'Available KV cache memory' or "
            "'GPU KV cache size' line): the log is truncated or the server stopped before profiling ended"
        )
    return log
