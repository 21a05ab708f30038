"""Golden greedy prompts against the real vLLM (CPU build): record, compare, tamper, change the key."""

from __future__ import annotations

import json
import subprocess

from endpoint_tools import golden
from tests.support.vllm_server import FIGURES, smoke

KEY = "revision=" + "0" * 40 + ",quantization=none,kvCacheDtype=auto"


def _smoke(server, *extra: str) -> subprocess.CompletedProcess:
    return smoke(server, "--model", server.model, *extra)


def _golden_line(proc: subprocess.CompletedProcess) -> str:
    return next(line for line in proc.stdout.splitlines() if line.split()[1:2] == ["golden"])


def _recorded(server, tmp_path):
    path = tmp_path / f"{server.model}.json"
    proc = _smoke(server, "--record-golden", str(path), "--golden-key", KEY)
    assert proc.returncode == 0, proc.stdout + proc.stderr + server.log_tail()
    return path, json.loads(path.read_text()), proc


def test_record_then_compare_is_identical_and_passes_even_when_exact(vllm_server, tmp_path):
    path, doc, proc = _recorded(vllm_server, tmp_path)
    line = _golden_line(proc)
    assert line.startswith(f"PASS  golden   recorded {len(golden.PROMPTS)} golden answers"), line
    # The engine comes from the server's GET /version; the rest from --golden-key.
    assert doc["key"]["engine"].startswith("vllm "), doc["key"]
    assert doc["key"]["revision"] == "0" * 40 and doc["model"] == vllm_server.model
    assert [o["prompt"] for o in doc["outputs"]] == [p for p, _ in golden.PROMPTS]
    with_ids = sum(o["tokenIds"] is not None for o in doc["outputs"])
    FIGURES.append(
        f"golden: {len(doc['outputs'])} answers recorded, {with_ids} with token ids (engine {doc['key']['engine']})"
    )
    key = KEY + f",engine={doc['key']['engine']}"
    proc = _smoke(vllm_server, "--golden", str(path), "--golden-exact", "--golden-key", key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _golden_line(proc) == (
        f"PASS  golden   {len(golden.PROMPTS)}/{len(golden.PROMPTS)} golden prompts "
        "identical to the record (key unchanged)"
    )


def test_a_tampered_answer_is_reported_and_fails_only_when_exact(vllm_server, tmp_path):
    path, doc, _ = _recorded(vllm_server, tmp_path)
    first = doc["outputs"][1]
    first["text"] = "TAMPERED " + first["text"]
    if first["tokenIds"]:
        first["tokenIds"][0] += 1
    path.write_text(json.dumps(doc))
    key = KEY + f",engine={doc['key']['engine']}"
    proc = _smoke(vllm_server, "--golden", str(path), "--golden-key", key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _golden_line(proc)
    unit = "token" if first["tokenIds"] else "char"
    assert line.startswith(
        f"PASS  golden   1 of {len(golden.PROMPTS)} golden prompts differ from the record "
        f"(key unchanged); {first['prompt']} at {unit} 0 ("
    ), line
    proc = _smoke(vllm_server, "--golden", str(path), "--golden-exact", "--golden-key", key)
    assert proc.returncode == golden_exit(), proc.stdout + proc.stderr
    assert _golden_line(proc).startswith("FAIL  golden   1 of ")
    assert "(exact agreement asked for)" in proc.stdout


def golden_exit() -> int:
    from endpoint_tools.smoke import EXIT_GOLDEN_DIFFERS

    return EXIT_GOLDEN_DIFFERS


def test_a_record_of_another_revision_names_the_changed_field(vllm_server, tmp_path):
    path, doc, _ = _recorded(vllm_server, tmp_path)
    doc["key"]["revision"] = "1" * 40
    path.write_text(json.dumps(doc))
    key = KEY + f",engine={doc['key']['engine']}"
    proc = _smoke(vllm_server, "--golden", str(path), "--golden-key", key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _golden_line(proc)
    assert f"identical to the record (key changed: revision '{'1' * 40}' -> '{'0' * 40}')" in line, line
