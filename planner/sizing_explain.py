"""Every term of one GPU's memory budget, with its size, the release behaviour it follows and its source.

`python -m components.sizing --explain` prints these, `--json` adds them under "terms", and
`--from-log` sets each beside what the log states. The sizes are the engine's own (planner/sizing.py,
the same functions `size` adds up, for the pipeline stage that binds); the sources are the data of
planner/vllm_releases.py:SOURCES, so a citation lives in one place and is printed, not restated.

Pure Python, no Pulumi import.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from common import gpus
from planner import sizing as s
from planner import vision_encoders
from planner.vllm_releases import SOURCES, WNA16_MOE_METHODS, Release


@dataclass(frozen=True)
class Term:
    key: str  # stable name, also the --json key and the --from-log key
    label: str
    value: float  # in `unit`
    unit: str  # "GiB", "fraction", "tokens", "sequences", "images", "B/token", "graphs"
    behaviour: str  # what the modelled release does for this term, and from which release on
    source: str  # vLLM's source line ("vllm vX.Y.Z path:function") or the project's model of it
    calibrated: str = ""  # the calibrated constant behind the size, when it is not derived from the source
    part_of: str = ""  # the term this one is a part of ("activation", "non_torch")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["value"] = round(self.value, 4) if isinstance(self.value, float) else self.value
        return out


def _version_text(key: tuple[int, int]) -> str:
    return f"{key[0]}.{key[1]}"


def _band(term: str, release: Release) -> str:
    """'from 0.20' / 'before 0.20' / 'every release read': which entry of SOURCES[term] holds."""
    keys = sorted(SOURCES[term])
    here = [k for k in keys if k <= release.version]
    chosen = max(here) if here else keys[0]
    later = [k for k in keys if k > chosen]
    if chosen == (0, 0) and not later:
        return "every release read"
    if chosen == (0, 0):
        return f"before {_version_text(later[0])}"
    if not later:
        return f"from {_version_text(chosen)}"
    return f"{_version_text(chosen)} to before {_version_text(later[0])}"


def _src(term: str, release: Release) -> str:
    return str(release.source(term))


# Joins a second source line to a term's first (as "; sizes: " joins the capture sizes' line to the graphs').
ALSO = "; also: "


def _interactivity_src(req: s.SizingRequest, release: Release) -> str:
    """The capture-size rule of --performance-mode interactivity (every size from 1 to 32), when it applies."""
    if req.performance_mode != "interactivity" or req.enforce_eager:
        return ""
    return ALSO + _src("performance_mode.interactivity", release)


def _batch_defaults_how(req: s.SizingRequest, release: Release) -> tuple[str, str]:
    """What sets a batch limit left to its default: the per-device table of the usage context and
    --performance-mode, with their source lines (planner/vllm_releases.py:USAGE_CONTEXTS, PERFORMANCE_MODES)."""
    offline = req.usage_context == "llm-class"
    table = "batch_defaults.llm_class" if offline else "batch_defaults"
    who = "the offline LLM class's" if offline else "the OpenAI server's"
    how = f"the per-device default, {who} (usage context {req.usage_context}; {_band(table, release)})"
    src = _src(table, release)
    if req.performance_mode == "throughput":
        how += ", doubled by --performance-mode throughput"
        src += ALSO + _src("performance_mode.throughput", release)
    else:
        how += f", performance mode {req.performance_mode} (throughput would double it)"
        if release.has_performance_mode:
            src += ALSO + _src("performance_mode.throughput", release)
    return how, src


def terms(req: s.SizingRequest, result: s.SizingResult | None = None) -> list[Term]:
    """The budget of the binding GPU, term by term, in the order vLLM subtracts them."""
    result = result or s.size(req)
    release = Release.of(req.vllm_version)
    ver = ".".join(map(str, release.version))
    arch = req.arch
    stage = result.binding_stage
    mnbt, seqs = s.default_batch_limits(req)
    utilization = req.gpu_memory_utilization
    out: list[Term] = []

    def add(key, label, value, unit, behaviour, source, calibrated="", part_of=""):
        out.append(Term(key, label, value, unit, f"vLLM {ver}: {behaviour}", source, calibrated, part_of))

    add(
        "utilization",
        "gpu_memory_utilization",
        utilization if utilization is not None else release.default_gpu_memory_utilization,
        "fraction",
        ("as set" if utilization is not None else "the release's default") + f" ({_band('utilization', release)})",
        _src("utilization", release),
    )
    add(
        "requested",
        f"requested = {result.gpu_memory_gib:g} GiB x utilization",
        result.requested_gib,
        "GiB",
        "the share of the CUDA total the engine may use",
        _src("requested", release),
    )
    defaults_how, defaults_src = _batch_defaults_how(req, release)
    add(
        "max_num_batched_tokens",
        "max_num_batched_tokens (profiled forward)",
        mnbt,
        "tokens",
        "as set" if req.max_num_batched_tokens else defaults_how,
        defaults_src,
    )
    add(
        "max_num_seqs",
        "max_num_seqs (sampler warm-up rows, capture sizes)",
        seqs,
        "sequences",
        "as set" if req.max_num_seqs else defaults_how,
        defaults_src,
    )
    weights_how = (
        "from --weights-gib / the log"
        if req.weights_bytes
        else "estimated from config.json's parameters (planner/sizing.py:weight_bytes_estimate)"
    )
    if not req.weights_bytes and (req.quantization or arch.quant_method or "").lower().startswith(("awq", "gptq")):
        weights_how += (
            f", {s.group_quantized_bytes_per_weight(req):.4f} bytes per quantized weight (packed weights, fp16 "
            "group scales, AWQ zero points; embedding and LM head unquantized: "
            + _src("weights.group_quantized", release)
            + ")"
        )
    if req.pipeline_parallel_size > 1:
        weights_how += f", stage {stage} of {req.pipeline_parallel_size}'s layers plus its embedding/LM head"
    add(
        "weights",
        "weights per GPU",
        result.weights_gib_per_gpu,
        "GiB",
        weights_how,
        _src("weights.pipeline" if req.pipeline_parallel_size > 1 else "weights", release),
    )
    add(
        "lora",
        "LoRA slots",
        result.lora_gib_per_gpu,
        "GiB",
        "allocated with the model, by --max-loras x --max-lora-rank" if result.lora_gib_per_gpu else "LoRA off",
        _src("lora", release),
    )
    parts = s.activation_parts(req, stage, mnbt, seqs)
    add(
        "activation",
        "peak activation (torch peak increase)",
        result.activation_gib,
        "GiB",
        "the largest of forward, sampler warm-up and encoder"
        + (", plus the persistent MoE workspace" if parts.moe_workspace_persists and parts.moe_workspace else ""),
        _src("profile_run", release),
    )
    add(
        "activation.forward",
        f"forward of {mnbt:,} tokens",
        parts.forward / s.GiB,
        "GiB",
        "the dummy forward of the profile run",
        _src("profile_run", release),
        "FORWARD_INTERMEDIATE_FACTOR, FORWARD_HIDDEN_FACTOR (calibration logs, tests/fixtures/vllm_logs/cases.yaml)",
        "activation",
    )
    if parts.sampler_path:
        rows = min(seqs, mnbt)
        if parts.sampler_path == "v2":
            add(
                "activation.sampler",
                f"sampler warm-up, {rows:,} rows of logits (Model Runner V2)",
                parts.sampler / s.GiB,
                "GiB",
                "Model Runner V2 skips top-k/top-p on the dummy batch: logits only",
                _src("sampler.v2", release),
                part_of="activation",
            )
            counted = release.profile_counts_buffers_allocated_after_load
            add(
                "activation.sampler_state",
                "V2 sampler state (kept)",
                parts.sampler_persistent / s.GiB,
                "GiB",
                "penalties state, per-request tables and the grammar bitmask"
                + (
                    ", counted by the profile's drop in free memory (from 0.27): "
                    if counted
                    else ", allocated outside the weights' measurement and before the profile, so not counted "
                    "(before 0.27): "
                )
                + _src("profile_accounting", release),
                _src("sampler.v2_penalties", release),
                part_of="activation",
            )
            state = s.v2_sampler_state_parts(req, seqs)
            for key, label, behaviour in (
                ("penalties", "penalties: counts and prompt mask", "an int32 count and a bit per request and token"),
                (
                    "tables",
                    "logit-bias, stop, bad-word, logprob-id tables",
                    f"{s.V2_SAMPLER_TABLE_ENTRIES_PER_REQUEST:,} 4-byte entries per request",
                ),
                ("bitmask", "structured-outputs grammar bitmask", "a bit per logit row and token, int32 words"),
            ):
                add(
                    f"activation.sampler_state.{key}",
                    label,
                    (state[key] if counted else 0.0) / s.GiB,
                    "GiB",
                    behaviour + ("" if counted else " (not counted before 0.27)"),
                    _src(f"sampler.v2_{key}", release),
                    part_of="activation.sampler_state",
                )
        else:
            path = parts.sampler_path
            gpu = gpus.CATALOG.get(req.gpu_name or "")
            warmed = release.sampler_warmup_paths(rows, req.flashinfer_sampler, gpu.compute_capability if gpu else None)
            second = (
                f"; the warm-up runs {' then '.join(warmed)} (a second call with a generator, "
                + _src("sampler.native_warmup", release)
                + "), the larger sets the peak"
                if len(warmed) > 1
                else ""
            )
            add(
                "activation.sampler",
                f"sampler warm-up, {rows:,} rows x {arch.vocab:,} vocabulary ({path} top-k/top-p)",
                parts.sampler / s.GiB,
                "GiB",
                f"the {path} top-k/top-p path ({_band('sampler.' + path, release)}){second}; dummy run: "
                + _src("sampler.dummy_run", release),
                _src("sampler." + path, release),
                f"SAMPLER_BYTES_PER_LOGIT[{path!r}] = {s.SAMPLER_BYTES_PER_LOGIT[path]}",
                "activation",
            )
    if parts.moe_workspace:
        quant = req.quantization or arch.quant_method or ""
        key = "moe_workspace.fp8_persistent" if quant in ("fp8", "fbgemm_fp8") else "moe_workspace.persistent"
        if quant.lower() in WNA16_MOE_METHODS:
            key = "moe_workspace.wna16_persistent"
        add(
            "activation.moe_workspace",
            "fused-MoE workspace",
            parts.moe_workspace / s.GiB,
            "GiB",
            "persistent, still allocated when the sampler runs"
            if parts.moe_workspace_persists
            else "per-call buffers, freed before the sampler runs",
            _src(key, release) if parts.moe_workspace_persists else _src("moe_workspace", release),
            part_of="activation",
        )
    _vision_terms(req, mnbt, seqs, result, add)
    if parts.pipeline_buffer:
        v2 = release.uses_model_runner_v2(arch.architecture, arch.is_moe, arch.is_hybrid)
        add(
            "activation.pipeline_buffer",
            f"received hidden states + residual, {mnbt:,} tokens (stage {stage})",
            parts.pipeline_buffer / s.GiB,
            "GiB",
            "Model Runner V2 allocates it after loading; counted by the free-memory budget"
            if v2
            else "allocated in the profile run and kept through the sampler warm-up",
            _src("pipeline_buffer.v2" if v2 else "pipeline_buffer", release),
            part_of="activation",
        )
    if not release.uses_model_runner_v2(arch.architecture, arch.is_moe, arch.is_hybrid):
        counted = release.v1_runner_buffers_in_budget(arch.architecture, arch.is_moe, arch.is_hybrid)
        add(
            "activation.runner_buffers",
            f"V1 runner input buffers: inputs_embeds of {mnbt:,} tokens, index buffers, block table of {seqs:,} rows",
            parts.runner_buffers / s.GiB,
            "GiB",
            (
                "allocated with the model runner after the memory snapshot, counted by the profile's drop in free "
                "memory (from 0.27): "
                if counted
                else "allocated with the model runner after the memory snapshot and outside the weights' "
                "measurement, so not counted (before 0.27): "
            )
            + _src("profile_accounting", release),
            _src("runner_buffers.v1", release),
            part_of="activation",
        )
    nt = s.non_torch_parts(req)
    add(
        "non_torch",
        f"non-torch memory ({result.interconnect})",
        result.non_torch_gib,
        "GiB",
        "what grows outside PyTorch between the snapshot and the end of profiling",
        _src("non_torch", release),
    )
    pp_stage_only = req.pipeline_parallel_size > 1 and req.tensor_parallel_size == 1
    pp_before_communicators = pp_stage_only and not release.snapshot_after_distributed_init
    add(
        "non_torch.workspaces",
        "CUDA/cuBLAS workspaces",
        nt.workspaces,
        "GiB",
        "a PP stage"
        if pp_stage_only and not pp_before_communicators
        else "one GPU's workspaces"
        + (
            f" (the snapshot precedes the communicators, {_band('non_torch.snapshot', release)})"
            if pp_stage_only
            else ""
        ),
        _src("non_torch.snapshot", release) if pp_stage_only else _src("non_torch", release),
        "NON_TORCH_PP_ONLY_GIB" if pp_stage_only and not pp_before_communicators else "NON_TORCH_SINGLE_GPU_GIB",
        "non_torch",
    )
    if nt.nccl_ring:
        add(
            "non_torch.nccl",
            "NCCL ring/tree buffers",
            nt.nccl_ring,
            "GiB",
            "the pipeline group's communicator and its warm-up, after the snapshot"
            if pp_before_communicators
            else "custom all-reduce buffers come before the snapshot; NCCL's during the forward",
            _src("non_torch.snapshot", release) if pp_before_communicators else _src("custom_all_reduce", release),
            "NCCL_RING_BUFFERS_GIB",
            "non_torch",
        )
    if nt.nccl_nvls:
        add(
            "non_torch.nvls",
            "NCCL NVLS buffers (NVSwitch, Hopper or newer)",
            nt.nccl_nvls,
            "GiB",
            "NCCL's NVLink SHARP all-reduce on NVSwitch",
            'vllm-project/vllm#9699 (NCCL "NVLS comm ... nvlsTotalSize")',
            "NCCL_NVLS_BUFFERS_GIB",
            "non_torch",
        )
    if nt.unified_host_growth:
        add(
            "non_torch.unified_host_growth",
            "host memory grown while profiling (unified memory)",
            nt.unified_host_growth,
            "GiB",
            f"free memory read from the host ({_band('unified_host_growth', release)})",
            _src("unified_host_growth", release),
            "UNIFIED_MEMORY_HOST_GROWTH_GIB",
            "non_torch",
        )
    sizes = len(s.cuda_graph_capture_sizes(req, seqs))
    fine = (
        ", every size from 1 to 32 (--performance-mode interactivity)"
        if req.performance_mode == "interactivity" and not req.enforce_eager
        else ""
    )
    v2_graphs = release.v2_graph_estimate(arch.architecture, arch.is_moe, arch.is_hybrid) and not req.enforce_eager
    full_graphs = s.v2_full_graph_count(req, seqs) if v2_graphs else 0
    if req.enforce_eager:
        graphs_how = "--enforce-eager: no CUDA graphs"
    elif v2_graphs:
        graphs_how = (
            f"Model Runner V2's estimate, subtracted: {sizes} PIECEWISE graphs measured, {full_graphs} FULL graphs "
            "(sizes up to max_num_seqs x decode query length) extrapolated from the two largest; encoder graphs "
            f"off by default (cudagraph_mm_encoder){fine}"
        )
    elif result.cuda_graph_in_budget:
        graphs_how = f"estimated and subtracted ({_band('cuda_graphs', release)}), {sizes} capture sizes{fine}"
    elif not release.cuda_graphs_in_budget:
        graphs_how = (
            f"captured after the budget, outside it ({_band('cuda_graphs', release)}), {sizes} capture sizes{fine}"
        )
    else:
        graphs_how = "Model Runner V2 of 0.22 to 0.28 estimates 0 (profile_cudagraph_memory returns 0)"
    add(
        "cuda_graphs",
        "CUDA graphs" + ("" if result.cuda_graph_in_budget else " (not in the budget)"),
        result.cuda_graph_gib,
        "GiB",
        graphs_how,
        _src("cuda_graphs.v2_skips", release)
        if (not req.enforce_eager and release.cuda_graphs_in_budget and not result.cuda_graph_in_budget)
        else (
            _src("cuda_graphs.v2_estimate", release)
            + "; sizes: "
            + _src("cuda_graphs.v2_full_sizes", release)
            + _interactivity_src(req, release)
        )
        if v2_graphs
        else _src("cuda_graphs", release)
        + "; sizes: "
        + _src("capture_sizes", release)
        + _interactivity_src(req, release),
        "CUDA_GRAPH_BASE_GIB, CUDA_GRAPH_PER_LAYER_GIB" if sizes else "",
    )
    v1_estimate = not release.uses_model_runner_v2(arch.architecture, arch.is_moe, arch.is_hybrid)
    if sizes > 1 and v1_estimate:
        add(
            "cuda_graphs.estimate_step",
            "step: one 20 MiB segment more in a 2nd capture",
            s.cuda_graph_estimate_step_bytes(sizes) / s.GiB,
            "GiB",
            f"vLLM extrapolates each mode from its second capture, ({sizes} - 1) x its free-memory drop, so one "
            "20 MiB allocator segment taken there moves the estimate by this much"
            + (" and the KV budget with it" if result.cuda_graph_in_budget else " (the estimate is only logged here)")
            + "; PyTorch c10/cuda/CUDACachingAllocator.cpp kLargeBuffer (planner/sizing.py:"
            "cuda_graph_estimate_step_bytes)",
            _src("cuda_graphs.estimate_step", release),
            part_of="cuda_graphs",
        )
    if full_graphs > 1:
        add(
            "cuda_graphs.estimate_step",
            "step: one 20 MiB segment more in the 2nd FULL capture",
            s.v2_cuda_graph_estimate_step_bytes(full_graphs) / s.GiB,
            "GiB",
            f"Model Runner V2 measures every PIECEWISE graph and extrapolates only FULL ones, ({full_graphs} - 1) x "
            "the second FULL capture's drop, so one 20 MiB allocator segment taken there moves the estimate and the "
            "KV budget by this much (planner/sizing.py:v2_cuda_graph_estimate_step_bytes)",
            _src("cuda_graphs.v2_estimate", release),
            part_of="cuda_graphs",
        )
    add(
        "kv_memory",
        "KV memory = requested - the terms above",
        result.kv_cache_gib_per_gpu,
        "GiB",
        "what is left of the requested memory",
        _src("kv_memory", release),
    )
    add(
        "kv_bytes_per_token",
        "KV bytes per token per GPU",
        result.kv_bytes_per_token_per_gpu,
        "B/token",
        f"pages of {result.block_size} tokens, groups {', '.join(result.kv_groups) or '-'}",
        _src("kv_layout", release),
    )
    add(
        "kv_tokens",
        "GPU KV cache size",
        result.kv_cache_tokens,
        "tokens",
        f"the reported count ({_band('kv_tokens', release)})",
        _src("kv_tokens", release),
    )
    return out


def render(term_list: list[Term], stage: int | None = None) -> str:
    where = f" of a GPU of pipeline stage {stage}, the one with the fewest KV blocks" if stage is not None else ""
    lines = [f"Memory budget{where}, term by term (size; the behaviour it follows; the source line):"]
    for t in term_list:
        indent = "    " if t.part_of else "  "
        if t.unit == "GiB":
            size = f"{t.value:9.2f} GiB"
        elif t.unit == "fraction":
            size = f"{t.value:9.3f}    "
        else:
            size = f"{int(t.value):>9,} {t.unit}"
        lines.append(f"{indent}{t.label:<{58 - len(indent)}} {size}")
        lines.append(
            f"{indent}    {t.behaviour}; {t.source}" + (f"; calibrated: {t.calibrated}" if t.calibrated else "")
        )
    return "\n".join(lines)


def _vision_terms(req: s.SizingRequest, mnbt: int, seqs: int, result: s.SizingResult, add_term) -> None:
    """The vision encoder's profiling terms (planner/vision_encoders.py), or the reason it is not sized."""
    arch = req.arch
    if result.binding_stage != 0:
        return
    parts = s.vision_encoder_parts(req, mnbt, seqs)
    family = arch.vision_family
    release = Release.of(req.vllm_version)
    if parts is None and family and not release.profiles_encoder(arch.architecture, arch.is_moe, arch.is_hybrid):
        add_term(
            "activation.vision_encoder",
            "vision encoder (not profiled by Model Runner V2)",
            0.0,
            "GiB",
            "Model Runner V2 before 0.27 runs only the text dummy forward in its profile (vLLM PR #48469's case)",
            _src("vision_encoder.v2", release),
            part_of="activation",
        )
        return
    if parts is None:
        if arch.vision_unmodelled:
            add_term(
                "activation.vision_encoder",
                "vision encoder (not sized)",
                0.0,
                "GiB",
                f"not modelled: {arch.vision_unmodelled} (preprocessor_config.json is not read); the startup "
                "log's 'Encoder cache will be initialized with a budget of N tokens' line and its torch peak settle it",
                "planner/vision_encoders.py:UNMODELLED_TOWERS",
                part_of="activation",
            )
        return
    profile = s.encoder_profile(req, mnbt, seqs, result.max_model_len)
    assert profile is not None
    batch = f"{profile.items} image(s) x {profile.patches_per_item} patches ({profile.tokens_per_item} tokens each)"
    source = vision_encoders.describe(family) + "; " + _src("vision_encoder", Release.of(req.vllm_version))
    add_term(
        "activation.vision_encoder",
        f"vision encoder on the dummy image batch ({family})",
        parts.total / s.GiB,
        "GiB",
        f"the encoder's dummy forward, before the decoder's: {batch}",
        source,
        f"VISION_ENCODER_TOKENS_PER_IMAGE = {s.VISION_ENCODER_TOKENS_PER_IMAGE}" if family == "qwen_vl" else "",
        "activation",
    )
    budget_source = "vllm v0.32.0 multimodal/encoder_budget.py:MultiModalBudget._get_max_items"
    add_term(
        "activation.vision_encoder.budget",
        "encoder budget (max of batched tokens, one image)",
        max(mnbt, profile.tokens_per_item),
        "tokens",
        "the log's 'Encoder cache will be initialized with a budget of N tokens'",
        budget_source,
        part_of="activation.vision_encoder",
    )
    add_term(
        "activation.vision_encoder.items",
        "images in the dummy encoder batch",
        profile.items,
        "images",
        "the log's 'profiled with M image items of the maximum feature size'",
        budget_source,
        part_of="activation.vision_encoder",
    )
    pieces = [
        ("layers", "residual, norm and MLP intermediates of every patch", parts.layers),
        ("pixels", "pixel values of the batch", parts.pixels),
        ("mask", "dense block-diagonal attention mask over all patches (no xFormers)", parts.mask),
        ("mask_padded_copy", "PyTorch SDPA's aligned copy of that mask", parts.mask_padded_copy),
        ("embeddings", "encoder outputs cached for the decoder's dummy run", parts.embeddings),
    ]
    for key, label, value in pieces:
        if value:
            add_term(
                f"activation.vision_encoder.{key}",
                label,
                value / s.GiB,
                "GiB",
                "part of the encoder's peak",
                vision_encoders.describe(family),
                part_of="activation.vision_encoder",
            )
