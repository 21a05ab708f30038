"""The verification Job in both committed stacks (mock runtime), and its shipped code on a fake server.

What must hold: one Job per stack, after every vLLM server and the entrance; it checks each model
against the plan's numbers (kvCacheTokens, maxModelLen, the model's and adapters' names); the
ConfigMap carries this checkout's endpoint tools byte for byte, and that copy alone runs; the stack
output says where the report is; the `pulumi up` wait grows by the Job's own.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from components.verification import job as verification
from components.verification.tools import ENTRY_MODULE, ROOT, TOOL_FILES, config_map_key, volume_items
from offline_plan.waits import longest_chain
from tests.support.committed import committed_stack
from tests.support.fuzz.fault_server import KV_TOKENS, MODEL
from tests.support.stack_variants import ADAPTERS, KSERVE, variant
from tests.support.verification_runs import fake_target, shipped_run, targets, the_config_map, the_job


@pytest.fixture(scope="module")
def evaluations():
    return {"dev": committed_stack("dev"), "prod": committed_stack("prod")}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_stack_has_one_job_that_waits_for_every_server_and_the_entrance(stack, evaluations):
    ev = evaluations[stack]
    job = the_job(ev)
    by_urn = {r.urn: r for r in ev.resources}
    waited = {by_urn[u].type for u in job.dependencies if u in by_urn}
    deployments = {
        r.urn
        for r in ev.of_type("kubernetes:apps/v1:Deployment")
        if r.inputs["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "vllm"
    }
    assert deployments and deployments <= set(job.dependencies)
    # The entrance's objects: its Gateway and the pickers' Helm releases.
    assert "kubernetes:gateway.networking.k8s.io/v1:Gateway" in waited
    assert "kubernetes:helm.sh/v3:Release" in waited
    assert the_config_map(ev, job).urn in job.dependencies


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_job_checks_each_model_against_the_plans_numbers(stack, evaluations):
    ev = evaluations[stack]
    sizing = {row["model"]: row for row in ev.outputs["sizing"]}
    doc = targets(ev)
    assert doc["kvTolerancePercent"] == verification.KV_TOLERANCE_PERCENT
    assert [t["model"] for t in doc["targets"]] == list(sizing)
    for target in doc["targets"]:
        row = sizing[target["model"]]
        assert target["expectKvTokens"] == row["kvCacheTokens"] > 0
        assert target["maxModelLen"] == row["maxModelLen"]
        assert target["names"] == [target["model"]]
        assert target["baseUrl"].startswith("http://") and target["baseUrl"].endswith(".svc.cluster.local:8000")
        assert target["calibration"]["revision"] == row["revision"] and target["calibration"]["gpu"] == row["gpu"]
    output = ev.outputs["verification"]
    assert output["expected"] == {
        m: {
            "kvCacheTokens": r["kvCacheTokens"],
            "maxModelLen": r["maxModelLen"],
            "names": [m],
            "golden": {"mode": "report", "record": None},
        }
        for m, r in sizing.items()
    }
    # No committed stack has a golden record yet: the Job records the answers
    # (tests/components/verification/test_golden_job.py).
    assert all(t["golden"]["mode"] == "report" and t["golden"]["record"] is None for t in doc["targets"])
    assert output["logs"] == f"kubectl -n llm-serving logs job/{verification.JOB_NAME}"
    # Its digest is settled with every other image by the resolver (common/images.py).
    assert output["unresolved"][0]["resolveWith"].startswith("python -m tools.resolve_image_digests")


def test_adapters_are_checked_on_their_base_models_server():
    doc = targets(variant(ADAPTERS))
    names = {t["model"]: t["names"] for t in doc["targets"]}
    assert len(names["llama-3-1-8b-instruct"]) == 3 and names["llama-3-3-70b-instruct"] == ["llama-3-3-70b-instruct"]


def test_kserve_models_are_left_to_the_smoke_command():
    # KServe serves the OpenAI API under /openai with its own health route; the Job checks vLLM only.
    assert [t["model"] for t in targets(variant(KSERVE))["targets"]] == ["llama-vllm"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_api_key_comes_from_each_models_secret(stack, evaluations):
    ev = evaluations[stack]
    pod = the_job(ev).inputs["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    secrets = {r.inputs["metadata"]["name"] for r in ev.of_type("kubernetes:core/v1:Secret")}
    for i, target in enumerate(targets(ev)["targets"]):
        ref = env[target["apiKeyEnv"]]["valueFrom"]["secretKeyRef"]
        assert target["apiKeyEnv"] == f"{verification.API_KEY_ENV_PREFIX}{i}"
        assert ref == {"name": f"{target['model']}-api-key", "key": "api-key"} and ref["name"] in secrets
    assert all("value" not in e or "key" not in e["name"].lower() for e in env.values())


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_job_runs_once_on_a_cpu_node_within_a_deadline_pulumi_outwaits(stack, evaluations):
    ev = evaluations[stack]
    job = the_job(ev)
    spec = job.inputs["spec"]
    deadline = spec["activeDeadlineSeconds"]
    assert spec["backoffLimit"] == 0 and spec["template"]["spec"]["restartPolicy"] == "Never"
    assert deadline == ev.outputs["verification"]["deadlineSeconds"]
    assert job.custom_timeouts["create"] == f"{int(deadline) + verification.PULUMI_WAIT_MARGIN_SECONDS}s"
    assert spec["template"]["spec"]["nodeSelector"] == {"llm-serving.io/pool": "system"}
    assert "nvidia.com/gpu" not in json.dumps(spec["template"]["spec"]["containers"][0]["resources"])
    # The last wait of `pulumi up`: after the servers, nothing waits for it.
    _, chain = longest_chain(ev.resources)
    assert chain[-1].resource.urn == job.urn


def test_budgets_grow_with_the_context_and_the_names():
    def plan(golden):
        model = SimpleNamespace(verification=SimpleNamespace(golden=golden, sweep=SimpleNamespace(enabled=False)))
        return SimpleNamespace(max_model_len=32768, lora=None, served_name="m", model=model)

    assert verification.request_timeout_seconds(plan("report")) == 60 + 33
    # The golden prompts add one request each unless they are off.
    assert verification.total_timeout_seconds(plan("report")) == 93 * (verification.HEAVY_REQUESTS + 1) + 120 + (
        verification.GOLDEN_REQUESTS * 60
    )
    assert verification.total_timeout_seconds(plan("off")) == 93 * (verification.HEAVY_REQUESTS + 1) + 120


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_config_map_carries_this_checkouts_tools_byte_for_byte(stack, evaluations):
    ev = evaluations[stack]
    job = the_job(ev)
    data = the_config_map(ev, job).inputs["data"]
    for path in TOOL_FILES:
        assert data[config_map_key(path)] == (ROOT / path).read_text(encoding="utf-8"), path
    assert job.inputs["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"] == volume_items()
    command = job.inputs["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python3", "-m", ENTRY_MODULE]


def test_a_changed_plan_makes_a_new_config_map_and_so_a_new_job():
    plan = {"m": {"kvCacheTokens": 1000}}
    assert verification.content_hash(plan, [None]) != verification.content_hash({"m": {"kvCacheTokens": 999}}, [None])
    assert verification.content_hash(plan, [None]) == verification.content_hash(dict(plan), [None])


def test_the_shipped_copy_alone_verifies_an_honest_server(tmp_path, evaluations, server):
    server.set({})
    proc = shipped_run(tmp_path, evaluations, {"targets": [fake_target(server)]}, {"LLM_SERVING_API_KEY_0": "k"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1].removeprefix("verify-summary: "))
    assert summary == {
        "passed": True,
        "exitStatus": 0,
        "models": {
            MODEL: {
                "status": "passed",
                "failed": [],
                "predictedKvTokens": KV_TOKENS,
                "actualKvTokens": KV_TOKENS,
                "kvErrorPercent": 0.0,
            }
        },
    }
    calibration = next(line for line in proc.stdout.splitlines() if line.startswith("calibration: "))
    assert json.loads(calibration.removeprefix("calibration: "))["gpu"] == "L4"


def test_the_shipped_copy_fails_on_a_lying_server_and_a_short_cache(tmp_path, evaluations, server):
    server.set({"chat": "usage_list"})
    env = {"LLM_SERVING_API_KEY_0": "k"}
    proc = shipped_run(tmp_path, evaluations, {"targets": [fake_target(server)]}, env)
    assert proc.returncode == 1 and "FAIL  chat" in proc.stdout and "Traceback" not in proc.stderr
    server.set({})
    proc = shipped_run(tmp_path, evaluations, {"targets": [fake_target(server, KV_TOKENS * 2)]}, env)
    assert proc.returncode == 3 and '"status": "kv-shortfall"' in proc.stdout


@pytest.mark.parametrize(
    "doc, says",
    [
        ({}, "must be an object with a `targets` list"),
        ({"targets": []}, "1 to 256 are read"),
        ({"targets": [{"model": "m"}]}, "targets[0].baseUrl is missing"),
        (
            {
                "targets": [
                    {"model": "m", "baseUrl": "http://x", "requestTimeoutSeconds": True, "totalTimeoutSeconds": 1}
                ]
            },
            "requestTimeoutSeconds must be a number",
        ),
        (
            {
                "targets": [
                    {
                        "model": "m",
                        "baseUrl": "http://x",
                        "requestTimeoutSeconds": 1,
                        "totalTimeoutSeconds": 1,
                        "expectKvTokens": 0,
                    }
                ]
            },
            "expectKvTokens must be from 1",
        ),
    ],
)
def test_an_unusable_targets_file_is_a_usage_error(tmp_path, evaluations, doc, says):
    proc = shipped_run(tmp_path, evaluations, doc)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
