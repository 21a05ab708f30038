"""The Pulumi side of the pack: one CrossGuard policy per rule of policies/registry.py.

Importing this module does not start anything; `policies/__main__.py` hands `build_policies()` to
`PolicyPack`, which serves them to the engine. The engine sends each resource's inputs wrapped in
pulumi_policy's unknown-checking proxies (Mapping/Sequence objects that raise on values unknown
during preview); `plain()` turns them into ordinary dicts and lists, replacing unknowns with
`UNKNOWN` so a rule skips what it cannot know instead of failing the whole policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policies.objects import UNKNOWN
from policies.registry import RULES, Rule
from policies.resource import Resource, from_object

_LEVELS = {
    "mandatory": EnforcementLevel.MANDATORY,
    "advisory": EnforcementLevel.ADVISORY,
    "disabled": EnforcementLevel.DISABLED,
}


def plain(value: Any) -> Any:
    """Deep copy of engine props as dicts/lists/scalars; unknown-during-preview values -> UNKNOWN."""
    if isinstance(value, str) or value is None or isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, Mapping):
        out = {}
        for key in list(value):
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                out[key] = UNKNOWN
        return out
    if isinstance(value, Sequence):
        items = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def resource_of(
    resource_type: str,
    props: Any,
    name: str,
    urn: str | None = None,
    property_dependencies: Mapping[str, Any] | None = None,
) -> Resource:
    r = from_object({"type": resource_type, "name": name, "props": plain(props)})
    r.urn = urn
    # Stack validation gives PolicyResource objects; keep their URNs only.
    r.property_dependencies = {
        k: [getattr(d, "urn", d) for d in deps] for k, deps in (property_dependencies or {}).items()
    }
    if r.is_kubernetes:
        # The object's own name (after auto-naming) is what kubectl shows; the Pulumi name otherwise.
        meta = r.props.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            r.name = meta["name"]
    return r


def _settings(rule: Rule, given: Mapping[str, Any] | None) -> dict:
    settings = rule.defaults()
    settings.update({k: v for k, v in (given or {}).items() if k != "enforcementLevel"})
    return settings


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation) -> None:
        resource = resource_of(args.resource_type, args.props, args.name, args.urn)
        if rule.applies is not None and not rule.applies(resource):
            args.not_applicable(f"{rule.name} does not look at {args.resource_type} resources")
        findings = rule.check(resource, _settings(rule, args.get_config()))
        for finding in findings:
            report_violation(str(finding), None)

    return validate


def _stack_validator(rule: Rule):
    def validate(args: StackValidationArgs, report_violation) -> None:
        resources = [
            resource_of(r.resource_type, r.props, r.name, r.urn, r.property_dependencies) for r in args.resources
        ]
        reason = rule.stack_not_applicable(resources) if rule.stack_not_applicable else None
        if reason:
            args.not_applicable(reason)
        for resource, finding in rule.check(resources, _settings(rule, args.get_config())):
            report_violation(str(finding), resource.urn)

    return validate


def _schema(rule: Rule) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties={k: dict(v) for k, v in rule.schema.items()}) if rule.schema else None


def build_policies() -> list[Policy]:
    policies: list[Policy] = []
    for rule in RULES:
        level, schema = _LEVELS[rule.level], _schema(rule)
        if rule.stack:
            policies.append(
                StackValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    enforcement_level=level,
                    config_schema=schema,
                    validate=_stack_validator(rule),
                )
            )
        else:
            policies.append(
                ResourceValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    enforcement_level=level,
                    config_schema=schema,
                    validate=_resource_validator(rule),
                )
            )
    return policies
