"""One shape for every resource a rule can see, whichever door it came through.

The Pulumi pack sees (type token, props); the manifest checker sees Kubernetes objects. Both
become a `Resource` whose `type` is the Pulumi type token (Kubernetes objects get the token the
Kubernetes provider would give them: `kubernetes:<group>/<version>:<Kind>`, core group as
`core/v1`), so rules select resources one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.objects import as_dict, as_str, is_unknown


@dataclass
class Resource:
    type: str
    name: str
    props: dict
    file: str | None = None
    urn: str | None = None
    # Stack validation only: input property -> URNs of the resources its value came from (how the
    # engine tells which bucket a BucketPublicAccessBlock's still-unknown `bucket` refers to).
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)

    @property
    def is_kubernetes(self) -> bool:
        return self.type.startswith("kubernetes:") and not self.type.startswith("kubernetes:helm.sh/")

    @property
    def kind(self) -> str:
        """The Kubernetes kind, or the last part of a Pulumi type token ('NodeGroup')."""
        if self.is_kubernetes:
            return as_str(self.props.get("kind")) or self.type.rsplit(":", 1)[-1]
        return self.type.rsplit(":", 1)[-1]

    @property
    def namespace(self) -> str | None:
        namespace = as_dict(self.props.get("metadata")).get("namespace")
        return namespace if is_unknown(namespace) else as_str(namespace)


def kubernetes_type(obj: dict) -> str:
    api_version = as_str(obj.get("apiVersion")) or "v1"
    kind = as_str(obj.get("kind")) or "Unknown"
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def api_version_of(resource_type: str) -> tuple[str, str]:
    """(apiVersion, kind) from a Kubernetes provider type token."""
    _, group_version, kind = resource_type.split(":", 2)
    group_version = group_version.removeprefix("core/")
    return group_version, kind


def from_kubernetes(obj: dict, file: str | None = None) -> Resource:
    name = (
        as_str(as_dict(obj.get("metadata")).get("name"))
        or as_str(as_dict(obj.get("metadata")).get("generateName"))
        or "<unnamed>"
    )
    return Resource(kubernetes_type(obj), name, obj, file)


def from_object(obj: dict, file: str | None = None) -> Resource:
    """A Kubernetes object, or a Pulumi-shaped `{"type": token, "name": ..., "props": {...}}` record
    (how the offline plan hands over cloud resources such as node pools and buckets)."""
    t = obj.get("type")
    if isinstance(t, str) and t.count(":") >= 2 and isinstance(obj.get("props"), dict) and "kind" not in obj:
        props = obj["props"]
        name = as_str(obj.get("name")) or "<unnamed>"
        r = Resource(t, name, props, file)
        if r.is_kubernetes and "kind" not in props:
            api_version, kind = api_version_of(t)
            r.props = {"apiVersion": api_version, "kind": kind, **props}
        return r
    return from_kubernetes(obj, file)
