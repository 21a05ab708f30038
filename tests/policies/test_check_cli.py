"""The manifest checker as users run it (`python -m policies.check`), and its library entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from policies.check import Verdict, check_objects
from tests.support import paths
from tests.support.committed import committed_stack
from tests.support.policy_engine import FIXTURES, load_fixture

ROOT = str(paths.ROOT)
GOOD = os.path.join(FIXTURES, "good")
BAD = os.path.join(FIXTURES, "bad")
MALFORMED = os.path.join(FIXTURES, "malformed")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "policies.check", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_good_folder_exits_zero():
    p = run("tests/fixtures/policy/good")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == ""


def test_bad_folder_exits_one_with_one_line_per_violation():
    p = run("tests/fixtures/policy/bad")
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    files = sorted(f for f in os.listdir(BAD) if f.endswith(".yaml"))
    assert len(lines) == len(files)  # each broken variant breaks exactly one rule
    for line in lines:
        file, ref, _, rest = line.split(": ", 3)
        _, level = rest.split(": ", 1)[0].split(" ")
        assert file.startswith("tests/fixtures/policy/bad/") and "/" in ref and level == "[mandatory]"
    by_file = {line.split(": ", 1)[0].rsplit("/", 1)[-1]: line for line in lines}
    assert " image-tag-pinned [mandatory]: " in by_file["image-tag-pinned.yaml"]
    assert ": vllm: gpu-in-limits" in by_file["gpu-in-limits.yaml"]
    assert "900 s" in by_file["startup-probe-budget.yaml"]


@pytest.mark.parametrize(
    "path,expected",
    [
        ("tests/fixtures/policy/malformed/broken.yaml", "broken.yaml:9:"),
        ("tests/fixtures/policy/malformed/not-a-mapping.yaml", "document 1 is a list, not a mapping"),
        ("tests/fixtures/policy/does-not-exist.yaml", "no such file or folder"),
        ("tests/fixtures/policy/malformed", "not valid YAML"),
    ],
)
def test_unreadable_input_exits_two_with_one_line(path, expected):
    p = run(path)
    assert p.returncode == 2
    assert p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and expected in p.stderr and "Traceback" not in p.stderr


def test_folder_without_manifests_is_an_error(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    p = run(str(tmp_path))
    assert p.returncode == 2 and "no *.yaml" in p.stderr


def test_json_report_shape():
    p = run("--json", "tests/fixtures/policy/bad/gpu-in-limits.yaml", "tests/fixtures/policy/good/list-kind.yaml")
    assert p.returncode == 1
    report = json.loads(p.stdout)
    assert list(report) == ["resources"]
    for r in report["resources"]:
        assert set(r) == {"file", "kind", "name", "namespace", "violations"}
        for v in r["violations"]:
            assert set(v) == {"policy", "level", "message"}
    by_ref = {(r["kind"], r["name"]): r for r in report["resources"]}
    assert [v["policy"] for v in by_ref[("Deployment", "gpu-only-in-requests")]["violations"]] == ["gpu-in-limits"]
    # The List was flattened into its items.
    assert by_ref[("StatefulSet", "redis")]["violations"] == [] and ("Service", "redis") in by_ref
    assert by_ref[("Deployment", "gpu-only-in-requests")]["namespace"] == "serving"


TWO_NAMESPACES = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team-a}
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 101, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: app, image: "nginx:1.27.2", securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]},
     readOnlyRootFilesystem: true}, resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 64Mi}},
     livenessProbe: {httpGet: {path: /, port: 80}}, readinessProbe: {httpGet: {path: /, port: 80}}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team-b}
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 101, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: app, image: "nginx:latest", securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]},
     readOnlyRootFilesystem: true}, resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 64Mi}},
     livenessProbe: {httpGet: {path: /, port: 80}}, readinessProbe: {httpGet: {path: /, port: 80}}}
"""


def test_same_name_in_two_namespaces_keeps_verdicts_apart(tmp_path):
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(TWO_NAMESPACES)
    p = run("--json", str(manifest))
    assert p.returncode == 1, p.stderr
    entries = json.loads(p.stdout)["resources"]
    assert [(e["kind"], e["name"], e["namespace"]) for e in entries] == [
        ("Pod", "web", "team-a"),
        ("Pod", "web", "team-b"),
    ]
    # The second Pod breaks the rule; keyed by (file, kind, name) its verdict would land on the first.
    assert entries[0]["violations"] == []
    assert [v["policy"] for v in entries[1]["violations"]] == ["image-tag-pinned"]
    p = run(str(manifest))
    (line,) = p.stdout.splitlines()
    assert line.startswith(f"{manifest}: Pod/web -n team-b: app: image-tag-pinned [mandatory]: ")


def test_config_changes_level_and_thresholds(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"startup-probe-budget": {"enforcementLevel": "advisory"}}))
    p = run("--config", str(cfg), "tests/fixtures/policy/bad/startup-probe-budget.yaml")
    assert p.returncode == 0 and "[advisory]" in p.stdout
    cfg.write_text(json.dumps({"startup-probe-budget": {"minimumSeconds": 600}}))
    p = run("--config", str(cfg), "tests/fixtures/policy/good/vllm-deployment.yaml")
    assert p.returncode == 1 and "configured minimum of 600 s" in p.stdout
    cfg.write_text(json.dumps({"image-tag-pinned": "disabled"}))
    assert run("--config", str(cfg), "tests/fixtures/policy/bad/image-tag-pinned.yaml").returncode == 0


@pytest.mark.parametrize(
    "config,expected",
    [
        ({"no-such-policy": {}}, "unknown policy 'no-such-policy'"),
        ({"image-tag-pinned": {"requireDigest": "yes"}}, "requireDigest must be a boolean"),
        ({"image-tag-pinned": {"enforcementLevel": "strict"}}, "enforcementLevel is 'strict'"),
        ({"image-tag-pinned": {"minimumSeconds": 5}}, "unknown setting 'minimumSeconds'"),
        # The schema's `minimum`, as the engine would enforce it on PolicyConfigSchema.
        (
            {"startup-probe-budget": {"minimumSeconds": -5}},
            "config['startup-probe-budget'].minimumSeconds must be a number >= 0, not -5",
        ),
        ({"startup-probe-budget": {"livenessMinimumSeconds": True}}, "livenessMinimumSeconds must be a number >= 0"),
        ({"gpu-taint-tolerated": {"taintKey": 7}}, "config['gpu-taint-tolerated'].taintKey must be a string, not 7"),
    ],
)
def test_bad_config_exits_two(tmp_path, config, expected):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(config))
    p = run("--config", str(cfg), "tests/fixtures/policy/good")
    assert p.returncode == 2 and expected in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_config_that_is_not_json_exits_two(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text("{not json")
    p = run("--config", str(cfg), "tests/fixtures/policy/good")
    assert p.returncode == 2 and "not valid JSON" in p.stderr


# check_objects: the offline plan's entry point --------------------------------------------------


def test_check_objects_returns_verdicts():
    (obj,) = load_fixture("bad", "no-literal-secrets.yaml")
    verdicts = check_objects([obj])
    assert verdicts == [
        Verdict(
            "Deployment",
            "token-in-env",
            "no-literal-secrets",
            "mandatory",
            verdicts[0].message,
            None,
            "vllm",
            "serving",
        )
    ]


def test_check_objects_runs_cloud_and_stack_rules_on_pulumi_shaped_records():
    server, pdb = load_fixture("good", "vllm-deployment.yaml")
    pool = {
        "type": "aws:eks/nodeGroup:NodeGroup",
        "name": "gpu",
        "props": {
            "instanceTypes": ["g6e.xlarge"],
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        },
    }
    assert check_objects([server, pdb, pool]) == []
    server["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    verdicts = check_objects([server, pdb, pool])
    assert [(v.kind, v.policy) for v in verdicts] == [("Deployment", "gpu-toleration-matches-pool")]
    untainted = {
        "type": "gcp:container/nodePool:NodePool",
        "name": "l4",
        "props": {"nodeConfig": {"machineType": "g2-standard-8"}},
    }
    assert [(v.kind, v.name, v.policy) for v in check_objects([untainted])] == [("NodePool", "l4", "gpu-pool-tainted")]


def test_check_objects_catches_a_bare_s3_bucket():
    # The offline plan hands cloud resources over as Pulumi-shaped records.
    bare = {"type": "aws:s3/bucket:Bucket", "name": "models", "props": {"tags": {"purpose": "model-weights"}}}
    verdicts = check_objects([bare])
    assert [(v.kind, v.name, v.policy, v.level, v.namespace) for v in verdicts] == [
        ("Bucket", "models", "bucket-public-access-block-present", "mandatory", None)
    ]
    block = {
        "type": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "name": "models-public-access",
        "props": {
            "bucket": "models-1a2b3c4",
            "blockPublicAcls": True,
            "blockPublicPolicy": True,
            "ignorePublicAcls": True,
            "restrictPublicBuckets": True,
        },
    }
    assert check_objects([bare, block]) == []


def test_check_objects_rejects_bad_config():
    with pytest.raises(ValueError, match="unknown policy"):
        check_objects([], {"nope": {}})


def test_prod_stack_without_its_public_access_block_is_caught():

    evaluation = committed_stack("prod")
    cloud = [
        {"type": r.type, "name": r.name, "props": r.inputs}
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
    pab = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    assert any(c["type"] == pab for c in cloud)
    policies = {v.policy for v in check_objects(cloud) if v.level == "mandatory"}
    assert "bucket-public-access-block-present" not in policies
    broken = [c for c in cloud if c["type"] != pab]
    verdicts = [v for v in check_objects(broken) if v.policy == "bucket-public-access-block-present"]
    assert [(v.kind, v.name) for v in verdicts] == [("Bucket", "llm-serving-prod-models")]


# The shape of the seed's own example: a plain Deployment that runs `vllm serve <Hub repo id>` and
# nothing else. Whatever else it lacks, the checker must refuse it as unpinned.
SEED_SHAPED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama
spec:
  replicas: 1
  selector:
    matchLabels: {app: llama}
  template:
    metadata:
      labels: {app: llama}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        command: ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
        resources:
          limits: {nvidia.com/gpu: 1}
"""


@pytest.mark.parametrize(
    "edit,unpinned",
    [
        (lambda text: text, True),
        (
            lambda text: text.replace(
                '"meta-llama/Llama-3.1-8B-Instruct"]', '"--model=meta-llama/Llama-3.1-8B-Instruct"]'
            ),
            True,
        ),
        (lambda text: text.replace('"meta-llama/Llama-3.1-8B-Instruct"]', '"/models/llama"]'), False),
        (
            lambda text: text.replace(
                '"meta-llama/Llama-3.1-8B-Instruct"]',
                '"meta-llama/Llama-3.1-8B-Instruct", "--revision", "0e9e39f249a16976918f6564b8830bc894c89659"]',
            ),
            False,
        ),
    ],
)
def test_the_seed_shaped_manifest_is_refused_as_unpinned(tmp_path, edit, unpinned):
    manifest = tmp_path / "seed.yaml"
    manifest.write_text(edit(SEED_SHAPED))
    p = run(str(manifest))
    assert p.returncode == 1, p.stdout + p.stderr  # it breaks other rules too
    found = [line for line in p.stdout.splitlines() if " model-revision-pinned [mandatory]: " in line]
    assert bool(found) is unpinned, p.stdout
    if unpinned:
        assert "Hub model 'meta-llama/Llama-3.1-8B-Instruct' with no --revision" in found[0]


def test_a_tab_in_a_manifest_is_named_as_a_tab_with_its_line_and_column(tmp_path):
    manifest = tmp_path / "tabbed.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n\tname: p\n")
    p = run(str(manifest))
    assert p.returncode == 2 and p.stdout == ""
    assert (
        "tabbed.yaml:4:1: not valid YAML: a tab character at line 4, column 1; YAML indents with spaces only, so "
        "replace the tab with spaces"
    ) in p.stderr, p.stderr
