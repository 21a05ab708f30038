"""resolve-digests.yml: the workflow that fills common/images.py's digests where registries answer.

Its shape is checked like the other workflows (actionlint and zizmor in test_workflows.py, which
lints every file of .github/workflows). Here: the triggers and permissions it needs and no more,
and its two shell steps run for real under bash with stand-ins for the resolver and for `gh`, so
each exit status of the resolver and each state of the branch and the pull request is exercised.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import paths

WORKFLOW = paths.ROOT / ".github" / "workflows" / "resolve-digests.yml"
RESOLVE_COMMAND = "venv/bin/python -m tools.resolve_image_digests --write"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _job() -> dict:
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["resolve"]
    return jobs["resolve"]


def _step(name_prefix: str) -> dict:
    steps = [s for s in _job()["steps"] if str(s.get("name", "")).startswith(name_prefix)]
    assert len(steps) == 1, f"one step named {name_prefix!r}"
    return steps[0]


def test_runs_on_a_schedule_and_by_hand():
    # PyYAML reads the key `on` as True (YAML 1.1).
    triggers = _workflow()[True]
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    (entry,) = triggers["schedule"]
    fields = entry["cron"].split()
    assert len(fields) == 5, "a five-field cron expression"


def test_asks_for_what_a_pull_request_needs_and_nothing_else():
    assert _workflow()["permissions"] == {}
    assert _job()["permissions"] == {"contents": "write", "pull-requests": "write"}
    checkout = next(s for s in _job()["steps"] if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False


def test_runs_the_resolver_with_write_and_the_resolver_takes_it():
    assert RESOLVE_COMMAND in _step("python -m tools.resolve_image_digests")["run"]
    result = subprocess.run(
        [sys.executable, "-m", "tools.resolve_image_digests", "--help"],
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert "--write" in result.stdout


def test_the_pull_request_step_runs_only_when_the_table_changed():
    assert _step("branch and pull request")["if"] == "steps.resolve.outputs.changed == 'true'"


# --- the shell steps, run for real -----------------------------------------------------------


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with common/images.py committed, as actions/checkout leaves it."""
    if shutil.which("bash") is None or shutil.which("git") is None:
        pytest.fail("bash and git are needed to run the workflow's steps")
    repo = tmp_path / "repo"
    (repo / "common").mkdir(parents=True)
    (repo / "common" / "images.py").write_text("DIGESTS = {}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "seed")
    return repo


def _run_step(step: dict, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    runner_temp = repo.parent / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    output = repo.parent / "github-output"
    output.touch()
    full_env = {
        "PATH": f"{repo.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(repo.parent),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(output),
        "DIGESTS_BRANCH": _workflow()["env"]["DIGESTS_BRANCH"],
        **env,
    }
    # GitHub runs `run:` scripts with `bash -e {0}` (plus pipefail when `shell: bash` is named).
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=repo, env=full_env, capture_output=True, text=True, timeout=60
    )


def _fake_resolver(repo: Path, status: int, rewrite: bool) -> None:
    body = "#!/bin/sh\necho 'quay.io/x: unreachable' >&2\n" if status == 1 else "#!/bin/sh\n"
    if rewrite:
        body += 'echo \'DIGESTS = {"vllm": "sha256:00"}\' > common/images.py\n'
    body += f"exit {status}\n"
    (repo / "venv" / "bin").mkdir(parents=True, exist_ok=True)
    _executable(repo / "venv" / "bin" / "python", body)


@pytest.mark.parametrize(
    "status, rewrite, step_status, changed",
    [
        (0, False, 0, "false"),  # every digest already in the table
        (0, True, 0, "true"),  # new digests
        (1, True, 0, "true"),  # some unresolved: the others are still proposed
        (3, False, 3, None),  # a digest that does not match its body: stop, propose nothing
        (4, False, 4, None),  # the table could not be written
    ],
)
def test_resolve_step_turns_each_exit_status_into_a_decision(checkout, status, rewrite, step_status, changed):
    _fake_resolver(checkout, status, rewrite)
    result = _run_step(_step("python -m tools.resolve_image_digests"), checkout, {})
    assert result.returncode == step_status, result.stderr
    output = (checkout.parent / "github-output").read_text()
    if changed is None:
        assert "changed=" not in output
    else:
        assert output.strip() == f"changed={changed}"


GH_STANDIN = """#!/bin/sh
# Records each call; answers the two questions the step asks.
echo "$*" >> "$GH_CALLS"
case "$*" in
  "api repos/o/r/git/ref/heads/"*) [ "$BRANCH_EXISTS" = yes ] && echo '{}' && exit 0; exit 1 ;;
  "pr list"*) [ "$PR_OPEN" = yes ] && echo 7; exit 0 ;;
esac
exit 0
"""


@pytest.mark.parametrize("branch_exists, pr_open", [("no", "no"), ("yes", "no"), ("yes", "yes")])
def test_pull_request_step_resets_the_branch_replaces_the_file_and_opens_one_pull_request(
    checkout, branch_exists, pr_open
):
    bin_dir = checkout.parent / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "gh", GH_STANDIN)
    calls = checkout.parent / "gh-calls"
    runner_temp = checkout.parent / "runner-temp"
    runner_temp.mkdir()
    (runner_temp / "unresolved.txt").write_text("quay.io/x: unreachable\n")
    head = _git(checkout, "rev-parse", "HEAD")
    env = {
        "GH_CALLS": str(calls),
        "BRANCH_EXISTS": branch_exists,
        "PR_OPEN": pr_open,
        "REPOSITORY": "o/r",
        "BASE": "main",
        "RUN_URL": "https://github.com/o/r/actions/runs/1",
        "GITHUB_SHA": head,
        "GH_TOKEN": "not-a-token",
    }
    result = _run_step(_step("branch and pull request"), checkout, env)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    branch = "automation/image-digests"
    if branch_exists == "yes":
        assert any(line.startswith(f"api --method PATCH repos/o/r/git/refs/heads/{branch}") for line in lines)
        assert f"sha={head}" in next(line for line in lines if "--method PATCH" in line)
    else:
        assert any(
            line.startswith("api --method POST repos/o/r/git/refs") and f"ref=refs/heads/{branch}" in line
            for line in lines
        )
    put = next(line for line in lines if line.startswith("api --method PUT repos/o/r/contents/common/images.py"))
    assert f"branch={branch}" in put
    assert f"sha={_git(checkout, 'rev-parse', 'HEAD:common/images.py')}" in put
    created = [line for line in lines if line.startswith("pr create")]
    edited = [line for line in lines if line.startswith("pr edit")]
    assert (len(created), len(edited)) == ((0, 1) if pr_open == "yes" else (1, 0))
    body = (runner_temp / "body.md").read_text()
    assert "quay.io/x: unreachable" in body, "the pull request names what was not resolved"
    assert "not-a-token" not in calls.read_text()
