"""Fit the performance model's efficiency factors on public benchmarks, and report its error.

`python -m planner.perf_calibration [BENCHMARKS_JSON]` (default tests/fixtures/perf_benchmarks/
benchmarks.json) refits each GPU family's bandwidth efficiency and per-request TTFT overhead on the
calibration sources only, then prints the absolute percentage error of every measured figure, per
split (calibration, held-out by source), GPU and metric. The held-out sources never touch the fit.
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
from planner.perf_model import COMPUTE_ASSUMPTION, Efficiency, Replica, Workload, build_replica, predict

DEFAULT_FIXTURE = os.path.join("tests", "fixtures", "perf_benchmarks", "benchmarks.json")
DECODE_METRICS = ("tpot_median_ms", "tpot_mean_ms", "output_tokens_per_s", "e2e_mean_ms")


@dataclass(frozen=True)
class Point:
    source: str
    split: str
    gpu: str
    family: str
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
        replica = build_replica(
            archs[p["model"]],
            CATALOG[p["gpu"]],
            peak,
            tensor_parallel_size=p["tp"],
            max_model_len=p.get("max_model_len"),
            max_num_seqs=p.get("max_num_seqs"),
        )
        split = data["sources"][p["source"]]["split"]
        workload = Workload(p["concurrency"], p["input_len"], p["output_len"])
        points.append(Point(p["source"], split, p["gpu"], peak.family, replica, workload, p["measured"]))
    return points


def predicted(point: Point, eff: Efficiency) -> dict[str, float]:
    p = predict(replace(point.replica, efficiency=eff), point.workload)
    e2e = p.ttft_ms + (point.workload.output_len - 1) * p.tpot_ms
    values = {
        "ttft_mean_ms": p.ttft_ms,
        "tpot_median_ms": p.tpot_ms,
        "tpot_mean_ms": p.tpot_ms,
        "output_tokens_per_s": p.output_tokens_per_s,
        "e2e_mean_ms": e2e,
    }
    return {k: values[k] for k in point.measured}


def fit(points: Sequence[Point]) -> Efficiency:
    """Grid-fit bandwidth efficiency; the TTFT overhead is the median TTFT left unexplained."""
    best: tuple[float, Efficiency] | None = None
    for step in range(60, 201):
        bw = step * 0.005
        trial = Efficiency(bw, COMPUTE_ASSUMPTION, 0.0, "calibrated")
        gaps = [
            pt.measured["ttft_mean_ms"] - predicted(pt, trial)["ttft_mean_ms"]
            for pt in points
            if "ttft_mean_ms" in pt.measured
        ]
        overhead = round(max(statistics.median(gaps), 0.0), 1) if gaps else 0.0
        trial = replace(trial, ttft_overhead_ms=overhead)
        errors = [
            abs(math.log(pred / pt.measured[k]))
            for pt in points
            for k, pred in predicted(pt, trial).items()
            if k in DECODE_METRICS or k == "ttft_mean_ms"
        ]
        score = sum(errors) / len(errors)
        if best is None or score < best[0] - 1e-12:
            best = (score, trial)
    assert best is not None
    return best[1]


def fit_families(points: Sequence[Point]) -> dict[str, Efficiency]:
    families = sorted({p.family for p in points if p.split == "calibration"})
    return {f: fit([p for p in points if p.split == "calibration" and p.family == f]) for f in families}


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
                    "metric": metric,
                    "concurrency": pt.workload.concurrency,
                    "input_len": pt.workload.input_len,
                    "measured": meas,
                    "predicted": round(pred, 2),
                    "ape": abs(pred - meas) / meas,
                }
            )
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        kind = "ttft" if r["metric"].startswith("ttft") else "decode"
        groups.setdefault((r["split"], r["gpu"], kind), []).append(r["ape"])
    return {k: sum(v) / len(v) for k, v in sorted(groups.items())}


def render(rows: Sequence[dict[str, Any]], effs: dict[str, Efficiency]) -> str:
    lines = ["fitted efficiencies (calibration sources only):"]
    for fam, e in effs.items():
        lines.append(f"  {fam}: bandwidth {e.bandwidth:.3f}, ttft overhead {e.ttft_overhead_ms:.1f} ms")
    lines.append("")
    lines.append(
        f"{'split':<11} {'source':<32} {'gpu':<10} {'metric':<20} {'conc':>4} {'in':>6} "
        f"{'measured':>9} {'predicted':>9} {'error':>7}"
    )
    for r in rows:
        lines.append(
            f"{r['split']:<11} {r['source']:<32} {r['gpu']:<10} {r['metric']:<20} {r['concurrency']:>4} "
            f"{r['input_len']:>6} {r['measured']:>9.2f} {r['predicted']:>9.2f} {r['ape']:>7.1%}"
        )
    lines.append("")
    lines.append("mean absolute percentage error by split, GPU and kind (decode = TPOT, ITL, tokens/s, E2E):")
    for (split, gpu, kind), mape in summary(rows).items():
        lines.append(f"  {split:<11} {gpu:<10} {kind:<7} {mape:6.1%}")
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
        print(render(errors(points, effs, UNCALIBRATED), effs))
    except BrokenPipeError:  # piped into `head`: not an error of the report
        sys.stderr.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
