"""The first-apply graph orders resources as the engine would: dependencies, inputs read from other
resources, components expanded to their children, and the provider a resource is created through."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from offline_plan.mock_runtime import run_in_mocks
from tests.support.first_apply import RULE_INFO, RULES, ApplyGraph, Violation, check, rule


class Box(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Box", name, None, opts)
        self.inner = k8s.core.v1.ConfigMap(f"{name}-inner", data={"a": "b"}, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def program():
    cluster = k8s.core.v1.Namespace("cluster-stand-in", metadata={"name": "a"})
    Box("held-back", opts=pulumi.ResourceOptions(depends_on=[cluster]))
    provider = k8s.Provider("k8s", kubeconfig=cluster.metadata.apply(lambda m: "{}"))
    box = Box("box")
    k8s.core.v1.ConfigMap("after-box", data={"x": "y"}, opts=pulumi.ResourceOptions(depends_on=[box]))
    k8s.core.v1.ConfigMap("reads-input", data={"name": box.inner.metadata.apply(lambda m: "n")})
    k8s.core.v1.ConfigMap("through-provider", data={"p": "q"}, opts=pulumi.ResourceOptions(provider=provider))
    k8s.core.v1.ConfigMap("alone", data={"z": "z"})


@pytest.fixture(scope="module")
def graph() -> ApplyGraph:
    return ApplyGraph(run_in_mocks(program))


def named(graph: ApplyGraph, name: str):
    return next(r for r in graph.resources if r.name == name)


def test_depends_on_a_component_waits_for_its_children(graph):
    assert graph.waits_for(named(graph, "after-box"), named(graph, "box-inner"))


def test_reading_another_resources_output_waits_for_it(graph):
    assert graph.waits_for(named(graph, "reads-input"), named(graph, "box-inner"))


def test_a_resource_waits_for_its_provider_and_what_the_provider_reads(graph):
    later = named(graph, "through-provider")
    assert graph.waits_for(later, named(graph, "k8s"))
    assert graph.waits_for(later, named(graph, "cluster-stand-in"))


def test_a_child_waits_for_what_its_parent_component_depends_on(graph):
    assert graph.waits_for(named(graph, "held-back-inner"), named(graph, "cluster-stand-in"))
    assert not graph.waits_for(named(graph, "box-inner"), named(graph, "cluster-stand-in"))


def test_unrelated_resources_do_not_wait_for_each_other(graph):
    assert not graph.waits_for(named(graph, "alone"), named(graph, "box-inner"))
    assert not graph.waits_for(named(graph, "box-inner"), named(graph, "after-box"))


def test_check_runs_registered_rules_and_reports_each_violation():
    name = "test-no-configmap-named-alone"

    @rule(name)
    def _no_alone(g: ApplyGraph):
        return [Violation(name, r.name, "is alone") for r in g.resources if r.name == "alone"]

    try:
        found = check(run_in_mocks(program), only=[name])
        assert [str(v) for v in found] == [f"{name}: alone: is alone"]
        with pytest.raises(ValueError, match="registered twice"):
            rule(name)(_no_alone)
    finally:
        RULES.pop(name)
        RULE_INFO.pop(name)
