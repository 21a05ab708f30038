"""`python -m components.sizing`: JSON keys, the "Will it fit?" bar, exit code 1 when it does not fit and 2 on
bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from common import gpus
from planner.sizing_cli import main
from tests.support import paths

ROOT = paths.ROOT
CONFIGS = ROOT / "tests" / "fixtures" / "vllm_logs" / "configs"
LLAMA_8B = str(CONFIGS / "llama-3.1-8b.json")
LLAMA_70B = str(CONFIGS / "llama-3.3-70b.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_promised_keys(capsys):
    code, out, err = run(capsys, "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    for key in ("kv_cache_tokens", "kv_cache_gib_per_gpu", "weights_gib_per_gpu", "max_concurrency", "fits"):
        assert key in data
    assert data["fits"] is True
    assert data["kv_bytes_per_token_per_gpu"] == 131072


def test_weights_gib_is_the_total_across_gpus(capsys):
    _, out, _ = run(
        capsys,
        "--model-config",
        LLAMA_8B,
        "--gpu",
        "H100-80GB",
        "--tensor-parallel-size",
        "2",
        "--weights-gib",
        "15.02",
        "--max-model-len",
        "8192",
        "--json",
    )
    assert json.loads(out)["weights_gib_per_gpu"] == pytest.approx(7.51)


def test_log_figures_reproduce_through_the_cli(capsys):
    # llm-d-planner v0.19.0 sweep, Llama-3.1-8B TP1 on H100, util 0.95: "Model loading took 14.99 GiB",
    # "GPU KV cache size: 476,016 tokens" (tests/fixtures/vllm_logs/cases.yaml).
    _, out, _ = run(
        capsys,
        "--model-config",
        LLAMA_8B,
        "--gpu",
        "H100-80GB",
        "--gpu-memory-utilization",
        "0.95",
        "--weights-gib",
        "14.99",
        "--max-model-len",
        "8192",
        "--vllm-version",
        "0.19.0",
        "--json",
    )
    assert json.loads(out)["kv_cache_tokens"] == pytest.approx(476016, rel=0.01)


def test_bar_shows_weights_overhead_kv_and_spare(capsys):
    code, out, _ = run(capsys, "--model-config", LLAMA_8B, "--gpu", "L4", "--max-model-len", "8192")
    assert code == 0
    assert "Will it fit? yes" in out and "L4" in out
    assert "GPU 0 [" in out
    for label in ("weights", "runtime overhead", "KV cache", "spare"):
        assert label in out
    assert "GiB" in out


def test_bar_is_drawn_per_gpu(capsys):
    _, out, _ = run(
        capsys,
        "--model-config",
        LLAMA_70B,
        "--gpu",
        "H100-80GB",
        "--tensor-parallel-size",
        "4",
        "--max-model-len",
        "8192",
    )
    assert [line.split("[")[0].strip() for line in out.splitlines() if "[" in line] == [
        "GPU 0",
        "GPU 1",
        "GPU 2",
        "GPU 3",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model-config", "/nonexistent/config.json", "--gpu", "L4"], "does not exist"),
        (["--model-config", LLAMA_8B, "--gpu", "V100"], "known GPUs: A10G, L4"),
        (["--model-config", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4"], "--revision is required"),
        (["--gpu", "L4"], "--model-config"),
        (["--model-config", LLAMA_8B, "--gpu", "L4", "--gpu-memory-utilization", "1.5"], "(0, 1]"),
        (["--model-config", LLAMA_8B, "--gpu", "L4", "--weights-gib", "-3"], "--weights-gib"),
        (["--model-config", LLAMA_8B, "--gpu", "L4", "--kv-cache-dtype", "int3"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, message):
    # "does not fit" is a failed check (exit 1); everything else here is unusable input (exit 2).
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--model-config", LLAMA_70B, "--gpu", "H100-80GB", "--max-model-len", "32768"],
            "smallest tensor-parallel size that fits: 4",
        ),
        (["--model-config", LLAMA_70B, "--gpu", "L4"], "no tensor-parallel size up to 8 fits"),
    ],
)
def test_a_model_that_does_not_fit_is_a_failed_check_exit_1(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert "Will it fit? NO" in out  # the report still shows where the memory goes
    assert err.startswith("error: does not fit: ") and err.count("\n") == 1 and message in err


def test_malformed_json_names_the_file(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "--model-config", str(bad), "--gpu", "L4")
    assert code == 2 and "not valid JSON" in err and str(bad) in err


def test_config_without_architecture_keys_is_a_clean_error(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 4096}')
    code, _, err = run(capsys, "--model-config", str(bad), "--gpu", "L4")
    assert code == 2 and "num_hidden_layers" in err


def test_module_entry_point_runs():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "components.sizing",
            "--model-config",
            LLAMA_8B,
            "--gpu-memory-gib",
            "79.19",
            "--max-model-len",
            "8192",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kv_cache_tokens"] > 400_000


def test_unshardable_tensor_parallel_size_warns_and_zero_context_is_refused():
    import subprocess
    import sys

    config = "tests/fixtures/model_configs/llama-3.1-8b/config.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "components.sizing",
            "--model-config",
            config,
            "--gpu",
            "L4",
            "--tensor-parallel-size",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1)
    assert (
        "warning: vLLM refuses --tensor-parallel-size 3 for this model (32 attention heads, 8 KV heads)" in proc.stderr
    )
    proc = subprocess.run(
        [sys.executable, "-m", "components.sizing", "--model-config", config, "--gpu", "L4", "--max-model-len", "0"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --max-model-len must be a positive number of tokens"


@pytest.mark.parametrize("spelling", ["H100", "h100", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"])
def test_common_gpu_spellings_resolve_to_the_catalog(capsys, spelling):
    code, out, _ = run(capsys, "--model-config", LLAMA_8B, "--gpu", spelling, "--max-model-len", "8192", "--json")
    assert code == 0 and json.loads(out)["gpu_memory_gib"] == pytest.approx(79.19)


def test_ambiguous_gpu_family_is_still_an_error(capsys):
    code, _, err = run(capsys, "--model-config", LLAMA_8B, "--gpu", "A100", "--json")
    assert code == 2 and "A100-40GB" in err and "A100-80GB" in err


def test_an_a100_total_gets_vllms_small_batch_defaults(capsys):
    _, out, _ = run(
        capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "79.25", "--max-model-len", "8192", "--json"
    )
    assert json.loads(out)["max_num_batched_tokens"] == 2048
    _, out, _ = run(
        capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "79.19", "--max-model-len", "8192", "--json"
    )
    assert json.loads(out)["max_num_batched_tokens"] == 8192


def test_interconnect_flag_changes_the_nccl_memory(capsys):
    args = (
        "--model-config",
        LLAMA_70B,
        "--gpu",
        "H100-80GB",
        "--tensor-parallel-size",
        "4",
        "--max-model-len",
        "8192",
        "--json",
    )
    _, nvswitch, _ = run(capsys, *args)
    _, pcie, _ = run(capsys, *args, "--interconnect", "pcie")
    assert json.loads(nvswitch)["interconnect"] == "nvswitch" and json.loads(pcie)["interconnect"] == "pcie"
    assert json.loads(pcie)["non_torch_gib"] < json.loads(nvswitch)["non_torch_gib"]
    assert json.loads(pcie)["kv_cache_tokens"] > json.loads(nvswitch)["kv_cache_tokens"]


def test_an_unconfirmed_cuda_total_is_flagged_on_stderr(capsys, monkeypatch):
    # Every catalog GPU cites its total now; the A10G stands in, its source removed, for one that does not.
    monkeypatch.setitem(gpus.CATALOG, "A10G", dataclasses.replace(gpus.CATALOG["A10G"], cuda_total_source=None))
    code, _, err = run(capsys, "--model-config", LLAMA_8B, "--gpu", "A10G", "--max-model-len", "4096")
    assert code == 0 and "A10G's CUDA total (21.99 GiB) is not confirmed by a cited log" in err
    # Broken variant: a confirmed total stays quiet.
    _, _, err = run(capsys, "--model-config", LLAMA_8B, "--gpu", "L40S", "--max-model-len", "4096")
    assert err == ""
