"""Stack configs for the validation tests: a valid base per cloud, one key edited, the problems it yields."""

from __future__ import annotations

import copy

import pytest

from stack_config import ConfigError, parse_stack_config

SOURCE = "Pulumi.dev.yaml"


SHA = "0" * 39 + "1"  # a well-formed commit for validation tests only; stacks cite real ones


def base(cloud: str = "gcp") -> dict:
    pool = {
        "gcp": {"name": "l4", "gpu": "L4"},
        "aws": {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8},
        "existing": {"name": "l4", "gpu": "L4"},
    }[cloud]
    raw = {
        "cloud": cloud,
        "pools": [pool],
        "models": [{"repo": "Qwen/Qwen2.5-1.5B-Instruct", "revision": SHA, "pool": pool["name"]}],
    }
    if cloud == "existing":
        raw["cluster"] = {"kubeconfig": "~/.kube/config", "rwxStorageClass": "nfs"}
        raw["operators"] = {"gpuOperator": {"driver": "preinstalled"}}
        # An existing cluster's network plugin is its owner's: the stack file names what enforces NetworkPolicy.
        raw["security"] = {"networkPolicyEnforcement": "calico"}
    return raw


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, SOURCE)
    assert all(p.startswith(f"{SOURCE}: ") for p in info.value.problems), info.value.problems
    return info.value.problems


def edit(raw: dict, path: str, value) -> dict:
    raw = copy.deepcopy(raw)
    node = raw
    keys = path.replace("]", "").replace("[", ".").split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    last = keys[-1]
    node[int(last) if last.isdigit() else last] = value
    return raw
