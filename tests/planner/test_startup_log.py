"""--from-log: vLLM V1 startup logs read back into the inputs and figures they state.

Grounded in the project's collected logs: every case of tests/fixtures/vllm_logs quotes its log lines,
and the parser must read those lines back into the numbers the case records (each case cites its
source). Through the CLI, a case whose excerpt states its release and CUDA total must come out with
the same token error the sizing report gives it (tests/support/sizing_cases.py:relative_error).
"""

from __future__ import annotations

import json
import re

import pytest

from planner.sizing_cli import main
from planner.startup_log import parse
from tests.support.sizing_cases import CALIBRATION, HELD_OUT, config_path, relative_error

CASES = CALIBRATION + HELD_OUT


def _text(case: dict) -> str:
    return "\n".join(case["log_lines"]) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_collected_excerpt_reads_back_into_its_recorded_numbers(case):
    text = _text(case)
    log = parse(text)
    observed = case["observed"]
    if "GPU KV cache size" in text and observed.get("kv_cache_tokens"):
        assert log.kv_tokens == observed["kv_cache_tokens"]
    if "Available KV cache memory" in text and observed.get("kv_cache_gib") is not None:
        assert log.kv_memory == pytest.approx(observed["kv_cache_gib"], abs=0.005)
    if "Model loading took" in text and observed.get("weights_gib_per_gpu"):
        assert log.weights == observed["weights_gib_per_gpu"]
    if log.version:
        assert log.version.startswith(str(case["vllm_version"]).split("+")[0].split("rc")[0])
    if log.cuda_total_gib:
        assert log.cuda_total_gib == pytest.approx(case["gpu_memory_gib"], abs=0.005)
    if log.tensor_parallel_size:
        assert log.tensor_parallel_size == case.get("tensor_parallel_size", 1)


def test_the_parser_reads_the_profiling_lines_of_each_release_family():
    # 0.19 (llm-d-planner sweep): "Memory profiling takes ...; torch peak memory increase: ...".
    h100 = next(c for c in CALIBRATION if c["id"].startswith("fp8dyn-llama-3-3-70b"))
    log = parse(_text(h100))
    assert (log.activation, log.non_torch, log.cuda_graphs, log.weights) == (1.96, 2.1, 1.82, 33.88)
    # 0.10.2 (tim-roethig L40S): "Free memory on device (43.93/44.42 GiB) ... Actual usage is ...".
    l40s = next(c for c in HELD_OUT if c["id"] == "l40s-pcie-tp8-ep-qwen3-235b-a22b-fp8-0.10.2")
    log = parse(_text(l40s))
    assert log.cuda_total_gib == 44.42 and log.requested == 39.98 and log.gpu_memory_utilization == 0.9
    assert (log.activation, log.non_torch, log.cuda_graphs) == (1.4, 0.21, 3.45)
    assert log.version == "0.10.2"


def _self_contained(log) -> bool:
    return bool(log.version and (log.cuda_total_gib or log.device_name) and log.kv_tokens)


# Cases whose excerpt states the release, the CUDA total or the device, and the token count.
SELF_CONTAINED = [c for c in CASES if _self_contained(parse(_text(c)))]
NAMING_A_DEVICE = [c for c in CASES if parse(_text(c)).device_name]


@pytest.mark.parametrize("case", NAMING_A_DEVICE, ids=[c["id"] for c in NAMING_A_DEVICE])
def test_a_device_the_log_names_is_the_gpu_of_its_case(case):
    from planner.sizing_cli import _gpu_from_log_name

    named = _gpu_from_log_name(parse(_text(case)))
    assert named is not None and named.name == case["gpu"]


def test_there_are_self_contained_excerpts():
    assert len(SELF_CONTAINED) >= 4


@pytest.mark.parametrize("case", SELF_CONTAINED, ids=[c["id"] for c in SELF_CONTAINED])
def test_from_log_reproduces_the_report_term_by_term(capsys, tmp_path, case):
    path = tmp_path / "startup.log"
    path.write_text(_text(case))
    argv = ["--model-config", str(config_path(case)), "--from-log", str(path), "--json"]
    code = main(argv)
    out, err = capsys.readouterr()
    if case["gpu_memory_gib"] == 79.18 and not parse(_text(case)).device_name:
        # An H100 total 0.01 GiB off its catalog figure is also within 0.5% of the A100-80GB's: asked for,
        # unless the log names the device (a fused-MoE config path's device_name=NVIDIA_H100_80GB_HBM3).
        assert code == 2 and "--gpu H100-80GB or --gpu A100-80GB" in err
        code = main([*argv, "--gpu", case["gpu"]])
        out, err = capsys.readouterr()
    assert code in (0, 1), err
    result = json.loads(out)
    assert result["gpu"] == case["gpu"]
    assert result["log"]["kv_tokens_error"] == pytest.approx(relative_error(case), abs=5e-4)
    compared = {row["term"] for row in result["log"]["terms"]}
    assert {"kv_memory", "kv_tokens"} <= compared
    # Broken variant: the same log under another GPU's traits gives another answer.
    other = "H100-80GB" if case["gpu"] != "H100-80GB" else "A100-80GB"
    main([*argv, "--gpu", other, "--interconnect", "nvswitch"])
    assert json.loads(capsys.readouterr().out)["log"]["kv_tokens_error"] != result["log"]["kv_tokens_error"]


def test_from_log_prints_predicted_against_logged(capsys, tmp_path):
    case = next(c for c in CALIBRATION if c["id"].startswith("fp8dyn-llama-3-3-70b"))
    path = tmp_path / "startup.log"
    path.write_text(_text(case))
    code = main(
        [
            "--model-config",
            str(config_path(case)),
            "--from-log",
            str(path),
            "--gpu",
            "H100-80GB",
            "--vllm-version",
            "0.19.0",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "Predicted against the log" in out and "error on the KV-cache tokens:" in out
    assert "peak activation (torch peak increase)" in out and "logged       1.96 GiB" in out
    assert f"{relative_error(case):+.2%}" in out


def test_a_flag_on_the_command_line_wins_over_the_log(capsys, tmp_path):
    case = next(c for c in HELD_OUT if c["id"] == "l40s-pcie-tp8-ep-qwen3-235b-a22b-fp8-0.10.2")
    path = tmp_path / "startup.log"
    path.write_text(_text(case))
    argv = ["--model-config", str(config_path(case)), "--from-log", str(path), "--json"]
    main(argv)
    from_log = json.loads(capsys.readouterr().out)
    main([*argv, "--gpu-memory-utilization", "0.8"])
    overridden = json.loads(capsys.readouterr().out)
    assert from_log["requested_gib"] == pytest.approx(44.42 * 0.9, abs=0.01)
    assert overridden["requested_gib"] == pytest.approx(44.42 * 0.8, abs=0.01)
    assert "--gpu-memory-utilization" in from_log["log"]["taken_from_log"]
    assert "--gpu-memory-utilization" not in overridden["log"]["taken_from_log"]
    utilization = {row["term"]: row for row in overridden["log"]["terms"]}["utilization"]
    assert utilization["input"] is False and utilization["difference"] == pytest.approx(-0.1)


# vLLM's own warnings (v0.28.0 distributed/device_communicators/custom_all_reduce.py), as its workers print them.
NO_P2P = (
    "WARNING 04-22 15:12:30 [custom_all_reduce.py:195] Custom allreduce is disabled because your platform lacks "
    "GPU P2P capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly."
)
PCIE_ONLY = (
    "WARNING 04-22 15:12:30 [custom_all_reduce.py:180] Custom allreduce is disabled because it's not supported on "
    "more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly."
)


@pytest.mark.parametrize("warning", [NO_P2P, PCIE_ONLY])
def test_a_log_whose_all_reduce_finds_no_nvlink_is_sized_without_nvswitch_buffers(capsys, tmp_path, warning):
    """A PCIe pair whose total is an NVSwitch GPU's (an H100 PCIe reads like an H100 SXM) gets no NVLS buffers."""
    case = next(c for c in CALIBRATION if c["id"] == "meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192")
    assert parse(_text(case)).interconnect is None
    assert parse(_text(case) + warning + "\n").interconnect == "pcie"
    argv = ["--model-config", str(config_path(case)), "--gpu", "H100-80GB", "--json"]
    outcomes = {}
    for name, text in (("nvswitch", _text(case)), ("pcie", _text(case) + warning + "\n")):
        path = tmp_path / f"{name}.log"
        path.write_text(text)
        assert main([*argv, "--from-log", str(path)]) == 0
        outcomes[name] = json.loads(capsys.readouterr().out)
    assert outcomes["nvswitch"]["interconnect"] == "nvswitch" and outcomes["pcie"]["interconnect"] == "pcie"
    assert outcomes["pcie"]["kv_cache_tokens"] > outcomes["nvswitch"]["kv_cache_tokens"]
    # The command line still wins over what the log says.
    path = tmp_path / "pcie.log"
    assert main([*argv, "--from-log", str(path), "--interconnect", "nvswitch"]) == 0
    assert json.loads(capsys.readouterr().out)["interconnect"] == "nvswitch"


# -- issue 29: the usage context and --performance-mode a log states ------------------------------------------------

# vLLM's DEBUG line when a batch limit is left to its default (vllm v0.19.0 engine/arg_utils.py:2233, v0.32.0 line
# 3173: "Defaulting max_num_batched_tokens to %d for %s usage context.", the UsageContext's value), and the line a
# non-balanced --performance-mode prints (vllm v0.19.0 config/vllm.py:687, "Performance mode set to '%s'.").
OFFLINE_DEFAULTING = (
    "DEBUG 04-22 00:16:13 [engine/arg_utils.py:2232] Defaulting max_num_batched_tokens to 16384 for LLM_CLASS "
    "usage context."
)
THROUGHPUT = "INFO 04-22 00:16:12 [config/vllm.py:687] Performance mode set to 'throughput'."


def _h100_tp2() -> dict:
    return next(c for c in CALIBRATION if c["id"].startswith("fp8dyn-llama-3-3-70b"))


def _without_server_markers(case: dict) -> str:
    """The case's excerpt as an offline LLM(...) script would print it: no model_tag (`vllm serve MODEL`'s argument)
    and no DEBUG line naming the usage context."""
    lines = [line for line in case["log_lines"] if "usage context" not in line]
    lines = [re.sub(r"'model_tag': '[^']*', ", "", line) for line in lines]
    return "\n".join(lines) + "\n"


def test_the_parser_reads_the_usage_context_and_performance_mode():
    case = _h100_tp2()
    log = parse(_text(case))
    assert log.usage_context == "openai-server" and "OPENAI_API_SERVER" in log.lines["usage_context"]
    bare = _without_server_markers(case)
    assert parse(bare).usage_context is None and parse(bare).performance_mode is None
    assert parse(bare + OFFLINE_DEFAULTING + "\n").usage_context == "llm-class"
    assert parse(bare + OFFLINE_DEFAULTING + "\n").max_num_batched_tokens == 16384
    # An API server's marker alone says openai-server (the l4-colab excerpt's "(APIServer pid=" lines).
    assert parse("(APIServer pid=4394) INFO 10-14 19:22:10 [api_server.py:1839] x\n").usage_context == "openai-server"
    assert parse(bare + THROUGHPUT + "\n").performance_mode == "throughput"
    args = "INFO 04-22 00:16:12 [entrypoints/utils.py:233] non-default args: {'performance_mode': 'interactivity'}"
    assert parse(args + "\n").performance_mode == "interactivity"


def _sized(capsys, tmp_path, text: str, *extra: str) -> tuple[dict, str]:
    path = tmp_path / "startup.log"
    path.write_text(text)
    argv = ["--model-config", str(config_path(_h100_tp2())), "--from-log", str(path), "--gpu", "H100-80GB"]
    argv += ["--vllm-version", "0.19.0", *extra]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    return result, capsys.readouterr().out


def test_from_log_sizes_an_offline_run_with_the_llm_class_defaults(capsys, tmp_path):
    bare = _without_server_markers(_h100_tp2())
    # Neither marker: the server's defaults, and the printout says they are assumed and how to change that.
    assumed, text = _sized(capsys, tmp_path, bare)
    assert assumed["max_num_batched_tokens"] == 8192 and assumed["usage_context"] == "openai-server"
    assert "openai-server, assumed" in text and "--usage-context llm-class" in text
    offline, text = _sized(capsys, tmp_path, bare, "--usage-context", "llm-class")
    assert offline["max_num_batched_tokens"] == 16384 and "llm-class (--usage-context)" in text
    assert offline["kv_cache_tokens"] < assumed["kv_cache_tokens"]
    # The log's own DEBUG line says LLM_CLASS: taken from it, with the line quoted.
    stated, text = _sized(capsys, tmp_path, bare + OFFLINE_DEFAULTING + "\n")
    assert stated["usage_context"] == "llm-class" and "--usage-context" in stated["log"]["taken_from_log"]
    assert "llm-class, from the log" in text and "assumed" not in text
    # The server's excerpt as collected: openai-server from its DEBUG line.
    server, _ = _sized(capsys, tmp_path, _text(_h100_tp2()))
    assert server["usage_context"] == "openai-server" and "from the log" in server["usage_context_source"]


def test_from_log_takes_the_performance_mode_it_states(capsys, tmp_path):
    bare = _without_server_markers(_h100_tp2())
    result, text = _sized(capsys, tmp_path, bare + THROUGHPUT + "\n")
    assert result["performance_mode"] == "throughput" and "--performance-mode" in result["log"]["taken_from_log"]
    assert (result["max_num_batched_tokens"], result["max_num_seqs"]) == (16384, 2048)
    assert "performance mode throughput" in text
    # The command line wins over the log.
    result, _ = _sized(capsys, tmp_path, bare + THROUGHPUT + "\n", "--performance-mode", "balanced")
    assert (result["max_num_batched_tokens"], result["max_num_seqs"]) == (8192, 1024)


def test_a_bad_usage_context_or_performance_mode_is_one_line_and_exit_2(capsys):
    for flag, value in (("--usage-context", "batch"), ("--performance-mode", "fast")):
        code = main(["--model-config", str(config_path(_h100_tp2())), "--gpu", "H100-80GB", flag, value])
        err = capsys.readouterr().err
        assert code == 2 and flag in err and "invalid choice" in err and len(err.strip().splitlines()) == 1
    release = ["--vllm-version", "0.16.0", "--performance-mode", "throughput"]
    code = main(["--model-config", str(config_path(_h100_tp2())), "--gpu", "H100-80GB", *release])
    err = capsys.readouterr().err
    assert code == 2 and "vLLM 0.16.0 has no --performance-mode (from 0.17)" in err
