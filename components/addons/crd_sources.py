"""Where each custom resource kind comes from: the resources a custom resource must wait for.

`AddOns` (install.py) fills one `CrdSources` per stack and `__main__.py` hands it to every
component that creates custom resources. A component asks for the kind of each object it creates
and puts the answer in that object's `depends_on`; a kind nobody provides is a wiring error
raised while the program runs, never a create that fails a minute into `pulumi up`.
"""

from __future__ import annotations

from collections.abc import Iterable

import pulumi
import pulumi_kubernetes as k8s


class MissingCrdSource(LookupError):
    pass


def group_of(api_version: str) -> str:
    """`monitoring.coreos.com/v1` -> `monitoring.coreos.com` (the core group "" for `v1`)."""
    return api_version.split("/", 1)[0] if "/" in api_version else ""


class CrdSources:
    """Kind -> the resources after which objects of that kind can be created."""

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], tuple[pulumi.Resource, ...]] = {}
        self._origin: dict[tuple[str, str], str] = {}

    def provide(self, group: str, kind: str, resources: Iterable[pulumi.Resource], origin: str) -> None:
        """Record that `resources` (an add-on's last install step, a CRD lookup, or nothing when
        the cluster itself provides the kind) make `kind` usable; `origin` says who, for messages."""
        self._by_kind[(group, kind)] = tuple(resources)
        self._origin[(group, kind)] = origin

    def depends_on(self, api_version: str, kind: str) -> list[pulumi.Resource]:
        key = (group_of(api_version), kind)
        if key not in self._by_kind:
            known = ", ".join(f"{k} ({g})" for g, k in sorted(self._by_kind)) or "none"
            raise MissingCrdSource(
                f"nothing installs or declares the CRD of {kind} ({key[0]}); components/addons/needs.py decides "
                f"which add-ons a stack needs and must list the one that serves it (kinds provided: {known})"
            )
        return list(self._by_kind[key])

    def origin(self, api_version: str, kind: str) -> str:
        return self._origin[(group_of(api_version), kind)]

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self._by_kind)


def custom_resource(
    resource_name: str, manifest: dict, crds: CrdSources, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A CustomResource from a manifest dict that waits for what provides its kind, besides `opts`."""
    extra = crds.depends_on(manifest["apiVersion"], manifest["kind"])
    base = opts.depends_on if isinstance(opts.depends_on, list) else ([opts.depends_on] if opts.depends_on else [])
    merged = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions())
    merged.depends_on = list(base) + extra
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=merged,
    )
