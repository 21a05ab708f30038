"""The plan refuses names the receiving API would refuse and objects two sources would both create,
naming both sources and the stack-file key; a defect of the program is reported as an internal error
(exit 1), never as a config problem."""

from __future__ import annotations

import copy

import pytest
import yaml

from common import pod_security
from offline_plan import helm, object_names, write
from offline_plan.mock_runtime import evaluate_stack
from offline_plan.object_names import NamedObject, problems
from tests.support import paths
from tests.support.committed import STACKS, committed_stack


def _models(stack: str) -> list[dict]:
    config = yaml.safe_load((paths.ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return copy.deepcopy(config["llm-serving:models"])


def _stack_problems(stack: str, models: list[dict]) -> list[str]:
    evaluation = evaluate_stack(stack, overrides={"models": models})
    return object_names.stack_problems(evaluation, helm.rendered(evaluation))


@pytest.mark.parametrize("stack", STACKS)
def test_the_committed_stacks_name_every_object_once_and_validly(stack):
    evaluation = committed_stack(stack)
    named = object_names.named_objects(evaluation, helm.rendered(evaluation))
    assert len(named) > 150  # the program's objects and every chart's
    assert object_names.stack_problems(evaluation, helm.rendered(evaluation)) == []


def test_a_model_name_whose_derived_service_is_too_long_is_refused_with_the_key():
    models = _models("dev")
    models[0]["name"] = "l" + "a" * 61  # a valid 62-character DNS label; `<name>-api` is 66
    found = _stack_problems("dev", models)
    service = next(p for p in found if "`Service llm-serving/" in p)
    assert service.startswith("Pulumi.dev.yaml: models[0].name: `Service llm-serving/")
    assert "RFC 1035 label" in service and "66 characters" in service
    release = next(p for p in found if "Helm release " in p)
    assert release.startswith("Pulumi.dev.yaml: models[0].name: Helm release ")
    assert "longer than 53 characters" in release


def test_a_model_named_like_another_models_picker_collides_and_both_sources_are_named():
    models = _models("prod")
    models[1]["name"] = models[0]["name"] + "-epp"
    models[1].pop("aliases", None)
    found = _stack_problems("prod", models)
    collision = next(p for p in found if "would be created twice" in p)
    assert collision.startswith(f"Pulumi.prod.yaml: models[1].name: `Deployment llm-serving/'{models[0]['name']}-epp'`")
    assert "resource llama-3-1-8b-instruct-epp-deployment" in collision  # the program's Deployment
    assert f"helm release llm-serving/{models[0]['name']}" in collision  # the picker chart's


def _obj(kind: str, name: str, namespace: str | None = "ns", api: str = "v1", labels=None) -> dict:
    meta: dict = {"name": name, **({"namespace": namespace} if namespace else {})}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": api, "kind": kind, "metadata": meta}


def test_same_name_in_another_kind_group_or_namespace_is_no_collision():
    objects = [
        NamedObject(_obj("ConfigMap", "a"), "one"),
        NamedObject(_obj("Secret", "a"), "two"),
        NamedObject(_obj("ConfigMap", "a", namespace="other"), "three"),
        NamedObject(_obj("Deployment", "a", api="apps/v1"), "four"),
    ]
    assert problems(objects, [], []) == []
    again = [*objects, NamedObject(_obj("ConfigMap", "a"), "five")]
    (line,) = problems(again, [], [])
    assert "by one and by five" in line


@pytest.mark.parametrize(
    "kind,name,refused",
    [
        ("Service", "9starts-with-digit", True),  # RFC 1035: a letter first
        ("Service", "a" * 63, False),
        ("Service", "a" * 64, True),
        ("Namespace", "Upper", True),
        ("Job", "j" * 64, True),  # its pods' job-name label
        ("ConfigMap", "a.b-c", False),
        ("ConfigMap", "a" * 254, True),
        ("ClusterRole", "cert-manager-controller-approve:cert-manager-io", False),
        ("Role", "a/b", True),
    ],
)
def test_each_kind_gets_the_name_rule_of_its_api(kind, name, refused):
    found = problems([NamedObject(_obj(kind, name), "src")], [], [])
    assert bool(found) is refused, found


def test_a_label_value_over_63_characters_is_refused_on_the_object_and_its_pod_template():
    deployment = _obj("Deployment", "d", api="apps/v1", labels={"app": "ok"})
    deployment["spec"] = {"template": {"metadata": {"labels": {"model": "m" * 64}}}}
    (line,) = problems([NamedObject(deployment, "src")], [], [])
    assert "label 'model'=" in line and "at most 63" in line


def test_an_unnamed_model_is_known_by_the_name_stack_config_derives_from_its_repo():
    config = {"llm-serving:models": '[{"repo": "meta-llama/Llama-3.1-8B-Instruct"}]'}
    assert object_names.served_names(config) == [("models[0].name", "llama-3-1-8b-instruct")]


def test_release_names_follow_helms_53_character_limit():
    assert problems([], [("r" * 53, "resource x")], []) == []
    (line,) = problems([], [("r" * 54, "resource x")], [("models[0].name", "r" * 54)])
    assert line.startswith("models[0].name: Helm release ") and "longer than 53" in line


# --- an internal error is said as one --------------------------------------------------------------


def _run_with(monkeypatch, tmp_path, capsys, failing) -> tuple[int, str]:
    monkeypatch.setattr(write, "evaluate_stack", failing)
    code = write.run("dev", tmp_path)
    return code, capsys.readouterr().err


def test_a_key_error_in_the_program_is_an_internal_error_with_exit_1(monkeypatch, tmp_path, capsys):
    def failing(stack, project_dir):
        return {}["missing"]

    code, err = _run_with(monkeypatch, tmp_path, capsys, failing)
    assert code == 1
    assert "internal error: KeyError" in err and "not of your stack file" in err
    assert "test_object_names.py" in err  # where it happened, for the report


def test_a_value_error_from_inside_a_call_is_internal_but_a_raised_refusal_is_a_config_problem(
    monkeypatch, tmp_path, capsys
):
    def parsing(stack, project_dir):
        return int("not a number")

    code, err = _run_with(monkeypatch, tmp_path, capsys, parsing)
    assert code == 1 and "internal error: ValueError" in err

    def refusing(stack, project_dir):
        raise ValueError("Pulumi.dev.yaml: pools[0].gpu: no such GPU")

    code, err = _run_with(monkeypatch, tmp_path, capsys, refusing)
    assert code == 2 and "internal error" not in err and "pools[0].gpu" in err


def test_a_defect_deep_in_a_component_during_a_real_evaluation_is_internal(monkeypatch, tmp_path, capsys):
    def broken(**_: object) -> dict:
        raise TypeError("unsupported operand")

    monkeypatch.setattr(pod_security, "container_security_context", broken)
    code = write.run("dev", tmp_path)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "internal error: TypeError: 'unsupported operand'" in err
    assert "components/model_store" in err or "components/serving" in err
