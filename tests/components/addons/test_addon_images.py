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
from components.addons import cert_manager, keda, kserve, leader_worker_set, prometheus_operator
from components.operators import nic_cluster_policy as ncp
from components.operators import values as ov
from offline_plan.write import _deployed_images, _in_stack
from tests.support.helm_values import chart_defaults, check_chart_values
from tests.support.operator_values import SUPPORTED, h100_pool, values_for

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
        assert {k: values[component][k] for k in ("repository", "image", "version")} == {
            "repository": chart["repository"],
            "image": chart["image"],
            "version": entry.tag,
        }, (cloud, driver)


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
    with_operator = _deployed_images(
        SimpleNamespace(
            kubernetes_objects=[],
            resources=[SimpleNamespace(type="kubernetes:helm.sh/v3:Release", inputs={"values": values})],
        )
    )
    without = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[]))
    for key in set(ov.GPU_OPERATOR_IMAGES.values()):
        assert not _in_stack(images.IMAGES[key], without), key
        assert _in_stack(images.IMAGES[key], with_operator) is (
            key not in ("gpu-operator-mig-manager", "gpu-operator-toolkit")
        ), key


# --- KEDA, LeaderWorkerSet, cert-manager -----------------------------------------------------------
# Each chart's template joins its image mapping; these mirror those joins (cited in each add-on module)
# so the test asserts the reference the pod would get, not just the keys.


def _keda_refs(values: dict) -> dict[str, str]:
    # keda/templates/*/deployment.yaml: "{registry}/{repository}:{tag | default appVersion}"
    return {keda.IMAGES[field]: f"{m['registry']}/{m['repository']}:{m['tag']}" for field, m in values["image"].items()}


def _lws_refs(values: dict) -> dict[str, str]:
    # charts/lws/templates/manager/deployment.yaml:48: "{repository}:{tag | default appVersion}"
    m = values["image"]["manager"]
    return {leader_worker_set.IMAGE_KEY: f"{m['repository']}:{m['tag']}"}


def _cert_manager_refs(values: dict) -> dict[str, str]:
    # templates/_helpers.tpl:233-241: repository, then ":tag@digest", ":tag" or "@digest".
    out = {}
    for component, key in cert_manager.IMAGES.items():
        m = (values[component] if component else values)["image"]
        out[key] = (
            m["repository"] + (f":{m['tag']}" if m.get("tag") else "") + (f"@{m['digest']}" if m.get("digest") else "")
        )
    return out


def _prometheus_refs(values: dict) -> dict[str, str]:
    # "{registry}/{repository}:{tag}" + "@sha256:{sha}" when sha is set (the templates cited in
    # components/addons/prometheus_operator.py).
    out = {}
    for path, key in prometheus_operator.IMAGES.items():
        m = values
        for part in path.split("."):
            m = m[part]
        out[key] = f"{m['registry']}/{m['repository']}:{m['tag']}" + (f"@sha256:{m['sha']}" if m.get("sha") else "")
    return out


def _kserve_refs(values: dict) -> dict[str, str]:
    # files/kserve/deployment-patch.yaml:61: "{image}:{tag | default kserve.version}"
    c = values["kserve"]["controller"]
    return {kserve.CONTROLLER_IMAGE: f"{c['image']}:{c['tag']}"}


ADDONS = [
    ("kserve-resources", kserve.RESOURCES_CHART, _kserve_refs),
    ("kube-prometheus-stack", prometheus_operator.STACK_CHART, _prometheus_refs),
    ("keda", keda.CHART, _keda_refs),
    ("lws", leader_worker_set.CHART, _lws_refs),
    ("cert-manager", cert_manager.CHART, _cert_manager_refs),
    ("cert-manager (Gateway API)", cert_manager.WITH_GATEWAY_API.steps[0], _cert_manager_refs),
]


@pytest.mark.parametrize("name, chart, refs", ADDONS, ids=[a[0] for a in ADDONS])
def test_add_on_charts_render_the_tables_references_with_and_without_a_system_pool(name, chart, refs):
    for selector in (None, {"example.io/pool": "system"}):
        values = chart.values(selector)
        rendered = refs(values)
        assert rendered and rendered == {key: images.reference(key) for key in rendered}, name
        assert check_chart_values(chart.chart, values, chart.version) == []


@pytest.mark.parametrize("name, chart, refs", ADDONS, ids=[a[0] for a in ADDONS])
def test_a_resolved_digest_pins_every_add_on_image_and_the_values_stay_valid(monkeypatch, name, chart, refs):
    keys = list(refs(chart.values(None)))
    for key in keys:
        _resolve(monkeypatch, key)
    values = chart.values(None)
    rendered = refs(values)
    for key in keys:
        entry = images.IMAGES[key]
        # The tag stays for the reader; the digest is what is pulled.
        assert rendered[key] == f"{entry.repository}:{entry.tag}@{FAKE}"
    assert check_chart_values(chart.chart, values, chart.version) == []
    release = SimpleNamespace(type="kubernetes:helm.sh/v3:Release", inputs={"values": values})
    deployed = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[release]))
    assert all(_in_stack(images.IMAGES[key], deployed) for key in keys)


def test_add_on_tags_are_the_chart_versions_they_come_with():
    # Tags default to the chart's appVersion in each chart; the table must not move them.
    assert {images.IMAGES[k].tag for k in keda.IMAGES.values()} == {keda.CHART.version}
    assert images.IMAGES[leader_worker_set.IMAGE_KEY].tag == f"v{leader_worker_set.CHART.version}"
    assert {images.IMAGES[k].tag for k in cert_manager.IMAGES.values()} == {cert_manager.CHART.version}
    assert images.IMAGES[kserve.CONTROLLER_IMAGE].tag == kserve.VERSION
    # The operator and its config reloader follow the chart's appVersion, the Prometheus Operator release.
    assert (
        images.IMAGES["prometheus-operator"].tag
        == images.IMAGES["prometheus-config-reloader"].tag
        == prometheus_operator.ADDON.version.split()[0]
    )


def test_the_value_check_refuses_a_digest_key_the_chart_does_not_have():
    # KEDA's mapping has no `digest` key: the pin goes through the tag field there, and a stray key is caught.
    values = keda.values(None)
    values["image"]["keda"]["digest"] = FAKE
    assert check_chart_values(keda.CHART.chart, values, keda.CHART.version) == [
        (
            "keda: image.keda.digest: not a key the chart's values.yaml has "
            "(the transcribed key list in tests/fixtures/helm)"
        )
    ]


def test_add_on_images_count_only_in_stacks_that_install_the_add_on():
    keda_release = SimpleNamespace(type="kubernetes:helm.sh/v3:Release", inputs={"values": keda.values(None)})
    with_keda = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[keda_release]))
    without = _deployed_images(SimpleNamespace(kubernetes_objects=[], resources=[]))
    for key in keda.IMAGES.values():
        assert _in_stack(images.IMAGES[key], with_keda) and not _in_stack(images.IMAGES[key], without)
    assert not _in_stack(images.IMAGES["cert-manager-controller"], with_keda)


def test_another_gpu_operator_chart_version_keeps_its_own_operand_images():
    # The table's tags are v26.7.0's defaults; forcing them under another release would run old
    # operands under a new operator, so the values leave the chart's own images alone there.
    values = values_for("existing", "operator", chartVersion="v26.10.0")
    for component in ov.GPU_OPERATOR_IMAGES:
        assert not {"repository", "image", "version"} & set(values[component]), component


# --- Network Operator: the NicClusterPolicy the program writes ---------------------------------------

NIC_IMAGES = {
    "rdmaSharedDevicePlugin": "k8s-rdma-shared-dev-plugin",
    "multus": "multus-cni",
    "cniPlugins": "plugins",
    "nvIpam": "nvidia-k8s-ipam",
}


def _nic_images(spec: dict) -> dict[str, dict]:
    return {
        "rdmaSharedDevicePlugin": spec["rdmaSharedDevicePlugin"],
        "multus": spec["secondaryNetwork"]["multus"],
        "cniPlugins": spec["secondaryNetwork"]["cniPlugins"],
        "nvIpam": spec["nvIpam"],
    }


def test_nic_cluster_policy_images_come_from_the_table_and_a_digest_pins_them(monkeypatch):
    spec = ncp.nic_cluster_policy_spec(ncp.IMAGES_CHART, [h100_pool()], ["mlx5_core"])
    for field, m in _nic_images(spec).items():
        entry = images.IMAGES[f"network-operator-{NIC_IMAGES[field]}"]
        assert f"{m['repository']}/{m['image']}:{m['version']}" == entry.tagged
        assert entry.tag == ncp.image_tag(ncp.IMAGES_CHART)
    for name in NIC_IMAGES.values():
        _resolve(monkeypatch, f"network-operator-{name}")
    spec = ncp.nic_cluster_policy_spec(ncp.IMAGES_CHART, [h100_pool()], ["mlx5_core"])
    assert {m["version"] for m in _nic_images(spec).values()} == {FAKE}
    deployed = _deployed_images(
        SimpleNamespace(kubernetes_objects=[{"kind": "NicClusterPolicy", "spec": spec}], resources=[])
    )
    assert all(_in_stack(images.IMAGES[f"network-operator-{n}"], deployed) for n in NIC_IMAGES.values())
    # Another release keeps its own tags (and is not pinned by the table).
    other = ncp.nic_cluster_policy_spec("26.7.0", [h100_pool()], ["mlx5_core"])
    assert {m["version"] for m in _nic_images(other).values()} == {"network-operator-v26.7.0"}
