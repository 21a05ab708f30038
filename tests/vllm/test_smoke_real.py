"""The smoke command against a real vLLM server."""

from __future__ import annotations

from tests.support.vllm_server import smoke as _smoke


def test_every_smoke_check_passes(vllm_server):
    proc = _smoke(vllm_server, "--model", vllm_server.model)
    assert proc.returncode == 0, proc.stdout + proc.stderr + vllm_server.log_tail()
    lines = proc.stdout.splitlines()
    for check in ("health", "models", "chat", "stream", "context", "metrics"):
        assert any(line.startswith(f"PASS  {check}") for line in lines), proc.stdout
    # The boundary evidence names the server's real limit and the 4xx for one token over it.
    assert f"max-model-len {vllm_server.max_model_len}" in proc.stdout
    assert f"{vllm_server.max_model_len + 1} -> 400" in proc.stdout


def test_wrong_model_name_fails_the_models_check(vllm_server):
    proc = _smoke(vllm_server, "--model", "not-the-served-model")
    assert proc.returncode == 1
    assert "FAIL  models" in proc.stdout
    assert vllm_server.model in proc.stdout  # the evidence lists what is served


def test_explicit_max_model_len_is_checked_against_the_server(vllm_server):
    # Claiming a longer context than the server enforces must fail the context check.
    proc = _smoke(vllm_server, "--model", vllm_server.model, "--max-model-len", str(vllm_server.max_model_len * 2))
    assert proc.returncode == 1
    assert "FAIL  context" in proc.stdout


def test_the_base_model_and_its_adapter_answer_by_name_as_through_the_entrance(vllm_server):
    # The flags the program derived from the tiny adapter's adapter_config.json (rank 8).
    lora = list(vllm_server.lora_args)
    assert lora[:1] == ["--enable-lora"] and lora[lora.index("--max-lora-rank") + 1] == "8"
    names = f"{vllm_server.model},{vllm_server.adapter}"
    proc = _smoke(vllm_server, "--entrance", "--names", names)
    assert proc.returncode == 0, proc.stdout + proc.stderr + vllm_server.log_tail()
    assert f"PASS  names    2 names answered under their own name: {vllm_server.model} (" in proc.stdout
    assert f"{vllm_server.adapter} (" in proc.stdout
    # Only what the entrance routes ran.
    assert [line.split()[1] for line in proc.stdout.splitlines() if line[:4] in ("PASS", "FAIL")] == [
        "chat",
        "stream",
        "names",
    ]
    # vLLM lists the adapter under the base model, as the program's docs say.
    models = {m["id"]: m for m in vllm_server.client().get("/v1/models").json()["data"]}
    assert models[vllm_server.adapter]["parent"] == vllm_server.model


def test_a_name_nothing_serves_fails_the_names_check(vllm_server):
    proc = _smoke(vllm_server, "--entrance", "--names", f"{vllm_server.model},not-an-adapter")
    assert proc.returncode == 1
    assert "FAIL  names    1 of 2 names failed: not-an-adapter: HTTP 404" in proc.stdout
