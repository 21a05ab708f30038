"""`python -m offline_plan.diff BASE HEAD`: what a pull request changes, on variants of the committed stacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_plan import diff, plan_json, update_diff
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from tests.support.committed import committed_stack
from tests.support.committed_plans import committed_plan
from tests.support.stack_variants import DEV_MODELS, LLAMA_8B, NO_ENTRANCE

SECOND = {**LLAMA_8B, "name": "llama-second", "pool": "l4"}
# Room for two one-GPU models on dev's pool, on both sides of the new-model and removed-model diffs.
TWO_NODES = {"pools": [{"name": "l4", "gpu": "L4", "gpusPerNode": 1, "machineType": "g2-standard-8", "maxNodes": 2}]}


def _summary(evaluation: Evaluation) -> dict:
    config = offline_plan.pack_config(evaluation.stack)
    verdicts = offline_plan.policy_verdicts(evaluation, config)
    return offline_plan.plan_summary(evaluation, verdicts, config)


def _folder(tmp_path: Path, name: str, data: dict) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    plan_json.write(folder / plan_json.FILENAME, data)
    return folder


def _diff(tmp_path: Path, capsys, base: dict, head: dict) -> str:
    code = diff.main([str(_folder(tmp_path, "base", base)), str(_folder(tmp_path, "head", head))])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _section(text: str, title: str) -> str:
    return text.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


@pytest.fixture(scope="module")
def dev() -> dict:
    return _summary(committed_stack("dev"))


@pytest.fixture(scope="module")
def one_model() -> dict:
    return _summary(evaluate_stack("dev", overrides={**NO_ENTRANCE, **TWO_NODES, "models": DEV_MODELS}))


@pytest.fixture(scope="module")
def two_models() -> dict:
    return _summary(evaluate_stack("dev", overrides={**NO_ENTRANCE, **TWO_NODES, "models": [*DEV_MODELS, SECOND]}))


def test_a_plan_against_itself_changes_nothing(tmp_path, capsys, dev):
    text = _diff(tmp_path, capsys, dev, dev)
    assert text.startswith(diff.MARKER.format(stack="dev"))
    assert "Deployable: unchanged (**deployable**)" in text
    assert "No object is created, changed or deleted." in text
    for title in ("Models", "GPUs and cost per hour (US dollars)", "Policy verdicts", "Images and digests", "Warnings"):
        assert _section(text, title).strip() == "No change.", title


def test_a_new_revision_moves_the_revision_and_replaces_the_mirror_job(tmp_path, capsys, dev):
    models = json.loads(committed_stack("dev").config["llm-serving:models"])
    moved = [{**models[0], "revision": update_diff.STAND_IN_REVISION}]
    with update_diff.stand_ins(models):
        head = _summary(evaluate_stack("dev", overrides={"models": moved}))
    text = _diff(tmp_path, capsys, dev, head)
    models_part = _section(text, "Models")
    assert (
        f"| `llama-3-1-8b-instruct` | revision | 0e9e39f249a16976918f6564b8830bc894c89659 | "
        f"{update_diff.STAND_IN_REVISION} |"
    ) in models_part
    assert "kvCacheTokens" not in models_part, "the same weights: the numbers stay"
    objects = _section(text, "Objects")
    # The mirror Job is named after the revision: a new name is a replacement, shown with both names.
    assert (
        "| replace | Job | `llm-serving/llama-3-1-8b-instruct-mirror-0e9e39f249a1` -> "
        f"`llm-serving/llama-3-1-8b-instruct-mirror-{update_diff.STAND_IN_REVISION[:12]}` | `.metadata.name`, "
        "`.spec.template` |"
    ) in objects
    assert "| replace | Job | `llm-serving/llm-serving-verify` | `.spec.template` |" in objects


def test_a_new_model_is_added_with_its_numbers_and_its_objects(tmp_path, capsys, one_model, two_models):
    text = _diff(tmp_path, capsys, one_model, two_models)
    models_part = _section(text, "Models")
    assert "| `llama-second` | added | | revision 0e9e39f249a16976918f6564b8830bc894c89659, pool l4, gpu L4, " in (
        models_part
    )
    # 28,288 (27,520 before issue 29's Model Runner V2 pass): vLLM 0.32's V2 CUDA-graph estimate counts the FULL
    # graphs up to max_num_seqs only (35 of 51 at an L4's 256 sequences), less its sampler tables and bitmask.
    assert "kvCacheTokens 28,288, startupBudgetSeconds 300 |" in models_part
    objects = _section(text, "Objects")
    assert "| create | Deployment | `llm-serving/llama-second` |" in objects
    assert "| create | Service | `llm-serving/llama-second-api` |" in objects
    assert " replaced, 0 deleted." in objects
    # The verification Job checks every model, so it runs again with the new one.
    assert "| replace | Job | `llm-serving/llm-serving-verify` | `.spec.template` |" in objects
    assert _section(text, "GPUs and cost per hour (US dollars)").strip() == "No change."


def test_a_removed_model_is_gone_with_its_objects(tmp_path, capsys, one_model, two_models):
    text = _diff(tmp_path, capsys, two_models, one_model)
    assert "| `llama-second` | removed | | |" in _section(text, "Models")
    objects = _section(text, "Objects")
    assert "| delete | Deployment | `llm-serving/llama-second` |" in objects
    assert "| delete | PersistentVolumeClaim | `llm-serving/llama-second-weights` |" in objects
    assert "0 created" in objects


def test_a_changed_pool_shows_its_gpus_and_the_node_pool_update(tmp_path, capsys, dev):
    pools = json.loads(committed_stack("dev").config["llm-serving:pools"])
    head = _summary(evaluate_stack("dev", overrides={"pools": [{**pools[0], "maxNodes": 3}]}))
    text = _diff(tmp_path, capsys, dev, head)
    gpus = _section(text, "GPUs and cost per hour (US dollars)")
    assert "| `l4` | maxNodes | 1 | 3 |" in gpus and "| `l4` | maxGpus | 1 | 3 |" in gpus
    assert "cost" not in gpus.split("|---|---|---|---|", 1)[1], "unresolved prices on both sides: no cost change"
    assert (
        "| update | gcp:container/nodePool:NodePool | `llm-serving-dev-l4-np` | `.autoscaling.totalMaxNodeCount`"
        in (_section(text, "Objects"))
    )


def test_verdicts_images_and_warnings_that_change_are_listed(tmp_path, capsys, dev):
    head = json.loads(json.dumps(dev))
    head["deployable"], head["reasons"] = False, ["1 mandatory `image-tag-pinned` violation(s) (see Policy verdicts)"]
    head["verdicts"].append({"level": "mandatory", "policy": "image-tag-pinned", "resource": "Job/x", "message": "m"})
    head["images"][0] = {**head["images"][0], "digest": "sha256:" + "a" * 64}
    head["warnings"] = [*head["warnings"], "a new warning"]
    text = _diff(tmp_path, capsys, dev, head)
    assert "Deployable: **deployable** -> **not deployable**" in text
    assert "- added: mandatory `image-tag-pinned` on Job/x: m" in _section(text, "Policy verdicts")
    assert f"@ `sha256:{'a' * 64}`" in _section(text, "Images and digests")
    assert "- added: a new warning" in _section(text, "Warnings")


def test_make_plan_writes_plan_json_beside_plan_md():
    plan = committed_plan("dev")
    assert plan.returncode == 0, plan.stderr
    data = diff.load(plan.folder)
    assert data["stack"] == "dev" and [m["model"] for m in data["models"]] == ["llama-3-1-8b-instruct"]
    assert data["gpus"][0]["machineType"] == "g2-standard-8" and data["gpus"][0]["capacityType"] == "spot"
    # Inputs are redacted as in the manifests: not even the stand-in of a secret is written.
    text = (plan.folder / plan_json.FILENAME).read_text()
    assert "<secret llm-serving:" not in text and '"<secret>"' in text


@pytest.mark.parametrize(
    "setup, expected",
    [
        (lambda d: None, "no such folder"),
        (lambda d: d.mkdir(), "plan.json: missing"),
        (lambda d: (d.mkdir(), (d / "plan.json").write_text('{"format": ')), "plan.json"),
        (lambda d: (d.mkdir(), (d / "plan.json").write_text("[1, 2]")), "not a plan summary"),
        (lambda d: (d.mkdir(), (d / "plan.json").write_bytes(b"\xff\xfe")), "plan.json"),
        (
            lambda d: (d.mkdir(), (d / "plan.json").write_text(json.dumps({"format": plan_json.FORMAT, "stack": 1}))),
            "`stack` is missing or not a str",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, dev, setup, expected):
    good = _folder(tmp_path, "good", dev)
    bad = tmp_path / "bad"
    setup(bad)
    for argv in ([str(bad), str(good)], [str(good), str(bad)]):
        assert diff.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and expected in err, err
        assert "Traceback" not in err


def test_a_plan_json_with_wrong_shapes_inside_is_one_line_and_exit_2(tmp_path, capsys, dev):
    broken = json.loads(json.dumps(dev))
    broken["resources"] = [{"urn": "u", "type": "t", "name": "n"}]  # no kind or label
    assert diff.main([str(_folder(tmp_path, "a", dev)), str(_folder(tmp_path, "b", broken))]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "`resources[0].kind` is missing or not a string" in err
