"""The README tells the truth: its two set-up commands exist and its config reference is current."""

from __future__ import annotations

import re
import subprocess
import sys

from offline_plan import config_reference as config_doc
from tests.support import paths

ROOT = paths.ROOT


def test_config_reference_is_generated_from_the_models():
    text = (ROOT / "README.md").read_text()
    assert config_doc.updated_readme(text) == text, "run `venv/bin/python -m offline_plan.config_reference`"
    # Every key a user can set is documented, nested ones included.
    for key in (
        "`models[].revision`",
        "`pools[].gpu`",
        "`operators.gpuOperator.driver`",
        "`modelStore.loadFrom`",
        "`models[].autoscaling.queueThreshold`",
        "`hfToken` (secret)",
    ):
        assert key in text


def test_policy_table_lists_every_rule_of_the_pack():
    from policies.registry import RULES

    text = (ROOT / "README.md").read_text()
    for rule in RULES:
        assert f"| `{rule.name}`" in text, rule.name


def test_stale_reference_is_detected(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text((ROOT / "README.md").read_text().replace("`models[].revision`", "`models[].rev`"))
    monkeypatch.setattr(config_doc, "README", stale)
    assert config_doc.main(["--check"]) == 1


def test_first_lines_give_the_two_setup_commands_and_the_makefile_has_them():
    head = (ROOT / "README.md").read_text().splitlines()[:6]
    commands = [line.split("#")[0].strip() for line in head if line.startswith("make ")]
    assert commands == ["make plan", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("plan", "test"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_offline_plan_exits_2_with_the_key_on_a_config_error(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("__main__.py", "serving_stack.py", "Pulumi.yaml"):
        (project / name).write_text((ROOT / name).read_text())
    (project / "Pulumi.broken.yaml").write_text(
        (ROOT / "Pulumi.dev.yaml").read_text().replace("0e9e39f249a16976918f6564b8830bc894c89659", "main")
    )
    code = (
        "import sys; from pathlib import Path; from offline_plan import write as offline_plan;"
        f"sys.exit(offline_plan.run('broken', Path({str(tmp_path / 'out')!r}), Path({str(project)!r})))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert (
        "Pulumi.broken.yaml: models[0].revision: 'main' is a branch or tag; pin a 40-character commit SHA"
        in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_sizing_example_in_the_readme_is_what_the_command_prints():
    text = (ROOT / "README.md").read_text()
    command_start = text.index("venv/bin/python -m components.sizing --model-config ")
    command = text[command_start : text.index("```", command_start)].replace("\\\n", " ").split()
    block_start = text.index("```\n", text.index("```", command_start) + 3) + 4
    shown = text[block_start : text.index("```", block_start)]
    proc = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert shown == proc.stdout
