"""Rules a real first `pulumi up` enforces that the SDK's mock runtime does not.

The mocks accept any resource in any order: a custom resource before its CRD, an IAM binding before
the identity pool it names, a node with 32 interfaces in a public subnet. The engine and the clouds
do not. This module turns each such rule into a check over what the mock runtime recorded: every
resource, its parent, its provider and the dependencies the SDK sent the engine (explicit
`depends_on` plus every resource whose output an input reads; a component is expanded to its
custom resources, as the SDK does).

A rule is a function of an `ApplyGraph` returning `Violation`s, registered with `@rule("name")`;
`check(evaluation)` runs them all. Each rule has a broken variant in the tests that proves it fires.

Rules come in three kinds (`RuleKind`), after what a real `pulumi up` has failed on:
- `graph`: the order the engine creates things in (CRDs before objects, APIs before use);
- `environment`: what lies outside the graph: where `pulumi up` runs from and what it can reach,
  how long its credentials live, what the clouds' own controllers need for the objects the program
  creates, what enforces what the program declares;
- `lifecycle`: what a second `up` replaces and what `destroy` deletes, in which order, and what the
  controllers leave behind.
A rule that only checks the program against its own numbers (self-consistency) says so with
`self_consistency=True`; the others encode what a cloud, a provider or an engine enforces, and name
that source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from offline_plan.mock_runtime import Evaluation, RecordedResource


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.resource}: {self.message}"


def describe(resource: RecordedResource) -> str:
    kind = resource.inputs.get("kind") if resource.is_kubernetes_object else None
    return f"{resource.type} {resource.name}" + (f" ({kind})" if kind else "")


class ApplyGraph:
    """The order a real engine would create the recorded resources in."""

    def __init__(self, evaluation: Evaluation):
        self.evaluation = evaluation
        self.resources = list(evaluation.resources)
        self.by_urn = {r.urn: r for r in self.resources if r.urn}
        self._upstream: dict[str, frozenset[str]] = {}

    def direct(self, resource: RecordedResource) -> set[str]:
        """URNs the engine creates before `resource`: its dependencies, its provider and its parent.

        The parent counts because the SDK registers a child only once its parent's URN resolves
        (pulumi/runtime/resource.py, prepare_resource: "Wait for our parent to resolve"), and a
        parent registers only once its own dependencies are done ("Before we can proceed, all our
        dependencies must be finished"): a component's `depends_on` holds back its children.
        """
        urns = set(resource.dependencies)
        if resource.parent_urn:
            urns.add(resource.parent_urn)
        if resource.provider:
            # Provider references are "<urn>::<id>"; the provider waits for what its inputs read.
            urns.add(resource.provider.rsplit("::", 1)[0])
        return {u for u in urns if u in self.by_urn}

    def upstream(self, resource: RecordedResource) -> frozenset[str]:
        """Every URN created before `resource`, transitively."""
        if resource.urn in self._upstream:
            return self._upstream[resource.urn]
        seen: set[str] = set()
        todo = list(self.direct(resource))
        while todo:
            urn = todo.pop()
            if urn in seen:
                continue
            seen.add(urn)
            todo.extend(self.direct(self.by_urn[urn]) - seen)
        result = frozenset(seen)
        self._upstream[resource.urn] = result
        return result

    def waits_for(self, later: RecordedResource, earlier: RecordedResource) -> bool:
        return earlier.urn in self.upstream(later)

    def of_type(self, *type_tokens: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type in type_tokens]

    def kubernetes_objects(self) -> list[RecordedResource]:
        return [r for r in self.resources if r.is_kubernetes_object]


Rule = Callable[[ApplyGraph], Iterable[Violation]]
RuleKind = Literal["graph", "environment", "lifecycle"]
RULES: dict[str, Rule] = {}


@dataclass(frozen=True)
class RuleInfo:
    name: str
    kind: RuleKind
    # True when the rule holds the program to its own numbers rather than to a cloud's behaviour.
    self_consistency: bool = False


RULE_INFO: dict[str, RuleInfo] = {}


def rule(name: str, kind: RuleKind = "graph", self_consistency: bool = False) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        if name in RULES:
            raise ValueError(f"first-apply rule {name!r} registered twice")
        RULES[name] = fn
        RULE_INFO[name] = RuleInfo(name, kind, self_consistency)
        return fn

    return register


def rules_of_kind(kind: RuleKind) -> list[str]:
    return [name for name, info in RULE_INFO.items() if info.kind == kind]


def check(evaluation: Evaluation, only: Iterable[str] | None = None) -> list[Violation]:
    graph = ApplyGraph(evaluation)
    names = list(only) if only is not None else list(RULES)
    return [v for name in names for v in RULES[name](graph)]
