"""`python -m components.sizing`: JSON keys, the "Will it fit?" bar, exit code 1 when it does not fit and 2 on
bad input."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from common import gpus
from planner.sizing_cli import build_parser, main
from stack_config.models import DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_TARGET_CONCURRENT_REQUESTS
from tests.support import paths
from tests.support.committed import committed_stack

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
            "tensorParallelSize auto picks 4 (smallest of up to 8 GPUs holding 4 × 32,768-token requests)",
        ),
        (["--model-config", LLAMA_70B, "--gpu", "L4"], "no tensor-parallel size up to 8 (GPUs per node) fits"),
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


def test_unshardable_tensor_parallel_size_and_zero_context_are_refused():
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
    # vLLM refuses to start (vllm/config/model.py verify_with_parallel_config), so the CLI does too.
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: --tensor-parallel-size: vLLM refuses to start: total number of attention heads (32) must be "
        "divisible by tensor parallel size (3) (vllm/config/model.py verify_with_parallel_config); sizes dividing "
        "32: 1, 2, 4, 8, 16, 32"
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


# --- issue 29: the GPU a CUDA total belongs to -------------------------------------------------

QWEN3_30B = str(CONFIGS / "qwen3-30b-a3b.json")


def _json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    return code, (json.loads(out) if out else None), err


def test_a_total_near_a_catalog_gpu_takes_that_gpus_traits(capsys):
    # 44.30 GiB is 0.27% below the L40S's 44.42: a PCIe card, so a TP 2 pair gets NCCL's ring buffers
    # only, not the 1.8 GiB of NVLS buffers an NVSwitch H100 box allocates.
    args = ("--model-config", LLAMA_8B, "--tensor-parallel-size", "2", "--max-model-len", "8192")
    _, near, _ = _json(capsys, *args, "--gpu-memory-gib", "44.30")
    _, named, _ = _json(capsys, *args, "--gpu", "L40S")
    assert near["gpu"] == "L40S" and "within 0.5% of its catalog total 44.42" in near["gpu_resolution"]
    assert near["interconnect"] == named["interconnect"] == "pcie"
    assert near["non_torch_gib"] == named["non_torch_gib"] < 1.0
    # Broken variant: what the old fallback did with a total off the catalog (44.0 GiB, 0.9% below the
    # L40S's): an unknown GPU on NVSwitch, NVLS buffers and all. It now has to be asked for.
    _, nvswitch, _ = _json(capsys, *args, "--gpu-memory-gib", "44.0", "--interconnect", "nvswitch")
    assert nvswitch["non_torch_gib"] > near["non_torch_gib"] + 1.5


def test_an_nvswitch_gpu_taken_from_its_total_says_which_machine_it_assumed(capsys):
    # An H100 PCIe card reports about an H100 SXM's total: the NVSwitch assumption is said, and
    # --interconnect pcie (or a log whose custom all-reduce found no P2P) sizes it without NVLS.
    args = ("--model-config", LLAMA_8B, "--tensor-parallel-size", "2", "--max-model-len", "8192")
    _, sxm, err = _json(capsys, *args, "--gpu-memory-gib", "79.19")
    assert sxm["interconnect"] == "nvswitch" and "--interconnect pcie" in err
    _, pcie, err = _json(capsys, *args, "--gpu-memory-gib", "79.19", "--interconnect", "pcie")
    assert pcie["interconnect"] == "pcie" and "warning" not in err
    assert pcie["non_torch_gib"] < sxm["non_torch_gib"] - 1.5
    # Broken variant: a single GPU or a PCIe catalog GPU has nothing to warn about.
    _, _, err = _json(capsys, "--model-config", LLAMA_8B, "--max-model-len", "8192", "--gpu-memory-gib", "79.19")
    assert "NVSwitch" not in err
    _, _, err = _json(capsys, *args, "--gpu", "L40S")
    assert "NVSwitch" not in err


def test_a_gb10_total_off_the_catalog_figure_is_unified_memory(capsys):
    # 121.63 GiB is the figure another DGX Spark reports (common/gpus.py, GB10 entry).
    args = ("--model-config", QWEN3_30B, "--max-model-len", "8192", "--vllm-version", "0.13.0")
    _, near, _ = _json(capsys, *args, "--gpu-memory-gib", "121.63")
    assert near["gpu"] == "GB10" and near["interconnect"] == "unified"
    # vLLM cannot read a GB10's memory from NVML and falls back to the small batch defaults.
    assert near["max_num_batched_tokens"] == 2048


def test_a_total_near_two_catalog_gpus_is_refused_naming_both(capsys):
    # 79.18 GiB (an H100's, benyucong/neo4j-graphrag-python) is within 0.5% of the H100's 79.19 and
    # the A100-80GB's 79.25, whose batch defaults and NCCL buffers differ.
    code, _, err = run(capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "79.18")
    assert code == 2 and err.count("\n") == 1
    assert "--gpu H100-80GB or --gpu A100-80GB" in err


def test_a_total_near_no_catalog_gpu_is_refused_naming_the_flags(capsys):
    # 47.43 GiB: no catalog GPU within 0.5% (a 48 GB card outside the catalog).
    code, _, err = run(capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "47.43", "--max-model-len", "8192")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "not within 0.5% of any catalog GPU" in err and "--gpu NAME" in err and "--interconnect" in err
    # With the machine described, it is sized, and says it is outside the catalog.
    code, out, _ = _json(capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "47.43", "--interconnect", "pcie")
    assert code == 0 and out["gpu"] is None and "outside the catalog" in out["gpu_resolution"]


def test_gpu_and_a_measured_total_together_keep_the_gpus_traits(capsys):
    code, out, _ = _json(
        capsys, "--model-config", LLAMA_8B, "--gpu", "L40S", "--gpu-memory-gib", "47.43", "--tensor-parallel-size", "2"
    )
    assert code == 0 and out["gpu"] == "L40S" and out["gpu_memory_gib"] == 47.43 and out["interconnect"] == "pcie"


def test_the_text_report_says_which_gpu_it_took(capsys):
    code, out, _ = run(capsys, "--model-config", LLAMA_8B, "--gpu-memory-gib", "95.0", "--max-model-len", "8192")
    assert code == 0 and "GPU: 95 GiB is RTX-PRO-6000 (within 0.5% of its catalog total 95.01 GiB)" in out


# --- issue 29: --explain -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, flags",
    [
        (LLAMA_8B, ("--gpu", "H100-80GB", "--tensor-parallel-size", "2", "--vllm-version", "0.19.0")),
        (LLAMA_8B, ("--gpu", "L4", "--vllm-version", "0.27.1", "--max-model-len", "4096")),
        (QWEN3_30B, ("--gpu", "GB10", "--vllm-version", "0.13.0", "--max-model-len", "8192")),
        (LLAMA_70B, ("--gpu", "H100-80GB", "--pipeline-parallel-size", "2", "--max-model-len", "8192")),
    ],
)
def test_explain_terms_add_up_to_the_kv_memory_and_cite_their_source(capsys, model, flags):
    code, out, _ = _json(capsys, "--model-config", model, *flags, "--explain")
    assert code == 0
    terms = {t["key"]: t for t in out["terms"]}
    for key in ("requested", "weights", "lora", "activation", "non_torch", "cuda_graphs", "kv_memory", "kv_tokens"):
        assert key in terms and terms[key]["source"] and terms[key]["behaviour"].startswith("vLLM ")
    graphs = terms["cuda_graphs"]["value"] if out["cuda_graph_in_budget"] else 0.0
    rest = (
        terms["requested"]["value"]
        - terms["weights"]["value"]
        - terms["lora"]["value"]
        - terms["activation"]["value"]
        - terms["non_torch"]["value"]
        - graphs
    )
    assert rest == pytest.approx(terms["kv_memory"]["value"], abs=2e-3)
    # The parts of non-torch memory add up to it; the activation peak is at least its largest part.
    parts = [t["value"] for t in out["terms"] if t["part_of"] == "non_torch"]
    assert sum(parts) == pytest.approx(terms["non_torch"]["value"], abs=1e-3)
    assert terms["activation"]["value"] >= max(t["value"] for t in out["terms"] if t["part_of"] == "activation") - 1e-3
    # Every vLLM citation is one of planner/vllm_releases.py:SOURCES (data, not prose).
    from planner.vllm_releases import SOURCES

    cited = {str(src) for table in SOURCES.values() for src in table.values()}
    for term in out["terms"]:
        for piece in re.split("; sizes: |; also: ", term["source"]):
            assert piece in cited or piece.startswith("vllm-project/vllm#"), piece


def test_explain_follows_the_release_a_term_changes_with(capsys):
    base = ("--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192", "--explain")
    _, old, _ = _json(capsys, *base, "--vllm-version", "0.19.0")
    _, new, _ = _json(capsys, *base, "--vllm-version", "0.20.0")
    graphs = {v: {t["key"]: t for t in d["terms"]}["cuda_graphs"] for v, d in (("old", old), ("new", new))}
    assert "before 0.20" in graphs["old"]["behaviour"] and "from 0.20" in graphs["new"]["behaviour"]
    assert "v0.20.0 v1/worker/gpu_worker.py:determine_available_memory" in graphs["new"]["source"]
    code, text, _ = run(capsys, *base, "--vllm-version", "0.19.0")
    assert code == 0 and "Memory budget, term by term" in text and "vllm v0.19.0 config/cache.py" in text


def test_no_collected_log_total_is_taken_for_another_gpu():
    # Every CUDA total of tests/fixtures/vllm_logs is either taken as the GPU its case names or
    # refused as near two catalog GPUs (the 79.15 and 79.18 GiB of A100/H100 logs); never another GPU.
    from tests.support.sizing_cases import CALIBRATION, HELD_OUT

    outcomes = {"same": 0, "refused": 0}
    for case in CALIBRATION + HELD_OUT:
        match = gpus.match_cuda_total(case["gpu_memory_gib"])
        assert match.gpu is None or match.gpu.name == case["gpu"], case["id"]
        assert match.gpu is not None or {g.name for g in match.candidates} >= {case["gpu"]}, case["id"]
        outcomes["same" if match.gpu else "refused"] += 1
    assert outcomes["same"] > 10 * outcomes["refused"] > 0


# --- one number for one question: the README's example is the CLI's output and prod's plan ------------


def _readme_sizing_example() -> tuple[list[str], str]:
    """The README's sizing command (its arguments after `venv/bin/python`) and the output block below it
    (tests/repo/test_readme.py holds that the block is what the command prints)."""
    text = (paths.ROOT / "README.md").read_text()
    section = text.split("## Sizing: will it fit?", 1)[1]
    command, output = re.findall(r"```(?:sh)?\n(.*?)```\n", section, flags=re.DOTALL)[:2]
    argv = command.replace("\\\n", " ").split()
    assert argv[:3] == ["venv/bin/python", "-m", "components.sizing"], argv
    return argv[1:], output


def test_the_readme_sizing_example_gives_prod_s_numbers_for_the_same_model():
    argv, output = _readme_sizing_example()
    (row,) = [r for r in committed_stack("prod").outputs["sizing"] if r["model"] == "llama-3-3-70b-instruct"]
    assert f"--max-model-len {row['maxModelLen']}" in " ".join(argv) and "--kv-cache-dtype fp8" in " ".join(argv)
    assert f"TP {row['tensorParallelSize']} × PP 1" in output
    assert f"= {row['kvCacheTokens']:,} tokens" in output
    assert f"tensorParallelSize auto picks {row['tensorParallelSize']} " in output
    assert row["gpuMemoryUtilization"] == DEFAULT_GPU_MEMORY_UTILIZATION


def test_a_model_that_does_not_fit_names_the_tp_the_plan_picks_not_just_the_smallest_that_fits():
    argv, _ = _readme_sizing_example()
    tp1 = [a if a != "4" else "1" for a in argv]  # the README's command at --tensor-parallel-size 1
    assert tp1.count("1") == 1
    proc = subprocess.run([sys.executable, *tp1], cwd=paths.ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    (row,) = [r for r in committed_stack("prod").outputs["sizing"] if r["model"] == "llama-3-3-70b-instruct"]
    # TP 2 fits, but holds fewer than targetConcurrentRequests; the plan deploys the TP below.
    assert f"tensorParallelSize auto picks {row['tensorParallelSize']} " in proc.stderr.splitlines()[-1]
    assert row["tensorParallelSize"] == 4


def test_the_cli_takes_the_program_s_default_utilization_and_target():
    argv, _ = _readme_sizing_example()
    proc = subprocess.run(
        [sys.executable, *argv, "--json"], cwd=paths.ROOT, capture_output=True, text=True, timeout=120
    )
    result = json.loads(proc.stdout)
    assert result["requested_gib"] == pytest.approx(result["gpu_memory_gib"] * DEFAULT_GPU_MEMORY_UTILIZATION, abs=0.01)
    args = build_parser().parse_args(["--model-config", "x", "--gpu", "H100-80GB"])
    assert args.target_concurrent_requests == DEFAULT_TARGET_CONCURRENT_REQUESTS


def test_a_context_beyond_the_model_s_maximum_is_refused_with_vllm_s_rule():
    config = "tests/fixtures/model_configs/llama-3.1-8b/config.json"
    argv = ["--model-config", config, "--gpu", "H100-80GB"]
    proc = subprocess.run(
        [sys.executable, "-m", "components.sizing", *argv, "--max-model-len", "131073"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(
        "error: --max-model-len: vLLM refuses to start: max_model_len 131,073 is greater than the model's derived "
        "maximum (max_position_embeddings=131,072 in config.json) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    )
    ok = subprocess.run(
        [sys.executable, "-m", "components.sizing", *argv, "--max-model-len", "131072"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
