"""The verification Job's code, as the ConfigMap ships it, against the real vLLM server.

The files are written where the Job mounts them (components/verification/tools.py volume_items) in
an empty folder, and run with `python -S` (no site-packages) from that folder alone: what passes
here is exactly what the Job runs, and it needs nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from components.verification.tools import ENTRY_MODULE, TOOL_FILES, config_map_key, tool_sources, volume_items
from tests.support.vllm_server import FIGURES, TOOL_KEY_ENV, planned_tokens


def _job_folder(tmp_path):
    sources = tool_sources()
    for item in volume_items():
        path = tmp_path / "tools" / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sources[item["key"]], encoding="utf-8")
    return tmp_path / "tools"


def _run(tmp_path, targets: dict, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    folder = _job_folder(tmp_path)
    (tmp_path / "targets.json").write_text(json.dumps(targets))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(folder),
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env_extra or {}),
    }
    return subprocess.run(
        [sys.executable, "-S", "-m", ENTRY_MODULE, "--targets", str(tmp_path / "targets.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _target(server, expect: int) -> dict:
    return {
        "model": server.model,
        "baseUrl": server.base_url,
        "names": [server.model, server.adapter],
        "apiKeyEnv": TOOL_KEY_ENV,
        "maxModelLen": server.max_model_len,
        "expectKvTokens": expect,
        "requestTimeoutSeconds": 60,
        "totalTimeoutSeconds": 300,
        "calibration": {"repo": "local/tiny-llama", "vllm": "0.32.0"},
    }


def test_the_shipped_files_verify_the_model_and_its_adapter(vllm_server, tiny_model, tmp_path):
    predicted = planned_tokens(tiny_model)
    proc = _run(tmp_path, {"targets": [_target(vllm_server, predicted)]}, {TOOL_KEY_ENV: vllm_server.api_key})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    checks = [line.split()[1] for line in lines if line[:4] in ("PASS", "FAIL")]
    assert checks == ["health", "models", "chat", "stream", "context", "metrics", "kv", "template", "names"], (
        proc.stdout
    )
    assert all(line.startswith("PASS") for line in lines if line[:4] in ("PASS", "FAIL"))
    calibration = json.loads(next(line for line in lines if line.startswith("calibration: "))[len("calibration: ") :])
    assert calibration["predictedKvTokens"] == predicted and calibration["repo"] == "local/tiny-llama"
    summary = json.loads(lines[-1][len("verify-summary: ") :])
    assert summary["passed"] is True and summary["models"][vllm_server.model]["status"] == "passed"
    FIGURES.append(
        f"verification Job code (python -S, ConfigMap files only): {lines[-2]}; "
        f"predicted {calibration['predictedKvTokens']:,}, actual {calibration['actualKvTokens']:,}"
    )


def test_a_plan_that_promised_too_much_fails_the_job_with_exit_3(vllm_server, tmp_path):
    proc = _run(tmp_path, {"targets": [_target(vllm_server, 10**7)]}, {TOOL_KEY_ENV: vllm_server.api_key})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1][len("verify-summary: ") :])
    assert summary["models"][vllm_server.model]["status"] == "kv-shortfall"
    assert summary["models"][vllm_server.model]["failed"] == ["kv"]


def test_a_missing_api_key_variable_is_one_failed_line(vllm_server, tmp_path):
    target = {**_target(vllm_server, 1000), "apiKeyEnv": "LLM_SERVING_API_KEY_0"}
    proc = _run(tmp_path, {"targets": [target]})
    assert proc.returncode == 1 and "FAIL  setup    environment variable LLM_SERVING_API_KEY_0" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_every_shipped_file_is_in_the_config_map():
    assert sorted(tool_sources()) == sorted(config_map_key(p) for p in TOOL_FILES)
