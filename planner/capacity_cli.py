"""`python -m planner.capacity --explain`: every term of one replica's prediction, for one model, GPU and load.

The flags are `python -m planner.performance`'s (planner/performance.py: the model's config.json, the GPU, TP,
dtypes, batch limits, --concurrency, --input-len/--output-len, the SLO and --request-rate). Without
--concurrency the replica is explained at the highest concurrency meeting the SLO, the point the plan's capacity
(planner/capacity.py) runs each replica at. It prints, with the numbers that make each one:

- prefill: the FLOPs of one prompt on each GPU (weights, logits, causal attention) and the time of its chunks,
  each chunk one engine step shared with the running decodes;
- decode: the bytes one step reads (weights, KV cache of the running batch) and its FLOPs, the step the longer
  of the two plus the all-reduces of tensor parallelism; that step is the TPOT (= ITL);
- batch growth and preemption: the running batch against max_num_seqs and the KV pool, the share recomputed;
- the first token: the rest of the step in progress, the step already in flight under asynchronous scheduling,
  and the mixed steps that carry the prompt with every running decode and the prompts that arrived with it;
- queueing (Little's law), TTFT mean and p95, output tokens per second, and the replicas for --request-rate;
- the efficiencies used and the benchmark sources they were calibrated on.

The terms add up to the predicted figures (tests/planner/test_capacity_explain.py): a term is recomputed from
planner/perf_model.py's own cost functions at the prediction's fixed point, and a sum that missed its figure
would be printed as a mismatch. Exit codes as planner.performance's: 0 an explanation, 2 unusable input as one
line naming the flag.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from planner.model_arch import SizingError
from planner.perf_calibration import DEFAULT_FIXTURE
from planner.perf_model import (
    ALLREDUCE_LATENCY_S,
    P95_OF_STEP_LEFT,
    Prediction,
    Replica,
    Workload,
    _Costs,
    _poisson_quantile,
    first_token,
    highest_concurrency,
    predict,
    replicas_for_rate,
)
from planner.performance import NO_CONCURRENCY_MEETS_SLO, replica_from_args
from planner.performance import build_parser as performance_parser
from planner.sizing import GiB
from planner.sizing_cli import CliError

# The recomputed terms and the prediction agree to this share (the fixed point of perf_model.predict
# stops within 1e-9 s of a step).
AGREEMENT = 1e-6


def build_parser():
    p = performance_parser()
    p.prog = "python -m planner.capacity"
    p.description = __doc__.splitlines()[0]
    p.epilog = "exit status: 0 an explanation; 2 unusable input"
    p.add_argument("--explain", action="store_true", help="print every term of the prediction (required)")
    return p


def _step_terms(
    c: _Costs, decode: float, prefill: float, ctx: float, prompt: float, prompts: float = 1.0
) -> dict[str, float]:
    """One engine step, term by term, as perf_model._Costs.step computes it (seconds, bytes, FLOPs)."""
    tokens = decode + prefill
    weights = c.weight_read(tokens)
    kv = decode * ctx * c.kv_token
    flops = {
        "matmul": tokens * c.flops_token,
        "logits": (decode + (prefill / prompt if prompt else 0.0)) * c.flops_logits,
        "prefill_attention": prefill * c.attn_coeff * prompt,
        "decode_attention": decode * 2 * c.attn_coeff * ctx,
    }
    total = sum(flops.values())
    memory_s, compute_s = (weights + kv) / c.bw, total / c.flops
    allreduce_s = c.allreduce(tokens)
    scheduled = decode + (prompts if prefill else 0.0)
    engine_s = c.engine(scheduled)
    return {
        "tokens": tokens,
        "weights_bytes": weights,
        "kv_bytes": kv,
        "memory_s": memory_s,
        **{f"flops_{k}": v for k, v in flops.items()},
        "flops": total,
        "compute_s": compute_s,
        "allreduce_s": allreduce_s,
        "scheduledRequests": scheduled,
        "engine_s": engine_s,
        "step_s": max(memory_s, compute_s) + allreduce_s + engine_s,
    }


def calibration_sources(family: str, path: str = DEFAULT_FIXTURE) -> list[str]:
    """The calibration-split sources of tests/fixtures/perf_benchmarks/ measured on GPUs of `family`."""
    from planner.gpu_specs import PEAKS

    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    names = {
        p["source"]
        for p in data.get("points", [])
        if p.get("gpu") in PEAKS
        and PEAKS[p["gpu"]].family == family
        and data["sources"].get(p["source"], {}).get("split") == "calibration"
    }
    return [f"{n} ({data['sources'][n].get('url', 'no url')})" for n in sorted(names)]


def explain(r: Replica, w: Workload) -> dict[str, Any]:
    """Every term of predict(r, w), recomputed at its fixed point, with the prediction's own figures."""
    p = predict(r, w)
    c = _Costs(r)
    pool = float(r.sizing.kv_cache_tokens)
    seqs, budget = r.sizing.max_num_seqs, r.sizing.max_num_batched_tokens
    footprint = w.input_len + w.output_len
    avg = w.input_len + w.output_len / 2
    running = p.running
    ctx = avg
    # Prefill of one prompt, in chunks that share their steps with the other running sequences' decodes.
    decode_beside = max(running - 1, 0.0)
    chunk = min(float(w.input_len), max(budget - decode_beside, 1.0))
    chunks = math.ceil(w.input_len / chunk)
    prefill_step = _step_terms(c, decode_beside, chunk, ctx, w.input_len)
    prefill_s = chunks * prefill_step["step_s"]
    own_flops = (
        w.input_len * c.flops_token + c.flops_logits + w.input_len * c.attn_coeff * w.input_len
    )  # this prompt's own FLOPs per GPU
    # The decode step at the fixed point: the running batch plus the prompt tokens of the others mixed in.
    step_s = p.tpot_ms / 1000
    hold_s = prefill_s + (w.output_len - 1) * step_s
    rate = running / hold_s
    others_share = (running - 1) / running if running > 1 else 0.0
    per_request = w.input_len + p.preempted_share * avg
    mixed = min(rate * per_request * others_share * step_s, max(budget - running, 0.0))
    decode_step = _step_terms(c, running, mixed, ctx, w.input_len)
    # The first token: the wait for a step boundary, then the mixed steps that carry this prompt.
    ft = first_token(c, running, rate, step_s, budget, ctx, w.input_len)
    first_step = _step_terms(c, ft.decode, ft.tokens_per_step, ctx, w.input_len, 1.0 + ft.co_scheduled)
    first_s = ft.chunks * first_step["step_s"]
    # Queueing, TTFT and its p95.
    waiting = max(w.concurrency - running, 0.0)
    queue_s = waiting / rate if rate else 0.0
    overhead_s = r.efficiency.ttft_overhead_ms / 1000
    ttft_s = queue_s + ft.boundary_s + ft.in_flight_s + first_s + overhead_s
    arrivals = _poisson_quantile(rate * prefill_s) if w.concurrency > 1 else 0
    arrivals = min(arrivals, max(w.concurrency - 1, 0))
    p95_tokens = w.input_len * (1 + arrivals)
    p95_chunk = min(float(p95_tokens), max(budget - running + 1, 1.0))
    p95_chunks = math.ceil(p95_tokens / p95_chunk)
    busy = _step_terms(c, max(running - 1, 0.0), p95_chunk, ctx, w.input_len)
    wait_p95_s = P95_OF_STEP_LEFT * step_s * ft.busy + ft.in_flight_s
    ttft_p95_s = max(queue_s + wait_p95_s + p95_chunks * busy["step_s"] + overhead_s, ttft_s)
    return {
        "prediction": p.to_dict(),
        "replica": {
            "gpu": r.gpu.name,
            "tensorParallelSize": r.tp,
            "kvPoolTokens": pool,
            "maxNumSeqs": seqs,
            "maxNumBatchedTokens": budget,
            "hbmGBps": r.gpu.memory_bandwidth_gbps,
            "peakTflops": r.peak_flops() / 1e12,
            "linkGBps": (r.link_bytes_per_s() / 1e9) if r.tp > 1 else None,
        },
        "efficiency": {
            "family": r.peak.family,
            "bandwidth": r.efficiency.bandwidth,
            "compute": r.efficiency.compute,
            "ttftOverheadMs": r.efficiency.ttft_overhead_ms,
            "source": r.efficiency.source,
            "calibratedOn": calibration_sources(r.peak.family) if r.efficiency.source == "calibrated" else [],
        },
        "batch": {
            "concurrency": w.concurrency,
            "kvSlotsAtAverageFootprint": pool / avg,
            "running": running,
            "waiting": waiting,
            "fullFootprintTokens": running * footprint,
            "preemptedShare": p.preempted_share,
        },
        "prefill": {
            "promptFlopsPerGpu": own_flops,
            "chunkTokens": chunk,
            "chunks": chunks,
            "step": prefill_step,
            "prefill_s": prefill_s,
        },
        "decode": {"mixedPrefillTokens": mixed, "step": decode_step},
        "firstToken": {
            "busyShare": ft.busy,
            "boundary_s": ft.boundary_s,
            "asyncScheduling": c.async_scheduling,
            "inFlight_s": ft.in_flight_s,
            "coScheduledPrompts": ft.co_scheduled,
            "decodesBeside": ft.decode,
            "tokensPerStep": ft.tokens_per_step,
            "throughTokens": ft.through_tokens,
            "chunks": ft.chunks,
            "step": first_step,
            "steps_s": first_s,
        },
        "queue": {"requestRate": rate, "queue_s": queue_s},
        "ttft": {
            "queue_s": queue_s,
            "boundary_s": ft.boundary_s,
            "inFlight_s": ft.in_flight_s,
            "firstTokenSteps_s": first_s,
            "overhead_s": overhead_s,
            "ttft_s": ttft_s,
        },
        "ttftP95": {
            "wait_s": wait_p95_s,
            "arrivalsDuringPrefill": arrivals,
            "tokens": p95_tokens,
            "chunkTokens": p95_chunk,
            "chunks": p95_chunks,
            "step": busy,
            "ttft_p95_s": ttft_p95_s,
        },
        "outputTokensPerSecond": rate * w.output_len,
        "holdSeconds": hold_s,
    }


def mismatches(e: dict[str, Any]) -> list[str]:
    """The recomputed figures that do not match the prediction (none when the terms add up)."""
    p = e["prediction"]
    pairs = {
        "TTFT mean ms": (e["ttft"]["ttft_s"] * 1000, p["ttft_ms"]),
        "TTFT p95 ms": (e["ttftP95"]["ttft_p95_s"] * 1000, p["ttft_p95_ms"]),
        "TPOT ms": (e["decode"]["step"]["step_s"] * 1000, p["tpot_ms"]),
        "output tokens/s": (e["outputTokensPerSecond"], p["output_tokens_per_s"]),
        "prefill ms": (e["prefill"]["prefill_s"] * 1000, p["terms"]["prefill_ms"]),
        "first-token steps ms": (e["firstToken"]["steps_s"] * 1000, p["terms"]["first_token_steps_ms"]),
    }
    # The prediction's dict is rounded to 4 decimals.
    return [
        f"{name}: terms give {mine:.4f}, the prediction {theirs:.4f}"
        for name, (mine, theirs) in pairs.items()
        if abs(mine - theirs) > max(AGREEMENT * abs(theirs), 1e-4)
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def render(e: dict[str, Any]) -> str:
    r, eff, b, pre, dec = e["replica"], e["efficiency"], e["batch"], e["prefill"], e["decode"]
    ps, ds, t, t95, ft = pre["step"], dec["step"], e["ttft"], e["ttftP95"], e["firstToken"]
    lines = [
        f"{r['gpu']} x{r['tensorParallelSize']}: KV pool {r['kvPoolTokens']:,.0f} tokens, max_num_seqs "
        f"{r['maxNumSeqs']}, max_num_batched_tokens {r['maxNumBatchedTokens']}; HBM {r['hbmGBps']:g} GB/s, dense "
        f"peak {r['peakTflops']:g} TFLOPS" + (f", link {r['linkGBps']:g} GB/s one way" if r["linkGBps"] else ""),
        (
            f"efficiencies ({eff['family']}, {eff['source']}): bandwidth {eff['bandwidth']:.3f}, compute "
            f"{eff['compute']:.2f}, TTFT overhead {eff['ttftOverheadMs']:.1f} ms per request"
        ),
    ]
    lines += [f"  calibrated on: {s}" for s in eff["calibratedOn"]] or [
        "  calibrated on: no benchmark of this family (the compute efficiency is assumed in every family)"
    ]
    lines += [
        "batch growth:",
        (
            f"  KV slots at the average footprint = {r['kvPoolTokens']:,.0f} / (input + output/2) = "
            f"{b['kvSlotsAtAverageFootprint']:.2f}"
        ),
        (
            f"  running = min(concurrency {b['concurrency']}, max_num_seqs {r['maxNumSeqs']}, KV slots) = "
            f"{b['running']:.2f}; waiting = {b['waiting']:.2f}"
        ),
        f"  preemption: the running batch at full length holds {b['fullFootprintTokens']:,.0f} tokens; "
        + (
            f"{b['preemptedShare']:.1%} of requests outgrow the pool and recompute"
            if b["preemptedShare"] > 0
            else "within the pool, none preempted"
        ),
        "prefill of one prompt:",
        (
            f"  its FLOPs per GPU = {pre['promptFlopsPerGpu']:.4g} (2 x active params x tokens + logits + causal "
            "attention)"
        ),
        f"  {pre['chunks']} chunk(s) of {pre['chunkTokens']:,.0f} tokens, each one step beside "
        f"{max(b['running'] - 1, 0):.2f} decodes: " + _step_line(ps),
        f"  prefill = {pre['chunks']} x {_ms(ps['step_s'])} = {_ms(pre['prefill_s'])}",
        (
            f"decode step with {b['running']:.2f} sequences and {dec['mixedPrefillTokens']:.1f} prompt tokens mixed in "
            "(the fixed point of throughput and step time):"
        ),
        "  " + _step_line(ds),
        f"  TPOT (= ITL) = {_ms(ds['step_s'])}",
        "queueing (Little's law):",
        (
            f"  request rate = running / (prefill + (output - 1) x TPOT) = {b['running']:.2f} / "
            f"{e['holdSeconds']:.4f} s = {e['queue']['requestRate']:.4f} requests/s"
        ),
        f"  queue = waiting / rate = {_ms(t['queue_s'])}",
        "first token (vLLM V1's engine loop; a closed loop replaces a request every hold / running):",
        (
            f"  the others keep the engine stepping for {ft['busyShare']:.0%} of arrivals: the rest of the step in "
            f"progress = 0.5 x {_ms(ds['step_s'])} x {ft['busyShare']:.2f} = {_ms(ft['boundary_s'])}"
        ),
        (
            f"  asynchronous scheduling {'on' if ft['asyncScheduling'] else 'off'} (the release's default): the "
            f"step already scheduled = {_ms(ft['inFlight_s'])}"
        ),
        (
            f"  {ft['coScheduledPrompts']:.3f} other prompt(s) arrive in the same step (rate x step); "
            f"{ft['chunks']} mixed step(s) of {ft['tokensPerStep']:,.1f} prompt tokens beside "
            f"{ft['decodesBeside']:.2f} decodes until its {ft['throughTokens']:,.1f} tokens (its own and those ahead "
            "of it) are in: " + _step_line(ft["step"])
        ),
        f"  first-token steps = {ft['chunks']} x {_ms(ft['step']['step_s'])} = {_ms(ft['steps_s'])}",
        (
            f"TTFT mean = queue {_ms(t['queue_s'])} + step boundary {_ms(t['boundary_s'])} + in flight "
            f"{_ms(t['inFlight_s'])} + first-token steps {_ms(t['firstTokenSteps_s'])} + overhead "
            f"{_ms(t['overhead_s'])} = {_ms(t['ttft_s'])}"
        ),
        f"TTFT p95: {t95['arrivalsDuringPrefill']} prompt(s) arrive during this one's prefill (95th percentile, "
        f"Poisson), {t95['tokens']:,} tokens in {t95['chunks']} chunk(s) of {t95['chunkTokens']:,.0f}: "
        + _step_line(t95["step"]),
        f"  TTFT p95 = queue {_ms(t['queue_s'])} + wait {_ms(t95['wait_s'])} (95% of the step in progress + in "
        f"flight) + {t95['chunks']} x {_ms(t95['step']['step_s'])} + overhead "
        f"{_ms(t['overhead_s'])} = {_ms(t95['ttft_p95_s'])}"
        + (" (at least the mean)" if t95["ttft_p95_s"] == t["ttft_s"] else ""),
        f"output tokens/s = rate x output tokens = {e['outputTokensPerSecond']:.2f}",
    ]
    return "\n".join(lines)


def _step_line(s: dict[str, Any]) -> str:
    bound = "memory" if s["memory_s"] >= s["compute_s"] else "compute"
    return (
        f"reads {s['weights_bytes'] / GiB:.3f} GiB weights + {s['kv_bytes'] / GiB:.3f} GiB KV = "
        f"{_ms(s['memory_s'])}; {s['flops']:.4g} FLOPs = {_ms(s['compute_s'])}; max ({bound}-bound) + all-reduce "
        f"{_ms(s['allreduce_s'])} + engine {_ms(s['engine_s'])} ({s['scheduledRequests']:.2f} requests) = "
        f"{_ms(s['step_s'])}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not args.explain:
            raise CliError("give --explain (python -m planner.performance prints the figures alone)")
        for flag in ("slo_ttft_p95_ms", "slo_tpot_ms", "request_rate"):
            value = getattr(args, flag)
            if value is not None and value <= 0:
                raise CliError(f"--{flag.replace('_', '-')} must be above 0")
        slo = args.slo_ttft_p95_ms is not None or args.slo_tpot_ms is not None
        if args.concurrency is None and not slo:
            raise CliError("give --concurrency, or an SLO (--slo-ttft-p95-ms / --slo-tpot-ms) to explain its highest")
        if args.request_rate is not None and not slo:
            raise CliError("--request-rate needs an SLO (--slo-ttft-p95-ms and/or --slo-tpot-ms) to size replicas at")
        replica = replica_from_args(args)
        concurrency = args.concurrency
        at: Prediction | None = None
        if slo:
            best, at = highest_concurrency(
                replica, args.input_len, args.output_len, args.slo_ttft_p95_ms, args.slo_tpot_ms
            )
            if best == 0:
                raise CliError(NO_CONCURRENCY_MEETS_SLO)
            concurrency = concurrency or best
        e = explain(replica, Workload(concurrency, args.input_len, args.output_len))
        if at is not None:
            e["slo"] = {"highestConcurrency": at.concurrency}
        if args.request_rate is not None:
            count = replicas_for_rate(
                replica, args.request_rate, args.input_len, args.output_len, args.slo_ttft_p95_ms, args.slo_tpot_ms
            )
            e["load"] = {
                "requestRate": args.request_rate,
                "replicas": count.replicas,
                "gpus": count.gpus,
                "ratePerReplica": count.rate_per_replica,
            }
        e["mismatches"] = mismatches(e)
        text = render(e)
        if at is not None:
            text += f"\nhighest concurrency meeting the SLO: {at.concurrency}"
        if "load" in e:
            load = e["load"]
            text += (
                f"\nreplicas for {load['requestRate']:g} requests/s = max(1, ceil({load['requestRate']:g} / "
                f"{load['ratePerReplica']:.4f})) = {load['replicas']} ({load['gpus']} GPUs)"
            )
        text += "".join(f"\nMISMATCH {m}" for m in e["mismatches"])
        text += f"\n(all-reduce latency {ALLREDUCE_LATENCY_S * 1e6:g} us each is an assumption: planner/perf_model.py)"
        print(json.dumps(e, sort_keys=True, default=float) if args.json else text)
        return 0
    except (CliError, SizingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stderr.close()
        return 0
