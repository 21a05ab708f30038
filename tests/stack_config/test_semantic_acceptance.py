"""Values that are well-formed but wrong in meaning: a system or add-on namespace given to the program to
own, CIDRs that together open the API endpoint to every address, a URL that carries credentials."""

from __future__ import annotations

import ipaddress

import pytest

from offline_plan.helm.releases import releases
from stack_config import parse_stack_config
from stack_config.namespaces import ADDON_NAMESPACES, reserved_reason
from stack_config.security import uncovered_public
from tests.support.committed import STACKS, committed_stack
from tests.support.config_edits import SOURCE, base, edit, problems_of

NAMESPACE_KEYS = ("modelStore.namespace", "operators.namespace")
SYSTEM = ["kube-system", "default", "kube-public", "kube-node-lease", "kube-anything", "gmp-system", "gke-managed-x"]


@pytest.mark.parametrize("key", NAMESPACE_KEYS)
@pytest.mark.parametrize("namespace", SYSTEM + sorted(ADDON_NAMESPACES))
def test_a_system_or_add_on_namespace_is_refused_where_it_is_written(key, namespace):
    (problem,) = problems_of(edit(base("gcp"), key, namespace))
    assert problem.startswith(f"{SOURCE}: {key}: '{namespace}' is "), problem
    assert "choose a namespace of its own" in problem


@pytest.mark.parametrize("key", NAMESPACE_KEYS)
def test_a_namespace_of_its_own_is_accepted(key):
    stack = parse_stack_config(edit(base("gcp"), key, "team-llm"), SOURCE)
    assert "team-llm" in (stack.modelStore.namespace, stack.operators.namespace)


@pytest.mark.parametrize("stack", STACKS)
def test_every_add_on_namespace_the_stacks_install_into_is_reserved(stack):
    """The reserved list is the add-ons' real namespaces: each Helm release and Namespace the committed
    stacks create lands in the serving or operators namespace or in one the program may not be given."""
    evaluation = committed_stack(stack)
    own = {"llm-serving", "gpu-operator"}
    # A release's namespace is its input (what rendering it would carry along unchanged).
    landed = {r.namespace for r in releases(evaluation)}
    landed |= {str(o["metadata"]["name"]) for o in evaluation.kubernetes_objects if o.get("kind") == "Namespace"}
    assert landed - own, "the committed stacks install add-ons"
    assert {ns for ns in landed - own if reserved_reason(ns) is None} == set()


@pytest.mark.parametrize(
    "cidrs",
    [
        ["0.0.0.0/1", "128.0.0.0/1"],
        [f"{i}.0.0.0/8" for i in range(1, 224) if i not in (10, 127)][:40],
        ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"],
    ],
)
def test_cidrs_that_together_admit_every_public_address_are_world_open(cidrs):
    covered = not uncovered_public(cidrs)
    raw = edit(base("aws"), "security", {"profile": "production", "clusterEndpoint": {"publicCidrs": cidrs}})
    if covered:
        problems = problems_of(raw)
        assert any("together admit every public address" in p for p in problems), problems
    else:  # 40 /8s leave part of the internet out: a wide list, not an open one
        assert len(cidrs) == 40
        parse_stack_config(raw, SOURCE)


def test_the_split_halves_of_the_internet_are_exactly_what_is_left_uncovered_otherwise():
    # One half alone leaves the other half's public addresses uncovered, and nothing of the first half.
    left = uncovered_public(["0.0.0.0/1"])
    assert left and all(net.subnet_of(ipaddress.IPv4Network("128.0.0.0/1")) for net in left)
    assert uncovered_public(["0.0.0.0/1", "128.0.0.0/1"]) == []
    assert uncovered_public(["0.0.0.0/0"]) == []


def test_a_narrow_public_list_stays_accepted_in_production():
    raw = edit(base("aws"), "security", {"profile": "production", "clusterEndpoint": {"publicCidrs": ["44.0.0.0/24"]}})
    assert not parse_stack_config(raw, SOURCE).security.clusterEndpoint.is_world_open


@pytest.mark.parametrize(
    "key,url",
    [
        ("monitoring.runbookUrl", "https://admin:hunter2@wiki.example.com/runbook.md"),
        ("monitoring.runbookUrl", "https://ghtoken@github.com/org/repo/blob/main/docs/runbook.md"),
        ("exposure.entrance.tls.acmeServer", "https://user:pass@acme.example.com/directory"),
    ],
)
def test_a_url_with_credentials_is_refused_in_any_field_without_quoting_them(key, url):
    raw = base("gcp")
    if key.startswith("exposure.entrance"):
        entrance = {"hostname": "llm.example.com", "picker": {"replicas": 2}, "tls": {"certificate": "acme"}}
        raw = edit(raw, "exposure", {"entrance": entrance})
    problems = problems_of(edit(raw, key, url))
    line = next(p for p in problems if "carries credentials" in p)
    assert line.startswith(f"{SOURCE}: {key}: "), line
    assert "hunter2" not in line and "pass@" not in line and "ghtoken" not in line
