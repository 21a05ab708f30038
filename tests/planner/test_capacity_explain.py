"""`python -m planner.capacity --explain` (planner/capacity_cli.py): every printed term adds up to the figure the
performance model predicts (TTFT mean and p95, TPOT, prefill, tokens/s), on a dense model, tensor parallelism, a
mixture-of-experts and a KV-limited batch; the printed lines carry the same sums; bad input exits 2 with one line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

from planner import capacity_cli
from planner.perf_model import Workload, predict
from planner.performance import build_parser, replica_from_args
from tests.support import paths

CONFIGS = paths.ROOT / "tests" / "fixtures" / "model_configs"
LLAMA_8B = str(CONFIGS / "llama-3.1-8b-instruct" / "config.json")
QWEN_MOE = str(CONFIGS / "qwen3-30b-a3b" / "config.json")

CASES = [
    # (config, gpu, tp, max_model_len, concurrency, input, output)
    (LLAMA_8B, "H100-80GB", 1, 8192, 16, 2000, 300),
    (LLAMA_8B, "A100-80GB", 2, 8192, 64, 6000, 500),  # all-reduces over NVLink, a prompt in several chunks
    (QWEN_MOE, "H100-80GB", 1, 8192, 8, 1000, 200),  # routed experts: only those the step's tokens hit are read
    (LLAMA_8B, "A100-40GB", 1, 8192, 256, 3000, 1000),  # KV-limited: requests wait and some are preempted
]


def _replica(config, gpu, tp, max_len):
    args = build_parser().parse_args(
        [
            "--model-config",
            config,
            "--gpu",
            gpu,
            "--tensor-parallel-size",
            str(tp),
            "--max-model-len",
            str(max_len),
            "--input-len",
            "1",
            "--output-len",
            "1",
        ]
    )
    return replica_from_args(args)


def _close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


@pytest.mark.parametrize("config, gpu, tp, max_len, concurrency, input_len, output_len", CASES)
def test_the_terms_add_up_to_the_prediction(config, gpu, tp, max_len, concurrency, input_len, output_len):
    r = _replica(config, gpu, tp, max_len)
    w = Workload(concurrency, input_len, output_len)
    e = capacity_cli.explain(r, w)
    p = predict(r, w)
    assert capacity_cli.mismatches(e) == []
    for step in (e["prefill"]["step"], e["decode"]["step"], e["ttftP95"]["step"], e["firstToken"]["step"]):
        flops = sum(v for k, v in step.items() if k.startswith("flops_"))
        assert _close(step["flops"], flops)
        assert _close(step["step_s"], max(step["memory_s"], step["compute_s"]) + step["allreduce_s"] + step["engine_s"])
    t, ft = e["ttft"], e["firstToken"]
    assert _close(
        t["ttft_s"], t["queue_s"] + t["boundary_s"] + t["inFlight_s"] + t["firstTokenSteps_s"] + t["overhead_s"]
    )
    assert _close(t["ttft_s"] * 1000, p.ttft_ms)
    assert _close(e["prefill"]["prefill_s"], e["prefill"]["chunks"] * e["prefill"]["step"]["step_s"])
    assert _close(ft["steps_s"], ft["chunks"] * ft["step"]["step_s"])
    # The wait for a step boundary is half the step in progress (the TPOT) whenever others run.
    assert _close(t["boundary_s"] * 1000, 0.5 * p.tpot_ms * ft["busyShare"])
    assert _close(t["inFlight_s"] * 1000, p.tpot_ms * ft["busyShare"] if ft["asyncScheduling"] else 0.0)
    assert _close(e["decode"]["step"]["step_s"] * 1000, p.tpot_ms)
    assert _close(e["ttftP95"]["ttft_p95_s"] * 1000, p.ttft_p95_ms)
    assert _close(e["outputTokensPerSecond"], p.output_tokens_per_s)
    assert _close(
        e["queue"]["queue_s"], e["batch"]["waiting"] / e["queue"]["requestRate"] if e["batch"]["waiting"] else 0
    )
    if tp > 1:
        assert e["decode"]["step"]["allreduce_s"] > 0
    else:
        assert e["decode"]["step"]["allreduce_s"] == 0


def test_the_mechanisms_show_where_the_cases_put_them():
    by_case = {(*c[1:3], c[4]): capacity_cli.explain(_replica(*c[:4]), Workload(*c[4:])) for c in CASES}
    several_chunks = by_case[("A100-80GB", 2, 64)]
    assert several_chunks["prefill"]["chunks"] > 1
    kv_limited = by_case[("A100-40GB", 1, 256)]
    assert kv_limited["batch"]["waiting"] > 0 and kv_limited["batch"]["preemptedShare"] > 0
    assert kv_limited["queue"]["queue_s"] > 0
    moe = by_case[("H100-80GB", 1, 8)]
    dense_weights = _replica(QWEN_MOE, "H100-80GB", 1, 8192).sizing.weights_gib_per_gpu * 1024**3
    assert moe["decode"]["step"]["weights_bytes"] < dense_weights


def _run(argv, capsys):
    code = capacity_cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


BASE = ["--explain", "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192"]


def test_the_printed_lines_add_up(capsys):
    code, out, _ = _run([*BASE, "--input-len", "2000", "--output-len", "300", "--concurrency", "32"], capsys)
    assert code == 0 and "MISMATCH" not in out
    m = re.search(
        r"TTFT mean = queue ([\d.]+) ms \+ step boundary ([\d.]+) ms \+ in flight ([\d.]+) ms \+ first-token steps "
        r"([\d.]+) ms \+ overhead ([\d.]+) ms = ([\d.]+) ms",
        out,
    )
    *parts, ttft = map(float, m.groups())
    assert abs(sum(parts) - ttft) <= 0.003 and parts[1] > 0 and parts[2] > 0  # 32 running, release 0.32: async
    p = predict(_replica(LLAMA_8B, "H100-80GB", 1, 8192), Workload(32, 2000, 300))
    assert abs(ttft - p.ttft_ms) <= 0.0005
    step = re.search(r"TPOT \(= ITL\) = ([\d.]+) ms", out)
    assert abs(float(step.group(1)) - p.tpot_ms) <= 0.0005
    assert "efficiencies (hopper, calibrated)" in out and "calibrated on: gpustack-qwen3-8b-h100" in out


def test_without_a_concurrency_it_explains_the_slo_point_and_the_replicas_for_a_rate(capsys):
    argv = [*BASE, "--input-len", "2000", "--output-len", "300", "--slo-ttft-p95-ms", "1000", "--request-rate", "40"]
    code, out, _ = _run([*argv, "--json"], capsys)
    e = json.loads(out)
    assert code == 0 and e["mismatches"] == []
    assert e["batch"]["concurrency"] == e["slo"]["highestConcurrency"]
    assert e["load"]["replicas"] == math.ceil(40 / e["load"]["ratePerReplica"] - 1e-9)


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*BASE[1:], "--input-len", "10", "--output-len", "10", "--concurrency", "1"], "--explain"),
        ([*BASE, "--input-len", "10", "--output-len", "10"], "--concurrency"),
        ([*BASE, "--input-len", "10", "--output-len", "10", "--concurrency", "0"], "--concurrency"),
        ([*BASE, "--input-len", "10", "--output-len", "10", "--slo-tpot-ms", "0.01"], "no concurrency meets the SLO"),
        (
            [*BASE, "--input-len", "10", "--output-len", "10", "--request-rate", "4", "--concurrency", "1"],
            "--request-rate",
        ),
        (
            [
                "--explain",
                "--model-config",
                LLAMA_8B,
                "--gpu",
                "K80",
                "--input-len",
                "1",
                "--output-len",
                "1",
                "--concurrency",
                "1",
            ],
            "--gpu",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, message, capsys):
    code, _, err = _run(argv, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_python_m_planner_capacity_runs_the_explanation():
    argv = [*BASE, "--input-len", "500", "--output-len", "100", "--concurrency", "4"]
    proc = subprocess.run(
        [sys.executable, "-m", "planner.capacity", *argv], capture_output=True, text=True, timeout=60, cwd=paths.ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "TTFT mean = queue" in proc.stdout and "decode step with 4.00 sequences" in proc.stdout
