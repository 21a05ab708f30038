"""CrdSources for component tests: every add-on kind declared present, or provided by given resources."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from components.addons import CATALOG, CrdSources


def crds_present(resources: Sequence[pulumi.Resource] = ()) -> CrdSources:
    """Every kind of every add-on, provided by `resources` (none: a cluster that already has them)."""
    crds = CrdSources()
    for addon in CATALOG:
        for crd in addon.crds:
            crds.provide(crd.group, crd.kind, resources, "test stand-in")
    return crds
