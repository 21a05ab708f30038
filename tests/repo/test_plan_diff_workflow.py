"""The offline plan diff on every pull request: pull-request.yml's job plan-diff and plan-diff-comment.yml.

Their shape is linted with the other workflows (actionlint and zizmor, test_workflows.py). Here: the stacks, the
permissions (the job that runs the pull request's code reads only; the one that comments runs none of it), the
diff step run for real under bash on two plan folders, and the comment script run for real under node against a
stand-in of the GitHub API, so that a second run updates the stack's comment instead of adding one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from offline_plan import diff, plan_json
from tests.support import paths

WORKFLOWS = paths.ROOT / ".github" / "workflows"
CHECKOUT = "actions/checkout@"
MARKER_DEV = diff.MARKER.format(stack="dev")


def _load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _job() -> dict:
    return _load("pull-request.yml")["jobs"]["plan-diff"]


def _step(job: dict, name: str) -> dict:
    [step] = [s for s in job["steps"] if s.get("name") == name]
    return step


def _served_stacks() -> list[str]:
    stacks = []
    for path in sorted(paths.ROOT.glob("Pulumi.*.yaml")):
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
        if config.get("llm-serving:role") != "deployer":
            stacks.append(path.name.removeprefix("Pulumi.").removesuffix(".yaml"))
    return stacks


def test_the_diff_job_plans_every_served_stack_on_both_branches_with_a_read_only_token():
    job = _job()
    assert job["strategy"]["matrix"]["stack"] == _served_stacks()
    assert job["permissions"] == {"contents": "read"}
    assert "if" not in job, "forks get the offline diff too"
    checkouts = [s for s in job["steps"] if str(s.get("uses", "")).startswith(CHECKOUT)]
    assert [c["with"]["path"] for c in checkouts] == ["head", "base"]
    assert checkouts[1]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert all(c["with"]["persist-credentials"] is False for c in checkouts)
    for name, folder in (("offline plan of the base branch", "base"), ("offline plan of the pull request", "head")):
        step = _step(job, name)
        assert step["working-directory"] == folder
        assert 'venv/bin/python -m offline_plan --stack "$STACK" || [ "$?" -eq 1 ]' in step["run"]
    upload = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload and upload[0]["with"]["name"] == "plan-diff-${{ matrix.stack }}"


def test_the_comment_workflow_runs_after_pull_request_and_runs_none_of_its_code():
    workflow = _load("plan-diff-comment.yml")
    trigger = workflow[True]["workflow_run"]  # YAML 1.1 reads the key `on` as True
    assert trigger == {"workflows": [_load("pull-request.yml")["name"]], "types": ["completed"]}
    assert workflow["permissions"] == {}
    [job] = workflow["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert not any(str(s.get("uses", "")).startswith(CHECKOUT) for s in job["steps"])
    assert job["if"] == "github.event.workflow_run.event == 'pull_request'"


def _summary(stack: str, models: list[dict]) -> dict:
    return {
        "format": plan_json.FORMAT,
        "stack": stack,
        "deployable": True,
        "reasons": [],
        "models": models,
        "gpus": [],
        "verdicts": [],
        "images": [],
        "warnings": [],
        "resources": [],
    }


def _python_stand_in(folder: Path) -> None:
    """head/venv/bin/python: this interpreter with the repository on its path."""
    bin_dir = folder / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{paths.ROOT}" exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)


def _run_diff_step(tmp_path: Path, base_plan: dict | None) -> tuple[subprocess.CompletedProcess, Path]:
    if shutil.which("bash") is None:
        pytest.fail("bash is needed to run the workflow's step")
    head = tmp_path / "head"
    _python_stand_in(head)
    model = {"model": "m", **dict.fromkeys(plan_json.MODEL_FIELDS, 1)}
    for side, data in (("head", _summary("dev", [model])), ("base", base_plan)):
        folder = tmp_path / side / "build" / "dev"
        folder.mkdir(parents=True)
        if data is not None:
            plan_json.write(folder / plan_json.FILENAME, data)
    summary = tmp_path / "summary.md"
    env = {**os.environ, "STACK": "dev", "PR_NUMBER": "42", "GITHUB_STEP_SUMMARY": str(summary)}
    step = _step(_job(), "python -m offline_plan.diff")
    # GitHub runs `run:` scripts with `bash -e {0}`.
    result = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    return result, tmp_path / "plan-diff"


def test_the_diff_step_writes_the_comment_body_and_the_pull_request_number(tmp_path):
    result, out = _run_diff_step(tmp_path, _summary("dev", []))
    assert result.returncode == 0, result.stderr
    body = (out / "dev.md").read_text()
    assert body.startswith(MARKER_DEV) and "| `m` | added |" in body
    assert (out / "pr-number").read_text() == "42\n"
    assert sorted(p.name for p in out.iterdir()) == ["dev.md", "pr-number"]
    assert (tmp_path / "summary.md").read_text() == body


def test_a_base_without_plan_json_gets_a_one_line_note(tmp_path):
    result, out = _run_diff_step(tmp_path, None)
    assert result.returncode == 0, result.stderr
    body = (out / "dev.md").read_text().splitlines()
    assert body[0] == MARKER_DEV
    assert body[-1].startswith("Not compared: offline plan diff: ") and "plan.json: missing" in body[-1]


# A stand-in of github-script's globals: the REST calls the script makes, answered from `state`, recorded in `calls`.
HARNESS = r"""
const fs = require('fs');
const state = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const calls = [];
const github = {
  paginate: async (fn, params) => (await fn(params)).data,
  rest: {
    pulls: { get: async ({ pull_number }) => ({ data: { head: { sha: state.heads[pull_number] } } }) },
    issues: {
      listComments: async ({ issue_number }) => ({ data: state.comments.filter((c) => c.issue === issue_number) }),
      updateComment: async (p) => { calls.push(['update', p.comment_id, p.body]); },
      createComment: async (p) => { calls.push(['create', p.issue_number, p.body]); },
    },
  },
};
const context = { repo: { owner: 'o', repo: 'r' } };
const core = { warning: (m) => calls.push(['warning', m]) };
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
new AsyncFunction('require', 'github', 'context', 'core', fs.readFileSync(process.argv[3], 'utf8'))(
  require, github, context, core,
).then(() => console.log(JSON.stringify(calls)), (e) => { console.error(e); process.exit(1); });
"""


def _run_comment_script(tmp_path: Path, state: dict, head_sha: str) -> list:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the comment script runs on GitHub's runners only")
    job = next(iter(_load("plan-diff-comment.yml")["jobs"].values()))
    step = _step(job, "post or update one comment per stack")
    assert step["uses"].startswith("actions/github-script@")
    (tmp_path / "script.js").write_text(step["with"]["script"])
    (tmp_path / "harness.js").write_text(HARNESS)
    (tmp_path / "state.json").write_text(json.dumps(state))
    result = subprocess.run(
        [node, "harness.js", "state.json", "script.js"],
        cwd=tmp_path,
        env={**os.environ, "HEAD_SHA": head_sha},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def artifacts(tmp_path):
    for stack in ("dev", "prod"):
        folder = tmp_path / "plan-diff" / f"plan-diff-{stack}"
        folder.mkdir(parents=True)
        (folder / f"{stack}.md").write_text(diff.MARKER.format(stack=stack) + f"\n## diff of {stack}\n")
        (folder / "pr-number").write_text("7\n")
    return tmp_path


def test_the_comment_script_creates_one_comment_per_stack_then_updates_it(artifacts):
    first = _run_comment_script(artifacts, {"heads": {"7": "abc"}, "comments": []}, "abc")
    assert [c[:2] for c in first] == [["create", 7], ["create", 7]]
    assert first[0][2].startswith(MARKER_DEV)
    # The next run finds each stack's comment by its marker (only the bot's own) and edits it.
    comments = [
        {"issue": 7, "id": 11, "user": {"login": "someone"}, "body": MARKER_DEV + "\nquoted by a person"},
        {"issue": 7, "id": 12, "user": {"login": "github-actions[bot]"}, "body": first[0][2]},
        {"issue": 7, "id": 13, "user": {"login": "github-actions[bot]"}, "body": first[1][2]},
    ]
    second = _run_comment_script(artifacts, {"heads": {"7": "abc"}, "comments": comments}, "abc")
    assert [c[:2] for c in second] == [["update", 12], ["update", 13]]


def test_the_comment_script_posts_nothing_where_the_pull_request_moved_on(artifacts):
    calls = _run_comment_script(artifacts, {"heads": {"7": "def"}, "comments": []}, "abc")
    assert [c[0] for c in calls] == ["warning", "warning"]
    assert "#7 is at def, the run planned abc" in calls[0][1]
