"""`vllm serve` command lines go through the pinned vLLM's own argument parser.

A misspelled flag in a Deployment is only found when the pod crash-loops; here vLLM's parser
(tools/vllm-cpu/check_serve_args.py, run in .venv-vllm) rejects it in CI instead.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from components.serving.engine_args import api_key_args
from tests.support.stack_commands import collect_vllm_serve_argv
from tests.support.vllm_server import TOOLS

# A command line of the shape the stacks generate, with flags every release must keep accepting.
REFERENCE_ARGS = [
    "--served-model-name",
    "tiny-llama",
    "--port",
    "8000",
    "--max-model-len",
    "4096",
    "--tensor-parallel-size",
    "2",
    "--gpu-memory-utilization",
    "0.9",
    "--enable-prefix-caching",
    "--max-num-seqs",
    "64",
    "--dtype",
    "auto",
]


@pytest.fixture(scope="session")
def verdicts(vllm_python, tiny_model):
    """Every command line checked in one run of the checker (importing vLLM takes ~10 s)."""
    model = str(tiny_model)
    lines = [
        {"name": "reference", "argv": ["vllm", "serve", model, *REFERENCE_ARGS]},
        {"name": "misspelled", "argv": ["vllm", "serve", model, "--max-model-lenght", "4096"]},
        {"name": "bad-value", "argv": ["vllm", "serve", model, "--gpu-memory-utilization", "most"]},
        {"name": "cross-flag", "argv": ["vllm", "serve", model, "--enable-auto-tool-choice"]},
        # A key rotation's flags, as the kubelet hands them over after expanding $(VAR).
        {
            "name": "rotation",
            "argv": [
                "vllm",
                "serve",
                model,
                *REFERENCE_ARGS,
                *[
                    a.replace("$(VLLM_API_KEY)", "old-key").replace("$(VLLM_API_KEY_NEXT)", "new-key")
                    for a in api_key_args(rotating=True)
                ],
            ],
        },
    ]
    stack_lines = collect_vllm_serve_argv(model)
    lines += [{"name": name, "argv": argv} for name, argv in stack_lines]
    proc = subprocess.run(
        [str(vllm_python), str(TOOLS / "check_serve_args.py")],
        input=json.dumps(lines),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_name = {v["name"]: v for v in json.loads(proc.stdout)}
    by_name["_stack"] = [by_name[name] for name, _ in stack_lines]
    by_name["_argv"] = dict(stack_lines)
    return by_name


def test_reference_command_line_is_accepted(verdicts):
    assert verdicts["reference"] == {"name": "reference", "ok": True, "error": ""}


def test_two_api_keys_of_a_rotation_parse(verdicts):
    assert verdicts["rotation"] == {"name": "rotation", "ok": True, "error": ""}


def test_misspelled_flag_is_rejected(verdicts):
    assert not verdicts["misspelled"]["ok"]
    assert "unrecognized arguments: --max-model-lenght" in verdicts["misspelled"]["error"]


def test_bad_value_and_cross_flag_errors_are_rejected(verdicts):
    assert "--gpu-memory-utilization" in verdicts["bad-value"]["error"]
    assert "--tool-call-parser" in verdicts["cross-flag"]["error"]


def test_every_stack_command_line_is_accepted(verdicts):
    stack = verdicts["_stack"]
    names = [v["name"] for v in stack]
    # dev, prod (two models) and the multi-node leader: an empty list means the collection broke.
    assert any(n.startswith("dev:") for n in names) and any(n.startswith("prod:") for n in names), names
    assert any(n.startswith("prod-multi-node:LeaderWorkerSet/") for n in names), names
    # The LoRA flags derived from the fixture adapters go through vLLM's parser too.
    assert any(
        "--lora-modules" in argv for name, argv in verdicts["_argv"].items() if name.startswith("prod-adapters:")
    ), names
    rejected = [f"{v['name']}: {v['error']}" for v in stack if not v["ok"]]
    assert not rejected, "vLLM rejects these generated command lines:\n" + "\n".join(rejected)
