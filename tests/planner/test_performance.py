"""The replica performance model (planner/perf_model.py): its mechanisms, its calibration against
public benchmarks (fit and held-out error, printed), and the CLI's refusals of bad input."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from common.gpus import CATALOG
from planner import perf_calibration
from planner.gpu_specs import PEAKS
from planner.model_arch import ModelArch, SizingError
from planner.perf_model import (
    EAGER_LAYER_MS,
    EFFICIENCY,
    STEP_OVERHEAD_MS,
    STEP_PER_REQUEST_MS,
    UNCALIBRATED,
    Workload,
    _Costs,
    build_replica,
    highest_concurrency,
    predict,
    replicas_for_rate,
)
from planner.performance import main
from planner.sizing import GiB
from tests.support import paths

ROOT = paths.ROOT
CONFIGS = ROOT / "tests" / "fixtures" / "model_configs"
LLAMA_8B = str(CONFIGS / "llama-3.1-8b-instruct" / "config.json")
QWEN3_MOE = str(CONFIGS / "qwen3-30b-a3b" / "config.json")
FIXTURE = str(ROOT / "tests" / "fixtures" / "perf_benchmarks" / "benchmarks.json")


def arch(path: str) -> ModelArch:
    with open(path, encoding="utf-8") as fh:
        return ModelArch.from_hf_config(json.load(fh))


def replica(gpu: str = "H100-80GB", path: str = LLAMA_8B, **kw):
    kw.setdefault("max_model_len", 8192)
    return build_replica(arch(path), CATALOG[gpu], PEAKS[gpu], **kw)


def test_ttft_grows_with_prompt_length():
    r = replica()
    ttfts = [predict(r, Workload(1, n, 100)).ttft_ms for n in (128, 1024, 4096, 7000)]
    assert ttfts == sorted(ttfts) and ttfts[-1] > 3 * ttfts[0]


def test_prefill_is_compute_bound_on_the_gpu_peak():
    # The same prompt prefills faster on the GPU with the larger tensor peak, by about the ratio of peaks.
    h100 = predict(replica("H100-80GB"), Workload(1, 6000, 50)).terms["prefill_ms"]
    a100 = predict(replica("A100-80GB"), Workload(1, 6000, 50)).terms["prefill_ms"]
    assert 2.0 < a100 / h100 < 4.0  # 989.5 / 312 dense TFLOPS = 3.2


def test_decode_is_bandwidth_bound_at_a_small_batch():
    r = replica()
    p = predict(r, Workload(1, 128, 256))
    assert p.decode_bound == "bandwidth"
    # The step reads the weights (all but the input embedding's table, a lookup) and the KV cache.
    read = p.terms["weights_read_gib"] * GiB
    assert 0.9 * r.sizing.weights_gib_per_gpu * GiB < read < r.sizing.weights_gib_per_gpu * GiB
    floor = read / (r.gpu.memory_bandwidth_gbps * 1e9 * r.efficiency.bandwidth) * 1000
    assert floor <= p.tpot_ms < floor * 1.1
    faster = dataclasses.replace(r, efficiency=dataclasses.replace(r.efficiency, bandwidth=r.efficiency.bandwidth * 2))
    assert predict(faster, Workload(1, 128, 256)).tpot_ms == pytest.approx(p.tpot_ms / 2, rel=0.05)


def test_batch_growth_raises_throughput_and_tpot_until_compute_bound():
    r = replica()
    preds = [predict(r, Workload(c, 1000, 200)) for c in (1, 8, 64, 256)]
    tps = [p.output_tokens_per_s for p in preds]
    tpots = [p.tpot_ms for p in preds]
    assert tps == sorted(tps) and tpots == sorted(tpots)
    assert preds[0].decode_bound == "bandwidth" and preds[-1].decode_bound == "compute"
    # Past the KV pool, recomputing preempted requests costs throughput.
    crowded = predict(r, Workload(512, 1000, 200))
    assert crowded.preemption and crowded.output_tokens_per_s < tps[-1]


def test_kv_reads_grow_the_decode_step_with_context():
    r = replica()
    short = predict(r, Workload(32, 256, 64)).tpot_ms
    long = predict(r, Workload(32, 6000, 64)).tpot_ms
    assert long > short * 1.2


def test_preemption_when_the_kv_pool_runs_out():
    r = replica("L4", max_model_len=8192)
    small = predict(r, Workload(4, 2000, 1000))
    assert not small.preemption and not small.kv_limited
    big = predict(r, Workload(256, 2000, 1000))
    assert big.kv_limited and big.preemption and 0 < big.preempted_share < 1
    assert big.running < 256 and big.waiting > 0
    assert big.running * 3000 > r.sizing.kv_cache_tokens  # the full footprint overflows the pool
    # Waiting for a slot shows up in TTFT.
    assert big.ttft_ms > 10 * small.ttft_ms


def test_tensor_parallel_adds_allreduce_and_splits_the_weights():
    one = predict(replica(tensor_parallel_size=1), Workload(8, 512, 128))
    two = predict(replica(tensor_parallel_size=2), Workload(8, 512, 128))
    assert one.terms["allreduce_ms"] == 0 and two.terms["allreduce_ms"] > 0
    assert two.tpot_ms < one.tpot_ms


def test_moe_reads_only_the_routed_experts_at_a_small_batch():
    r = replica(path=QWEN3_MOE, max_model_len=4096)
    p = predict(r, Workload(1, 256, 64))
    assert p.terms["weights_read_gib"] < 0.3 * r.sizing.weights_gib_per_gpu
    wide = predict(r, Workload(256, 256, 64))
    assert wide.terms["weights_read_gib"] > 0.9 * r.sizing.weights_gib_per_gpu


def test_highest_concurrency_tightens_with_the_slo():
    r = replica()
    loose, at = highest_concurrency(r, 2000, 300, 2000, 60)
    tight, _ = highest_concurrency(r, 2000, 300, 300, 15)
    assert loose > tight >= 1
    assert at is not None and at.ttft_p95_ms <= 2000 and at.tpot_ms <= 60
    above = predict(r, Workload(loose + 1, 2000, 300))
    assert above.ttft_p95_ms > 2000 or above.tpot_ms > 60


def test_replicas_for_a_rate_scale_with_it_and_an_unmeetable_slo_is_an_error():
    r = replica()
    one = replicas_for_rate(r, 10, 2000, 300, 1000, None)
    four = replicas_for_rate(r, 40, 2000, 300, 1000, None)
    assert one.replicas >= 1 and four.replicas >= 3 * one.replicas - 1
    assert four.replicas * four.rate_per_replica >= 40 > (four.replicas - 1) * four.rate_per_replica
    assert four.gpus == four.replicas * r.tp
    with pytest.raises(SizingError, match=r"no concurrency meets the SLO.*bigger GPU"):
        replicas_for_rate(r, 10, 2000, 300, 1.0, None)
    with pytest.raises(SizingError, match="request rate"):
        replicas_for_rate(r, float("nan"), 2000, 300, 1000, None)


def test_unresolved_gpu_figures_are_refused_not_invented():
    r = replica("A10G", max_model_len=4096)
    with pytest.raises(SizingError, match="unresolved"):
        predict(r, Workload(1, 128, 16))
    measured = dataclasses.replace(r, peak_tflops_override=70.0)
    assert predict(measured, Workload(1, 128, 16)).tpot_ms > 0


def test_calibration_refits_the_shipped_efficiencies_and_reports_the_error():
    points = perf_calibration.load(FIXTURE)
    fitted = perf_calibration.fit_families(points)
    for family, eff in fitted.items():
        assert eff.bandwidth == pytest.approx(EFFICIENCY[family].bandwidth, abs=1e-9), family
        assert eff.ttft_overhead_ms == pytest.approx(EFFICIENCY[family].ttft_overhead_ms, abs=1e-9), family
    rows = perf_calibration.errors(points, fitted, UNCALIBRATED)
    splits = {r["split"] for r in rows}
    assert splits == {"calibration", "held_out"}
    # Held-out sources are not used by the fit: their points carry no weight in it.
    calibration_only = perf_calibration.fit_families([p for p in points if p.split == "calibration"])
    assert calibration_only == fitted
    # The ada family is calibrated on its own source (the dev stack's L4), not the mean of the others.
    assert fitted["ada"] == EFFICIENCY["ada"] and "ada" in {p.family for p in points if p.split == "calibration"}
    hits = perf_calibration.slo_hits(points, fitted, UNCALIBRATED)
    assert {h["split"] for h in hits} == {"calibration", "held_out"}
    assert all(h["measured"] in {p.workload.concurrency for p in points} for h in hits)
    text = perf_calibration.render(rows, fitted, hits)
    assert "SLO concurrency" in text and "per split and model kind" in text
    summary = perf_calibration.summary(rows)
    assert all(mape < 0.10 for (split, _, _), mape in summary.items() if split == "calibration")


def test_the_per_step_time_adds_to_every_step_and_is_shipped_at_what_the_calibration_supports():
    r = replica()
    base = predict(r, Workload(4, 256, 64)).tpot_ms
    slower = dataclasses.replace(r, efficiency=dataclasses.replace(r.efficiency, step_overhead_ms=1.5))
    assert predict(slower, Workload(4, 256, 64)).tpot_ms == pytest.approx(base + 1.5, rel=0.02)
    points = perf_calibration.load(FIXTURE)
    assert all(e.step_overhead_ms == STEP_OVERHEAD_MS for e in EFFICIENCY.values())
    assert len(perf_calibration.step_overhead_profile(points, (0.0, 1.0))) == 2


def test_the_engine_time_per_running_request_grows_the_step_with_the_batch():
    r = replica()
    flat = dataclasses.replace(r, efficiency=dataclasses.replace(r.efficiency, step_per_request_ms=0.0))
    busy = dataclasses.replace(r, efficiency=dataclasses.replace(r.efficiency, step_per_request_ms=0.1))
    for c in (1, 32):
        p0, p1 = predict(flat, Workload(c, 64, 128)), predict(busy, Workload(c, 64, 128))
        # 0.1 ms for each request the step carries, on top of the same bytes and FLOPs.
        assert p1.tpot_ms - p0.tpot_ms == pytest.approx(0.1 * p0.running, rel=0.05)
        assert p1.terms["engine_step_ms"] == pytest.approx(0.1 * p0.running)
    assert all(e.step_per_request_ms == STEP_PER_REQUEST_MS > 0 for e in EFFICIENCY.values())


def test_the_shipped_time_per_request_is_the_calibration_minimum_on_its_grid():
    points = [p for p in perf_calibration.load(FIXTURE) if p.split == "calibration"]
    step = perf_calibration.PER_REQUEST_GRID_MS[1]
    here = perf_calibration.total_score(points, STEP_OVERHEAD_MS, STEP_PER_REQUEST_MS)[0]
    for other in (STEP_PER_REQUEST_MS - step, STEP_PER_REQUEST_MS + step):
        assert here < perf_calibration.total_score(points, STEP_OVERHEAD_MS, other)[0], other


def test_eager_mode_adds_a_launch_time_per_layer_to_every_step():
    graphs = replica()
    eager = replica(enforce_eager=True)
    g, e = predict(graphs, Workload(1, 256, 128)), predict(eager, Workload(1, 256, 128))
    layers = graphs.arch.layers
    assert e.tpot_ms - g.tpot_ms == pytest.approx(layers * EAGER_LAYER_MS, rel=0.02)
    assert e.terms["engine_step_ms"] - g.terms["engine_step_ms"] == pytest.approx(layers * EAGER_LAYER_MS)
    # The fixture's eager point is built eager: its engine setting reaches the replica.
    eager_points = [p for p in perf_calibration.load(FIXTURE) if p.replica.request.enforce_eager]
    assert [p.source for p in eager_points] == ["vllm-20469-qwen3-14b-awq-a100"]


def test_a_closed_loop_benchmark_is_scored_by_littles_law():
    points = perf_calibration.load(FIXTURE)
    for p in points:
        eff = EFFICIENCY[p.family]
        asked = dict.fromkeys(("ttft_mean_ms", "tpot_mean_ms", "output_tokens_per_s"), 1.0)
        got = perf_calibration.predicted(dataclasses.replace(p, measured=asked), eff)
        e2e = got["ttft_mean_ms"] + (p.workload.output_len - 1) * got["tpot_mean_ms"]
        # C requests in flight, each for its whole latency: C x output / E2E tokens per second, below
        # the engine-side rate whenever part of the latency is spent outside the engine.
        assert got["output_tokens_per_s"] == pytest.approx(p.workload.concurrency * p.workload.output_len / e2e * 1000)
        engine = predict(dataclasses.replace(p.replica, efficiency=eff), p.workload).output_tokens_per_s
        assert got["output_tokens_per_s"] <= engine * (1 + 1e-9)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_a_prediction_and_the_slo_concurrency(capsys):
    code, out, err = run(
        capsys, "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192",
        "--concurrency", "16", "--input-len", "2000", "--output-len", "300", "--slo-ttft-p95-ms", "1000", "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["prediction"]["concurrency"] == 16 and data["slo"]["highest_concurrency"] >= 16
    code, out, err = run(
        capsys, "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192",
        "--input-len", "2000", "--output-len", "300", "--slo-ttft-p95-ms", "1000", "--request-rate", "40",
    )  # fmt: skip
    assert code == 0, err
    assert "40 requests/s at the SLO:" in out and "replicas" in out


def test_the_documented_question_gets_the_answer_docs_capacity_states(capsys):
    # docs/capacity.md answers "how many H100s for 40 requests/s of 2,000-token prompts and 300-token answers at a
    # TTFT p95 under 1 s" with this command's figures: a change to the model that moves them must move the docs too.
    code, out, err = run(
        capsys, "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--tensor-parallel-size", "1",
        "--max-model-len", "8192", "--input-len", "2000", "--output-len", "300", "--slo-ttft-p95-ms", "1000",
        "--request-rate", "40",
    )  # fmt: skip
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("40 requests/s at the SLO:"))
    replicas = int(line.split(": ")[1].split()[0])
    concurrency = int(line.split("each at concurrency ")[1].split()[0])
    rate = line.split("serving ")[1].split()[0]
    docs = (paths.ROOT / "docs" / "capacity.md").read_text()
    stated = f"answers {replicas} for Llama-3.1-8B in bfloat16 (each at concurrency {concurrency}, {rate} requests/s)"
    assert stated in docs


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--gpu", "H200X"], "--gpu"),
        (["--gpu", "A10G"], "unresolved"),
        (["--gpu", "H100-80GB", "--concurrency", "0"], "--concurrency"),
        (["--gpu", "H100-80GB", "--input-len", "8000", "--output-len", "1000"], "max_model_len"),
        (["--gpu", "H100-80GB", "--slo-tpot-ms", "0.5", "--no-concurrency"], "SLO"),
        (["--gpu", "H100-80GB", "--no-concurrency"], "--concurrency"),
        (["--gpu", "H100-80GB", "--peak-tflops", "-3"], "--peak-tflops"),
        (["--gpu", "H100-80GB", "--request-rate", "40"], "--request-rate needs an SLO"),
        (["--gpu", "H100-80GB", "--request-rate", "0", "--slo-tpot-ms", "50"], "--request-rate"),
        (["--gpu", "H100-80GB", "--request-rate", "5", "--slo-ttft-p95-ms", "1"], "bigger GPU"),
    ],
)
def test_cli_refuses_bad_input_with_one_line_and_exit_2(capsys, argv, fragment):
    base = {"--input-len": "2000", "--output-len": "300", "--concurrency": "4"}
    args = ["--model-config", LLAMA_8B, "--max-model-len", "8192"]
    no_concurrency = "--no-concurrency" in argv
    argv = [a for a in argv if a != "--no-concurrency"]
    for flag, value in base.items():
        if flag not in argv and not (flag == "--concurrency" and no_concurrency):
            args += [flag, value]
    code, _out, err = run(capsys, *args, *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err
    assert "Traceback" not in err


def test_cli_names_the_tensor_parallel_size_that_fits(capsys):
    code, _, err = run(capsys, "--model-config", QWEN3_MOE, "--gpu", "L40S", "--max-model-len", "4096",
                       "--concurrency", "1", "--input-len", "10", "--output-len", "10")  # fmt: skip
    assert code == 2 and "does not fit on L40S x1" in err and "--tensor-parallel-size 2 fits" in err


def test_cli_refuses_a_missing_config(capsys):
    code, _, err = run(capsys, "--model-config", "/nonexistent/config.json", "--gpu", "L4",
                       "--concurrency", "1", "--input-len", "10", "--output-len", "10")  # fmt: skip
    assert code == 2 and "--model-config" in err


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").exists()),
)
def test_every_fixture_model_predicts_finite_and_in_order(name):
    # Dense, MoE, MXFP4, FP8 and sliding-window configs: on the smallest tensor-parallel size that fits,
    # TTFT grows with the prompt and TPOT with the batch, and every figure is finite and positive.
    a = arch(str(CONFIGS / name / "config.json"))
    r = None
    for tp in (1, 2, 4, 8):
        try:
            r = build_replica(a, CATALOG["H100-80GB"], PEAKS["H100-80GB"], tensor_parallel_size=tp, max_model_len=4096)
            break
        except SizingError:
            continue
    assert r is not None, name
    ttft = [predict(r, Workload(1, n, 64)).ttft_ms for n in (64, 1024, 3000)]
    tpot = [predict(r, Workload(c, 256, 64)).tpot_ms for c in (1, 8, 64)]
    assert ttft == sorted(ttft) and tpot == sorted(tpot)
    for p in (predict(r, Workload(c, 1000, 200)) for c in (1, 32)):
        values = [p.ttft_ms, p.ttft_p95_ms, p.tpot_ms, p.output_tokens_per_s, *p.terms.values()]
        assert all(v >= 0 and v == v and v != float("inf") for v in values), (name, p)
        assert p.ttft_p95_ms >= p.ttft_ms > 0 and p.tpot_ms > 0


def test_a_prompt_alone_starts_at_once_and_one_among_others_waits_for_the_step_boundary():
    r = replica(vllm_version="0.13.0")  # synchronous scheduling: no step in flight
    alone = predict(r, Workload(1, 256, 128))
    assert alone.terms["step_boundary_wait_ms"] == 0 and alone.terms["async_step_wait_ms"] == 0
    assert alone.terms["first_token_steps_ms"] == pytest.approx(alone.terms["prefill_ms"])
    assert alone.ttft_ms == pytest.approx(alone.terms["prefill_ms"] + r.efficiency.ttft_overhead_ms)
    busy = predict(r, Workload(8, 256, 128))
    # The engine takes new requests between steps: half the step in progress (the TPOT) on average.
    assert busy.terms["step_boundary_wait_ms"] == pytest.approx(0.5 * busy.tpot_ms)
    assert busy.ttft_ms == pytest.approx(
        busy.terms["queue_ms"]
        + busy.terms["step_boundary_wait_ms"]
        + busy.terms["first_token_steps_ms"]
        + r.efficiency.ttft_overhead_ms
    )


def test_asynchronous_scheduling_adds_the_step_in_flight_from_the_release_that_defaults_to_it():
    sync, asyn = replica(vllm_version="0.13.0"), replica(vllm_version="0.14.0")
    w = Workload(8, 256, 128)
    s, a = predict(sync, w), predict(asyn, w)
    assert s.terms["async_step_wait_ms"] == 0
    assert a.terms["async_step_wait_ms"] == pytest.approx(a.tpot_ms)
    assert a.ttft_ms - s.ttft_ms == pytest.approx(a.tpot_ms, rel=0.01)
    assert a.tpot_ms == pytest.approx(s.tpot_ms)  # the decode step itself does not change
    # Alone, nothing is in flight when the prompt arrives.
    assert predict(asyn, Workload(1, 256, 128)).terms["async_step_wait_ms"] == 0


def test_the_first_token_comes_after_the_whole_mixed_step_with_every_running_decode():
    r = replica(vllm_version="0.13.0")
    alone = predict(r, Workload(1, 2000, 300))
    crowded = predict(r, Workload(64, 2000, 300))
    c = _Costs(r)
    co = crowded.terms["co_scheduled_prompts"]
    decode = crowded.running - 1 - co
    carried = min(2000 * (1 + co), r.sizing.max_num_batched_tokens - decode)
    mixed, _ = c.step(decode, carried, 2150, 2000, 1 + co)
    chunks = math.ceil(2000 * (1 + co / 2) / (r.sizing.max_num_batched_tokens - decode) - 1e-9)
    assert crowded.terms["first_token_steps_ms"] == pytest.approx(chunks * mixed * 1000)
    # The decodes' KV and the co-scheduled prompts make the step longer than the prompt's prefill alone.
    assert crowded.terms["first_token_steps_ms"] > alone.terms["first_token_steps_ms"] * 1.05


def test_a_closed_loop_puts_concurrency_over_output_new_prompts_in_a_step():
    r = replica()
    for out in (32, 512):
        p = predict(r, Workload(32, 1000, out))
        assert p.terms["co_scheduled_prompts"] == pytest.approx(p.request_rate * p.tpot_ms / 1000)
        assert p.terms["co_scheduled_prompts"] == pytest.approx(32 / out, rel=0.35)
    short = predict(r, Workload(32, 1000, 32))
    long = predict(r, Workload(32, 1000, 512))
    assert short.terms["co_scheduled_prompts"] > 8 * long.terms["co_scheduled_prompts"]
    assert short.terms["first_token_steps_ms"] > long.terms["first_token_steps_ms"]
    assert predict(r, Workload(1, 1000, 32)).terms["co_scheduled_prompts"] == 0


def test_the_fixture_builds_each_replica_on_the_release_its_source_ran():
    by_source = {}
    for p in perf_calibration.load(FIXTURE):
        by_source.setdefault((p.source, p.gpu), set()).add(p.replica.request.vllm_version)
    assert by_source[("gpustack-qwen3-8b-h100", "H100-80GB")] == {"0.11.0"}
    assert by_source[("ree2raz-qwen2.5-7b-l4-a100", "L4")] == {"0.8.5"}
    assert by_source[("ree2raz-qwen2.5-7b-l4-a100", "A100-40GB")] == {"0.20.1"}
    assert all(None not in v for v in by_source.values())
