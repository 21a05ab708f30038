"""`python -m planner.performance`: TTFT, TPOT and tokens/s of one vLLM replica at a concurrency.

The model is planner/perf_model.py (each term in docs/capacity.md); the replica is sized first by
the sizing engine, whose KV pool and batch limits bound the batch. With --slo-ttft-p95-ms and/or
--slo-tpot-ms it also prints the highest concurrency that meets them.

Exit codes: 0 a prediction; 2 unusable input (a bad flag or value, an unreadable config.json, a
model that does not fit, a GPU whose peak figures are unresolved without --peak-tflops / --link-gbps),
as one line on stderr naming the flag.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from common.gpus import CATALOG
from planner.gpu_specs import PEAKS, unresolved
from planner.model_arch import MAX_CONTEXT, ModelArch, SizingError
from planner.perf_model import (
    Prediction,
    Replica,
    Workload,
    build_replica,
    highest_concurrency,
    predict,
    replicas_for_rate,
)
from planner.sizing import MAX_BATCHED_TOKENS, MAX_NUM_SEQS, MAX_TENSOR_PARALLEL
from planner.sizing_cli import DTYPES, KV_CACHE_DTYPES, CliError, _finite, _Parser, _whole, load_config

MAX_CONCURRENCY = 65536
# A measured figure a GPU can have: the catalog's dense peaks are tens to a few thousand TFLOPS and its links a
# few to 900 GB/s one way (planner/gpu_specs.py). Beyond these the arithmetic leaves floating point: 1e-308 TFLOPS
# made a prefill of infinite time and a NaN concurrency (a traceback), 1e308 an infinite peak.
MEASURED_RANGE = {"peak_tflops": (0.1, 100_000.0), "link_gbps": (0.1, 100_000.0)}

# The one line both CLIs (this and planner.capacity --explain) print when not even one request meets the SLO.
NO_CONCURRENCY_MEETS_SLO = (
    "no concurrency meets the SLO: even one request misses it; use a bigger GPU, a larger "
    "--tensor-parallel-size, a quantized checkpoint, or a looser SLO"
)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m planner.performance",
        description=__doc__.splitlines()[0],
        epilog="exit status: 0 a prediction; 2 unusable input",
    )
    p.add_argument("--model-config", required=True, help="path to a config.json, or a Hub repo id with --revision")
    p.add_argument("--revision", help="40-hex commit of the Hub repo (with a repo id)")
    p.add_argument("--gpu", required=True, help=f"catalog GPU: {', '.join(sorted(PEAKS))}")
    p.add_argument("--tensor-parallel-size", type=_whole(1, MAX_TENSOR_PARALLEL), default=1)
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    p.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    p.add_argument("--quantization", help="vLLM --quantization method, if the checkpoint's is overridden")
    p.add_argument("--max-model-len", type=_whole(1, MAX_CONTEXT), help="default: the model's context")
    p.add_argument("--max-num-seqs", type=_whole(1, MAX_NUM_SEQS))
    p.add_argument("--max-num-batched-tokens", type=_whole(1, MAX_BATCHED_TOKENS))
    p.add_argument(
        "--enforce-eager", action="store_true", help="no CUDA graphs: each layer's kernels launched per step"
    )
    p.add_argument("--concurrency", type=_whole(1, MAX_CONCURRENCY), help="requests in flight (closed loop)")
    p.add_argument("--input-len", type=_whole(1, MAX_CONTEXT), required=True, help="prompt tokens per request")
    p.add_argument("--output-len", type=_whole(1, MAX_CONTEXT), required=True, help="output tokens per request")
    p.add_argument("--slo-ttft-p95-ms", type=_finite("ms"), help="TTFT p95 target: print the highest concurrency")
    p.add_argument("--slo-tpot-ms", type=_finite("ms"), help="TPOT target: print the highest concurrency")
    p.add_argument(
        "--request-rate",
        type=_finite("requests/s"),
        help="requests per second to carry (with an SLO): print the replicas and GPUs it needs",
    )
    p.add_argument("--peak-tflops", type=_finite("TFLOPS"), help="measured dense TFLOPS, for an unresolved GPU")
    p.add_argument("--link-gbps", type=_finite("GB/s"), help="measured one-way GPU-to-GPU GB/s")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return p


def replica_from_args(args: argparse.Namespace) -> Replica:
    if args.gpu not in PEAKS or args.gpu not in CATALOG:
        raise CliError(f"--gpu {args.gpu!r} is not in the catalog; use one of {', '.join(sorted(PEAKS))}")
    for flag, (low, high) in MEASURED_RANGE.items():
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise CliError(f"--{flag.replace('_', '-')} must be above 0")
        if value is not None and not low <= value <= high:
            raise CliError(
                f"--{flag.replace('_', '-')} {value:g} is outside {low:g}..{high:,g}; give the GPU's measured figure"
            )
    arch = ModelArch.from_hf_config(load_config(args.model_config, args.revision))
    replica = build_replica(
        arch,
        CATALOG[args.gpu],
        PEAKS[args.gpu],
        tensor_parallel_size=args.tensor_parallel_size,
        dtype=args.dtype,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        enforce_eager=args.enforce_eager,
        max_num_batched_tokens=args.max_num_batched_tokens,
        peak_tflops=args.peak_tflops,
        link_gbps=args.link_gbps,
    )
    replica.peak_flops()  # an unresolved peak is refused before any arithmetic
    if replica.tp > 1:
        replica.link_bytes_per_s()
    return replica


def render(r: Replica, p: Prediction) -> str:
    e = r.efficiency
    lines = [
        (
            f"{r.gpu.name} x{r.tp}: KV pool {r.sizing.kv_cache_tokens:,} tokens, "
            f"max_num_seqs {r.sizing.max_num_seqs}, max_num_batched_tokens {r.sizing.max_num_batched_tokens}"
        ),
        (
            f"  efficiency ({r.peak.family}, {e.source}): bandwidth {e.bandwidth:.3f}, compute {e.compute:.2f} "
            f"(assumed), TTFT overhead {e.ttft_overhead_ms:.1f} ms"
        ),
        f"  concurrency {p.concurrency}: running {p.running:.1f}, waiting {p.waiting:.1f}"
        + (" (KV-limited)" if p.kv_limited else ""),
        f"  TTFT mean {p.ttft_ms:.1f} ms, p95 {p.ttft_p95_ms:.1f} ms",
        f"  TPOT/ITL {p.tpot_ms:.2f} ms ({p.decode_bound}-bound decode step)",
        f"  output {p.output_tokens_per_s:,.0f} tokens/s, {p.request_rate:.2f} requests/s",
        "  terms: "
        + ", ".join(
            f"{label} {p.terms[key]:.2f}"
            for label, key in (
                ("weights read GiB", "weights_read_gib"),
                ("KV read GiB", "kv_read_gib"),
                ("all-reduce ms", "allreduce_ms"),
                ("prefill ms", "prefill_ms"),
                ("queue ms", "queue_ms"),
            )
        ),
    ]
    if p.preemption:
        lines.append(f"  preemption: {p.preempted_share:.0%} of requests outgrow the KV pool and are recomputed")
    for fact in unresolved(r.peak):
        lines.append(f"  unresolved: {fact.subject} ({fact.resolve_with})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.concurrency is None and args.slo_ttft_p95_ms is None and args.slo_tpot_ms is None:
            raise CliError("give --concurrency, or an SLO (--slo-ttft-p95-ms / --slo-tpot-ms) to search for one")
        for flag in ("slo_ttft_p95_ms", "slo_tpot_ms"):
            value = getattr(args, flag)
            if value is not None and value <= 0:
                raise CliError(f"--{flag.replace('_', '-')} must be above 0")
        slo_given = args.slo_ttft_p95_ms is not None or args.slo_tpot_ms is not None
        if args.request_rate is not None and not slo_given:
            raise CliError("--request-rate needs an SLO (--slo-ttft-p95-ms and/or --slo-tpot-ms) to size replicas at")
        if args.request_rate is not None and args.request_rate <= 0:
            raise CliError("--request-rate must be above 0")
        replica = replica_from_args(args)
        out: dict[str, object] = {"gpu": replica.gpu.name, "tensor_parallel_size": replica.tp}
        text = []
        if args.concurrency is not None:
            p = predict(replica, Workload(args.concurrency, args.input_len, args.output_len))
            out["prediction"] = p.to_dict()
            text.append(render(replica, p))
        if args.slo_ttft_p95_ms is not None or args.slo_tpot_ms is not None:
            best, at = highest_concurrency(
                replica, args.input_len, args.output_len, args.slo_ttft_p95_ms, args.slo_tpot_ms
            )
            out["slo"] = {"highest_concurrency": best, "at": at.to_dict() if at else None}
            if best == 0:
                raise CliError(NO_CONCURRENCY_MEETS_SLO)
            text.append(f"highest concurrency meeting the SLO: {best}")
            if args.request_rate is not None:
                count = replicas_for_rate(
                    replica, args.request_rate, args.input_len, args.output_len, args.slo_ttft_p95_ms, args.slo_tpot_ms
                )
                out["load"] = {
                    "request_rate": args.request_rate,
                    "replicas": count.replicas,
                    "gpus": count.gpus,
                    "concurrency_per_replica": count.concurrency_per_replica,
                    "rate_per_replica": round(count.rate_per_replica, 4),
                }
                text.append(
                    f"{args.request_rate:g} requests/s at the SLO: {count.replicas} replicas ({count.gpus} GPUs), "
                    f"each at concurrency {count.concurrency_per_replica} serving "
                    f"{count.rate_per_replica:.2f} requests/s"
                )
            if at is not None and args.concurrency is None:
                text.append(render(replica, at))
        print(json.dumps(out, sort_keys=True) if args.json else "\n".join(text))
        return 0
    except (CliError, SizingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
