"""The commands README.md documents, run as a user runs them, keep their names, flags and outputs.

The code behind them moved (docs/architecture.md); these names did not, and must not without a
deliberate change here and in the README. The flag lists below are what each command accepted
when the layout changed; `--json` keys of the sizing CLI likewise.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from common import images
from tests.support import paths

ROOT = paths.ROOT
LLAMA_8B = "model-metadata/meta-llama/Llama-3.1-8B-Instruct/0e9e39f249a16976918f6564b8830bc894c89659/config.json"

DOCUMENTED_FLAGS = {
    "components.sizing": {
        "--model-config",
        "--revision",
        "--gpu",
        "--gpu-memory-gib",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--dtype",
        "--kv-cache-dtype",
        "--quantization",
        "--weights-gib",
        "--max-num-batched-tokens",
        "--max-num-seqs",
        "--block-size",
        "--enforce-eager",
        "--vllm-version",
        "--interconnect",
        "--explain",
        "--from-log",
        "--json",
    },
    "components.smoke": {
        "--base-url",
        "--model",
        "--api-key-env",
        "--max-model-len",
        "--timeout",
        "--total-timeout",
        "--names",
        "--entrance",
    },
    "components.loadtest": {
        "--base-url",
        "--model",
        "--concurrency",
        "--requests",
        "--prompt-tokens",
        "--output-tokens",
        "--slo-ttft-ms",
        "--json",
        "--chart",
        "--timeout",
        "--request-timeout",
        "--api-key-env",
        "--no-ignore-eos",
        "--seed",
    },
    "policies.check": {"--json", "--config"},
}

SIZING_JSON_KEYS = {
    "activation_gib",
    "cuda_graph_gib",
    "cuda_graph_in_budget",
    "fits",
    "gpu_memory_gib",
    "kv_bytes_per_token_per_gpu",
    "kv_cache_gib_per_gpu",
    "kv_cache_tokens",
    "kv_groups",
    "max_concurrency",
    "max_model_len",
    "max_num_batched_tokens",
    "max_num_seqs",
    "non_torch_gib",
    "num_gpu_blocks",
    "pipeline_parallel_size",
    "reason",
    "requested_gib",
    "tensor_parallel_size",
    "weights_gib_per_gpu",
}


def python_m(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", sorted(DOCUMENTED_FLAGS))
def test_each_documented_command_keeps_its_name_and_every_flag(module):
    proc = python_m(module, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"usage: python -m {module}" in proc.stdout
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", proc.stdout)) - {"--help"}
    assert DOCUMENTED_FLAGS[module] <= flags, f"dropped: {sorted(DOCUMENTED_FLAGS[module] - flags)}"


def test_sizing_json_keeps_every_field():
    proc = python_m(
        "components.sizing", "--model-config", LLAMA_8B, "--gpu", "H100-80GB", "--max-model-len", "8192", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert set(result) >= SIZING_JSON_KEYS, f"dropped: {sorted(SIZING_JSON_KEYS - set(result))}"
    assert result["fits"] is True and result["kv_cache_tokens"] > 0


def test_the_readme_names_the_commands_it_documents():
    readme = (ROOT / "README.md").read_text()
    for command in [
        "make plan",
        "make test",
        "make test-fast",
        "make bench",
        "python -m components.sizing",
        "python -m components.smoke",
        "python -m components.loadtest",
        "policies.check",
        "pulumi preview --policy-pack policies",
    ]:
        assert command in readme, command


@pytest.mark.parametrize(
    "target,runs",
    [
        ("plan", "-m offline_plan --stack dev"),
        ("plan STACK=prod", "-m offline_plan --stack prod"),
        ("test", "-m pytest -q -n auto"),
        ("test", "ruff format --check"),
        ("test", "-m mypy"),
        ("test-fast", "-m pytest -q -n auto --ignore=tests/vllm"),
        ("bench", "benchmarks/*.py"),
        ("fuzz SEED=7", "--hypothesis-seed=7"),
    ],
)
def test_make_targets_run_what_the_readme_says(target, runs):
    # -n prints the recipe without running it; the venv and vLLM installs it would do are stamped.
    proc = subprocess.run(["make", "-n", "-B", *target.split()], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert runs in proc.stdout


def test_make_plan_installs_the_program_alone_and_make_test_adds_the_test_tools():
    # A fresh `make plan` builds the program's venv only; pytest, ruff, mypy and the other test
    # tools come with `make test` (requirements-test.txt), which builds on the same venv.
    plan = subprocess.run(["make", "-n", "-B", "plan"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    test = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0 == test.returncode, plan.stderr + test.stderr
    assert "-r requirements.txt" in plan.stdout and "requirements-test.txt" not in plan.stdout
    assert "-r requirements-test.txt" in test.stdout
    program = (ROOT / "requirements.txt").read_text().lower()
    for tool in ("pytest", "hypothesis", "ruff", "mypy", "xdist", "kubernetes-validate", "zizmor"):
        assert tool not in program, f"{tool} is a test tool, pinned in requirements-test.txt"


def test_make_plan_writes_the_plan_of_the_stack(tmp_path):
    # The real thing, as a user types it: the Makefile's own recipe with this interpreter.
    proc = subprocess.run(
        ["make", "plan", "STACK=prod", f"PY={sys.executable}", "STAMP="],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # prod's pack config requires digests: the plan is written either way, and exits 1 (naming the
    # images and the resolver) while common/images.py lacks one.
    # (make reports a failed recipe as its own status 2, with the recipe's status in "Error 1").
    unresolved = bool(images.unresolved())
    assert proc.returncode == (2 if unresolved else 0), proc.stdout + proc.stderr
    assert ("Error 1" in proc.stderr) == unresolved, proc.stderr
    assert "stack prod:" in proc.stdout
    assert ("NOT DEPLOYABLE with requireDigest" in proc.stdout) == unresolved
    plan = (ROOT / "build" / "prod" / "plan.md").read_text()
    assert plan.startswith("# Offline plan: stack `prod`")


@pytest.mark.parametrize(
    "module", ["components.sizing", "components.smoke", "components.loadtest", "policies.check", "offline_plan"]
)
def test_each_command_states_its_exit_codes_in_help(module):
    # The exit codes each --help states are the ones docs/hostile-input.md tabulates and the tests
    # (tests/hostile/, tests/fuzz/) hold the commands to.
    text = " ".join(python_m(module, "--help").stdout.split()).lower()
    assert "exit status: 0" in text and "; 1 " in text and "; 2 " in text, text[-400:]
