"""Issue 15, the sizing CLI: each class of hostile input the issue lists, as a named regression test.

Before: 34 tracebacks, hangs on 10^7 layers or a tensor-parallel size of 10^12, and "fits: yes" for
negative KV heads, negative batched tokens, negative quantization bits, `true` as a layer count or an
unknown --quantization. Now every one is exit 2 with one line naming the flag or the config key.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from planner import sizing_cli
from tests.support import paths

ROOT = paths.ROOT
LLAMA_8B = json.loads((ROOT / "tests/fixtures/model_configs/llama-3.1-8b/config.json").read_text())


def run(capsys, config, *flags, raw: bytes | None = None, tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_bytes(raw if raw is not None else json.dumps(config).encode())
    started = time.monotonic()
    code = sizing_cli.main(["--model-config", str(path), "--gpu", "H100-80GB", *flags])
    out, err = capsys.readouterr()
    return code, out, err, time.monotonic() - started


def refused(capsys, tmp_path, config, *flags, raw=None, says=""):
    code, out, err, seconds = run(capsys, config, *flags, raw=raw, tmp_path=tmp_path)
    assert code == 2, out + err
    assert "fits" not in out and "yes" not in out
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err
    assert seconds < 30  # a bound for a hang (10^7 layers used to loop for minutes), not a speed test
    return lines[0]


@pytest.mark.parametrize(
    "key, value",
    [
        ("num_hidden_layers", "32"),
        ("hidden_size", "big"),
        ("num_attention_heads", [32]),
        ("vocab_size", {"n": 1}),
        ("intermediate_size", 3.5),
        ("num_key_value_heads", "8"),
    ],
)
def test_strings_where_numbers_belong_are_refused(capsys, tmp_path, key, value):
    refused(capsys, tmp_path, {**LLAMA_8B, key: value}, says=key)


@pytest.mark.parametrize(
    "key, value",
    [("num_key_value_heads", -8), ("num_hidden_layers", True), ("num_attention_heads", -32), ("head_dim", -128)],
)
def test_negative_heads_and_true_as_a_layer_count_are_refused_not_sized(capsys, tmp_path, key, value):
    refused(capsys, tmp_path, {**LLAMA_8B, key: value}, says=key)


def test_negative_quantization_bits_are_refused(capsys, tmp_path):
    config = {**LLAMA_8B, "quantization_config": {"quant_method": "gptq", "bits": -4}}
    refused(capsys, tmp_path, config, says="bits")


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--block-size", "0"], "--block-size"),
        (["--max-num-batched-tokens", "-1"], "--max-num-batched-tokens"),
        (["--max-num-seqs", "-5"], "--max-num-seqs"),
        (["--quantization", "bogus"], "--quantization"),
        (["--pipeline-parallel-size", "33"], "32 decoder layers"),
        (["--tensor-parallel-size", "1000000000000"], "tensor"),
        (["--weights-gib", "nan"], "--weights-gib"),
        (["--weights-gib", "inf"], "--weights-gib"),
        (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
        (["--vllm-version", "0.9\n"], "--vllm-version"),
    ],
)
def test_impossible_flags_are_refused(capsys, tmp_path, flags, says):
    refused(capsys, tmp_path, LLAMA_8B, *flags, says=says)


def test_nan_and_infinite_gpu_memory_is_refused(capsys, tmp_path):
    for value in ("nan", "inf", "-inf", "0"):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(LLAMA_8B))
        assert sizing_cli.main(["--model-config", str(path), "--gpu-memory-gib", value]) == 2
        assert "--gpu-memory-gib" in capsys.readouterr().err


def test_ten_million_layers_is_refused_at_once_not_looped_over(capsys, tmp_path):
    refused(capsys, tmp_path, {**LLAMA_8B, "num_hidden_layers": 10**7}, says="num_hidden_layers")


@pytest.mark.parametrize(
    "raw, says",
    [
        (b"\x89PNG\r\n\x1a\n\x00\xff", "not UTF-8"),
        (b"[" * 50_000 + b"]" * 50_000, "nested deeper"),
        (b'{"num_hidden_layers": NaN}', "NaN"),
        (b'{"num_hidden_layers": ' + b"9" * 5000 + b"}", "not usable JSON"),
        (b"[1, 2]", "JSON object"),
    ],
)
def test_binary_nested_or_nan_config_json_is_refused(capsys, tmp_path, raw, says):
    refused(capsys, tmp_path, None, raw=raw, says=says)


def test_dev_zero_and_a_fifo_as_config_are_refused_without_reading(capsys, tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.json")
    for source, says in (("/dev/zero", "character device"), (str(tmp_path / "pipe.json"), "FIFO")):
        assert sizing_cli.main(["--model-config", source, "--gpu", "L4"]) == 2
        assert says in capsys.readouterr().err


def test_quantization_the_checkpoint_cannot_use_is_refused(capsys, tmp_path):
    refused(capsys, tmp_path, LLAMA_8B, "--quantization", "awq", says="Cannot find the config file for awq")


def test_does_not_fit_is_exit_1_not_2(capsys, tmp_path):
    code, out, err, _ = run(capsys, LLAMA_8B, "--gpu-memory-utilization", "0.1", tmp_path=tmp_path)
    assert code == 1 and "Will it fit? NO" in out and err.startswith("error: does not fit: ")


def test_a_torch_dtype_with_a_line_break_is_refused_in_one_line(capsys, tmp_path):
    # Found by `make fuzz` (seed 492264081): the dtype check quoted the checkpoint's torch_dtype as it
    # was, so a newline in it split the one error line in two.
    config = {**LLAMA_8B, "torch_dtype": "us-central1\n", "quantization_config": {"quant_method": "mxfp4"}}
    refused(capsys, tmp_path, config, "--dtype", "float16", says="torch_dtype")


# --- issue 29: --from-log with a file that is not a usable vLLM V1 startup log ---------------------

LLAMA_8B_LOG_LINES = [
    # The first lines of a real start-up (llm-d-planner v0.19.0 sweep, Llama-3.1-8B on H100; quoted in
    # tests/fixtures/vllm_logs/cases.yaml), cut before vLLM reports its KV cache.
    (
        "INFO 04-22 00:23:30 [entrypoints/utils.py:233] non-default args: {'model_tag': "
        "'meta-llama/Llama-3.1-8B-Instruct', 'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, "
        "'gpu_memory_utilization': 0.95}"
    ),
    "INFO 04-22 00:24:10 [v1/worker/gpu_model_runner.py:4820] Model loading took 14.99 GiB memory and 30.1 seconds",
]


def from_log(capsys, tmp_path, content: bytes | None, *, path=None):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B))
    if path is None:
        path = tmp_path / "startup.log"
        path.write_bytes(content or b"")
    started = time.monotonic()
    code = sizing_cli.main(["--model-config", str(config), "--gpu", "H100-80GB", "--from-log", str(path)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: --from-log: ") and "Traceback" not in err, err
    assert out == "" and time.monotonic() - started < 30
    return lines[0]


@pytest.mark.parametrize(
    "content, says",
    [
        (b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 100, "not UTF-8"),
        (b"INFO Model loading took 3 GiB\x00\x00\x00", "NUL bytes"),
        (b"", "not a vLLM startup log"),
        (b"[2026-08-18 10:00:00] KV Cache is allocated. #tokens: 430913, K size: 13.15 GB\n", "not a vLLM startup log"),
        (b'{"hidden_size": 4096, "num_hidden_layers": 32}', "not a vLLM startup log"),
        ("\n".join(LLAMA_8B_LOG_LINES).encode(), "ends before vLLM reported its KV cache"),
        (
            (
                b"INFO 07-14 [llm_engine.py:161] Initializing an LLM engine (v0.6.3) with config: model='x'\n"
                b"INFO 07-14 worker.py:267] Memory profiling takes 2.1 seconds\nINFO GPU KV cache size: 1,000 tokens\n"
            ),
            "V0 engine",
        ),
        (b"GPU KV cache size: " + b"9" * 400 + b" tokens\n" + b"A" * 200_000, "ends before vLLM reported its KV cache"),
    ],
    ids=["binary", "nul", "empty", "sglang", "json", "truncated", "v0-engine", "absurd-number-long-line"],
)
def test_a_file_that_is_not_a_usable_startup_log_is_one_line_exit_2(capsys, tmp_path, content, says):
    assert says in from_log(capsys, tmp_path, content)


def test_a_huge_log_is_refused_without_reading_it(capsys, tmp_path):
    huge = tmp_path / "huge.log"
    with huge.open("wb") as f:
        f.truncate(65 * 1024 * 1024)  # sparse: no disk use
    assert "more than the 67,108,864 this tool reads" in from_log(capsys, tmp_path, None, path=huge)


def test_dev_zero_a_fifo_and_a_directory_are_refused_as_logs(capsys, tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.log")
    for source in ("/dev/zero", tmp_path / "pipe.log", tmp_path):
        from_log(capsys, tmp_path, None, path=source)
