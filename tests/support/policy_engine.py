"""Drive the policy pack the way the Pulumi engine does (no tests here, only the harness).

The engine talks gRPC to the pack's analyzer servicer: it sends each resource's inputs as a
protobuf Struct (numbers become doubles), the servicer deserializes them, wraps them in
pulumi_policy's unknown-checking proxies, builds ResourceValidationArgs / StackValidationArgs and
collects diagnostics with the configured enforcement level. `analyze` and `analyze_stack` call that
same servicer with the same protobuf messages, so the rules see exactly what they see under
`pulumi preview`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import yaml
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policies.pack import build_policies
from policies.registry import BY_NAME
from policies.resource import kubernetes_type
from tests.support import paths

FIXTURES = str(paths.FIXTURES / "policy")
# Sentinels of pulumi/sdk/go/common/resource/properties.go, as the engine sends them.
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

_LEVEL_TO_PROTO = {"mandatory": proto.MANDATORY, "advisory": proto.ADVISORY, "disabled": proto.DISABLED}
_PROTO_TO_LEVEL = {proto.MANDATORY: "mandatory", proto.ADVISORY: "advisory"}


def secret(value):
    return {SECRET_SIG_KEY: SECRET_SIG, "value": value}


def struct(d: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(d)
    return s


@dataclass
class Diagnostic:
    policy: str
    level: str
    message: str
    urn: str


@dataclass
class Result:
    violations: list[Diagnostic]
    not_applicable: set[str]

    def policies(self) -> set[str]:
        return {d.policy for d in self.violations}

    def of(self, policy: str) -> list[Diagnostic]:
        return [d for d in self.violations if d.policy == policy]


def servicer(config: dict | None = None) -> _PolicyAnalyzerServicer:
    s = _PolicyAnalyzerServicer("llm-serving", "0.1.0", build_policies(), EnforcementLevel.MANDATORY)
    if config:
        policy_config = {}
        for name, settings in config.items():
            settings = dict(settings)
            level = settings.pop("enforcementLevel", BY_NAME[name].level)
            policy_config[name] = proto.PolicyConfig(
                enforcementLevel=_LEVEL_TO_PROTO[level], properties=struct(settings)
            )
        s.Configure(proto.ConfigureAnalyzerRequest(policyConfig=policy_config), None)
    return s


def _result(response) -> Result:
    violations = []
    for d in response.diagnostics:
        # The servicer prefixes the policy description; keep the rule's own sentence.
        message = d.message.split("\n", 1)[1] if "\n" in d.message else d.message
        violations.append(
            Diagnostic(d.policyName, _PROTO_TO_LEVEL.get(d.enforcementLevel, str(d.enforcementLevel)), message, d.urn)
        )
    return Result(violations, {n.policy_name for n in response.not_applicable})


def urn(resource_type: str, name: str) -> str:
    return f"urn:pulumi:dev::llm-serving::{resource_type}::{name}"


def analyze(resource_type: str, props: dict, name: str = "r", config: dict | None = None) -> Result:
    request = proto.AnalyzeRequest(
        type=resource_type, properties=struct(props), urn=urn(resource_type, name), name=name
    )
    return _result(servicer(config).Analyze(request, None))


def analyze_k8s(obj: dict, config: dict | None = None) -> Result:
    """A Kubernetes object as the Kubernetes provider registers it (type token + camelCase inputs)."""
    name = obj.get("metadata", {}).get("name", "r")
    return analyze(kubernetes_type(obj), obj, name, config)


def analyze_stack(resources: list[tuple], config: dict | None = None) -> Result:
    """Each resource is (type, name, props) or (type, name, props, {input: [(type, name), ...]}),
    the last being the engine's propertyDependencies (which resources an input's value came from)."""
    entries = []
    for t, n, p, *rest in resources:
        deps = {
            k: proto.AnalyzerPropertyDependencies(urns=[urn(dt, dn) for dt, dn in v])
            for k, v in (rest[0] if rest else {}).items()
        }
        entries.append(
            proto.AnalyzerResource(type=t, name=n, urn=urn(t, n), properties=struct(p), propertyDependencies=deps)
        )
    request = proto.AnalyzeStackRequest(resources=entries)
    return _result(servicer(config).AnalyzeStack(request, None))


def load_fixture(*parts: str) -> list[dict]:
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def k8s_stack_entry(obj: dict) -> tuple[str, str, dict]:
    return kubernetes_type(obj), obj["metadata"]["name"], obj


GOOD_SERVER = load_fixture("good", "vllm-deployment.yaml")[0]


def cloud_records(evaluation):
    return [
        {"type": r.type, "name": r.name, "props": r.inputs}
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
