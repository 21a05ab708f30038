"""Issue 15, the policy checker: each class of hostile input the issue lists, as a named regression test.

Before: recursion errors on deep YAML and deep --config JSON, an overflow on a 400-digit
failureThreshold and non-UTF-8 input, all as exit 1 instead of 2; an alias bomb through nested
`List` kinds grew without bound; a FIFO in a scanned folder blocked forever; a NaN threshold in the
pack config silently turned a rule off; large files went through the pure-Python YAML parser.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from policies import check
from safe_yaml import bounded
from tests.support import paths
from tests.support.fuzz.harness import Worker

ROOT = paths.ROOT
GOOD = ROOT / "tests/fixtures/policy/good/vllm-deployment.yaml"
BAD_PROBE = ROOT / "tests/fixtures/policy/bad/startup-probe-budget.yaml"


def run(*args, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "policies.check", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def unusable(proc: subprocess.CompletedProcess, says: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("check: error: ") and says in proc.stderr, proc.stderr


def test_deeply_nested_yaml_is_exit_2(tmp_path):
    (tmp_path / "deep.yaml").write_text("kind: Pod\nspec:\n" + "".join("  " * i + "- \n" for i in range(1, 200)))
    unusable(run(tmp_path / "deep.yaml"), "nested deeper than 100 levels")
    (tmp_path / "flow.yaml").write_text("kind: Pod\nspec: " + "[" * 10_000 + "]" * 10_000 + "\n")
    unusable(run(tmp_path / "flow.yaml"), "flow.yaml:2:")


def test_deeply_nested_config_json_is_exit_2(tmp_path):
    (tmp_path / "c.json").write_text("[" * 100_000 + "]" * 100_000)
    unusable(run("--config", tmp_path / "c.json", GOOD), "nested deeper than 100 levels")


def test_a_400_digit_failure_threshold_is_exit_2(tmp_path):
    text = BAD_PROBE.read_text()
    (tmp_path / "big.yaml").write_text(
        re.sub(r"failureThreshold: \d+", "failureThreshold: " + "9" * 400, text, count=1)
    )
    assert "9" * 400 in (tmp_path / "big.yaml").read_text()
    unusable(run(tmp_path / "big.yaml"), "beyond the 64-bit integer range")


def test_a_400_digit_threshold_in_the_pack_config_is_exit_2(tmp_path):
    (tmp_path / "c.json").write_text('{"startup-probe-budget": {"minimumSeconds": ' + "9" * 400 + "}}")
    unusable(run("--config", tmp_path / "c.json", GOOD), "minimumSeconds")


def test_non_utf8_manifests_and_config_are_exit_2(tmp_path):
    (tmp_path / "latin.yaml").write_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n")
    unusable(run(tmp_path / "latin.yaml"), "not UTF-8 text (byte 0xe9")
    (tmp_path / "c.json").write_bytes(b'{"all": "advisory\xff"}')
    unusable(run("--config", tmp_path / "c.json", GOOD), "--config")


def test_an_alias_bomb_through_nested_list_kinds_is_refused_in_bounded_memory():
    text = "apiVersion: v1\nkind: List\nitems: &i0\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n" + "".join(
        f"x{i}: &i{i} [{{kind: List, items: *i{i - 1}}}, {{kind: List, items: *i{i - 1}}}, "
        f"{{kind: List, items: *i{i - 1}}}]\n"
        for i in range(1, 25)
    )
    worker = Worker("check")
    try:
        outcome = worker.run({"files": {"bomb.yaml": text}, "argv": ["{folder}"]}, 60)
    finally:
        worker.stop()
    assert outcome.clean and outcome.exit == 2, outcome.describe()
    assert "expand to more than" in outcome.stderr


def test_a_fifo_in_a_scanned_folder_does_not_block(tmp_path):
    (tmp_path / "good.yaml").write_text(GOOD.read_text())
    os.mkfifo(tmp_path / "pipe.yaml")
    proc = run(tmp_path, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "pipe.yaml: skipped, is a FIFO (named pipe), not a regular file" in proc.stderr
    unusable(run(tmp_path / "pipe.yaml", timeout=30), "FIFO")


def test_a_nan_threshold_is_refused_not_a_rule_turned_off(tmp_path):
    # With NaN every `window < minimum` is false: the rule would pass everything, silently.
    for value in ("NaN", "Infinity", "-Infinity"):
        (tmp_path / "c.json").write_text('{"startup-probe-budget": {"minimumSeconds": ' + value + "}}")
        unusable(run("--config", tmp_path / "c.json", BAD_PROBE), value)
    with pytest.raises(check.InputError, match="finite"):
        check.check_objects([], {"startup-probe-budget": {"minimumSeconds": float("nan")}})


def test_the_checker_reads_yaml_with_libyaml():
    # The pure-Python parser takes minutes on a 50 MB file; libyaml is installed with PyYAML.
    assert bounded.LIBYAML and issubclass(bounded._BaseLoader, __import__("yaml").CSafeLoader)


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(65 * 1024 * 1024)  # sparse: nothing to write, nothing the checker may read
    unusable(run(big), "more than the 67,108,864")
