"""The `pulumi up` workflow's job outlasts the longest chain of waits of every committed stack."""

from __future__ import annotations

import pytest
import yaml

from offline_plan import waits
from offline_plan.mock_runtime import RecordedResource
from tests.support import paths
from tests.support.committed import committed_stack
from tests.support.stack_variants import MULTI_NODE, variant

ROOT = paths.ROOT
WORKFLOW = ROOT / ".github" / "workflows" / "pulumi-up.yml"
STACKS = ("dev", "prod")


@pytest.fixture(scope="module")
def chains() -> dict[str, tuple[int, list[waits.Wait]]]:
    return {stack: waits.longest_chain(committed_stack(stack).resources) for stack in STACKS}


def workflow_timeout_minutes(text: str) -> int:
    return int(yaml.safe_load(text)["jobs"]["up"]["timeout-minutes"])


def timeout_problems(timeout_minutes: int, chains: dict[str, tuple[int, list[waits.Wait]]]) -> list[str]:
    problems = []
    for stack, (seconds, chain) in chains.items():
        needed = waits.required_job_minutes(seconds)
        if timeout_minutes < needed:
            longest = max(chain, key=lambda w: w.seconds)
            problems.append(
                f"{stack}: pulumi up may block {seconds / 60:.0f} min (longest step: {longest.resource.type} "
                f"{longest.resource.name}, {longest.seconds / 60:.0f} min); with set-up the job needs "
                f"{needed} min, the workflow allows {timeout_minutes}"
            )
    if timeout_minutes > waits.GITHUB_HOSTED_JOB_LIMIT_MINUTES:
        problems.append(
            f"timeout-minutes {timeout_minutes} exceeds the {waits.GITHUB_HOSTED_JOB_LIMIT_MINUTES} a "
            "GitHub-hosted job may run"
        )
    return problems


def test_the_workflow_timeout_exceeds_both_stacks_longest_chain(chains):
    assert timeout_problems(workflow_timeout_minutes(WORKFLOW.read_text()), chains) == []


def test_regression_a_120_minute_job_is_shorter_than_the_70b_mirror_wait(chains):
    problems = timeout_problems(120, chains)
    [prod] = [p for p in problems if p.startswith("prod:")]
    assert "llama-3-3-70b-instruct-mirror, 190 min" in prod


def test_a_timeout_above_the_hosted_runner_limit_is_refused(chains):
    assert timeout_problems(400, chains) == ["timeout-minutes 400 exceeds the 360 a GitHub-hosted job may run"]


def test_prods_longest_chain_runs_through_the_cluster_the_70b_mirror_and_its_server(chains):
    seconds, chain = chains["prod"]
    names = [w.resource.name for w in chain]
    assert names[0] == "llm-serving-prod" and "llama-3-3-70b-instruct-mirror" in names
    # After the last server, the verification Job (docs/verification.md) ends the chain.
    assert names[-2:] == ["llama-3-3-70b-instruct-deployment", "verification-job"]
    assert seconds == sum(w.seconds for w in chain)


def test_the_plan_shows_the_chain(chains):
    from offline_plan.write import _waits_section

    text = "\n".join(_waits_section(committed_stack("prod")))
    assert f"timeout-minutes >= {waits.required_job_minutes(chains['prod'][0])}" in text
    assert "llama-3-3-70b-instruct-mirror" in text


def k8s(
    kind: str, api: str = "v1", annotations: dict | None = None, timeouts: dict | None = None, **spec
) -> RecordedResource:
    return RecordedResource(
        type=f"kubernetes:{api}:{kind}",
        name=kind.lower(),
        provider=None,
        custom=True,
        inputs={"apiVersion": api, "kind": kind, "metadata": {"annotations": annotations or {}}, "spec": spec},
        custom_timeouts=timeouts or {},
    )


@pytest.mark.parametrize(
    "resource, seconds",
    [
        (k8s("Service"), 600),
        (k8s("Service", annotations={"pulumi.com/skipAwait": "true"}), 0),
        (k8s("ConfigMap"), 0),
        (k8s("Deployment", "apps/v1", timeouts={"create": "1240s"}), 1240),
        (k8s("ServiceMonitor", "monitoring.coreos.com/v1", timeouts={"create": "900s"}), 0),
        (
            k8s(
                "LeaderWorkerSet",
                "leaderworkerset.x-k8s.io/v1",
                annotations={"pulumi.com/waitFor": "condition=Available"},
                timeouts={"create": "1h2m"},
            ),
            3720,
        ),
        (RecordedResource("kubernetes:helm.sh/v3:Release", "r", {"timeout": 600}, None, True), 1800),
        (RecordedResource("kubernetes:helm.sh/v3:Release", "r", {}, None, True), 900),
        (RecordedResource("aws:eks/nodeGroup:NodeGroup", "ng", {}, None, True), 3600),
        (RecordedResource("aws:iam/role:Role", "role", {}, None, True), 0),
    ],
)
def test_each_resources_longest_wait(resource, seconds):
    assert waits.resource_wait(resource).seconds == seconds


def test_the_multi_node_servers_wait_is_on_the_chain():
    _, chain = waits.longest_chain(variant(MULTI_NODE).resources)
    [lws] = [w for w in chain if w.resource.inputs.get("kind") == "LeaderWorkerSet"]
    assert lws.why == "customTimeouts" and lws.seconds > 0


def test_durations_parse_as_pulumi_writes_them():
    assert [waits.duration_seconds(t) for t in ("90s", "10m", "1h30m", "1.5h")] == [90, 600, 5400, 5400]
    with pytest.raises(ValueError, match="not a duration: 'soon'"):
        waits.duration_seconds("soon")


def test_the_docs_state_the_computed_figures(chains):
    minutes = round(chains["prod"][0] / 60)
    timeout = workflow_timeout_minutes(WORKFLOW.read_text())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"({minutes} minutes for prod" in readme and f"workflow allows {timeout}." in readme
    addons_doc = " ".join((ROOT / "docs" / "addons.md").read_text().split())
    assert f"{minutes} minutes; dev's {round(chains['dev'][0] / 60)}" in addons_doc
    assert f"allows {timeout} minutes" in addons_doc
