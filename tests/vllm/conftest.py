"""The real vLLM (CPU build) for the tests in this folder: the tiny model, its adapter and one
server per pytest process (tests/support/vllm_server.py says how it is started and guarded).

The tests run in the project venv; vLLM lives in its own venv (.venv-vllm, `make vllm-venv`) and is
driven as subprocesses. They skip only when that venv is missing AND LLM_SERVING_REQUIRE_VLLM is
unset; CI sets the variable, so a missing vLLM fails there instead of passing silently (and the
root tests/conftest.py fails the session on any other skip in this folder). Under pytest-xdist the
whole folder runs in one worker (tests/support/parallel.py), so one server serves it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from tests.conftest import REQUIRE_ENV, vllm_required
from tests.support.vllm_server import FIGURES, TOOLS, program_lora_args, serve, vllm_python_path


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
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
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
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if proc.returncode != 0:
        pytest.fail(f"building the tiny adapter failed:\n{proc.stderr[-3000:]}", pytrace=False)
    return out


@pytest.fixture(scope="session")
def vllm_server(vllm_python, tiny_model, tiny_adapter, vllm_workdir):
    lora = program_lora_args(tiny_model, tiny_adapter)
    with serve(vllm_python, tiny_model, vllm_workdir, lora) as server:
        server.lora_args = tuple(lora)
        FIGURES.append(
            f"vLLM server (two API keys, LoRA) ready, first completion answered, in {server.start_seconds:.1f} s"
        )
        yield server
