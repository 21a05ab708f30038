"""Golden prompts in the verification Job: models[].verification.golden, the committed records the
targets file ships, and the shipped runner recording, comparing and failing (exact) against the
fault server. The comparison itself: tests/endpoint_tools/test_golden.py; against the real vLLM:
tests/vllm/test_golden_real.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from common.engine import VLLM_IMAGE, VLLM_VERSION
from components.verification import job as verification
from components.verification.tools import ROOT
from endpoint_tools import golden, smoke
from offline_plan.mock_runtime import evaluate_stack
from tests.support.adapter_fixtures import offline_cache
from tests.support.committed import committed_stack
from tests.support.fuzz.fault_server import MODEL
from tests.support.stack_variants import DEV_MODELS
from tests.support.verification_runs import fake_target, shipped_run, targets

GOLDEN_KEY = {
    "revision": "a" * 40,
    "engine": f"vllm {VLLM_VERSION}",
    "quantization": "checkpoint",
    "kvCacheDtype": "auto",
}


def test_the_jobs_budget_counts_every_golden_prompt():
    assert len(golden.PROMPTS) == verification.GOLDEN_REQUESTS


def test_every_committed_record_is_usable():
    # The program checks only that a record is JSON (components never import endpoint_tools); this
    # checks every field of each committed one, so a broken record fails here, not in the cluster.
    for path in sorted((ROOT / "golden").glob("*.json")):
        rec = golden.load_record(str(path))
        assert rec.model == path.stem, f"{path.name} holds the record of {rec.model}"


def _plan(golden_mode="report", image=VLLM_IMAGE, quantization=None, served_name="m"):
    model = SimpleNamespace(
        verification=SimpleNamespace(golden=golden_mode), image=image, quantization=quantization, kvCacheDtype="fp8"
    )
    return SimpleNamespace(model=model, revision="b" * 40, served_name=served_name)


def test_the_key_is_what_produces_the_answers():
    assert verification.golden_key(_plan()) == {
        "revision": "b" * 40,
        "engine": f"vllm {VLLM_VERSION}",
        "quantization": "checkpoint",
        "kvCacheDtype": "fp8",
    }
    other = verification.golden_key(_plan(image="example.com/vllm:custom", quantization="awq"))
    assert other["engine"] == "image example.com/vllm:custom" and other["quantization"] == "awq"
    assert verification.golden_entry(_plan("off")) is None


def test_a_committed_record_is_read_and_a_broken_one_named(tmp_path, monkeypatch):
    monkeypatch.setattr(verification, "ROOT", tmp_path)
    assert verification.golden_entry(_plan())["record"] is None
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "m.json").write_text('{"format": 1}')
    assert verification.golden_entry(_plan("exact")) == {
        "mode": "exact",
        "key": verification.golden_key(_plan()),
        "record": {"format": 1},
    }
    (tmp_path / "golden" / "m.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"golden/m.json is not JSON .*record it again"):
        verification.golden_entry(_plan())
    (tmp_path / "golden" / "m.json").write_text(" " * (verification.MAX_GOLDEN_BYTES + 1))
    with pytest.raises(ValueError, match=r"golden/m\.json is 262,145 bytes"):
        verification.golden_entry(_plan())


def test_config_sets_the_mode_and_a_committed_record_reaches_the_job(tmp_path, monkeypatch):
    record = golden.Record(
        "llama-3-1-8b-instruct",
        golden.normalized_key(GOLDEN_KEY),
        (golden.Output("count", "1, 2", (16, 17), "length"),),
    )
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "llama-3-1-8b-instruct.json").write_text(record.dumps())
    monkeypatch.setattr(verification, "ROOT", tmp_path)
    models = [{**DEV_MODELS[0], "verification": {"golden": "exact"}}]
    with offline_cache():
        ev = evaluate_stack("dev", overrides={"models": models})
    (target,) = targets(ev)["targets"]
    assert target["golden"]["mode"] == "exact" and target["golden"]["record"] == record.as_json()
    assert target["golden"]["key"]["revision"] == DEV_MODELS[0]["revision"]
    assert ev.outputs["verification"]["expected"]["llama-3-1-8b-instruct"]["golden"] == {
        "mode": "exact",
        "record": "golden/llama-3-1-8b-instruct.json",
    }
    with offline_cache():
        off = evaluate_stack("dev", overrides={"models": [{**DEV_MODELS[0], "verification": {"golden": "off"}}]})
    (target,) = targets(off)["targets"]
    assert target["golden"] is None
    assert off.outputs["verification"]["deadlineSeconds"] < ev.outputs["verification"]["deadlineSeconds"]


def _golden_target(server, mode="report", record=None):
    return {**fake_target(server), "golden": {"mode": mode, "key": {"revision": "a" * 40}, "record": record}}


def _summary(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[-1].removeprefix("verify-summary: "))


def test_the_shipped_copy_records_then_compares_then_fails_exact(tmp_path, server):
    server.set({})
    evaluations = {"dev": committed_stack("dev")}
    env = {"LLM_SERVING_API_KEY_0": "k"}
    # First rollout: no record; the Job passes and prints the record to commit.
    proc = shipped_run(tmp_path, evaluations, {"targets": [_golden_target(server)]}, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS  golden   recorded 4 golden answers" in proc.stdout
    assert _summary(proc)["models"][MODEL]["golden"] == {"result": "recorded"}
    log = tmp_path / "verify.log"
    log.write_text(proc.stdout)
    assert golden.main(["save", str(log), str(tmp_path / "golden")]) == 0
    record = json.loads((tmp_path / "golden" / f"{MODEL}.json").read_text())
    assert record["key"]["revision"] == "a" * 40 and len(record["outputs"]) == len(golden.PROMPTS)

    # Next rollout, same answers: identical, no record printed.
    proc = shipped_run(tmp_path, evaluations, {"targets": [_golden_target(server, "exact", record)]}, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert golden.LOG_PREFIX not in proc.stdout
    assert _summary(proc)["models"][MODEL]["golden"] == {
        "result": "identical",
        "compared": 4,
        "differing": [],
        "keyChanges": [],
    }

    # A changed answer and another revision: reported (report mode) with the new record to commit...
    record["outputs"][2]["text"] = "changed"
    record["key"]["revision"] = "c" * 40
    proc = shipped_run(tmp_path, evaluations, {"targets": [_golden_target(server, "report", record)]}, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"key changed: revision '{'c' * 40}' -> '{'a' * 40}'" in proc.stdout
    assert golden.LOG_PREFIX in proc.stdout
    assert _summary(proc)["models"][MODEL]["golden"]["differing"] == ["arithmetic"]
    # ...and fails the Job with its own status where config asks for exact agreement.
    proc = shipped_run(tmp_path, evaluations, {"targets": [_golden_target(server, "exact", record)]}, env)
    assert proc.returncode == smoke.EXIT_GOLDEN_DIFFERS, proc.stdout + proc.stderr
    assert _summary(proc)["models"][MODEL]["status"] == "golden-differs"


@pytest.mark.parametrize(
    "entry, says",
    [
        ({"mode": "strict"}, "targets[0].golden must be an object whose mode is one of report, exact"),
        ({"mode": "report", "key": {"gpu": "L4"}}, "targets[0].golden.key must be an object of revision"),
        (
            {"mode": "report", "record": {"format": 1, "model": "m", "key": {}, "outputs": "x"}},
            "targets[0].golden.record.outputs must be a list",
        ),
        (
            {
                "mode": "report",
                "record": json.loads(
                    golden.Record("other", golden.normalized_key({}), (golden.Output("a", "x", None, None),)).dumps()
                ),
            },
            "targets[0].golden.record is of model 'other'",
        ),
    ],
)
def test_an_unusable_golden_entry_is_a_usage_error(tmp_path, server, entry, says):
    proc = shipped_run(
        tmp_path, {"dev": committed_stack("dev")}, {"targets": [{**fake_target(server), "golden": entry}]}
    )
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_save_refuses_a_malformed_log_line(tmp_path, capsys):
    log = tmp_path / "log"
    log.write_text(
        golden.LOG_PREFIX + '{"format": 1, "model": "../etc", "key": {}, "outputs": [{"prompt": "a", "text": ""}]}\n'
    )
    with pytest.raises(SystemExit) as exc:
        golden.main(["save", str(log), str(tmp_path / "g")])
    assert exc.value.code == 2 and "no usable file name" in capsys.readouterr().err
    log.write_text(golden.LOG_PREFIX + "{broken\n")
    with pytest.raises(SystemExit):
        golden.main(["save", str(log), str(tmp_path / "g")])
    assert not (tmp_path / "g").exists()
