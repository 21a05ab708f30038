"""The pack agrees with the well-known community policies where the semantics are the same.

Cases (facts: image strings / container fields and the expected verdict) are ported from the
community test suites, not their code; each case cites its source file. Sources and revisions:

- GK = open-policy-agent/gatekeeper-library @ 5c441fb645f257b2c428fe9aea22da24a94b5bab
  library/general/{disallowedtags,containerresources,requiredprobes}/suite.yaml and samples/
- KY = kyverno/policies @ b9c4317ce02256dc66118e08bb3e9345e7bfce5c
  best-practices/{disallow-latest-tag,require-pod-requests-limits,require-probes}/
  .kyverno-test/{resource.yaml,kyverno-test.yaml} and .chainsaw-test/
- CK = bridgecrewio/checkov tests/kubernetes/checks/example_ImageTagFixed/*.yaml (CKV_K8S_14) and
  checkov/kubernetes/checks/resource/k8s/{ImageTagFixed,ImageDigest,LivenessProbe,CPULimits}.py

Deliberate differences, not ported: Gatekeeper's `exemptImages` parameter (this pack has no
exemption list); Kyverno require-probes' goodpod03/goodpod04 (Kyverno accepts any ONE probe; this
pack requires liveness AND readiness — asserted below as a documented divergence); checkov
CKV_K8S_11 on its own (CPU limits are optional here unless requireCpuLimit).
"""

from __future__ import annotations

import pytest

from policies.rules.images import image_problem
from tests.support.policy_engine import analyze_k8s

GK = "gatekeeper-library/library/general"
KY = "kyverno/policies/best-practices"
CK = "checkov/tests/kubernetes/checks"


def pod(containers, init=(), ephemeral=(), kind="Pod"):
    spec = {"containers": [dict(c) for c in containers]}
    if init:
        spec["initContainers"] = [dict(c) for c in init]
    if ephemeral:
        spec["ephemeralContainers"] = [dict(c) for c in ephemeral]
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "case"}, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "case"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": spec},
        },
    }


def img(*images):
    return [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]


# image-tag-pinned --------------------------------------------------------------------------------
# (source, case, workload, violates)
IMAGE_CASES = [
    (
        f"{GK}/disallowedtags/samples/container-image-must-not-have-latest-tag/example_allowed.yaml",
        "allowed",
        pod(img("openpolicyagent/opa:0.9.2")),
        False,
    ),
    (
        f"{GK}/disallowedtags/.../example_disallowed_tag.yaml",
        "single-disallowed-tag",
        pod(img("openpolicyagent/opa:latest")),
        True,
    ),
    (f"{GK}/disallowedtags/.../example_no_tag.yaml", "no-tag", pod(img("openpolicyagent/opa")), True),
    (
        f"{GK}/disallowedtags/.../example_no_tag_w_port.yaml",
        "no-tag-with-port",
        pod(img("openpolicyagent:443/opa")),
        True,
    ),
    (
        f"{GK}/disallowedtags/.../disallowed_tag_ephemeral.yaml",
        "single-disallowed-tag-ephemeral",
        pod(img("openpolicyagent/opa:0.9.2"), ephemeral=img("openpolicyagent/opa:latest")),
        True,
    ),
    (
        f"{GK}/disallowedtags/.../example_some_disallowed_tags.yaml",
        "some-disallow-tags",
        pod(
            img(
                "openpolicyagent/opa-exp:latest",
                "openpolicyagent/init:latest",
                "openpolicyagent/opa-exp2:latest",
                "openpolicyagent/monitor:latest",
            )
        ),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "myapp-pod",
        pod(img("nginx:1.12"), init=img("nginx:1.12")),
        False,
    ),
    (f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml", "badpod01", pod(img("nginx"), init=img("nginx")), True),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "badpod02",
        pod(img("busybox:1.28", "nginx"), init=img("busybox:1.28", "nginx")),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "vit-badpod01",
        pod(img("nginx:latest"), init=img("nginx:latest")),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "vit-badpod02",
        pod(img("busybox:1.28", "nginx:latest"), init=img("busybox:1.28", "nginx:latest")),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "gooddeployment01",
        pod(img("busybox:1.28"), init=img("busybox:1.28"), kind="Deployment"),
        False,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "baddeployment01",
        pod(img("busybox"), init=img("busybox"), kind="Deployment"),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.kyverno-test/resource.yaml",
        "vit-baddeployment01",
        pod(img("busybox:latest"), init=img("busybox:latest"), kind="Deployment"),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/good-pod.yaml",
        "goodpod-ht",
        pod(img("ghcr.io/kyverno/test-busybox:1.35"), init=img("ghcr.io/kyverno/test-busybox:1.35")),
        False,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/bad-pod-no-tag.yaml",
        "badpod-no-tag (1)",
        pod(
            img("ghcr.io/kyverno/test-busybox", "ghcr.io/kyverno/test-nginx:1.35"),
            init=img("ghcr.io/kyverno/test-busybox", "ghcr.io/kyverno/test-nginx:1.35"),
        ),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/bad-pod-no-tag.yaml",
        "badpod-no-tag (2)",
        pod(
            img("ghcr.io/kyverno/test-nginx:1.35", "ghcr.io/kyverno/test-busybox"),
            init=img("ghcr.io/kyverno/test-nginx:1.35", "ghcr.io/kyverno/test-busybox"),
        ),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/bad-pod-no-tag.yaml",
        "badpod-no-tag (3)",
        pod(
            img("ghcr.io/kyverno/test-busybox", "ghcr.io/kyverno/test-nginx:latest"),
            init=img("ghcr.io/kyverno/test-busybox", "ghcr.io/kyverno/test-nginx:latest"),
        ),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/bad-pod-latest-fail-first.yaml",
        "badpod-latest",
        pod(
            img("ghcr.io/kyverno/test-busybox:latest", "ghcr.io/kyverno/test-nginx:1.35"),
            init=img("ghcr.io/kyverno/test-busybox:latest", "ghcr.io/kyverno/test-nginx:1.35"),
        ),
        True,
    ),
    (
        f"{KY}/disallow-latest-tag/.chainsaw-test/bad-pod-latest-success-first.yaml",
        "badpod-latest",
        pod(
            img("ghcr.io/kyverno/test-nginx:1.35", "ghcr.io/kyverno/test-busybox:latest"),
            init=img("ghcr.io/kyverno/test-nginx:1.35", "ghcr.io/kyverno/test-busybox:latest"),
        ),
        True,
    ),
    (
        f"{CK}/example_ImageTagFixed/imageWithDigest-PASSED.yaml",
        "kafka",
        pod(img("gcr.io/google_containers/kubernetes-kafka@sha256:123456"), kind="StatefulSet"),
        False,
    ),
    (
        f"{CK}/example_ImageTagFixed/imageWithTagAndDigest-PASSED.yaml",
        "kafka",
        pod(img("gcr.io/google_containers/kubernetes-kafka:1.0-10.2.1@sha256:123456"), kind="StatefulSet"),
        False,
    ),
    (
        f"{CK}/example_ImageTagFixed/kafka-ImageWithRepo-PASSED.yaml",
        "kafka",
        pod(img("docker-registry.mycompany.co:4567/super-sre/kafka/kafka-docker/release:1.0.9"), kind="StatefulSet"),
        False,
    ),
    (
        f"{CK}/example_ImageTagFixed/ephemeralContainer-ImageTagLatest-FAILED.yaml",
        "ephemeral-latest",
        pod(img("nginx:1.27"), ephemeral=img("busybox:latest")),
        True,
    ),
]


@pytest.mark.parametrize(
    "source,case,obj,violates", IMAGE_CASES, ids=[f"{s.split('/')[-1]}:{c}" for s, c, _, _ in IMAGE_CASES]
)
def test_image_tag_pinned_agrees_with_community(source, case, obj, violates):
    assert bool(analyze_k8s(obj).of("image-tag-pinned")) is violates


# CKV_K8S_43 (ImageDigest.py): an image passes when it carries '@' (a digest), whatever the tag.
DIGEST_CASES = [
    ("gcr.io/google_containers/kubernetes-kafka@sha256:123456", False),
    ("gcr.io/google_containers/kubernetes-kafka:1.0-10.2.1@sha256:123456", False),
    ("docker-registry.mycompany.co:4567/super-sre/kafka/kafka-docker/release:1.0.9", True),
    ("nginx:1.27", True),
]


@pytest.mark.parametrize("image,violates", DIGEST_CASES)
def test_require_digest_agrees_with_checkov_image_digest(image, violates):
    obj = pod(img(image))
    result = analyze_k8s(obj, config={"image-tag-pinned": {"requireDigest": True}})
    assert bool(result.of("image-tag-pinned")) is violates


@pytest.mark.parametrize(
    "image,pinned",
    [
        # What counts as a tag (distribution/reference grammar; same verdicts as the three tools above).
        ("nginx:1.2@sha256:" + "0" * 64, True),
        ("registry:5000/app", False),
        ("registry:5000/app:1.0", True),
        ("app:latest", False),
        ("app", False),
        ("localhost:5000/team/app:v2", True),
        ("app:", False),
    ],
)
def test_what_counts_as_a_tag(image, pinned):
    assert (image_problem(image) is None) is pinned


# resources-declared ------------------------------------------------------------------------------
def res(requests=None, limits=None, empty=False):
    c = {"name": "opa", "image": "openpolicyagent/opa:0.9.2"}
    if empty:
        c["resources"] = {}
    elif requests or limits:
        c["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return c


CR = f"{GK}/containerresources/samples"
RESOURCE_CASES = [
    # K8sRequiredResources limits:[memory] requests:[cpu,memory] == this pack's default.
    (
        f"{CR}/container-must-have-cpu-requests-memory-limits-and-requests/limits-and-requests-defined-allowed.yaml",
        False,
        [res({"cpu": "100m", "memory": "1Gi"}, {"cpu": "100m", "memory": "1Gi"})],
        False,
    ),
    (
        f"{CR}/container-must-have-cpu-requests-memory-limits-and-requests/only-cpu-requests-and-memory-limits-and-requests-defined-allowed.yaml",
        False,
        [res({"cpu": "100m", "memory": "2Gi"}, {"memory": "2Gi"})],
        False,
    ),
    (
        f"{CR}/container-must-have-cpu-requests-memory-limits-and-requests/only-requests-defined-disallowed.yaml",
        False,
        [res({"cpu": "100m", "memory": "2Gi"})],
        True,
    ),
    (
        f"{CR}/container-must-have-cpu-requests-memory-limits-and-requests/only-memory-limits-defined-disallowed.yaml",
        False,
        [res(limits={"memory": "2Gi"})],
        True,
    ),
    (
        f"{CR}/container-must-have-cpu-requests-memory-limits-and-requests/empty-resources-disallowed.yaml",
        False,
        [res(empty=True)],
        True,
    ),
    # K8sRequiredResources limits:[cpu,memory] requests:[cpu,memory] == requireCpuLimit.
    (
        f"{CR}/container-must-have-limits-and-requests/limits-and-requests-defined-allowed.yaml",
        True,
        [res({"cpu": "100m", "memory": "1Gi"}, {"cpu": "100m", "memory": "1Gi"})],
        False,
    ),
    (
        f"{CR}/container-must-have-limits-and-requests/only-requests-defined-disallowed.yaml",
        True,
        [res({"cpu": "100m", "memory": "2Gi"})],
        True,
    ),
    (
        f"{CR}/container-must-have-limits-and-requests/only-cpu-requests-and-memory-limits-defined-disallowed.yaml",
        True,
        [res({"cpu": "100m"}, {"memory": "2Gi"})],
        True,
    ),
    (
        f"{CR}/container-must-have-limits-and-requests/only-memory-limits-defined-disallowed.yaml",
        True,
        [res(limits={"memory": "2Gi"})],
        True,
    ),
    # Kyverno require-requests-limits (requests cpu+memory, limits memory).
    (
        f"{KY}/require-pod-requests-limits/.kyverno-test/resource.yaml#goodpod01",
        False,
        [res({"memory": "256Mi", "cpu": "0.5"}, {"memory": "256Mi"})],
        False,
    ),
    (
        f"{KY}/require-pod-requests-limits/.kyverno-test/resource.yaml#goodpod02",
        False,
        [
            res({"memory": "50Mi", "cpu": "100m"}, {"memory": "100Mi"}),
            res({"memory": "256Mi", "cpu": "0.5"}, {"memory": "256Mi"}),
        ],
        False,
    ),
    (f"{KY}/require-pod-requests-limits/.kyverno-test/resource.yaml#badpod01", False, [res()], True),
    (
        f"{KY}/require-pod-requests-limits/.kyverno-test/resource.yaml#badpod02",
        False,
        [res({"memory": "256Mi", "cpu": "0.5"})],
        True,
    ),
    (
        f"{KY}/require-pod-requests-limits/.kyverno-test/resource.yaml#badpod03",
        False,
        [res(), res({"memory": "256Mi", "cpu": "0.5"}, {"memory": "256Mi"})],
        True,
    ),
    # checkov CKV_K8S_11 (CPULimits.py): a container without limits.cpu fails == requireCpuLimit.
    (
        "checkov/kubernetes/checks/resource/k8s/CPULimits.py",
        True,
        [res({"memory": "256Mi", "cpu": "0.5"}, {"memory": "256Mi"})],
        True,
    ),
]


@pytest.mark.parametrize(
    "source,cpu_limit,containers,violates", RESOURCE_CASES, ids=[s.split("/")[-1] for s, *_ in RESOURCE_CASES]
)
def test_resources_declared_agrees_with_community(source, cpu_limit, containers, violates):
    for i, c in enumerate(containers):
        c["name"] = f"c{i}"
    config = {"resources-declared": {"requireCpuLimit": cpu_limit}}
    assert bool(analyze_k8s(pod(containers), config=config).of("resources-declared")) is violates


# probes-declared ---------------------------------------------------------------------------------
TCP = {"tcpSocket": {"port": 8080}, "periodSeconds": 10}


def probed(**probes):
    return {"name": "c", "image": "registry.k8s.io/goproxy:0.1", **probes}


PROBE_CASES = [
    (
        f"{GK}/requiredprobes/samples/must-have-probes/example_allowed.yaml",
        [probed(livenessProbe=TCP, readinessProbe=TCP)],
        False,
    ),
    (
        f"{GK}/requiredprobes/samples/must-have-probes/example_disallowed.yaml",
        [probed(livenessProbe=None), probed(readinessProbe=TCP)],
        True,
    ),
    (
        f"{GK}/requiredprobes/samples/must-have-probes/example_disallowed2.yaml",
        [probed(readinessProbe=None, livenessProbe=TCP), probed(readinessProbe=TCP)],
        True,
    ),
    (
        f"{KY}/require-probes/.kyverno-test/resource.yaml#goodpod01",
        [probed(readinessProbe=TCP, livenessProbe=TCP)],
        False,
    ),
    (
        f"{KY}/require-probes/.kyverno-test/resource.yaml#goodpod02",
        [probed(readinessProbe=TCP, livenessProbe=TCP), probed(readinessProbe=TCP, livenessProbe=TCP)],
        False,
    ),
    (f"{KY}/require-probes/.kyverno-test/resource.yaml#badpod01", [probed()], True),
    (f"{KY}/require-probes/.kyverno-test/resource.yaml#badpod02", [probed(readinessProbe=TCP), probed()], True),
    # checkov CKV_K8S_8/9 (LivenessProbe.py, ReadinessProbe.py): a Deployment container without probes fails.
    ("checkov/kubernetes/checks/resource/k8s/LivenessProbe.py", [probed(readinessProbe=TCP)], True),
]


@pytest.mark.parametrize("source,containers,violates", PROBE_CASES, ids=[s.split("/")[-1] for s, *_ in PROBE_CASES])
def test_probes_declared_agrees_with_community(source, containers, violates):
    for i, c in enumerate(containers):
        c["name"] = f"c{i}"
    assert bool(analyze_k8s(pod(containers, kind="Deployment")).of("probes-declared")) is violates


def test_probes_not_required_for_jobs_like_checkov():
    # checkov LivenessProbe.py: "Don't check Job/CronJob"; initContainers need no liveness probe.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [probed()], "initContainers": [probed()]}}
        },
    }
    assert analyze_k8s(job).of("probes-declared") == []


@pytest.mark.parametrize(
    "case,containers",
    [
        ("goodpod03", [probed(readinessProbe=TCP)]),
        ("goodpod04", [probed(startupProbe={"grpc": {"port": 8888}})]),
    ],
)
def test_documented_divergence_from_kyverno_require_probes(case, containers):
    # Kyverno passes these (any one probe suffices); this pack wants liveness AND readiness, as the
    # Gatekeeper library and checkov do.
    assert analyze_k8s(pod(containers)).of("probes-declared")
