"""Cases the capacity-tools fuzzer (tests/fuzz/test_fuzz_capacity_tools.py) found, each a named regression test."""

from __future__ import annotations

import copy
import json
import math

import pytest

from offline_plan import diff
from planner import capacity_cli, performance, plan
from stack_config import parse_stack_config
from tests.support.fuzz.tool_inputs import PLAN
from tests.support.stack_variants import LLAMA_8B

LENGTHS = {"promptTokens": {"mean": 1}, "outputTokens": {"mean": 200}}
A100 = {"pools": [{"name": "gpu-a", "gpu": "A100-80GB", "gpusPerNode": 8, "maxNodes": 1}]}


def _plan(load):
    raw = {"cloud": "aws", **A100, "models": [{**LLAMA_8B, "pool": "gpu-a", "load": load}]}
    (p,) = plan.build_plans(parse_stack_config(raw, "Pulumi.test.yaml"), plan.default_metadata_loader(None), source="x")
    return p


def _folders(tmp_path, head):
    out = []
    for name, data in (("base", PLAN), ("head", head)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "plan.json").write_text(json.dumps(data))
        out.append(str(folder))
    return out


@pytest.mark.parametrize(
    "edit, names",
    [
        # Each used to end in "a plan.json has an unexpected shape (TypeError: ...)", naming no key.
        (lambda d: d["resources"].__setitem__(0, True), "`resources[0]` is not an object"),
        (
            lambda d: d["resources"][0].__setitem__("replaceOnChanges", 0),
            "`resources[0].replaceOnChanges` is not a list",
        ),
        (lambda d: d["resources"][0].__setitem__("ignoreChanges", [1]), "`resources[0].ignoreChanges` holds"),
        (lambda d: d["resources"][0].pop("label"), "`resources[0].label` is missing"),
        (lambda d: d["resources"][0].__setitem__("inputs", []), "`resources[0].inputs` is not a dict"),
        (lambda d: d["images"][0].__setitem__("tag", None), "`images[0].tag` is missing or not a string"),
    ],
)
def test_a_plan_json_row_the_diff_cannot_read_is_one_line_naming_its_key(tmp_path, capsys, edit, names):
    head = copy.deepcopy(PLAN)
    edit(head)
    assert diff.main(_folders(tmp_path, head)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and names in err and "unexpected shape" not in err, err


def test_the_unbroken_plan_still_diffs(tmp_path, capsys):
    assert diff.main(_folders(tmp_path, copy.deepcopy(PLAN))) == 0
    assert "## Offline plan diff: stack `dev`" in capsys.readouterr().out


@pytest.mark.parametrize("rate", [2.247894540792183e-202, 1e-12])
def test_a_peak_far_below_one_replicas_rate_still_gets_one_replica(rate):
    # Found by tests/stack_config/test_config_property.py: the ceiling's float tolerance rounded it to 0 replicas.
    p = _plan({"peakRequestsPerSecond": rate, "troughRequestsPerSecond": rate, **LENGTHS})
    assert p.capacity.replicas_at_peak == 1 and p.capacity.replicas_at_trough == 1
    ordinary = _plan({"peakRequestsPerSecond": 0.5, **LENGTHS})
    assert ordinary.capacity.replicas_at_peak == 1 and ordinary.capacity.replicas_at_trough == 0


CONFIG = "tests/fixtures/model_configs/llama-3.1-8b/config.json"
PERFORMANCE = ["--model-config", CONFIG, "--gpu", "H100-80GB", "--input-len", "512", "--output-len", "128"]


@pytest.mark.parametrize("main", [performance.main, capacity_cli.main], ids=["performance", "capacity-explain"])
@pytest.mark.parametrize(
    "flags",
    [
        # 1e-308 TFLOPS: a prefill of infinite time, then "cannot convert float NaN to integer" (a traceback).
        ["--concurrency", "8", "--peak-tflops", "1e-308"],
        ["--slo-ttft-p95-ms", "1000", "--peak-tflops", "1e-308", "--json"],
        # An overflowing peak printed "dense peak inf TFLOPS"; a link of 1e-308 GB/s "TTFT mean inf ms".
        ["--concurrency", "8", "--peak-tflops", "1e308"],
        ["--concurrency", "8", "--tensor-parallel-size", "2", "--link-gbps", "1e-308"],
    ],
)
def test_a_measured_peak_or_link_beyond_any_gpu_is_one_line_naming_the_flag(capsys, main, flags):
    flag = next(f for f in flags if f in ("--peak-tflops", "--link-gbps"))
    assert main(PERFORMANCE + flags + ["--explain"] * (main is capacity_cli.main)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {flag} ") and "is outside 0.1..100,000" in err, err


@pytest.mark.parametrize("value", ["0.1", "100000"])
def test_the_ends_of_the_measured_range_still_predict_finite_figures(capsys, value):
    code = performance.main(
        [
            *PERFORMANCE,
            "--concurrency",
            "8",
            "--tensor-parallel-size",
            "2",
            "--peak-tflops",
            value,
            "--link-gbps",
            value,
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and all(math.isfinite(v) for v in out["prediction"].values() if isinstance(v, float)), out


@pytest.mark.parametrize("main", [performance.main, capacity_cli.main], ids=["performance", "capacity-explain"])
def test_a_request_rate_far_below_one_replicas_rate_is_one_replica_on_the_command_line_too(capsys, main):
    # `--request-rate 1e-12` printed "0 replicas (0 GPUs)": perf_model's ceiling tolerance rounded it away.
    flags = ["--slo-ttft-p95-ms", "1000", "--request-rate", "1e-12", "--json"]
    assert main([*PERFORMANCE, *flags, *["--explain"] * (main is capacity_cli.main)]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    assert (load["replicas"], load["gpus"]) == (1, 1), load
