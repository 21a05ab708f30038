"""models[].verification.sweep: the verification Job's short load sweep against the plan's prediction.

What must hold: off by default (no committed stack's Job sweeps); on, the rendered targets file carries the sweep's
levels, requests and lengths with the plan's prediction at exactly those levels (computed at plan time, so no
plan.json in the cluster), the Job's deadline grows by the sweep's budget, plan.md and the stack output show it; the
shipped copy of the tools runs the sweep against a fake server and reports predicted against measured; a bad sweep
key or a bad targets entry is refused naming it.
"""

from __future__ import annotations

import json

import pytest

from components.verification import job as verification
from components.verification.tools import ENTRY_MODULE, TOOL_FILES
from endpoint_tools import expectation, verify
from offline_plan import plan_json
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import evaluate_stack
from planner import plan, sweep_prediction
from planner.perf_model import EFFICIENCY
from stack_config import ConfigError, parse_stack_config
from tests.support.committed import committed_stack
from tests.support.fuzz.fault_server import MODEL
from tests.support.stack_variants import DEV_MODELS, NO_ENTRANCE
from tests.support.verification_runs import fake_target, shipped_run, targets, the_job

A100_POOL = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 1, "maxNodes": 2}]}
# The same GPU on EKS, whose A100 machine has eight (p4de.24xlarge).
AWS_A100 = {"pools": [{"name": "a100", "gpu": "A100-80GB", "gpusPerNode": 8, "maxNodes": 1}]}
SWEEP = {"enabled": True, "concurrency": [1, 2, 4, 6], "requestsPerLevel": 6, "promptTokens": 1000, "outputTokens": 200}


def _stack(sweep: dict, pool: dict | None = None, load: dict | None = None):
    model = {**DEV_MODELS[0], "verification": {"sweep": sweep}, **({"load": load} if load else {})}
    if pool:
        model["pool"] = pool["pools"][0]["name"]
    return evaluate_stack("dev", overrides={**NO_ENTRANCE, **(pool or {}), "models": [model]})


@pytest.fixture(scope="module")
def a100():
    return _stack(SWEEP, A100_POOL)


def test_the_sweep_is_off_by_default(tmp_path):
    # The committed dev stack's model states a load (so it has a prediction); without one and without a sweep,
    # nothing is predicted and nothing sweeps.
    ev = committed_stack("dev")
    assert all(t["sweep"] is None for t in targets(ev)["targets"])
    ev = evaluate_stack("dev", overrides={"models": DEV_MODELS})
    assert all(t["sweep"] is None for t in targets(ev)["targets"])
    assert all("sweep" not in e for e in ev.outputs["verification"]["expected"].values())
    assert all(row["prediction"] is None for row in ev.outputs["sizing"])


def test_the_rendered_job_carries_the_sweep_with_the_plans_prediction_at_its_levels(a100):
    (target,) = targets(a100)["targets"]
    sweep = target["sweep"]
    assert (sweep["concurrency"], sweep["requestsPerLevel"]) == ([1, 2, 4, 6], 6)
    assert (sweep["promptTokens"], sweep["outputTokens"]) == (1000, 200)
    prediction = sweep["prediction"]
    assert prediction["predicted"] is True and prediction["efficiency"] == "ampere, calibrated"
    assert [lv["concurrency"] for lv in prediction["levels"]] == [1, 2, 4, 6]
    # The plan's own figures (plan.json's models[].prediction), level 6 added to the grid for this sweep.
    row = a100.outputs["sizing"][0]["prediction"]
    by_level = {lv["concurrency"]: lv for lv in row["levels"]}
    assert 6 in by_level and 6 not in sweep_prediction.GRID
    assert prediction["levels"] == [by_level[n] for n in (1, 2, 4, 6)]
    assert prediction["highestConcurrencyAtSlo"] == row["highestConcurrencyAtSlo"] > 0
    # The Job's command is the runner on the targets file; the tools it imports for the sweep are shipped.
    container = the_job(a100).inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == [
        "python3",
        "-m",
        ENTRY_MODULE,
        "--targets",
        f"{verification.TARGETS_MOUNT_PATH}/{verification.TARGETS_FILE}",
    ]
    assert {"endpoint_tools/loadtest.py", "endpoint_tools/expectation.py"} <= set(TOOL_FILES)
    # The parsed entry is what the runner sweeps with.
    (parsed,), _ = verify.parse_targets(json.dumps(targets(a100)))
    assert parsed.sweep is not None and parsed.sweep.expected is not None
    assert parsed.sweep.expected.levels[6].tpot_ms == by_level[6]["tpotMs"]


def _plans(sweep: dict, pools: dict = AWS_A100) -> list[plan.ModelPlan]:
    model = {**DEV_MODELS[0], "pool": pools["pools"][0]["name"], "verification": {"sweep": sweep}}
    config = parse_stack_config({"cloud": "aws", **pools, "models": [model]}, "Pulumi.test.yaml")
    return plan.build_plans(config, plan.default_metadata_loader(None), source="Pulumi.test.yaml")


def test_plan_json_carries_the_prediction_in_the_form_the_load_sweep_reads(a100):
    # plan.json's `models`, as offline_plan/plan_json.py summary() writes them.
    text = json.dumps({"models": plan_json.model_entries(a100.outputs["sizing"])}, sort_keys=True)
    (entry,) = json.loads(text)["models"]
    assert entry["prediction"] == a100.outputs["sizing"][0]["prediction"]
    exp = expectation.from_plan_json(text, entry["model"])
    assert set(exp.levels) == {lv["concurrency"] for lv in entry["prediction"]["levels"]} >= {1, 2, 4, 6, 8}
    assert exp.levels[6].tpot_ms == next(lv["tpotMs"] for lv in entry["prediction"]["levels"] if lv["concurrency"] == 6)
    assert (exp.prompt_tokens, exp.output_tokens) == (1000, 200)
    assert exp.highest == entry["prediction"]["highestConcurrencyAtSlo"]


def test_the_deadline_grows_by_the_sweeps_budget(a100):
    (target,) = targets(a100)["targets"]
    (p,) = _plans(SWEEP)
    # Rounds of `concurrency` requests per level (6/1 + 6/2 + 6/4 + 6/6 = 6 + 3 + 2 + 1) and a warm-up request,
    # each 60 s plus a 1,000-token prompt at 1,000 tokens/s.
    assert verification.sweep_seconds(p) == (60 + 1) * (6 + 3 + 2 + 1 + 1)
    (off,) = _plans({**SWEEP, "enabled": False})
    assert verification.sweep_seconds(off) == 0
    assert verification.total_timeout_seconds(p) == verification.total_timeout_seconds(off) + 61 * 13
    assert target["totalTimeoutSeconds"] == verification.total_timeout_seconds(p)
    assert (
        a100.outputs["verification"]["deadlineSeconds"]
        == verification.POD_START_SECONDS + target["totalTimeoutSeconds"]
    )


def test_plan_md_and_the_stack_output_show_the_sweep(a100):
    expected = a100.outputs["verification"]["expected"]["llama-3-1-8b-instruct"]
    assert expected["sweep"] == targets(a100)["targets"][0]["sweep"]
    section = "\n".join(offline_plan._verification_section(a100.outputs["verification"]))
    assert (
        "Load sweep of llama-3-1-8b-instruct after its checks: concurrency 1, 2, 4, 6; 6 requests per level" in section
    )
    level_1 = expected["sweep"]["prediction"]["levels"][0]
    assert f"| 1 | {level_1['ttftMeanMs']} | {level_1['ttftP95Ms']} | {level_1['tpotMs']} |" in section


def test_an_uncalibrated_gpu_sweeps_without_a_prediction_and_says_why(monkeypatch):
    # An L4 is an Ada GPU; its family is taken out of the calibrated efficiencies (planner/perf_model.py
    # EFFICIENCY) for this test, as for a family with no calibration source.
    monkeypatch.delitem(EFFICIENCY, "ada")
    plans = _plans(SWEEP, {"pools": [{"name": "l4", "gpu": "L4", "gpusPerNode": 1, "maxNodes": 1}]})
    doc = json.loads(verification.targets_document(plans, ["http://x:8000"], [None], 10))
    prediction = doc["targets"][0]["sweep"]["prediction"]
    assert prediction["predicted"] is False and "no calibrated efficiency for ada" in prediction["notPredicted"]
    (parsed,), _ = verify.parse_targets(json.dumps(doc))
    assert parsed.sweep.expected is None and "ada" in parsed.sweep.not_predicted
    section = "\n".join(offline_plan._verification_section(verification.summary("llm-serving", plans, 10)))
    assert "measured only, not predicted: no calibrated efficiency for ada" in section


@pytest.mark.parametrize(
    "sweep, message",
    [
        ({"enabled": True, "concurrency": [4, 2]}, "levels must increase"),
        ({"enabled": True, "concurrency": [0]}, "concurrency"),
        ({"enabled": True, "concurrency": list(range(1, 10))}, "concurrency"),
        ({"enabled": True, "requestsPerLevel": 1000}, "requestsPerLevel"),
        ({"enabled": "yes please"}, "enabled"),
    ],
)
def test_a_bad_sweep_key_is_refused_naming_it(sweep, message):
    raw = {"cloud": "aws", **AWS_A100, "models": [{**DEV_MODELS[0], "pool": "a100", "verification": {"sweep": sweep}}]}
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw, "Pulumi.test.yaml")
    assert "verification.sweep" in str(err.value) and message in str(err.value)


def test_a_sweep_longer_than_the_context_is_a_plan_error():
    raw = {
        "cloud": "aws",
        **AWS_A100,
        "models": [
            {**DEV_MODELS[0], "pool": "a100", "verification": {"sweep": {**SWEEP, "promptTokens": 9000}}},
        ],
    }
    with pytest.raises(plan.PlanError) as err:
        plan.build_plans(parse_stack_config(raw, "Pulumi.test.yaml"), plan.default_metadata_loader(None), source="x")
    assert "models[0].verification.sweep: 9,000 prompt + 200 output tokens exceed maxModelLen 8,192" in str(err.value)


def _prediction(levels=(1, 2)):
    return {
        "predicted": True,
        "promptTokens": 16,
        "outputTokens": 4,
        "ttftSloMs": 500.0,
        "itlSloMs": 50.0,
        "highestConcurrencyAtSlo": 2,
        "levels": [
            {"concurrency": n, "ttftMeanMs": 5.0, "ttftP95Ms": 8.0, "tpotMs": 1.0, "outputTokensPerSecond": 100.0}
            for n in levels
        ],
    }


def _sweep_target(server, **edits):
    sweep = {"concurrency": [1, 2], "requestsPerLevel": 3, "promptTokens": 16, "outputTokens": 4}
    return {**fake_target(server), "sweep": {**sweep, "prediction": _prediction(), **edits}}


def test_the_shipped_copy_sweeps_a_fake_server_against_the_prediction(tmp_path, a100, server):
    server.set({})
    doc = {"targets": [_sweep_target(server)]}
    proc = shipped_run(tmp_path, {"dev": a100}, doc, {"LLM_SERVING_API_KEY_0": "k"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    line = next(x for x in lines if x.startswith(verify.SWEEP_PREFIX))
    swept = json.loads(line.removeprefix(verify.SWEEP_PREFIX))
    assert [lv["concurrency"] for lv in swept["levels"]] == [1, 2]
    assert all(lv["completed"] == 3 for lv in swept["levels"])
    assert [row["concurrency"] for row in swept["expectation"]["levels"]] == [1, 2]
    assert any(x.startswith("  concurrency 1: TTFT mean 5.0/") for x in lines)
    summary = json.loads(lines[-1].removeprefix(verify.SUMMARY_PREFIX))
    model = summary["models"][MODEL]
    assert model["status"] == "passed" and summary["exitStatus"] == 0
    assert model["sweep"]["slo"]["predicted_highest_concurrency"] == 2
    assert model["sweep"]["errorPercent"]["1"] == swept["expectation"]["levels"][0]["error_percent"]


@pytest.mark.parametrize(
    "edits, message",
    [
        ({"concurrency": [2, 1]}, "sweep.concurrency must be"),
        ({"requestsPerLevel": 0}, "sweep.requestsPerLevel must be from"),
        ({"prediction": _prediction(levels=(1,))}, "sweep.prediction has no level 2"),
        ({"prediction": {**_prediction(), "levels": "many"}}, "sweep.prediction.levels must be a list"),
    ],
)
def test_a_bad_sweep_entry_is_an_unusable_targets_file(server, edits, message):
    with pytest.raises(verify.TargetsError, match="targets\\[0\\]") as err:
        verify.parse_targets(json.dumps({"targets": [_sweep_target(server, **edits)]}))
    assert message in str(err.value)
