"""The `vllm serve` argv, probe and resource numbers follow the plan (pure functions, no Pulumi)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from common import contract
from components.serving import engine_args as vllm_args
from components.serving import probes
from components.serving import resources as server_resources
from planner import plan as plan_module
from tests.support import paths
from tests.support.model_plans import LLAMA_8B, LLAMA_70B, LLAMA_70B_TWO_NODES, machine, make_plan, make_plans


def flag(argv: list, name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_argv_carries_the_plan_numbers():
    p = make_plan(LLAMA_8B)
    argv = vllm_args.serve_args(p)
    assert argv[0] == p.model_path == f"{contract.MODEL_MOUNT_PATH}/meta-llama/Llama-3.1-8B-Instruct/{p.revision}"
    assert flag(argv, "--served-model-name") == p.served_name
    assert flag(argv, "--max-model-len") == "8192"
    assert flag(argv, "--gpu-memory-utilization") == "0.9"
    assert flag(argv, "--tensor-parallel-size") == str(p.tensor_parallel_size) == "1"
    assert flag(argv, "--port") == str(contract.SERVER_PORT)
    assert flag(argv, "--host") == "0.0.0.0"
    assert "--enable-prefix-caching" in argv
    for absent in (
        "--pipeline-parallel-size",
        "--kv-cache-dtype",
        "--quantization",
        "--dtype",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--chat-template",
        "--load-format",
        "--api-key",
    ):
        assert absent not in argv
    assert vllm_args.command_line(p)[:2] == ["vllm", "serve"]


def test_changing_max_model_len_changes_flags_tp_and_drain():
    # One full-length request is enough here, so TP follows what fits (the default target is 4).
    short = make_plan({**LLAMA_8B, "pool": "l4x4", "maxModelLen": 8192, "targetConcurrentRequests": 1})
    long = make_plan({**LLAMA_8B, "pool": "l4x4", "maxModelLen": 131072, "targetConcurrentRequests": 1})
    a, b = vllm_args.serve_args(short), vllm_args.serve_args(long)
    assert flag(a, "--max-model-len") == "8192" and flag(b, "--max-model-len") == "131072"
    # 128k tokens of KV cache do not fit next to the weights on one L4: sizing splits the model.
    assert flag(a, "--tensor-parallel-size") == "1"
    assert flag(b, "--tensor-parallel-size") == str(long.tensor_parallel_size) == "2"
    assert int(flag(a, "--shutdown-timeout")) < int(flag(b, "--shutdown-timeout"))


def test_changing_the_gpu_changes_tensor_parallelism():
    on_l4 = make_plan({**LLAMA_8B, "pool": "l4x4", "maxModelLen": 131072, "targetConcurrentRequests": 1})
    on_h100 = make_plan({**LLAMA_8B, "pool": "h100", "maxModelLen": 131072, "targetConcurrentRequests": 1})
    assert flag(vllm_args.serve_args(on_l4), "--tensor-parallel-size") == "2"
    assert flag(vllm_args.serve_args(on_h100), "--tensor-parallel-size") == "1"
    assert server_resources.pod_resources(on_l4, machine(on_l4)).gpus == 2
    assert server_resources.pod_resources(on_h100, machine(on_h100)).gpus == 1


def test_slower_storage_raises_the_startup_budget():
    fast = make_plan(LLAMA_70B, model_store={"readMBps": 2000})
    slow = make_plan(LLAMA_70B, model_store={"readMBps": 100})
    for p in (fast, slow):
        pp = probes.probe_plan(p)
        assert pp.startup_budget_seconds >= p.load_seconds * 1.5
        assert pp.startup_budget_seconds >= p.startup_budget_seconds
    assert probes.probe_plan(slow).startup_failure_threshold > probes.probe_plan(fast).startup_failure_threshold


def test_optional_flags_appear_only_when_configured():
    p = make_plan(
        {
            **LLAMA_8B,
            "pool": "h100",
            "kvCacheDtype": "fp8",
            "quantization": "fp8",
            "dtype": "bfloat16",
            "maxNumSeqs": 64,
            "maxNumBatchedTokens": 4096,
            "enablePrefixCaching": False,
        }
    )
    argv = vllm_args.serve_args(p)
    assert flag(argv, "--kv-cache-dtype") == "fp8"
    assert flag(argv, "--quantization") == "fp8"
    assert flag(argv, "--dtype") == "bfloat16"
    assert flag(argv, "--max-num-seqs") == "64"
    assert flag(argv, "--max-num-batched-tokens") == "4096"
    assert "--no-enable-prefix-caching" in argv and "--enable-prefix-caching" not in argv


def test_pipeline_parallel_across_nodes_uses_ray():
    p = make_plan(LLAMA_70B_TWO_NODES)
    argv = vllm_args.serve_args(p)
    assert p.nodes_per_replica == 2
    assert flag(argv, "--pipeline-parallel-size") == "2"
    assert flag(argv, "--tensor-parallel-size") == "8"
    assert flag(argv, "--distributed-executor-backend") == "ray"


def test_bucket_loading_streams_the_uri():
    p = make_plan(LLAMA_8B)
    argv = vllm_args.serve_args(p, weights_uri="s3://models-bucket/models/meta-llama/x/rev")
    assert argv[0] == "s3://models-bucket/models/meta-llama/x/rev"
    assert flag(argv, "--load-format") == "runai_streamer"


def test_chat_template_only_when_the_model_ships_none():
    shipped = make_plan({**LLAMA_8B, "chatTemplate": "{{ messages }}"}, has_chat_template=True)
    missing = make_plan({**LLAMA_8B, "chatTemplate": "{{ messages }}"}, has_chat_template=False)
    neither = make_plan(LLAMA_8B, has_chat_template=False)
    assert "--chat-template" not in vllm_args.serve_args(shipped)
    assert flag(vllm_args.serve_args(missing), "--chat-template") == vllm_args.CHAT_TEMPLATE_PATH
    assert "--chat-template" not in vllm_args.serve_args(neither)
    assert any("ships no chat template" in w and "chatTemplate" in w for w in vllm_args.plan_warnings(neither))
    assert any("ignored" in w for w in vllm_args.plan_warnings(shipped))
    assert vllm_args.plan_warnings(missing) == []


def test_probe_numbers():
    p = make_plan(LLAMA_70B)
    pp = probes.probe_plan(p)
    startup = pp.startup_probe()
    assert "initialDelaySeconds" not in startup
    assert startup["httpGet"]["path"] == "/health"
    assert startup["failureThreshold"] * startup["periodSeconds"] >= p.startup_budget_seconds >= p.load_seconds
    live = pp.liveness_probe()
    assert live["periodSeconds"] * live["failureThreshold"] >= 120 and live["timeoutSeconds"] >= 10
    # /health checks the engine (and is outside vLLM's key guard); /v1/models would not.
    assert pp.readiness_probe()["httpGet"]["path"] == "/health"
    assert pp.termination_grace_period_seconds == probes.PRESTOP_SLEEP_SECONDS + pp.drain_seconds + probes.EXIT_SECONDS
    assert pp.drain_seconds == int(flag(vllm_args.serve_args(p), "--shutdown-timeout"))


def test_memory_covers_weight_staging_and_fits_the_node():
    p = make_plan(LLAMA_70B)
    r = server_resources.pod_resources(p, machine(p))
    weights_gib = p.weights_bytes / 1024**3
    assert r.memory_limit_gib >= weights_gib + r.shm_gib
    node = machine(p)
    assert r.memory_limit_gib <= node.memory_gib * r.gpus / node.gpus
    assert r.shm_gib >= 2 * r.gpus or r.shm_gib == server_resources.SHM_MAX_GIB
    # The L4 single-GPU node has 16 GiB: the limit is capped there and the cap is reported.
    small = make_plan(LLAMA_8B)
    rs = server_resources.pod_resources(small, machine(small))
    assert rs.capped_by_node and rs.memory_limit_gib <= 16 and rs.memory_request_gib <= rs.memory_limit_gib
    roomy = make_plan({**LLAMA_8B, "pool": "l4x4"})
    assert not server_resources.pod_resources(roomy, machine(roomy)).capped_by_node


def test_rollout_surges_only_when_the_pool_has_room():
    # 4 GPUs per replica on a pool of 4 × 8 GPUs: 7 replicas leave room for a surge one, 8 do not.
    roomy = make_plan({**LLAMA_70B, "replicas": 7})
    full = make_plan({**LLAMA_70B, "replicas": 8})
    assert server_resources.update_strategy(roomy) == "RollingUpdate"
    assert server_resources.update_strategy(full) == "Recreate"
    assert server_resources.update_strategy(full, configured="RollingUpdate") == "RollingUpdate"


def test_surge_room_is_decided_per_pool_across_models():
    # 4 GPUs per replica on a pool of 32 GPUs. a runs 3 replicas (12 GPUs); b and c scale to 4 and 5
    # (16 and 20 GPUs). a + b peak at 28 GPUs, so a surge replica (4 more) of either fits; a + c peak
    # at 32, so neither can surge, although each alone could.
    a = {**LLAMA_70B, "name": "a", "replicas": 3}
    b = {**LLAMA_70B, "name": "b", "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 4}}
    c = {**LLAMA_70B, "name": "c", "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 5}}
    for alone in (a, b, c):
        assert server_resources.update_strategy(make_plans([alone])[0]) == "RollingUpdate"
    together = make_plans([a, b])
    assert [p.gpus_per_replica * p.replica_bounds[1] for p in together] == [12, 16]
    assert [server_resources.update_strategy(p) for p in together] == ["RollingUpdate", "RollingUpdate"]
    crowded = make_plans([a, c])
    assert [server_resources.update_strategy(p) for p in crowded] == ["Recreate", "Recreate"]
    # A model on another pool does not take this pool's room.
    elsewhere = make_plans([a, {**c, "pool": "l4x4", "repo": "meta-llama/Llama-3.1-8B-Instruct", "maxModelLen": 8192}])
    assert server_resources.update_strategy(elsewhere[0]) == "RollingUpdate"


def test_multi_node_startup_budget_waits_for_worker_nodes():
    two_nodes = make_plan(LLAMA_70B_TWO_NODES)
    one_node = make_plan({**LLAMA_70B_TWO_NODES, "pipelineParallelSize": 1})
    assert two_nodes.nodes_per_replica == 2 and one_node.nodes_per_replica == 1
    assert two_nodes.worker_wait_seconds == plan_module.NODE_PROVISIONING_ALLOWANCE_SECONDS > 0
    assert one_node.worker_wait_seconds == 0
    assert two_nodes.startup_budget_seconds >= (
        two_nodes.load_seconds * plan_module.STARTUP_MARGIN + plan_module.NODE_PROVISIONING_ALLOWANCE_SECONDS
    )
    assert probes.probe_plan(two_nodes).startup_budget_seconds >= two_nodes.startup_budget_seconds


@pytest.fixture(scope="module")
def vllm_verdicts(tmp_path_factory):
    """The generated argv through vLLM 0.32's own parser (tools/vllm-cpu/check_serve_args.py)."""
    from tests.conftest import REQUIRE_ENV, vllm_required
    from tests.support.vllm_server import TOOLS, vllm_python_path

    python = vllm_python_path()
    if not python.exists():
        message = f"{python} not found; run `make vllm-venv` to check flags with vLLM's parser"
        if vllm_required():  # `make test` and CI: the check must run, so a missing vLLM is a failure
            pytest.fail(f"{REQUIRE_ENV} is set but {message}", pytrace=False)
        pytest.skip(message)
    template = tmp_path_factory.mktemp("tpl") / "chat-template.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    cases = {
        "8b": vllm_args.command_line(make_plan(LLAMA_8B)),
        "70b": vllm_args.command_line(make_plan(LLAMA_70B)),
        "two-nodes": vllm_args.command_line(make_plan(LLAMA_70B_TWO_NODES)),
        "bucket": vllm_args.command_line(make_plan(LLAMA_8B), weights_uri="s3://bucket/models/org/name/rev"),
        "everything": vllm_args.command_line(
            make_plan(
                {
                    **LLAMA_8B,
                    "pool": "h100",
                    "kvCacheDtype": "fp8",
                    "quantization": "fp8",
                    "dtype": "bfloat16",
                    "maxNumSeqs": 64,
                    "maxNumBatchedTokens": 4096,
                    "enablePrefixCaching": False,
                    "chatTemplate": "x",
                },
                has_chat_template=False,
            )
        ),
    }
    # The template is mounted from a ConfigMap in the pod; vLLM checks the file exists.
    cases = {k: [str(template) if a == vllm_args.CHAT_TEMPLATE_PATH else a for a in v] for k, v in cases.items()}
    proc = subprocess.run(
        [str(python), str(TOOLS / "check_serve_args.py")],
        input=json.dumps([{"name": k, "argv": v} for k, v in cases.items()]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {v["name"]: v for v in json.loads(proc.stdout)}


def test_vllm_accepts_every_generated_command_line(vllm_verdicts):
    rejected = {k: v["error"] for k, v in vllm_verdicts.items() if not v["ok"]}
    assert not rejected


# -- LLM_SERVING_REQUIRE_VLLM: a skipped real-vLLM check fails the session (tests/conftest.py) --------

_SKIPPING_TEST = """
import pytest

def test_needs_vllm():
    pytest.skip("pretend vLLM is missing")
"""


def _pytest_on_scratch_tree(tmp_path: pathlib.Path, test_file: str, require: str | None):
    """Run pytest in a subprocess on a scratch tree holding the real root conftest and one skipping
    test at `test_file` (a path under tests/)."""
    tests = tmp_path / "tests"
    target = tests / test_file
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(paths.TESTS / "conftest.py", tests / "conftest.py")
    target.write_text(_SKIPPING_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("LLM_SERVING_REQUIRE_VLLM", "PYTEST_ADDOPTS")}
    if require is not None:
        env["LLM_SERVING_REQUIRE_VLLM"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tests)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("test_file", ["vllm/test_real_thing.py", "components/serving/test_vllm_args.py"])
def test_a_guarded_skip_fails_the_session_when_vllm_is_required(tmp_path, test_file):
    proc = _pytest_on_scratch_tree(tmp_path, test_file, "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "LLM_SERVING_REQUIRE_VLLM is set: real-vLLM tests skipped" in proc.stdout
    assert f"tests/{test_file}::test_needs_vllm: Skipped: pretend vLLM is missing" in proc.stdout


@pytest.mark.parametrize(
    "test_file, require",
    [
        ("vllm/test_real_thing.py", None),  # a developer machine without vLLM: a skip is fine
        ("vllm/test_real_thing.py", "0"),
        ("test_something_else.py", "1"),  # skips outside the real-vLLM files are not guarded
    ],
)
def test_other_skips_leave_the_session_green(tmp_path, test_file, require):
    proc = _pytest_on_scratch_tree(tmp_path, test_file, require)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "real-vLLM tests skipped" not in proc.stdout
