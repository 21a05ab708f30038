"""The shared readers of untrusted input: common/untrusted.py and safe_yaml/."""

from __future__ import annotations

import os

import pytest

from common.untrusted import (
    InputLimitError,
    NotJsonError,
    excerpt,
    loads_json,
    nesting_depth,
    read_regular_file,
    secret_kind,
)
from safe_yaml import YamlInputError, load_all, load_one


@pytest.mark.parametrize(
    "text, kind",
    [
        ("hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01", "Hugging Face"),
        ("Bearer sk-proj-AbCdEfGhIjKlMnOpQrStUv", "OpenAI"),
        ("ghp_" + "a1B2" * 9, "GitHub"),
        ("AKIAABCDEFGHIJKLMNOP", "AWS"),
        ("-----BEGIN RSA PRIVATE KEY-----", "private key"),
    ],
)
def test_tokens_are_recognised(text, kind):
    assert kind in secret_kind(text)


@pytest.mark.parametrize(
    "text",
    [
        "sk-llama-3-1-8b-instruct-finetune-v2",
        "hf_internal_testing_models_and_more",
        "0e9e39f249a16976918f6564b8830bc894c89659",
        "meta-llama/Llama-3.1-8B-Instruct",
        "vllm/vllm-openai:v0.32.0",
        "task-skeleton-abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_ordinary_values_are_not_taken_for_tokens(text):
    assert secret_kind(text) is None


def test_excerpt_is_short_escaped_and_never_a_secret():
    assert excerpt("a\nb\x1b") == "'a\\nb\\x1b'"
    assert excerpt("x" * 1000) == "'" + "x" * 40 + "...' (1,000 characters)"
    assert excerpt("prefix hf_AbCdEfGhIjKlMnOpQrStUvWxYz01") == "<redacted: looks like a Hugging Face token (hf_...)>"
    assert excerpt(b"\x00\xff") == "<2 bytes of binary data>"


def test_json_limits():
    with pytest.raises(InputLimitError, match="nested deeper than 100"):
        loads_json("[" * 101 + "]" * 101, "x", max_bytes=10_000)
    assert loads_json("[" * 100 + "]" * 100, "x", max_bytes=10_000)
    with pytest.raises(NotJsonError, match="NaN"):
        loads_json('{"a": NaN}', "x", max_bytes=100)
    with pytest.raises(InputLimitError, match="more than the 10"):
        loads_json('"' + "a" * 20 + '"', "x", max_bytes=10)
    with pytest.raises(InputLimitError, match="not usable JSON"):
        loads_json("9" * 5000, "x", max_bytes=10_000)
    a: list = []
    a.append(a)
    assert nesting_depth(a) > 100


def test_only_regular_files_are_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, says in (
        (tmp_path / "fifo", "FIFO"),
        ("/dev/zero", "character device"),
        (tmp_path, "folder"),
        (tmp_path / "missing", "no such file"),
    ):
        with pytest.raises(InputLimitError, match=says):
            read_regular_file(path, 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(InputLimitError, match="more than the 100"):
        read_regular_file(tmp_path / "big", 100)


def test_yaml_limits():
    with pytest.raises(YamlInputError, match="recursive alias"):
        load_one("a: &a [*a]\n", "f.yaml")
    with pytest.raises(YamlInputError, match="expand to more than 50"):
        load_one("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: [*a, *a, *a, *a, *a, *a]\n", "f.yaml", max_alias_values=50)
    assert load_one("a: &a [1, 2]\nb: *a\n", "f.yaml") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(YamlInputError, match=r"f.yaml:2:1: not valid YAML: .*defined twice"):
        load_one("a: 1\na: 2\n", "f.yaml", unique_keys=True)
    assert load_one("a: 1\na: 2\n", "f.yaml") == {"a": 2}  # manifests: as PyYAML always read them
    with pytest.raises(YamlInputError, match="nested deeper than 3"):
        load_all("a: {b: {c: {d: 1}}}\n", "f.yaml", max_depth=3)
    with pytest.raises(YamlInputError, match="not valid YAML"):
        load_one("a: !!python/object:os.system {}\n", "f.yaml")
