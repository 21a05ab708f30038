"""The policy pack over every object the committed stacks' Helm releases render, with the waivers of
policies/config/waivers.yaml: the plan's verdict (offline_plan/helm/policy.py) and the checker's
(`python -m policies.check --waivers`)."""

from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path

import pytest
import yaml

from common import images
from offline_plan import helm
from offline_plan import write as offline_plan
from offline_plan.helm import policy as chart_policy
from offline_plan.mock_runtime import ROOT, Evaluation
from policies import check, waivers
from tests.support.committed import STACKS, committed_stack

WAIVERS = ROOT / chart_policy.WAIVERS


@functools.cache
def _evaluated(stack: str) -> tuple[Evaluation, list[helm.RenderedRelease], list]:
    evaluation = committed_stack(stack)
    return (
        evaluation,
        helm.rendered(evaluation),
        offline_plan.policy_verdicts(evaluation, offline_plan.pack_config(stack)),
    )


def _chart_verdicts(stack: str, waiver_list: list[waivers.Waiver] | None = None) -> chart_policy.ChartVerdicts:
    evaluation, rendered, program = _evaluated(stack)
    result = chart_policy.chart_verdicts(evaluation, rendered, program, offline_plan.pack_config(stack))
    if waiver_list is None:
        return result
    findings = [*result.applied.kept, *(v for v, _ in result.applied.waived)]
    return dataclasses.replace(result, applied=waivers.apply(findings, waiver_list, stack), waivers=waiver_list)


def _unresolved_table_image(verdict) -> bool:
    """image-tag-pinned under requireDigest on an image of the table whose digest is unresolved:
    the finding the program's own images get too, settled by the resolver, never waived."""
    if verdict.policy != "image-tag-pinned" or "requireDigest" not in verdict.message:
        return False
    image = verdict.message.split(" image '", 1)[1].split("'", 1)[0]
    entries = images.entries_for(image)
    return bool(entries) and not any(e.resolved for e in entries)


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stacks_pass_over_their_rendered_charts_with_explicit_waivers(stack):
    result = _chart_verdicts(stack)
    assert not result.applied.stale, result.applied.stale_lines(str(chart_policy.WAIVERS))
    assert not result.program, [v.message for v in result.program]
    unexplained = [
        f"{v.policy}: {v.kind}/{v.name}: {v.message}" for v in result.applied.kept if not _unresolved_table_image(v)
    ]
    assert not unexplained, unexplained
    # The pack really ran over the charts: the waivers carry findings, and every one names its release.
    assert result.applied.waived
    for verdict, waiver in result.applied.waived:
        assert Path(verdict.file).name.startswith(waiver.prefix)
        assert verdict.policy == waiver.policy and f"{verdict.kind}/{verdict.name}" in waiver.objects


def test_dev_has_no_finding_left_on_its_charts_and_prod_only_unresolved_digests():
    assert not _chart_verdicts("dev").applied.kept
    kept = _chart_verdicts("prod").applied.kept
    assert kept and all(_unresolved_table_image(v) for v in kept)


def test_every_waiver_cites_a_chart_file_of_the_pinned_version_and_a_reason():
    loaded = waivers.load(str(WAIVERS))
    assert loaded
    rendered_releases = {
        f"{r.release.namespace}/{r.release.name}": r.release for stack in STACKS for r in _evaluated(stack)[1]
    }
    for w in loaded:
        assert w.release in rendered_releases, f"waiver {w.index}: no committed stack installs {w.release}"
        chart_dir = rendered_releases[w.release].chart_dir().name
        assert w.source.startswith(f"charts/{chart_dir}/"), f"waiver {w.index}: cite a file of charts/{chart_dir}/"
        assert (ROOT / w.source).is_file(), f"waiver {w.index}: {w.source} does not exist"
        assert len(w.reason) > 40, f"waiver {w.index}: say why the chart needs it"
        assert set(w.stacks) <= set(STACKS)


def _without(index: int) -> list[waivers.Waiver]:
    return [w for w in waivers.load(str(WAIVERS)) if w.index != index]


def test_a_removed_waiver_fails_the_plan_with_the_finding_it_covered():
    loaded = waivers.load(str(WAIVERS))
    node_exporter = next(
        w
        for w in loaded
        if w.policy == "pod-security-context"
        and "DaemonSet/kube-prometheus-stack-prometheus-node-exporter" in w.objects
    )
    assert not _chart_verdicts("dev").failing
    result = _chart_verdicts("dev", _without(node_exporter.index))
    assert result.failing
    assert {(v.policy, v.name) for v in result.applied.kept} == {
        ("pod-security-context", "kube-prometheus-stack-prometheus-node-exporter")
    }


def test_a_waiver_that_matches_nothing_is_stale_and_fails_the_plan():
    loaded = waivers.load(str(WAIVERS))
    extra = dataclasses.replace(loaded[0], index=99, objects=("Deployment/no-such-object",))
    result = _chart_verdicts("dev", [*loaded, extra])
    assert result.failing
    assert [(w.index, obj) for w, obj in result.applied.stale] == [(99, "Deployment/no-such-object")]
    assert "matches no finding" in result.applied.stale_lines("waivers.yaml")[0]
    # A waiver listed for a stack that has no such finding is stale in that stack only.
    prod_only = next(w for w in loaded if w.stacks == ("prod",))
    widened = dataclasses.replace(prod_only, stacks=("dev", "prod"))
    others = [w for w in loaded if w.index != prod_only.index]
    assert _chart_verdicts("dev", [*others, widened]).applied.stale
    assert not _chart_verdicts("prod", [*others, widened]).applied.stale


def test_a_waiver_never_covers_the_programs_own_objects():
    # The same Kind/name outside the release's files is not waived, even if the names agree.
    loaded = waivers.load(str(WAIVERS))
    waiver = loaded[0]
    kind, name = waiver.objects[0].split("/")
    verdict = check.Verdict(kind, name, waiver.policy, "mandatory", "finding", file="Deployment-x.yaml")
    applied = waivers.apply([verdict], [waiver], waiver.stacks[0])
    assert applied.kept == [verdict] and not applied.waived


@pytest.mark.parametrize(
    "entry, problem",
    [
        ({"policy": "no-such-rule"}, "'policy'"),
        ({"objects": ["Deployment"]}, "'objects' item"),
        ({"release": "kube-prometheus-stack"}, "'release'"),
        ({"reason": ""}, "'reason'"),
        ({"stacks": []}, "'stacks'"),
        ({"why": "x"}, "unknown key"),
    ],
)
def test_a_malformed_waiver_is_one_line_naming_the_entry_and_key(tmp_path, entry, problem):
    good = yaml.safe_load(WAIVERS.read_text())[0]
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump([good, {**good, "stacks": ["other"], **entry}]))
    with pytest.raises(waivers.WaiverError) as err:
        waivers.load(str(path))
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "waiver 2" in message and problem in message


def test_a_repeated_waiver_is_refused(tmp_path):
    good = yaml.safe_load(WAIVERS.read_text())[0]
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump([good, good]))
    with pytest.raises(waivers.WaiverError, match="repeats an earlier waiver"):
        waivers.load(str(path))


@pytest.fixture(scope="module")
def dev_manifests(tmp_path_factory) -> Path:
    evaluation = _evaluated("dev")[0]
    directory = tmp_path_factory.mktemp("dev") / "manifests"
    offline_plan.write_manifests(copy.deepcopy(evaluation.kubernetes_objects), directory)
    helm.write_manifests(evaluation, directory)
    return directory


def test_the_checker_applies_the_waivers_to_the_written_manifests(dev_manifests, capsys):
    args = ["--config", str(ROOT / "policies" / "config" / "dev.json"), str(dev_manifests)]
    assert check.main(args) == 1  # without waivers, the charts' findings are violations
    capsys.readouterr()
    assert check.main(["--waivers", str(WAIVERS), "--stack", "dev", *args]) == 0
    err = capsys.readouterr().err
    assert " waived" in err and "0 mandatory" in err


def test_the_checker_fails_on_a_stale_waiver(dev_manifests, tmp_path, capsys):
    entries = yaml.safe_load(WAIVERS.read_text())
    entries.append({**entries[0], "objects": ["Deployment/no-such-object"]})
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump(entries))
    assert check.main(["--waivers", str(path), "--stack", "dev", str(dev_manifests)]) == 1
    assert "Deployment/no-such-object" in capsys.readouterr().err


def test_the_checker_refuses_waivers_without_a_stack(dev_manifests, capsys):
    assert check.main(["--waivers", str(WAIVERS), str(dev_manifests)]) == 2
    assert "--stack" in capsys.readouterr().err


def test_the_plan_lists_the_waivers_it_used():
    evaluation, _, program = _evaluated("dev")
    section = chart_policy.plan_section(_chart_verdicts("dev"))
    text = "\n".join(section)
    assert text.startswith("## Policy verdicts over rendered charts")
    assert "Waivers used:" in text and "0 stale waivers" in text
    for w in waivers.for_stack(waivers.load(str(WAIVERS)), "dev"):
        assert f"| {w.index} | `{w.release}` | {w.policy} |" in text
    plan = offline_plan.render_plan(evaluation, program, [], offline_plan.pack_config("dev"))
    assert "## Policy verdicts over rendered charts" in plan
