"""Issue 26, images in rendered charts: every container image the Helm releases render (and every
image an operator runs for a custom resource they render) is an entry of the one image table
(common/images.py), pulled through the stack's cache where it has one for the image's registry,
or on the explicit list below of images this stack never runs, each with the chart file that shows it.

Rendered twice: as committed (the table as it is), and with every digest of the table resolved to a
stand-in and the pull-through cache on (ECR on prod, Artifact Registry on dev), so a values key the
chart does not read (the digest or the cache prefix would then be missing) fails here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import pytest

from common import images
from common.facts import Fact
from components.cluster.aws import registry_cache as ecr_cache
from components.cluster.gcp import registry_cache as ar_cache
from components.entrance import picker
from offline_plan import helm
from offline_plan.helm.pods import custom_resource_images, summaries
from offline_plan.mock_runtime import evaluate_stack
from stack_config.images import UPSTREAMS
from tests.support.committed import STACKS, committed_stack
from tests.support.stack_variants import EXISTING_RDMA, KSERVE, PROD_PULL_THROUGH, VARIANTS

FAKE = "sha256:" + "7" * 64
# What the mock runtime answers for the account and project (tests/components/cluster/test_image_cache.py).
ECR_MIRRORS = ecr_cache.mirrors("llm-serving-prod", list(UPSTREAMS), "123456789012", "us-east-1", "amazonaws.com")
AR_MIRRORS = ar_cache.mirrors("llm-serving-dev", list(UPSTREAMS), "mock-project", "us-central1")

# GPU Operator operands the ClusterPolicy names but these stacks never run: they serve sandbox (VM)
# workloads, which the operator deploys only with `sandboxWorkloads.enabled`, false in the chart
# (charts/gpu-operator-v26.7.0/values.yaml:19-20) and never set by the program; the driver manager
# also runs beside an operator-managed driver, off on both stacks (`driver.enabled` false,
# components/operators/values.py). NVIDIA: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/
# latest/gpu-operator-kubevirt.html ("sandboxWorkloads.enabled=true"). Unresolved on this machine which
# operator state gates each one; settle on a created cluster: `kubectl -n gpu-operator get daemonsets`.
NOT_RUN = {
    "nvcr.io/nvidia/cloud-native/k8s-driver-manager": (
        "charts/gpu-operator-v26.7.0/values.yaml (driver.manager, vfioManager)"
    ),
    "nvcr.io/nvidia/cloud-native/vgpu-device-manager": "charts/gpu-operator-v26.7.0/values.yaml (vgpuDeviceManager)",
    "nvcr.io/nvidia/cloud-native/k8s-cc-manager": "charts/gpu-operator-v26.7.0/values.yaml (ccManager)",
    "nvcr.io/nvidia/kubevirt-gpu-device-plugin": "charts/gpu-operator-v26.7.0/values.yaml (sandboxDevicePlugin)",
    "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin": (
        "charts/gpu-operator-v26.7.0/values.yaml (kataSandboxDevicePlugin)"
    ),
}


# The ClusterServingRuntimes kserve-runtime-configs renders (its `kserve.servingruntime.enabled`, for
# kserve-huggingfaceserver's CRs): the KServe server images a cluster offers. No model of the program
# runs one: each KServe model names its own ServingRuntime on the table's vLLM image
# (components/serving/kserve.py serving_runtime; components/addons/kserve.py). The images stay the chart's
# (charts/kserve-runtime-configs-v0.20.0/values.yaml), pulled only if someone else's InferenceService asks.
UNUSED_RUNTIMES = "ClusterServingRuntime/"


def _repository(ref: str) -> str:
    name = ref.partition("@")[0]
    head, slash, last = name.rpartition("/")
    return head + slash + last.partition(":")[0]


def rendered_images(rendered: list[helm.RenderedRelease]) -> Iterator[tuple[str, str, str]]:
    """(release, object, image) for every pod container and operator-run image the releases render."""
    for release in rendered:
        for pod in summaries(release.objects):
            for image in pod.images:
                yield release.release.label, pod.ref, image
        for where, image in custom_resource_images(release.objects):
            yield release.release.label, where, image


def expected_references(mirrors: dict[str, str]) -> dict[str, str]:
    """Reference -> table key, as a chart renders each entry: `name:tag[@digest]`, or the GPU
    Operator's operand form `name@digest` once a digest is known (components/operators/values.py)."""
    out = {}
    for key in images.IMAGES:
        entry = images.chart_image(key, mirrors)
        out[entry.reference] = key
        if entry.digest:
            out[f"{entry.name}@{entry.digest}"] = key
    return out


def problems(rendered: list[helm.RenderedRelease], mirrors: dict[str, str]) -> list[str]:
    expected = expected_references(mirrors)
    found = []
    for release, where, image in rendered_images(rendered):
        if image in expected:
            continue
        if _repository(image) in NOT_RUN and where.startswith("ClusterPolicy/"):
            continue
        if where.startswith(UNUSED_RUNTIMES) and "chart kserve-runtime-configs " in release:
            continue
        found.append(f"{release}: {where}: {image} is neither the table's reference nor a listed exception")
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_image_of_a_committed_stack_is_the_tables(stack):
    rendered = helm.rendered(committed_stack(stack))
    assert list(rendered_images(rendered))
    assert problems(rendered, {}) == []


# The releases the committed stacks do not install: KServe's three charts (and cert-manager on dev),
# the Network Operator. (The LWS release of the multi-node variant does not render yet: charts/lws-0.10.0
# says version v0.10.0 where the program pins 0.10.0; issue 26 point 1.)
@pytest.mark.parametrize("variant", [KSERVE, EXISTING_RDMA])
def test_every_rendered_image_of_the_other_releases_is_the_tables(variant):
    stack, overrides = VARIANTS[variant]
    rendered = helm.rendered(evaluate_stack(stack, overrides=overrides))
    charts = {r.release.chart_name for r in rendered}
    assert charts & {"kserve-resources", "network-operator"}
    assert problems(rendered, {}) == []


# (stack, overrides, the caches it then has): prod and dev with a pull-through cache, KServe's charts
# on dev with one, the Network Operator on an existing cluster (which has no cache of the program's).
RESOLVED_CASES = {
    "prod-ecr": ("prod", PROD_PULL_THROUGH, ECR_MIRRORS),
    "dev-artifact-registry": ("dev", {"images": {"pullThrough": True}}, AR_MIRRORS),
    "kserve-artifact-registry": (
        VARIANTS[KSERVE][0],
        {**VARIANTS[KSERVE][1], "images": {"pullThrough": True}},
        AR_MIRRORS,
    ),
    "network-operator": (*VARIANTS[EXISTING_RDMA], {}),
}


def _resolved(patch: pytest.MonkeyPatch) -> None:
    for key, entry in images.IMAGES.items():
        fact = Fact(subject=entry.digest.subject, value=FAKE, source="a stand-in digest (test)")
        patch.setitem(images.IMAGES, key, dataclasses.replace(entry, digest=fact))


@functools.cache
def _cached_and_resolved(case: str) -> list[helm.RenderedRelease]:
    stack, overrides, _ = RESOLVED_CASES[case]
    with pytest.MonkeyPatch.context() as patch:
        _resolved(patch)
        # The picker module keeps its table entry from import time.
        patch.setattr(picker, "_PICKER", images.IMAGES["endpoint-picker"])
        return helm.rendered(evaluate_stack(stack, overrides=overrides))


@pytest.mark.parametrize("case", sorted(RESOLVED_CASES))
def test_with_every_digest_known_and_a_cache_every_rendered_image_is_pinned_and_cached(case):
    mirrors = RESOLVED_CASES[case][2]
    rendered = _cached_and_resolved(case)
    with pytest.MonkeyPatch.context() as patch:
        _resolved(patch)
        assert problems(rendered, mirrors) == []
    ran = [
        (w, i)
        for _, w, i in rendered_images(rendered)
        if _repository(i) not in NOT_RUN and not w.startswith(UNUSED_RUNTIMES)
    ]
    assert ran
    for where, image in ran:
        # Every image the stack runs is pinned by the digest the table gives it...
        assert image.endswith(f"@{FAKE}"), (where, image)
        # ...and none is pulled from an upstream the stack has a cache for.
        host = images.split_reference(image)[0]
        assert host not in mirrors, (where, image)
    # The caches are really used by the charts (Docker Hub: Grafana, the KServe controller; ghcr.io:
    # KEDA, the certificate Jobs, the pickers), not only by the program's own pods.
    prefixes = {prefix for _, image in ran for prefix in mirrors.values() if image.startswith(prefix + "/")}
    assert prefixes == set(mirrors.values())


def test_not_run_entries_are_rendered_by_the_gpu_operator_chart():
    # The exception list holds only what the ClusterPolicy really names (no stale entries).
    named = {
        _repository(i)
        for _, w, i in rendered_images(helm.rendered(committed_stack("dev")))
        if w.startswith("ClusterPolicy/")
    }
    assert set(NOT_RUN) <= named
