"""How long one `pulumi up` of a stack may block, from what the program asks the engine for.

Each recorded resource gets the longest the engine may wait for it (below), and the longest chain
of such waits through the dependency graph is the longest `pulumi up` can run before it either
finishes or fails on its own. The `pulumi up` workflow's job timeout must exceed it: a job killed
mid-update leaves a pending operation on the stack (.github/workflows/pulumi-up.yml; the test in
tests/offline_plan/test_waits.py reads both committed stacks and the workflow).

The longest wait per resource, by what decides it:
- customTimeouts (create) when the program sets them; the engine and providers honour them.
- Kubernetes objects the provider awaits without a timeout: 10 minutes, pulumi-kubernetes'
  default (provider/pkg/await/await.go, `timeout := 10 * time.Minute`). Awaited are the kinds with a
  built-in awaiter (provider/pkg/await/awaiters.go: Deployment, StatefulSet, DaemonSet, Job, Pod,
  Service, PersistentVolume(Claim), Ingress, ReplicationController, ResourceQuota) and any object
  with `pulumi.com/waitFor`; `pulumi.com/skipAwait: "true"` waits for nothing. Secrets other than
  service-account tokens and ServiceAccounts (Kubernetes >= 1.24) return at once (same file), as
  does everything else, custom resources without waitFor among them.
- Helm releases that wait: up to three times their `timeout` (default 300 s, provider/pkg/provider/
  helm_release.go): Helm gives pre-install hooks, the release's objects and post-install hooks each
  the full timeout (helm/helm v3 pkg/action/install.go, performInstall).
- Cloud resources without customTimeouts: the provider's default create timeout where the provider
  documents one (the table below, from the Terraform providers these Pulumi providers wrap);
  other cloud resources (IAM, buckets, networks) are counted as 0: they have no wait of their own
  beyond their API calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from common import contract
from offline_plan.mock_runtime import Evaluation, RecordedResource

KUBERNETES_DEFAULT_WAIT_SECONDS = 600
HELM_DEFAULT_TIMEOUT_SECONDS = 300
HELM_PHASES = 3

# Default create timeouts, seconds:
# - aws_eks_cluster 30 minutes, aws_eks_node_group 60 minutes (terraform-provider-aws
#   website/docs/r/eks_cluster.html.markdown and eks_node_group.html.markdown, "Timeouts");
# - google_container_cluster 40 minutes, google_container_node_pool 30 minutes
#   (terraform-provider-google website/docs/r/container_cluster.html.markdown and
#   container_node_pool.html.markdown, "Timeouts").
CLOUD_CREATE_WAIT_SECONDS = {
    "aws:eks/cluster:Cluster": 30 * 60,
    "aws:eks/nodeGroup:NodeGroup": 60 * 60,
    "gcp:container/cluster:Cluster": 40 * 60,
    "gcp:container/nodePool:NodePool": 30 * 60,
}

# Kubernetes kinds (apiVersion, kind) with a built-in awaiter that can block.
AWAITED_KINDS = {
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume"),
    ("v1", "ReplicationController"),
    ("v1", "ResourceQuota"),
    ("networking.k8s.io/v1", "Ingress"),
}

# What a job of .github/workflows/pulumi-up.yml spends before `pulumi up` starts: checkout, two
# virtualenvs (`make venv` and the policy pack's), cloud credentials, the Pulumi CLI. A judgement
# with room to spare: those steps take a few minutes on a hosted runner.
WORKFLOW_SETUP_SECONDS = 15 * 60
# "Each job in a workflow can run for up to 6 hours of execution time" on GitHub-hosted runners
# (https://docs.github.com/en/actions/learn-github-actions/usage-limits-billing-and-administration).
GITHUB_HOSTED_JOB_LIMIT_MINUTES = 360

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def duration_seconds(text: str) -> int:
    """Seconds of a Pulumi customTimeouts string ("1200s", "90m", "1h30m")."""
    match = _DURATION.match(text.strip())
    if not text.strip() or not match:
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return math.ceil(hours * 3600 + minutes * 60 + seconds)


@dataclass(frozen=True)
class Wait:
    resource: RecordedResource
    seconds: int
    why: str


def _annotations(resource: RecordedResource) -> dict:
    return (resource.inputs.get("metadata") or {}).get("annotations") or {}


def resource_wait(resource: RecordedResource) -> Wait:
    """The longest the engine may wait for `resource` to be created (see the module docstring)."""
    create = resource.custom_timeouts.get("create")
    if resource.read_id is not None:
        return Wait(resource, 0, "a read")
    if resource.is_kubernetes_object:
        annotations = _annotations(resource)
        if str(annotations.get(contract.PULUMI_SKIP_AWAIT, "")).lower() == "true":
            return Wait(resource, 0, "skipAwait")
        awaited = (
            contract.PULUMI_WAIT_FOR in annotations
            or (resource.inputs.get("apiVersion"), resource.inputs.get("kind")) in AWAITED_KINDS
        )
        if not awaited:
            return Wait(resource, 0, "not awaited")
        if create:
            return Wait(resource, duration_seconds(create), "customTimeouts")
        return Wait(resource, KUBERNETES_DEFAULT_WAIT_SECONDS, "pulumi-kubernetes default")
    if resource.type == "kubernetes:helm.sh/v3:Release":
        if resource.inputs.get("skipAwait"):
            return Wait(resource, 0, "skipAwait")
        timeout = int(resource.inputs.get("timeout") or HELM_DEFAULT_TIMEOUT_SECONDS)
        return Wait(resource, HELM_PHASES * timeout, f"Helm: {HELM_PHASES} x timeout {timeout} s")
    if create:
        return Wait(resource, duration_seconds(create), "customTimeouts")
    if resource.type in CLOUD_CREATE_WAIT_SECONDS:
        return Wait(resource, CLOUD_CREATE_WAIT_SECONDS[resource.type], "provider's default create timeout")
    return Wait(resource, 0, "no wait of its own")


def _direct(resource: RecordedResource, by_urn: dict[str, RecordedResource]) -> set[str]:
    urns = set(resource.dependencies)
    if resource.provider:
        urns.add(resource.provider.rsplit("::", 1)[0])
    return {u for u in urns if u in by_urn and u != resource.urn}


def longest_chain(resources: Iterable[RecordedResource]) -> tuple[int, list[Wait]]:
    """The chain of waits that ends last: its total seconds and its waits, first to last."""
    resources = [r for r in resources if r.urn]
    by_urn = {r.urn: r for r in resources}
    finish: dict[str, tuple[int, str | None]] = {}

    def end(urn: str, visiting: frozenset[str] = frozenset()) -> int:
        if urn in finish:
            return finish[urn][0]
        if urn in visiting:
            raise ValueError(f"dependency cycle through {urn}")
        before, previous = 0, None
        # Sorted, so a tie between two equally long chains goes to the same one on every run (a set's
        # order changes with the process's hash seed).
        for dep in sorted(_direct(by_urn[urn], by_urn)):
            t = end(dep, visiting | {urn})
            if t > before:
                before, previous = t, dep
        finish[urn] = (before + resource_wait(by_urn[urn]).seconds, previous)
        return finish[urn][0]

    if not resources:
        return 0, []
    last = max(sorted(by_urn), key=end)
    chain: list[Wait] = []
    urn: str | None = last
    while urn is not None:
        wait = resource_wait(by_urn[urn])
        if wait.seconds:
            chain.append(wait)
        urn = finish[urn][1]
    chain.reverse()
    return finish[last][0], chain


def required_job_minutes(chain_seconds: int) -> int:
    """The job timeout a stack needs: its longest chain plus the job's set-up, in whole minutes."""
    return math.ceil((chain_seconds + WORKFLOW_SETUP_SECONDS) / 60)


def chain_table(evaluation: Evaluation) -> dict:
    """For plan.md and the stack outputs of the offline plan: the longest chain, step by step."""
    total, chain = longest_chain(evaluation.resources)
    return {
        "totalSeconds": total,
        "requiredJobMinutes": required_job_minutes(total),
        "steps": [
            {"resource": f"{w.resource.type} {w.resource.name}", "seconds": w.seconds, "why": w.why} for w in chain
        ],
    }
