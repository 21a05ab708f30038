"""Cluster add-ons the program's custom resources stand on (stage 5 of the serving path, first half).

May import: `common`, `stack_config`, `planner`, `components.cluster`.
Imported by: the operators, the model store, serving, `__main__.py`.

- `catalog`: what an add-on is (charts or manifests at exact versions, the CRDs it brings).
- one module per add-on: `prometheus_operator`, `keda`, `leader_worker_set`, `cert_manager`,
  `kserve`, `gateway_api` (chart facts, values in pure functions, readiness conditions).
- `needs`: which add-ons a stack needs and why, from the stack config and the plans.
- `crd_sources`: `CrdSources`, kind -> what an object of that kind must wait for.
- `install`: `AddOns`, the component that installs them on a created cluster or looks their CRDs
  up on an existing one, and hands out the `CrdSources`.

Wiring in __main__:

    needs = needed_addons(stack, plans)
    addons = AddOns("addons", AddOnsArgs(needs, stack.creates_cluster, system_node_selector), k8s_opts)
    ... VllmServerArgs(..., crds=addons.crds), GpuOperator(..., OperatorsArgs(..., crds=addons.crds))
"""

from components.addons.crd_sources import CrdSources, MissingCrdSource
from components.addons.install import AddOns, AddOnsArgs
from components.addons.needs import CATALOG, AddOnNeed, addon_table, needed_addons, undeclared_problems

__all__ = [
    "CATALOG",
    "AddOnNeed",
    "AddOns",
    "AddOnsArgs",
    "CrdSources",
    "MissingCrdSource",
    "addon_table",
    "needed_addons",
    "undeclared_problems",
]
