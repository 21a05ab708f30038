"""Issue 17, images: one table of every image the program deploys (common/images.py), references
pinned by digest where the digest is known, the pack's requireDigest on in prod, and pull-through
rewriting.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from common import engine, images
from common.facts import Fact
from components.entrance import picker
from components.model_store import store
from components.serving import kserve
from offline_plan.write import pack_config, policy_verdicts, render_plan, requires_digest
from policies.check import check_objects
from stack_config import DOWNLOADER_IMAGE
from tests.support import paths
from tests.support.committed import committed_stack

ROOT = paths.ROOT
FAKE = "sha256:" + "1" * 64
REQUIRE = {"image-tag-pinned": {"requireDigest": True}}


# --- the table --------------------------------------------------------------------------------------


def test_every_digest_is_well_formed_and_every_unresolved_one_says_how_to_settle_it():
    for image in images.IMAGES.values():
        if image.resolved:
            assert images.DIGEST_RE.match(image.digest.value), image.key
            assert image.reference == f"{image.repository}:{image.tag}@{image.digest.value}"
        else:
            assert image.reference == image.tagged
            assert images.RESOLVE_COMMAND in image.digest.resolve_with
        assert image.digest.source  # where it was read, or where it was looked for


def test_the_program_takes_every_image_of_its_own_from_the_table():
    assert images.reference("vllm") == engine.VLLM_IMAGE
    assert images.reference("downloader") == DOWNLOADER_IMAGE
    assert {"s3": images.reference("aws-cli"), "gs": images.reference("gcloud")} == store.SYNC_IMAGES
    assert images.reference("storage-initializer") == kserve.STORAGE_INITIALIZER_IMAGE
    assert f"{picker.IMAGE['registry']}/{picker.IMAGE['repository']}:{picker.IMAGE['tag']}" == images.reference(
        "endpoint-picker"
    )
    # The tags agree with the releases the rest of the program pins.
    assert images.IMAGES["vllm"].tag == f"v{engine.VLLM_VERSION}"
    assert images.IMAGES["storage-initializer"].tag == kserve.KSERVE_VERSION
    # KServe models run the vLLM image in the program's own ServingRuntime: no runtime image of KServe's.
    assert not [key for key, image in images.IMAGES.items() if "huggingfaceserver" in image.repository]
    assert images.IMAGES["endpoint-picker"].tag == picker.VERSION


@pytest.mark.parametrize(
    "ref, expected",
    [
        ("vllm/vllm-openai:v0.32.0", ("docker.io", "vllm/vllm-openai", ":v0.32.0")),
        ("alpine:3.20", ("docker.io", "library/alpine", ":3.20")),
        ("docker.io/library/alpine@sha256:ab", ("docker.io", "library/alpine", "@sha256:ab")),
        ("ghcr.io/llm-d/picker:v1@sha256:ab", ("ghcr.io", "llm-d/picker", ":v1@sha256:ab")),
        ("localhost:5000/app:1", ("localhost:5000", "app", ":1")),
        ("registry.k8s.io/lws/lws:v0.10.0", ("registry.k8s.io", "lws/lws", ":v0.10.0")),
    ],
)
def test_references_split_as_the_distribution_grammar_does(ref, expected):
    assert images.split_reference(ref) == expected


def test_a_mirror_keeps_the_tag_and_the_digest_and_leaves_other_registries_alone():
    mirrors = {
        "docker.io": "123.dkr.ecr.us-east-1.amazonaws.com/docker-hub",
        "ghcr.io": "123.dkr.ecr.us-east-1.amazonaws.com/ghcr",
    }
    assert (
        images.mirrored(f"vllm/vllm-openai:v0.32.0@{FAKE}", mirrors)
        == f"123.dkr.ecr.us-east-1.amazonaws.com/docker-hub/vllm/vllm-openai:v0.32.0@{FAKE}"
    )
    assert images.mirrored("alpine:3", mirrors) == "123.dkr.ecr.us-east-1.amazonaws.com/docker-hub/library/alpine:3"
    assert images.mirrored("ghcr.io/llm-d/x:v1", mirrors) == "123.dkr.ecr.us-east-1.amazonaws.com/ghcr/llm-d/x:v1"
    assert images.mirrored("quay.io/a/b:1", mirrors) == "quay.io/a/b:1"


@pytest.mark.parametrize(
    "key, mirrors, name, registry, path",
    [
        # A name with its host keeps it: the chart's `registry` takes the host, `repository` the rest.
        ("keda-operator", {}, "ghcr.io/kedacore/keda", "ghcr.io", "kedacore/keda"),
        (
            "keda-operator",
            {"ghcr.io": "123.dkr.ecr.us-east-1.amazonaws.com/llm-ghcr"},
            "123.dkr.ecr.us-east-1.amazonaws.com/llm-ghcr/kedacore/keda",
            "123.dkr.ecr.us-east-1.amazonaws.com",
            "llm-ghcr/kedacore/keda",
        ),
        # A Docker Hub name without a host stays as the table writes it, its registry docker.io.
        ("kserve-controller", {}, "kserve/kserve-controller", "docker.io", "kserve/kserve-controller"),
        ("grafana", {}, "docker.io/grafana/grafana", "docker.io", "grafana/grafana"),
        (
            "grafana",
            {"docker.io": "us-central1-docker.pkg.dev/p/dev-docker-hub"},
            "us-central1-docker.pkg.dev/p/dev-docker-hub/grafana/grafana",
            "us-central1-docker.pkg.dev",
            "p/dev-docker-hub/grafana/grafana",
        ),
        # A registry without a cache is left alone.
        (
            "prometheus",
            {"docker.io": "x.example/hub"},
            "quay.io/prometheus/prometheus",
            "quay.io",
            "prometheus/prometheus",
        ),
    ],
)
def test_a_chart_image_splits_its_name_as_the_charts_take_it(key, mirrors, name, registry, path):
    image = images.chart_image(key, mirrors)
    assert (image.name, image.registry, image.path) == (name, registry, path)
    assert image.reference == f"{name}:{images.IMAGES[key].tag}"
    assert images.mirrored(images.reference(key), mirrors) == image.reference


def test_a_chart_image_with_a_digest_pins_it_in_the_tag_field(monkeypatch):
    entry = images.IMAGES["keda-operator"]
    monkeypatch.setitem(images.IMAGES, "keda-operator", dataclasses.replace(entry, digest=Fact("d", FAKE, "test")))
    image = images.chart_image("keda-operator")
    assert image.digest == FAKE and image.pinned_tag == f"2.20.2@{FAKE}"
    assert image.reference == f"ghcr.io/kedacore/keda:2.20.2@{FAKE}" == images.reference("keda-operator")


# --- the rule in its requireDigest mode: good and bad fixtures -------------------------------------


def _deployment(image: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                        }
                    ]
                },
            },
        },
    }


def _digest_findings(obj: dict, config: dict | None = REQUIRE) -> list:
    return [v for v in check_objects([obj], config) if v.policy == "image-tag-pinned"]


def test_good_an_image_with_a_digest_passes_require_digest():
    assert _digest_findings(_deployment(f"nginx:1.27@{FAKE}")) == []


def test_bad_a_tag_alone_fails_require_digest_with_the_generic_fix():
    [finding] = _digest_findings(_deployment("nginx:1.27"))
    assert finding.level == "mandatory" and "requireDigest" in finding.message
    assert "common/images.py" not in finding.message


def test_bad_an_unresolved_image_of_the_program_names_its_table_entry_and_the_command():
    unresolved = images.unresolved()[0]
    [finding] = _digest_findings(_deployment(unresolved.reference))
    assert f"'{unresolved.key}'" in finding.message and images.RESOLVE_COMMAND in finding.message


def test_without_require_digest_a_pinned_tag_is_enough():
    assert _digest_findings(_deployment("nginx:1.27"), None) == []


# --- the committed stacks with their pack config -----------------------------------------------------


def test_prod_runs_the_pack_with_require_digest_and_dev_with_the_defaults():
    assert requires_digest(pack_config("prod"))
    assert not requires_digest(pack_config("dev"))
    # The workflows pass the same file to `pulumi preview` / `up`: the one offline_plan.pack_config prints.
    for workflow in ("pull-request.yml", "pulumi-up.yml"):
        text = (ROOT / ".github" / "workflows" / workflow).read_text()
        assert "python -m offline_plan.pack_config --stack" in text, workflow
        assert "policyPackConfigs: ${{ steps.pack.outputs.path }}" in text, workflow
    for stack in ("dev", "prod"):
        assert json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text()) == pack_config(stack)


@pytest.fixture(scope="module")
def prod():
    return committed_stack("prod")


def _container_images(objects: list[dict]) -> list[str]:
    found = []
    for obj in objects:
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            found.append(c["image"])
    return found


def test_prod_is_refused_exactly_for_the_digests_the_table_does_not_know(prod):
    verdicts = policy_verdicts(prod, pack_config("prod"))
    mandatory = [v for v in verdicts if v.level == "mandatory"]
    unresolved = {i.tagged for i in images.unresolved()}
    # Every mandatory finding is a digest the table lacks, and says how to settle it.
    assert mandatory and all(v.policy == "image-tag-pinned" for v in mandatory)
    assert all(images.RESOLVE_COMMAND in v.message for v in mandatory)
    assert {img for img in _container_images(prod.kubernetes_objects) if "@" not in img} <= unresolved
    plan = render_plan(prod, verdicts, [], pack_config("prod"))
    assert "## Images" in plan and "NOT DEPLOYABLE with requireDigest" in plan
    # Only images this stack deploys make it undeployable: prod runs no KServe model.
    refusal = next(line for line in plan.splitlines() if "NOT DEPLOYABLE" in line)
    assert "`vllm/vllm-openai:v0.32.0`" in refusal and "kserve" not in refusal
    for image in images.IMAGES.values():
        assert f"`{image.repository}`" in plan


def _resolve_in(objects: list[dict]) -> list[dict]:
    """The objects as a fully resolved table would produce them: each unresolved reference gets a digest."""
    objects = copy.deepcopy(objects)
    for obj in objects:
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if "@" not in c["image"]:
                c["image"] = f"{c['image']}@{FAKE}"
    return objects


def test_prod_with_every_digest_known_passes_and_a_copy_without_one_is_caught(prod):
    resolved = _resolve_in(prod.kubernetes_objects)
    config = pack_config("prod")
    assert [v for v in check_objects(resolved, config) if v.level == "mandatory"] == []
    broken = copy.deepcopy(resolved)
    server = next(o for o in broken if o["kind"] == "Deployment" and o["metadata"]["name"] == "llama-3-3-70b-instruct")
    container = server["spec"]["template"]["spec"]["containers"][0]
    container["image"] = container["image"].partition("@")[0]
    mandatory = [v for v in check_objects(broken, config) if v.level == "mandatory"]
    assert [(v.policy, v.name) for v in mandatory] == [("image-tag-pinned", "llama-3-3-70b-instruct")]
    # The control is the pack config: without requireDigest the same copy passes.
    assert [v for v in check_objects(broken, pack_config("dev")) if v.level == "mandatory"] == []


def test_the_engine_cuda_follows_the_image_through_a_digest_and_a_cache():
    fact = engine.image_cuda(engine.VLLM_IMAGE_TAGGED)
    assert fact is engine.VLLM_IMAGE_CUDA
    assert engine.image_cuda(f"{engine.VLLM_IMAGE_TAGGED}@{FAKE}") is fact
    assert (
        engine.image_cuda(images.mirrored(f"{engine.VLLM_IMAGE_TAGGED}@{FAKE}", {"docker.io": "1.dkr.ecr.x/c"})) is fact
    )
    assert engine.image_cuda("myorg/vllm-openai:v0.32.0") is None
