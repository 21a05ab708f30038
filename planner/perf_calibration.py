"""Fit the performance model's efficiency factors on public benchmarks, and report its error.

`python -m planner.perf_calibration [BENCHMARKS_JSON]` (default tests/fixtures/perf_benchmarks/
benchmarks.json) refits each GPU family's bandwidth efficiency and per-request TTFT overhead on the
calibration sources only (at the shipped engine time per step per running request, whose own
calibration profile and lowest point it prints at the end), then prints every measured figure beside
its prediction and the mean absolute percentage error per split (calibration, held out by source),
GPU type and model kind (dense, MoE, quantized) for TPOT/ITL, output tokens/s, TTFT and E2E, and the
SLO-concurrency hit rate of each concurrency sweep. The held-out sources never touch the fit.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from common.gpus import CATALOG
from planner.gpu_specs import PEAKS
from planner.model_arch import ModelArch
from planner.perf_model import (
    COMPUTE_ASSUMPTION,
    STEP_OVERHEAD_MS,
    STEP_PER_REQUEST_MS,
    Efficiency,
    Replica,
    Workload,
    build_replica,
    predict,
)

DEFAULT_FIXTURE = os.path.join("tests", "fixtures", "perf_benchmarks", "benchmarks.json")
DECODE_METRICS = (
    "tpot_median_ms",
    "tpot_mean_ms",
    "tpot_p99_ms",
    "itl_median_ms",
    "output_tokens_per_s",
    "e2e_mean_ms",
)
TTFT_METRICS = ("ttft_mean_ms", "ttft_median_ms")
LATENCY_METRICS = ("tpot_median_ms", "tpot_mean_ms", "tpot_p99_ms", "itl_median_ms")  # per-token latency, the SLO's ITL
# How the report groups the metrics (the goal's two are TPOT/ITL and output tokens/s).
METRIC_GROUP = {
    "tpot_median_ms": "TPOT/ITL",
    "tpot_mean_ms": "TPOT/ITL",
    "tpot_p99_ms": "TPOT/ITL",
    "itl_median_ms": "TPOT/ITL",
    "output_tokens_per_s": "tokens/s",
    "ttft_mean_ms": "TTFT",
    "ttft_median_ms": "TTFT",
    "e2e_mean_ms": "E2E",
}
GROUPS = ("TPOT/ITL", "tokens/s", "TTFT", "E2E")


@dataclass(frozen=True)
class Point:
    source: str
    split: str
    gpu: str
    family: str
    model: str
    kind: str  # "dense", "MoE" or "quantized" (a quantized MoE counts as quantized)
    replica: Replica
    workload: Workload
    measured: dict[str, float]


def load(path: str = DEFAULT_FIXTURE) -> list[Point]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    # config_path is relative to the repository root, three levels above the fixture file.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path)))))
    archs: dict[str, ModelArch] = {}
    for name, model in data["models"].items():
        cfg = model.get("config")
        if cfg is None:
            with open(os.path.join(root, model["config_path"]), encoding="utf-8") as fh:
                cfg = json.load(fh)
        archs[name] = ModelArch.from_hf_config(cfg)
    points = []
    for p in data["points"]:
        peak = PEAKS[p["gpu"]]
        # The release the source ran (its engine loop: asynchronous scheduling from 0.14); one per GPU where
        # a source ran each GPU on its own release.
        version = data["sources"][p["source"]].get("vllm_version")
        if isinstance(version, dict):
            version = version[p["gpu"]]
        replica = build_replica(
            archs[p["model"]],
            CATALOG[p["gpu"]],
            peak,
            tensor_parallel_size=p["tp"],
            max_model_len=p.get("max_model_len"),
            max_num_seqs=p.get("max_num_seqs"),
            enforce_eager=p.get("enforce_eager", False),
            vllm_version=version,
        )
        split = data["sources"][p["source"]]["split"]
        workload = Workload(p["concurrency"], p["input_len"], p["output_len"])
        arch = archs[p["model"]]
        kind = "quantized" if arch.quant_method else ("MoE" if arch.is_moe else "dense")
        points.append(
            Point(
                p["source"],
                split,
                p["gpu"],
                peak.family,
                p["model"],
                kind,
                replica,
                workload,
                p["measured"],
            )
        )
    return points


def predicted(point: Point, eff: Efficiency) -> dict[str, float]:
    p = predict(replace(point.replica, efficiency=eff), point.workload)
    w = point.workload
    e2e = p.ttft_ms + (w.output_len - 1) * p.tpot_ms
    values = {
        "ttft_mean_ms": p.ttft_ms,
        # The model predicts one TTFT per concurrency (no spread below the p95): mean and median alike.
        "ttft_median_ms": p.ttft_ms,
        "tpot_median_ms": p.tpot_ms,
        "itl_median_ms": p.tpot_ms,
        "tpot_mean_ms": p.tpot_ms,
        # Fixed lengths in a closed loop: every request decodes in the same steps, so the spread of TPOT
        # over requests is small and its p99 is compared with the one TPOT the model predicts.
        "tpot_p99_ms": p.tpot_ms,
        # A closed-loop benchmark at --max-concurrency C holds each of its C slots for a request's whole
        # latency (vllm/benchmarks/serve.py @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1: benchmark()'s
        # limited_request_func awaits the request inside `async with semaphore`) and divides the output
        # tokens by the wall clock (calculate_metrics: output_throughput = total output / duration), so
        # by Little's law it measures C x output / E2E; the engine-side rate (Prediction.request_rate)
        # leaves out the time a request spends outside the engine (the TTFT overhead). The ramp-down of a
        # finite run (its last requests finish with fewer in flight) is left out.
        "output_tokens_per_s": w.concurrency * w.output_len / (e2e / 1000),
        "e2e_mean_ms": e2e,
    }
    return {k: values[k] for k in point.measured}


def _score(
    points: Sequence[Point], bw: float, step_overhead_ms: float, per_request_ms: float = STEP_PER_REQUEST_MS
) -> tuple[float, Efficiency]:
    """Mean absolute log error of the points at this bandwidth efficiency and per-step times; the TTFT
    overhead is the median TTFT left unexplained."""
    trial = Efficiency(bw, COMPUTE_ASSUMPTION, 0.0, "calibrated", step_overhead_ms, per_request_ms)
    gaps = [pt.measured[k] - pred for pt in points for k, pred in predicted(pt, trial).items() if k in TTFT_METRICS]
    overhead = round(max(statistics.median(gaps), 0.0), 1) if gaps else 0.0
    trial = replace(trial, ttft_overhead_ms=overhead)
    errors = [
        abs(math.log(pred / pt.measured[k]))
        for pt in points
        for k, pred in predicted(pt, trial).items()
        if k in DECODE_METRICS or k in TTFT_METRICS
    ]
    return sum(errors) / len(errors), trial


def fit(
    points: Sequence[Point], step_overhead_ms: float = 0.0, per_request_ms: float = STEP_PER_REQUEST_MS
) -> Efficiency:
    """Bandwidth efficiency on a 0.005 grid from 0.30 to 1.00 (a pass every 0.05, then every 0.005 around
    the best), at given per-step times."""
    grid = range(60, 201)
    coarse = min(grid[::10], key=lambda i: _score(points, i * 0.005, step_overhead_ms, per_request_ms)[0])
    fine = [i for i in grid if abs(i - coarse) <= 10]
    scored = [_score(points, i * 0.005, step_overhead_ms, per_request_ms) for i in fine]
    best = min(range(len(scored)), key=lambda j: (scored[j][0], j))
    return scored[best][1]


def family_points(points: Sequence[Point]) -> dict[str, list[Point]]:
    families = sorted({p.family for p in points if p.split == "calibration"})
    return {f: [p for p in points if p.split == "calibration" and p.family == f] for f in families}


def total_score(
    points: Sequence[Point], step_overhead_ms: float, per_request_ms: float = STEP_PER_REQUEST_MS
) -> tuple[float, dict[str, Efficiency]]:
    """The calibration points' mean absolute log error with each family's bandwidth fitted at shared
    per-step times."""
    effs = {f: fit(pts, step_overhead_ms, per_request_ms) for f, pts in family_points(points).items()}
    errors = [
        abs(math.log(pred / pt.measured[k]))
        for f, pts in family_points(points).items()
        for pt in pts
        for k, pred in predicted(pt, effs[f]).items()
        if k in DECODE_METRICS or k in TTFT_METRICS
    ]
    return sum(errors) / len(errors), effs


def fit_families(
    points: Sequence[Point], step_overhead_ms: float = STEP_OVERHEAD_MS, per_request_ms: float = STEP_PER_REQUEST_MS
) -> dict[str, Efficiency]:
    """Each family's factors on the calibration sources, at the shared per-step times."""
    return total_score(points, step_overhead_ms, per_request_ms)[1]


PER_REQUEST_GRID_MS = tuple(round(0.01 * i, 2) for i in range(11))  # 0 to 0.10 ms


def fit_per_request(points: Sequence[Point], grid_ms: Sequence[float] = PER_REQUEST_GRID_MS) -> float:
    """The engine time per step per running request (shared by the families) with the lowest calibration
    score, each family's bandwidth refitted at each value; the first of equal scores."""
    scores = [(total_score(points, STEP_OVERHEAD_MS, t)[0], i) for i, t in enumerate(grid_ms)]
    return grid_ms[min(scores)[1]]


def per_request_profile(points: Sequence[Point], grid_ms: Sequence[float] = PER_REQUEST_GRID_MS) -> list[str]:
    """The calibration score at each engine time per running request, each family's bandwidth refitted."""
    scores = [(t, total_score(points, STEP_OVERHEAD_MS, t)[0]) for t in grid_ms]
    low = min(v for _, v in scores)
    return [f"  {t:.2f} ms: mean |log error| {v:.4f} ({v / low - 1:+.1%} from the lowest)" for t, v in scores]


def step_overhead_profile(
    points: Sequence[Point],
    grid_ms: Sequence[float] = (0.0, 0.5, 1.0, 1.5, 2.0),
    per_request_ms: float = STEP_PER_REQUEST_MS,
) -> list[str]:
    """Whether the calibration sources identify the fixed per-step time: their score with each family's
    bandwidth refitted at each value (a flat profile means they do not)."""
    scores = [(t, total_score(points, t, per_request_ms)[0]) for t in grid_ms]
    low = min(v for _, v in scores)
    return [f"  {t:.2f} ms: mean |log error| {v:.4f} ({v / low - 1:+.1%} from the lowest)" for t, v in scores]


def errors(points: Sequence[Point], effs: dict[str, Efficiency], fallback: Efficiency) -> list[dict[str, Any]]:
    rows = []
    for pt in points:
        eff = effs.get(pt.family, fallback)
        for metric, pred in predicted(pt, eff).items():
            meas = pt.measured[metric]
            rows.append(
                {
                    "split": pt.split,
                    "source": pt.source,
                    "gpu": pt.gpu,
                    "model": pt.model,
                    "kind": pt.kind,
                    "metric": metric,
                    "group": METRIC_GROUP[metric],
                    "concurrency": pt.workload.concurrency,
                    "input_len": pt.workload.input_len,
                    "output_len": pt.workload.output_len,
                    "measured": meas,
                    "predicted": round(pred, 2),
                    "ape": abs(pred - meas) / meas,
                }
            )
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    """MAPE per (split, GPU, metric group)."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["split"], r["gpu"], r["group"]), []).append(r["ape"])
    return {k: sum(v) / len(v) for k, v in sorted(groups.items())}


def _mape_table(rows: Sequence[dict[str, Any]], key: str) -> list[str]:
    """One line per (split, key value): n and MAPE of each metric group ('-' where none was measured)."""
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        cells.setdefault((r["split"], r[key]), {}).setdefault(r["group"], []).append(r["ape"])
    lines = [f"  {'split':<11} {key:<10} " + " ".join(f"{g:>17}" for g in GROUPS)]
    for (split, value), by_group in sorted(cells.items()):
        out = []
        for g in GROUPS:
            v = by_group.get(g)
            out.append(f"{len(v):>3} pts {sum(v) / len(v):7.1%}" if v else f"{'-':>17}")
        lines.append(f"  {split:<11} {value:<10} " + " ".join(f"{c:>17}" for c in out))
    return lines


def slo_hits(points: Sequence[Point], effs: dict[str, Efficiency], fallback: Efficiency) -> list[dict[str, Any]]:
    """For each concurrency sweep (one source, GPU, model and lengths, two levels or more with a TPOT/ITL
    figure), take each measured level's per-token latency as an SLO in turn: the measured highest level
    meeting it is that level; the predicted highest is the largest level whose prediction meets it. A hit
    is a prediction within one sweep step of the measured level."""
    sweeps: dict[tuple[str, str, str, int, int, str], list[tuple[int, float, float]]] = {}
    for pt in points:
        metric = next((m for m in LATENCY_METRICS if m in pt.measured), None)
        if metric is None:
            continue
        pred = predicted(pt, effs.get(pt.family, fallback))[metric]
        key = (pt.source, pt.gpu, pt.model, pt.workload.input_len, pt.workload.output_len, pt.split)
        sweeps.setdefault(key, []).append((pt.workload.concurrency, pt.measured[metric], pred))
    out = []
    for (source, gpu, _model, _i, _o, split), levels in sorted(sweeps.items()):
        if len(levels) < 2:
            continue
        levels.sort()
        for _, target, _ in levels:
            measured_at = max(j for j, (_, m, _) in enumerate(levels) if m <= target)
            met = [j for j, (_, _, p) in enumerate(levels) if p <= target]
            predicted_at = max(met) if met else -1
            out.append(
                {
                    "split": split,
                    "source": source,
                    "gpu": gpu,
                    "slo_ms": target,
                    "measured": levels[measured_at][0],
                    "predicted": levels[predicted_at][0] if predicted_at >= 0 else 0,
                    "hit": abs(predicted_at - measured_at) <= 1,
                }
            )
    return out


def render(rows: Sequence[dict[str, Any]], effs: dict[str, Efficiency], hits: Sequence[dict[str, Any]] = ()) -> str:
    lines = ["fitted efficiencies (calibration sources only):"]
    for fam, e in effs.items():
        lines.append(f"  {fam}: bandwidth {e.bandwidth:.3f}, ttft overhead {e.ttft_overhead_ms:.1f} ms")
    lines.append("")
    lines.append(
        f"{'split':<11} {'source':<32} {'gpu':<10} {'kind':<9} {'metric':<20} {'conc':>4} {'in':>6} "
        f"{'measured':>9} {'predicted':>9} {'error':>7}"
    )
    for r in rows:
        lines.append(
            f"{r['split']:<11} {r['source']:<32} {r['gpu']:<10} {r['kind']:<9} {r['metric']:<20} "
            f"{r['concurrency']:>4} {r['input_len']:>6} {r['measured']:>9.2f} {r['predicted']:>9.2f} {r['ape']:>7.1%}"
        )
    lines.append("")
    lines.append(
        "mean absolute percentage error (MAPE) per split and GPU type; the goal's metrics are TPOT/ITL "
        "and output tokens/s at a fixed concurrency:"
    )
    lines += _mape_table(rows, "gpu")
    lines.append("per split and model kind:")
    lines += _mape_table(rows, "kind")
    if hits:
        lines.append("")
        lines.append(
            "SLO concurrency: each measured level's TPOT/ITL taken as the SLO; a hit is a predicted highest "
            "level within one sweep step of the measured one:"
        )
        tally: dict[tuple[str, str, str], list[bool]] = {}
        for h in hits:
            tally.setdefault((h["split"], h["source"], h["gpu"]), []).append(h["hit"])
        for (split, source, gpu), got in sorted(tally.items()):
            lines.append(f"  {split:<11} {source:<32} {gpu:<10} {sum(got)}/{len(got)} hit")
        for split in sorted({h["split"] for h in hits}):
            got = [h["hit"] for h in hits if h["split"] == split]
            lines.append(f"  {split:<11} {'all sweeps':<43} {sum(got)}/{len(got)} hit ({sum(got) / len(got):.0%})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    path = args[0] if args else DEFAULT_FIXTURE
    try:
        points = load(path)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 2
    effs = fit_families(points)
    from planner.perf_model import UNCALIBRATED

    try:
        print(render(errors(points, effs, UNCALIBRATED), effs, slo_hits(points, effs, UNCALIBRATED)))
        print()
        print(
            f"engine time per step per running request (shared by the families, shipped {STEP_PER_REQUEST_MS} ms), "
            "calibration score by value:"
        )
        print("\n".join(per_request_profile(points)))
        print(f"  lowest at {fit_per_request(points)} ms (STEP_PER_REQUEST_MS must equal it)")
        print(
            f"fixed per-step time (shared by the families, shipped {STEP_OVERHEAD_MS} ms), calibration score by value:"
        )
        print("\n".join(step_overhead_profile(points)))
    except BrokenPipeError:  # piped into `head`: not an error of the report
        sys.stderr.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
