"""The "did you mean" hints name what the user most likely meant."""

from __future__ import annotations

import pytest

from common import gpus
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import stack_file_config
from planner.sizing_cli import main as sizing_main
from safe_yaml.bounded import YamlInputError, load_one
from stack_config import ConfigError, parse_stack_config
from stack_config.cluster import PoolConfig
from stack_config.formats import did_you_mean
from stack_config.gcp_project import PROJECT_ENV_VARS, gcp_project_problems
from tests.support.config_edits import base, problems_of
from tests.support.paths import ROOT


def test_a_prefix_of_one_catalog_name_suggests_that_name():
    # difflib alone rates H200 closer to "H100" (one character apart) than H100-80GB.
    assert did_you_mean("H100", gpus.CATALOG) == " (did you mean 'H100-80GB'?)"


def test_a_prefix_of_several_names_names_them_all():
    assert did_you_mean("A100", gpus.CATALOG) == " (did you mean 'A100-40GB' or 'A100-80GB'?)"


def test_a_misspelling_still_gets_the_closest_name():
    assert did_you_mean("modells", ["models", "monitoring"]) == " (did you mean 'models'?)"
    assert did_you_mean("zzz", gpus.CATALOG) == ""
    assert did_you_mean("", gpus.CATALOG) == ""


def test_a_pool_of_h100_is_told_about_h100_80gb():
    raw = base("aws")
    raw["pools"][0]["gpu"] = "H100"
    problems = problems_of(raw)
    assert any("unknown GPU 'H100' (did you mean 'H100-80GB'?)" in p for p in problems), problems


def test_the_gpu_key_documents_every_catalog_gpu():
    # The README's config reference is generated from this docstring (offline_plan/config_reference.py).
    doc = PoolConfig.model_fields["gpu"].description or ""
    missing = [name for name in gpus.CATALOG if name not in doc.replace("\n", " ")]
    assert not missing, f"pools[].gpu does not name {missing}"


def test_the_readme_pools_gpu_row_lists_every_catalog_gpu():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `pools[].gpu` |"))
    missing = [name for name in gpus.CATALOG if name not in row]
    assert not missing, f"the README's pools[].gpu row does not name {missing}"


def test_the_sizing_cli_suggests_h100_80gb_for_h100_and_for_a_near_miss(capsys):
    config = str(ROOT / "tests" / "fixtures" / "model_configs" / "llama-3.1-8b" / "config.json")
    for typed in ("H1", "H100-80", "H100-8OGB"):
        assert sizing_main(["--model-config", config, "--gpu", typed]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --gpu: unknown GPU '{typed}' (did you mean 'H100-80GB'?); known GPUs: "), err


# A tab in YAML: one line naming the file, the line and the column, and the word "tab".
@pytest.mark.parametrize(
    "text,line,column",
    [
        ("config:\n\tllm-serving:cloud: gcp\n", 2, 1),
        ("config:\n  llm-serving:cloud: gcp\n  \tllm-serving:pools: []\n", 3, 3),
        ("config:\n  llm-serving:pools:\n  -\tname: l4\n", 3, 4),
        ("config:\n  llm-serving:cloud: gcp\n\t  llm-serving:pools: []\n", 3, 1),
    ],
)
def test_a_tab_in_the_stack_file_is_named_with_its_line_and_column(tmp_path, text, line, column):
    (tmp_path / "Pulumi.tabbed.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        stack_file_config("tabbed", tmp_path)
    (problem,) = info.value.problems
    assert problem == (
        f"Pulumi.tabbed.yaml:{line}:{column}: not valid YAML: a tab character at line {line}, column {column}; "
        f"YAML indents with spaces only, so replace the tab with spaces"
    )


def test_a_tab_inside_a_value_is_not_mistaken_for_the_error():
    assert load_one('a: "x\ty"\n', "f.yaml") == {"a": "x\ty"}
    with pytest.raises(YamlInputError) as info:
        load_one('a: "x\ty"\nb: [1\n', "f.yaml")
    assert "tab" not in str(info.value)


# A GKE stack without a GCP project: refused at plan time, naming the key to set.
def _dev_without_project() -> str:
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    assert "\n  gcp:project: " in text
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("  gcp:project: "))


def test_a_gke_stack_without_a_gcp_project_is_refused_with_the_key_to_set(tmp_path, capsys, monkeypatch):
    for name in PROJECT_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "__main__.py").symlink_to(ROOT / "__main__.py")
    (tmp_path / "Pulumi.noproject.yaml").write_text(_dev_without_project())
    assert offline_plan.run("noproject", tmp_path / "out", tmp_path) == 2
    err = capsys.readouterr().err
    assert (
        "Pulumi.noproject.yaml: gcp:project: a GKE stack needs the GCP project to deploy into, and none is set; "
        "run `pulumi config set gcp:project <project-id> -s noproject`"
    ) in err
    assert "Traceback" not in err


def test_the_project_may_come_from_the_stack_file_the_provider_key_or_the_environment():
    raw = base("gcp")
    cfg = parse_stack_config(raw, "Pulumi.dev.yaml")
    assert gcp_project_problems(cfg, {}, {}, "Pulumi.dev.yaml", "dev")
    assert gcp_project_problems(cfg, {"gcp:project": "my-project"}, {}, "Pulumi.dev.yaml", "dev") == []
    assert gcp_project_problems(cfg, {}, {"GOOGLE_CLOUD_PROJECT": "my-project"}, "Pulumi.dev.yaml", "dev") == []
    named = parse_stack_config({**raw, "cluster": {"gcpProject": "my-project"}}, "Pulumi.dev.yaml")
    assert gcp_project_problems(named, {}, {}, "Pulumi.dev.yaml", "dev") == []
    aws = parse_stack_config(base("aws"), "Pulumi.prod.yaml")
    assert gcp_project_problems(aws, {}, {}, "Pulumi.prod.yaml", "prod") == []
