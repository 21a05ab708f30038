"""NVIDIA GPU Operator and Network Operator (stage 5 of the serving path, second half).

May import: `common`, `stack_config`, `planner`, `components.cluster`, `components.addons` (`CrdSources`).
Imported by: the model store, serving, `__main__.py`.

- `values`: the charts' Helm values, decided per cloud in pure functions.
- `gpu_alerts`: the alerts on the GPUs (DCGM exporter series), as a PrometheusRule dict.
- `nic_cluster_policy`: the Network Operator's custom resources, as plain dicts.
- `gpu_operator`, `network_operator`: the ComponentResources that install them.

Wiring in __main__ (servers then depend on `ready`):

    args = OperatorsArgs(config.operators, config.cloud.value, list(cluster.placements.values()))
    opts = ResourceOptions(provider=cluster.provider, depends_on=cluster_node_pools)
    gpu = GpuOperator("gpu-operator", args, opts) if config.operators.gpuOperator.enabled else None
    net = NetworkOperator("network-operator", NetworkOperatorArgs(...), gpu, opts) if ... else None
"""

from components.operators.args import GpuAlerting, NetworkOperatorArgs, OperatorsArgs
from components.operators.gpu_operator import GpuOperator
from components.operators.network_operator import NetworkOperator

__all__ = ["GpuAlerting", "GpuOperator", "NetworkOperator", "NetworkOperatorArgs", "OperatorsArgs"]
