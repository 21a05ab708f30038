"""The layout holds: imports flow one way along the serving path, with no cycles, and the side
packages stay on the side. The contracts live in .importlinter (import-linter); this file runs them
on the tree, and on copies with a planted wrong import to prove each fails and names the import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import import_graph, paths

ROOT = paths.ROOT
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for package in import_graph.PACKAGES:
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "venv"))
    shutil.copy(ROOT / ".importlinter", tree / ".importlinter")
    (tree / "tests" / "support").mkdir(parents=True)
    shutil.copy(Path(import_graph.__file__), tree / "tests" / "support" / "import_graph.py")
    return tree


def plant(tree: Path, module_path: str, line: str) -> None:
    path = tree / module_path
    path.write_text(path.read_text() + f"\n{line}  # planted by tests/repo/test_layout.py\n")


def test_every_import_contract_holds():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_no_module_imports_itself_back_in_a_circle():
    assert import_graph.cycles(import_graph.build()) == []


@pytest.mark.parametrize("package", ["common", "endpoint_tools"])
def test_common_and_the_endpoint_tools_need_only_the_standard_library(package):
    # The endpoint tools run anywhere Python does (a laptop, a pinned Python image in the cluster),
    # and common is what they read: neither may pull in Pulumi, pydantic or a Hub client.
    graph = import_graph.build(include_external=True)
    outside = {
        module: names - set(sys.stdlib_module_names)
        for module, names in import_graph.external_imports(graph, package).items()
    }
    assert {m: n for m, n in outside.items() if n} == {}


# A planted import of each kind the contracts forbid, and the words lint-imports must say.
PLANTED = [
    ("planner/plan.py", "from components.serving import vllm", "planner.plan -> components.serving.vllm"),
    (
        "components/cluster/common.py",
        "from components.model_store import store",
        "components.cluster.common -> components.model_store.store",
    ),
    ("common/gpus.py", "import stack_config", "common.gpus -> stack_config"),
    (
        "components/cluster/aws/eks.py",
        "from components.cluster.gcp import gke",
        "components.cluster.aws.eks -> components.cluster.gcp.gke",
    ),
    ("policies/rules/models.py", "from planner import sizing", "policies.rules.models -> planner.sizing"),
    ("policies/gpu.py", "from common import engine", "policies.gpu -> common.engine"),
    ("endpoint_tools/smoke.py", "from planner import plan", "endpoint_tools.smoke -> planner.plan"),
    (
        "components/serving/vllm.py",
        "from endpoint_tools import smoke",
        "components.serving.vllm -> endpoint_tools.smoke",
    ),
    ("planner/hub.py", "from offline_plan import mock_runtime", "planner.hub -> offline_plan.mock_runtime"),
    ("safe_yaml/bounded.py", "from policies import check", "safe_yaml.bounded -> policies.check"),
    ("stack_config/loader.py", "import safe_yaml", "stack_config.loader -> safe_yaml"),
]


@pytest.mark.parametrize("module_path,line,named", PLANTED, ids=[p[2] for p in PLANTED])
def test_a_planted_wrong_import_breaks_a_contract_that_names_it(tmp_path, module_path, line, named):
    tree = copy_of_the_tree(tmp_path)
    plant(tree, module_path, line)
    proc = lint_imports(tree)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BROKEN" in proc.stdout and named in proc.stdout, proc.stdout


def test_a_planted_cycle_inside_one_package_is_found(tmp_path):
    # Layers say nothing about two modules of one layer; the cycle check does.
    tree = copy_of_the_tree(tmp_path)
    plant(tree, "planner/sizing.py", "from planner import sizing_cli")
    proc = subprocess.run(
        [sys.executable, "tests/support/import_graph.py"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(tree)},
    )
    assert proc.returncode == 1
    assert "import cycle: planner.sizing <-> planner.sizing_cli" in proc.stdout
