"""The GPU Operator's values for a given cloud and driver, on an H100 pool, and every combination a stack can
express."""

from __future__ import annotations

from components.cluster.interface import GpuPlacement, pool_node_labels
from components.operators import values as ov
from stack_config import GpuOperatorConfig


def h100_pool(**overrides) -> GpuPlacement:
    fields = {
        "pool": "h100",
        "gpu": "H100-80GB",
        "gpus_per_node": 8,
        "max_nodes": 2,
        "node_labels": pool_node_labels("h100", "H100-80GB"),
    }
    fields.update(overrides)
    return GpuPlacement(**fields)


def options(**fields) -> GpuOperatorConfig:
    return GpuOperatorConfig.model_validate(fields)


def values_for(cloud: str, driver: str = "auto", gke: str | None = None, net: bool = False, **opts) -> dict:
    cm = "device-plugin-config" if opts.get("timeSlicingReplicas") else None
    return ov.gpu_operator_values(
        cloud,
        driver,
        options(**opts),
        [h100_pool()],
        "gpu-operator",
        gke_driver_version=gke,
        network_operator=net,
        time_slicing_config_map=cm,
    )


# The combinations a stack can express and the config accepts (cloud, gpuOperator.driver, GKE
# pools' driver version); test_config_and_values_agree_on_every_driver_combination proves the list.
SUPPORTED = [
    ("aws", "auto", None),
    ("aws", "preinstalled", None),
    ("gcp", "auto", "LATEST"),
    ("gcp", "auto", "DEFAULT"),
    ("gcp", "preinstalled", "LATEST"),
    ("gcp", "preinstalled", "DEFAULT"),
    ("gcp", "operator", "INSTALLATION_DISABLED"),
    ("existing", "operator", None),
    ("existing", "preinstalled", None),
]
