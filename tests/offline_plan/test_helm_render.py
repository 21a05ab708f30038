"""Every Helm release of the committed stacks, rendered by Helm's own engine (offline_plan/helm)."""

from __future__ import annotations

import copy
import functools
import shutil
from pathlib import Path

import pytest

from common import contract
from offline_plan import helm
from offline_plan import write as offline_plan
from offline_plan.helm import pod_security
from offline_plan.helm import releases as helm_releases
from offline_plan.helm.pods import summaries
from offline_plan.helm.releases import RELEASE_TYPE, releases
from offline_plan.mock_runtime import Evaluation
from tests.support import schemas, stack_variants
from tests.support.committed import STACKS, committed_stack
from tests.support.committed_plans import committed_plan
from tests.support.helm_crds import installed_crds, unserved_versions
from tests.support.helm_entrance import entrance_problems


@functools.cache
def _rendered(stack: str) -> tuple[Evaluation, list[helm.RenderedRelease]]:
    evaluation = committed_stack(stack)
    return evaluation, helm.rendered(evaluation)


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_of_the_stack_renders_with_the_values_the_program_passes(stack):
    evaluation, rendered = _rendered(stack)
    recorded = evaluation.of_type(RELEASE_TYPE)
    assert recorded, "the committed stacks install Helm releases"
    assert sorted(r.release.resource for r in rendered) == sorted(r.name for r in recorded)
    for r in rendered:
        rel = r.release
        assert r.objects, f"{rel.label} rendered nothing"
        source = next(x for x in recorded if x.name == rel.resource)
        # The release name and namespace the program passes are the ones Helm rendered with: the
        # chart's own labels say so.
        assert rel.name == source.inputs["name"] and rel.namespace == source.inputs["namespace"]
        instance = [
            o for o in r.objects if (o.get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/instance")
        ]
        assert all(o["metadata"]["labels"]["app.kubernetes.io/instance"] == rel.name for o in instance), rel.label
        assert rel.chart_dir().name == f"{rel.chart_name}-{source.inputs['version']}"


@pytest.mark.parametrize("name", [stack_variants.MULTI_NODE, stack_variants.KSERVE, stack_variants.KEDA_DEV])
def test_the_variants_add_ons_render_too(name):
    """LWS (multi-node), KServe and KEDA are installed only by these variants. LWS's registry tag
    `0.10.0` names a chart whose Chart.yaml says `v0.10.0` (charts/SOURCES.md): one chart."""
    evaluation = stack_variants.variant(name)
    rendered = helm.rendered(evaluation)
    assert rendered and all(r.objects for r in rendered)
    if name == stack_variants.MULTI_NODE:
        assert any(r.release.chart_name == "lws" for r in rendered)


def test_values_a_cloud_computes_are_named_as_placeholders():
    _, rendered = _rendered("prod")
    karpenter = next(r for r in rendered if r.release.chart_name == "karpenter")
    assert karpenter.release.placeholders == ("settings.clusterEndpoint",)
    assert all(not r.release.placeholders for r in rendered if r is not karpenter)


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_objects_validate_strictly_against_kubernetes_and_the_stacks_crds(stack):
    _, rendered = _rendered(stack)
    crds = [o for r in rendered for o in [*r.crds, *r.objects] if o.get("kind") == "CustomResourceDefinition"]
    installed = schemas.schemas_of(crds)
    problems = []
    for r in rendered:
        for obj in [*r.crds, *r.objects]:
            try:
                schemas.validate_object(obj, installed)
            except schemas.SchemaError as err:
                problems.append(f"{r.release.label}: {err}")
    assert not problems, "\n".join(problems)


def test_the_plan_writes_rendered_objects_marked_with_their_release_and_a_section_per_release():
    _evaluation, rendered = _rendered("dev")
    plan = committed_plan("dev")
    assert plan.returncode == 0, plan.stderr
    written = sorted((plan.folder / "manifests").glob("helm.*.yaml"))
    assert len(written) == sum(len(r.objects) + len(r.crds) for r in rendered)
    plan_md = (plan.folder / "plan.md").read_text()
    for r in rendered:
        rel = r.release
        assert any(p.name.startswith(f"helm.{rel.namespace}.{rel.name}.") for p in written), rel.label
        assert f"### `{rel.namespace}/{rel.name}`: {rel.chart_name} {rel.version}" in plan_md
    # No value of a rendered Secret reaches a file (Grafana's admin password is generated at render).
    values = [v for r in rendered for o in r.objects if o["kind"] == "Secret" for v in (o.get("data") or {}).values()]
    assert values and not any(v in p.read_text() for p in written for v in values if len(v) > 8)
    # The Prometheus Operator's admission webhooks, with the failure policy its chart renders.
    assert (
        "`MutatingWebhookConfiguration/kube-prometheus-stack-admission` `prometheusrulemutate.monitoring.coreos.com`: "
        "failurePolicy Ignore"
    ) in plan_md


def _charts_without(tmp_path: Path, missing: str) -> Path:
    """A charts folder with every chart of the repository but `missing`."""
    folder = tmp_path / "charts"
    folder.mkdir()
    for chart in helm_releases.CHARTS_DIR.iterdir():
        if chart.is_dir() and chart.name != missing:
            (folder / chart.name).symlink_to(chart)
    return folder


def _run_with(monkeypatch, tmp_path, stack: str, evaluation: Evaluation | None = None) -> int:
    if evaluation is not None:
        monkeypatch.setattr(offline_plan, "evaluate_stack", lambda *_a, **_k: evaluation)
    return offline_plan.run(stack, tmp_path / "build")


def test_a_missing_chart_directory_fails_the_plan_naming_the_release(tmp_path, monkeypatch, capsys):
    # prod installs cert-manager (ACME for agentgateway); dev's GKE entrance takes a Google-managed one.
    monkeypatch.setattr(helm_releases, "CHARTS_DIR", _charts_without(tmp_path, "cert-manager-v1.21.1"))
    assert _run_with(monkeypatch, tmp_path, "prod") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        (
            "plan failed for stack prod: helm release cert-manager/cert-manager (resource cert-manager-release, chart "
            "cert-manager v1.21.1): no chart directory charts/cert-manager-v1.21.1; add the chart at that version "
            "(charts/SOURCES.md says how)"
        )
    ]


def test_a_chart_that_does_not_load_fails_the_plan_naming_the_release(tmp_path, monkeypatch, capsys):
    charts = _charts_without(tmp_path, "keda-2.20.2")
    shutil.copytree(helm_releases.CHARTS_DIR / "keda-2.20.2", charts / "keda-2.20.2")
    (charts / "keda-2.20.2" / "Chart.yaml").write_text("apiVersion: v2\nname: [keda\n")
    monkeypatch.setattr(helm_releases, "CHARTS_DIR", charts)
    assert _run_with(monkeypatch, tmp_path, "prod") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "plan failed for stack prod: helm release keda/keda (resource keda-release, chart keda 2.20.2): "
        "the chart does not load: "
    ), line


def _with_values(stack: str, chart_name: str, edit) -> Evaluation:
    evaluation = committed_stack(stack)
    [resource] = [r for r in evaluation.of_type(RELEASE_TYPE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart_name][:1]
    values = copy.deepcopy(resource.inputs.get("values") or {})
    edit(values)
    resource.inputs["values"] = values
    return evaluation


@pytest.mark.parametrize(
    "stack, chart, edit, message",
    [
        (
            "prod",
            "cert-manager",
            lambda v: v.update(replicaCount="two"),
            (
                "helm release cert-manager/cert-manager (resource cert-manager-release, chart cert-manager v1.21.1): "
                "values refused by the chart's schema: key replicaCount: got string, want number"
            ),
        ),
        (
            "prod",
            "cert-manager",
            lambda v: v["webhook"].update(notAKey=True),
            (
                "helm release cert-manager/cert-manager (resource cert-manager-release, chart cert-manager v1.21.1): "
                "values refused by the chart's schema: key webhook.notAKey: additional properties 'notAKey' not allowed"
            ),
        ),
        (
            "prod",
            "karpenter",
            lambda v: v["settings"].pop("clusterName"),
            (
                "helm release kube-system/karpenter (resource llm-serving-prod-karpenter-release, chart karpenter "
                "1.14.1): the chart refuses the values: execution error at "
                "(karpenter/templates/deployment.yaml:151:25): Chart cannot be installed without a valid "
                "settings.clusterName!"
            ),
        ),
    ],
)
def test_values_the_chart_refuses_fail_the_plan_with_the_charts_message(
    stack, chart, edit, message, tmp_path, monkeypatch, capsys
):
    assert _run_with(monkeypatch, tmp_path, stack, _with_values(stack, chart, edit)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"plan failed for stack {stack}: {message}"]


def test_every_release_names_a_chart_directory_in_the_repository():
    for stack in STACKS:
        for rel in releases(committed_stack(stack)):
            assert rel.chart_dir().is_dir(), rel.label


@pytest.mark.parametrize("stack", STACKS)
def test_each_route_backend_is_the_inference_pool_a_picker_release_renders(stack):
    """Issue 26 point 4, on GKE's Gateway (dev) and agentgateway (prod)."""
    evaluation, rendered = _rendered(stack)
    assert entrance_problems(evaluation, rendered) == []


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            lambda v: v["router"]["modelServers"]["matchLabels"].update({contract.LABEL_MODEL: "another-model"}),
            "InferencePool ('llm-serving', 'llama-3-1-8b-instruct') selects no server pod",
        ),
        (
            lambda v: v["router"]["modelServers"].update(targetPorts=[{"number": 8080}]),
            "does not listen on the pool's target ports {8080}",
        ),
    ],
)
def test_a_pool_that_misses_its_servers_is_found(edit, problem):
    evaluation = _with_values("dev", "llm-d-router-gateway", edit)
    found = entrance_problems(evaluation, helm.rendered(evaluation))
    assert any(problem in p for p in found), found


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_pod_meets_the_pod_security_level_its_namespace_enforces(stack):
    evaluation, rendered = _rendered(stack)
    namespaces = pod_security.namespace_levels(evaluation.kubernetes_objects)
    refused = [
        f"{r.release.label}: {pod.ref} meets {pod.level} ({pod.level_gaps}), namespace enforces {namespaces[ns]}"
        for r in rendered
        for pod in summaries(r.objects)
        if (ns := pod.namespace or r.release.namespace) in namespaces
        and not pod_security.admitted(pod.level, namespaces[ns])
    ]
    assert not refused, "\n".join(refused)


HARDENED = {
    "name": "c",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"]},
    },
}


@pytest.mark.parametrize(
    "spec, level",
    [
        ({"containers": [HARDENED]}, "restricted"),
        ({"containers": [HARDENED], "volumes": [{"name": "v", "hostPath": {"path": "/"}}]}, "privileged"),
        ({"containers": [HARDENED], "hostNetwork": True}, "privileged"),
        ({"containers": [{**HARDENED, "securityContext": {"privileged": True}}]}, "privileged"),
        ({"containers": [{"name": "c"}]}, "baseline"),
        ({"containers": [HARDENED], "volumes": [{"name": "v", "nfs": {"server": "x", "path": "/"}}]}, "baseline"),
    ],
)
def test_a_pods_level_follows_the_pod_security_standards(spec, level):
    assert pod_security.level(spec)[0] == level
    # A baseline namespace refuses what meets privileged only.
    assert pod_security.admitted(level, "baseline") == (level != "privileged")


@pytest.mark.parametrize("stack", STACKS)
def test_the_crds_the_charts_install_serve_every_api_version_the_program_uses(stack):
    evaluation, rendered = _rendered(stack)
    problems, covered = unserved_versions(evaluation.kubernetes_objects, installed_crds(rendered))
    assert covered, f"{stack}: no object of the program is of a kind a chart installs"
    assert problems == []


def test_a_crd_version_no_longer_served_is_found():
    evaluation, rendered = _rendered("prod")
    crds = copy.deepcopy(installed_crds(rendered))
    for crd in crds:
        if crd["spec"]["names"]["kind"] == "ServiceMonitor":
            for version in crd["spec"]["versions"]:
                version["served"] = False
    problems, _ = unserved_versions(evaluation.kubernetes_objects, crds)
    assert problems and all("ServiceMonitor/" in p and "monitoring.coreos.com/v1 is not served" in p for p in problems)
