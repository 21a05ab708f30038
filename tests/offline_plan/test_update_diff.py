"""What a second `pulumi up` replaces: the classification against pulumi-kubernetes' and the cloud
providers' replace-on-change properties, and both committed stacks through the weekly changes."""

from __future__ import annotations

import copy
import json

import pytest

from offline_plan import update_diff
from offline_plan.mock_runtime import Evaluation, RecordedResource
from tests.support.committed import STACKS, committed_stack

# --- classify on hand-made evaluations ---------------------------------------------------------


def _k8s(kind: str, api: str, name: str = "x", **fields) -> RecordedResource:
    inputs = {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ns"}, **fields}
    group = api.split("/")[0] if "/" in api else "core"
    return RecordedResource(f"kubernetes:{group}/v1:{kind}", name, inputs, None, True, urn=f"urn:{kind}:{name}")


def _cloud(type_: str, **inputs) -> RecordedResource:
    return RecordedResource(type_, "c", dict(inputs), None, True, urn=f"urn:{type_}")


def _kind_of(old: RecordedResource, edit) -> str:
    new = copy.deepcopy(old)
    edit(new)
    (change,) = update_diff.classify(Evaluation("t", [old]), Evaluation("t", [new])).values()
    return change.kind


def _set(path: str, value):
    def edit(r: RecordedResource) -> None:
        *parents, last = path.split(".")
        node = r.inputs
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return edit


JOB = _k8s("Job", "batch/v1", spec={"template": {"spec": {"containers": [{"name": "m", "image": "a:1"}]}}})
DEPLOYMENT = _k8s(
    "Deployment",
    "apps/v1",
    spec={"selector": {"matchLabels": {"app": "x"}}, "template": {"spec": {"containers": [{"image": "a:1"}]}}},
)


@pytest.mark.parametrize(
    "resource, path, value, kind",
    [
        (JOB, "spec.template.spec.containers", [{"name": "m", "image": "a:2"}], "replace"),
        (JOB, "spec.backoffLimit", 3, "update"),
        (DEPLOYMENT, "spec.template.spec.containers", [{"image": "a:2"}], "update"),
        (DEPLOYMENT, "spec.selector.matchLabels", {"app": "y"}, "replace"),
        (DEPLOYMENT, "spec.replicas", 3, "update"),
        (_k8s("PersistentVolumeClaim", "v1", spec={"storageClassName": "a"}), "spec.storageClassName", "b", "replace"),
        (
            _k8s("PersistentVolumeClaim", "v1", spec={"resources": {}}),
            "spec.resources.requests",
            {"storage": "2Gi"},
            "update",
        ),
        (_k8s("StorageClass", "storage.k8s.io/v1", parameters={"a": "1"}), "parameters.a", "2", "replace"),
        (_k8s("Secret", "v1", stringData={"k": "1"}), "stringData.k", "2", "replace"),
        (_k8s("ConfigMap", "v1", data={"k": "1"}), "data.k", "2", "replace"),
        (_k8s("ConfigMap", "v1", data={"k": "1"}), "metadata.labels", {"a": "b"}, "update"),
        (_k8s("NodePool", "karpenter.sh/v1", spec={"limits": {}}), "spec.limits.cpu", "10", "update"),
        (_k8s("NodePool", "karpenter.sh/v1", spec={}), "metadata.name", "other", "replace"),
        (_k8s("Service", "v1", spec={"clusterIP": "None"}), "spec.clusterIP", "10.0.0.1", "replace"),
        (_cloud("kubernetes:helm.sh/v3:Release", name="r", values={}), "values.a", 1, "update"),
        (_cloud("kubernetes:helm.sh/v3:Release", name="r", values={}), "name", "s", "replace"),
        (_cloud("aws:eks/nodeGroup:NodeGroup", scalingConfig={"maxSize": 2}), "scalingConfig.maxSize", 3, "update"),
        (
            _cloud("aws:eks/nodeGroup:NodeGroup", instanceTypes=["p5.48xlarge"]),
            "instanceTypes",
            ["p4d.24xlarge"],
            "replace",
        ),
        (_cloud("gcp:container/nodePool:NodePool", autoscaling={}), "autoscaling.totalMaxNodeCount", 2, "update"),
        # Not classified by the table: assumed to replace, never claimed as an update.
        (
            _cloud("gcp:container/nodePool:NodePool", nodeConfig={}),
            "nodeConfig.machineType",
            "g2-standard-16",
            "replace",
        ),
        (_cloud("aws:s3/bucket:Bucket", tags={}), "tags.a", "b", "update"),
        (_cloud("aws:s3/bucket:Bucket", bucket="a"), "bucket", "b", "replace"),
        (_cloud("aws:s3/bucket:Bucket"), "objectLockEnabled", True, "replace"),
    ],
)
def test_a_change_is_classified_as_the_provider_diffs_it(resource, path, value, kind):
    assert _kind_of(resource, _set(path, value)) == kind


def test_same_create_and_delete_by_urn():
    a, b = copy.deepcopy(JOB), _k8s("Job", "batch/v1", name="y")
    diff = update_diff.classify(Evaluation("t", [a]), Evaluation("t", [copy.deepcopy(a), b]))
    assert {c.name: c.kind for c in diff.values()} == {"x": "same", "y": "create"}
    diff = update_diff.classify(Evaluation("t", [a, b]), Evaluation("t", [a]))
    assert {c.name: c.kind for c in diff.values()} == {"x": "same", "y": "delete"}


def test_resource_options_change_the_verdict():
    ignored = copy.deepcopy(JOB)
    ignored.ignore_changes = ("spec.template",)
    assert _kind_of(ignored, _set("spec.template.spec.containers", [])) == "same"
    forced = copy.deepcopy(DEPLOYMENT)
    forced.replace_on_changes = ("spec.replicas",)
    assert _kind_of(forced, _set("spec.replicas", 2)) == "replace"


def test_every_table_entry_names_its_source_and_every_path_is_spelled_as_an_input_path():
    entries = update_diff.replace_table()
    assert entries
    for key, entry in entries.items():
        assert entry["source"] and ("/" in entry["source"] or "http" in entry["source"]), key
        assert entry["paths"] and all(isinstance(p, str) and p.strip(".") for p in entry["paths"]), key
    # The Job's pod template is what makes a new revision replace the mirror Job.
    assert ".spec.template" in entries["k8s:batch/Job"]["paths"]
    assert json.loads(update_diff.TABLE.read_text())["about"]


# --- both committed stacks through the weekly changes -----------------------------------------


@pytest.fixture(scope="module", params=STACKS)
def weekly(request):
    before = committed_stack(request.param)
    return request.param, before, {change.name: diff for change, diff in update_diff.weekly_diffs(before)}


def _of(diff, kind):
    return {c.name: c for c in diff.values() if c.kind == kind}


def test_the_four_weekly_changes_are_made(weekly):
    _, _, diffs = weekly
    assert list(diffs) == ["new model revision", "new vLLM release", "more replicas", "new LoRA adapter"]
    assert all(any(c.kind != "same" for c in diff.values()) for diff in diffs.values())


def test_no_weekly_change_replaces_or_deletes_a_cluster_pool_bucket_network_key_or_file_system(weekly):
    stack, before, diffs = weekly
    durable = {r.urn for r in before.resources if r.type in update_diff.NEVER_REPLACED}
    assert len(durable) >= 5, stack  # the cluster, its pools, the bucket and the network are there
    for change, diff in diffs.items():
        hit = [f"{c.type} {c.name}: {c.kind}" for urn, c in diff.items() if urn in durable and c.kind != "same"]
        assert all(line.endswith(": update") for line in hit), (change, hit)


def test_nothing_is_deleted_and_only_jobs_and_hashed_config_maps_are_replaced(weekly):
    _, before, diffs = weekly
    kinds = {r.urn: r.inputs.get("kind") for r in before.resources}
    for change, diff in diffs.items():
        assert not _of(diff, "delete"), change
        assert {kinds[c.urn] for c in _of(diff, "replace").values()} <= {"Job", "ConfigMap"}, change


def test_a_new_revision_replaces_the_mirror_job_because_its_pod_template_is_immutable(weekly):
    _, _, diffs = weekly
    replaced = _of(diffs["new model revision"], "replace")
    mirror = replaced["llama-3-1-8b-instruct-mirror"]
    assert ".spec.template" in mirror.forced
    assert any("diff.go" in s and "var job" in s for s in mirror.sources)
    # The servers roll (an update of the Deployment's template), they are not replaced.
    updated = _of(diffs["new model revision"], "update")
    assert "llama-3-1-8b-instruct-deployment" in updated


def test_a_new_vllm_release_rolls_the_servers_and_leaves_the_mirror_job(weekly):
    _, _, diffs = weekly
    diff = diffs["new vLLM release"]
    assert "llama-3-1-8b-instruct-deployment" in _of(diff, "update")
    assert "llama-3-1-8b-instruct-mirror" not in _of(diff, "replace")
    deployment = _of(diff, "update")["llama-3-1-8b-instruct-deployment"]
    assert any(p.endswith(".image") for p in deployment.paths)


def test_more_replicas_update_the_pool_in_place(weekly):
    stack, _, diffs = weekly
    updated = _of(diffs["more replicas"], "update")
    pool = "llm-serving-dev-l4-np" if stack == "dev" else "llm-serving-prod-h100-karpenter-nodepool"
    assert pool in updated, sorted(updated)
    assert not _of(diffs["more replicas"], "replace")


def test_a_new_adapter_adds_its_mirror_job(weekly):
    _, _, diffs = weekly
    created = _of(diffs["new LoRA adapter"], "create")
    assert any(name.endswith("-mirror") and "weekly-adapter" in name for name in created), sorted(created)


@pytest.mark.parametrize("stack", STACKS)
def test_plan_section_lists_the_replaced_resources_and_why(stack):
    section = "\n".join(update_diff.replaced_section(committed_stack(stack)))
    assert (
        "| new model revision:" in section
        and "`llama-3-1-8b-instruct-mirror` (`.metadata.name`, `.spec.template`)" in section
    )
    assert "more replicas" in section and "Four more evaluations" in section


def test_switching_prod_to_on_destroy_empty_updates_the_bucket_in_place():
    # force_destroy is not replace-on-change for S3 (the table's terraform-provider-aws entry), so the
    # `pulumi up` that docs/lifecycle.md asks for before a destroy keeps the bucket and its weights.
    from offline_plan.mock_runtime import evaluate_stack

    before = committed_stack("prod")
    after = evaluate_stack("prod", overrides={"modelStore": {"onDestroy": "empty"}})
    diff = update_diff.classify(before, after)
    (bucket,) = [c for c in diff.values() if c.type == "aws:s3/bucket:Bucket"]
    assert (bucket.kind, bucket.paths) == ("update", (".forceDestroy",))
