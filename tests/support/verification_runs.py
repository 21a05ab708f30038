"""The verification Job as a stack creates it: its ConfigMap, its targets file, and its shipped code run alone against a
server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from components.verification import job as verification
from components.verification.tools import ENTRY_MODULE, volume_items
from tests.support.fuzz.fault_server import KV_TOKENS, MAX_MODEL_LEN, MODEL

JOB = "kubernetes:batch/v1:Job"


CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def the_job(ev):
    jobs = [r for r in ev.of_type(JOB) if r.inputs["metadata"]["name"] == verification.JOB_NAME]
    assert len(jobs) == 1, [r.name for r in ev.of_type(JOB)]
    return jobs[0]


def the_config_map(ev, job):
    name = job.inputs["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
    (cm,) = [r for r in ev.of_type(CONFIG_MAP) if r.inputs["metadata"]["name"] == name]
    return cm


def targets(ev) -> dict:
    return json.loads(the_config_map(ev, the_job(ev)).inputs["data"][verification.TARGETS_FILE])


def shipped_run(tmp_path, evaluations, doc: dict, env_extra: dict | None = None):
    """Write the dev ConfigMap's files where the Job mounts them and run them with `python -S`."""
    data = the_config_map(evaluations["dev"], the_job(evaluations["dev"])).inputs["data"]
    for item in volume_items():
        path = tmp_path / "tools" / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]], encoding="utf-8")
    (tmp_path / "targets.json").write_text(json.dumps(doc))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path / "tools"), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-S", "-B", "-m", ENTRY_MODULE, "--targets", str(tmp_path / "targets.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fake_target(server, expect: int = KV_TOKENS) -> dict:
    # No names: the fake server does not echo the model (tests/vllm checks names on the real one).
    return {
        "model": MODEL,
        "baseUrl": server.url,
        "names": [],
        "maxModelLen": MAX_MODEL_LEN,
        "expectKvTokens": expect,
        "apiKeyEnv": "LLM_SERVING_API_KEY_0",
        "requestTimeoutSeconds": 5,
        "totalTimeoutSeconds": 30,
        "calibration": {"repo": "x/y", "gpu": "L4"},
    }
