"""The GKE cluster layer's test arrangements: a stack config of given pools and the pools the GKE tests share."""

from __future__ import annotations

import stack_config as cfg

REVISION = "0123456789abcdef0123456789abcdef01234567"


def stack(pools, cluster=None) -> cfg.StackConfig:
    raw = {
        "cloud": "gcp",
        "cluster": {"gcpProject": "mock-project", **(cluster or {})},
        "pools": pools,
        "models": [{"repo": "Qwen/Qwen2.5-7B-Instruct", "revision": REVISION, "pool": pools[0]["name"]}],
    }
    if (cluster or {}).get("create") is False:
        # A cluster this program does not create declares what enforces NetworkPolicy.
        raw["security"] = {"networkPolicyEnforcement": "gke-dataplane-v2"}
    return cfg.parse_stack_config(raw, "Pulumi.test.yaml")


# Config requires one gkeDriverVersion across a cluster's pools (the GPU Operator is set up once).
POOLS = [
    {"name": "l4", "gpu": "L4", "minNodes": 0, "maxNodes": 4, "diskGib": 250, "gkeDriverVersion": "DEFAULT"},
    {
        "name": "h100",
        "gpu": "H100-80GB",
        "gpusPerNode": 8,
        "capacityType": "spot",
        "maxNodes": 2,
        "gkeDriverVersion": "DEFAULT",
    },
    {"name": "a100", "gpu": "A100-40GB", "localSsd": False, "gkeDriverVersion": "DEFAULT"},
]
