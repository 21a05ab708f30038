"""Issue 17, images of the add-on charts: where a chart's values can name an image by digest, the
image is an entry of the one table (common/images.py) and the values take it from there, so a
resolved digest pins it; the plan counts such an image only where the stack installs the chart.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from common import images
from common.facts import Fact
from components.operators import values as ov
from offline_plan.write import _deployed_images, _in_stack
from tests.helm_values import chart_defaults
from tests.test_operators import SUPPORTED, values_for

FAKE = "sha256:" + "2" * 64


def _resolve(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """Pretend the resolver settled one entry (the table is read at call time)."""
    entry = images.IMAGES[key]
    fact = Fact(subject=entry.digest.subject, value=FAKE, source="test")
    monkeypatch.setitem(images.IMAGES, key, dataclasses.replace(entry, digest=fact))


# --- GPU Operator ----------------------------------------------------------------------------------

@pytest.mark.parametrize("component, key", sorted(ov.GPU_OPERATOR_IMAGES.items()))
def test_gpu_operator_operands_take_the_tables_image_at_the_charts_default_tag(component, key):
    chart = chart_defaults("gpu-operator")[component]
    entry = images.IMAGES[key]
    # The table's tag is the one the pinned chart would deploy anyway: no silent version change.
    assert entry.repository == f"{chart['repository']}/{chart['image']}"
    assert entry.tag == chart["version"]
    for cloud, driver, gke in SUPPORTED:
        values = values_for(cloud, driver, gke)
        assert {k: values[component][k] for k in ("repository", "image", "version")} == \
            {"repository": chart["repository"], "image": chart["image"], "version": entry.tag}, (cloud, driver)


@pytest.mark.parametrize("component, key", sorted(ov.GPU_OPERATOR_IMAGES.items()))
def test_a_resolved_digest_reaches_the_gpu_operator_values_in_place_of_the_tag(monkeypatch, component, key):
    _resolve(monkeypatch, key)
    values = values_for("existing", "operator")  # every operand on
    # The operator joins `repository/image@version` when version starts with "sha256:".
    assert values[component]["version"] == FAKE
    release = SimpleNamespace(type="kubernetes:helm.sh/v3:Release", inputs={"values": values})
    deployed = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[release]))
    assert f"{images.IMAGES[key].repository}@{FAKE}" in deployed
    assert _in_stack(images.IMAGES[key], deployed)


def test_gpu_operator_images_count_only_where_the_operator_is_installed_and_the_operand_is_on():
    values = values_for("aws")  # EKS's GPU AMI brings its own toolkit: `toolkit.enabled` false
    values["migManager"]["enabled"] = False
    with_operator = _deployed_images(SimpleNamespace(
        kubernetes_objects=[], resources=[SimpleNamespace(type="kubernetes:helm.sh/v3:Release", inputs={"values": values})]))
    without = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[]))
    for key in set(ov.GPU_OPERATOR_IMAGES.values()):
        assert not _in_stack(images.IMAGES[key], without), key
        assert _in_stack(images.IMAGES[key], with_operator) is (key not in ("gpu-operator-mig-manager", "gpu-operator-toolkit")), key
