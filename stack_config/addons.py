"""Cluster add-ons the stack's objects stand on, and which of them an existing cluster already has."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from stack_config.base import StrictModel

# The add-ons whose custom resources this program creates (components/addons/catalog.py says what
# each installs and why a stack needs it). cert-manager is needed on an existing cluster only for
# the entrance's ACME certificate (for KServe, whoever installed KServe has taken care of it).
AddOnName = Literal[
    "prometheusOperator",
    "keda",
    "leaderWorkerSet",
    "kserve",
    "gatewayApi",
    "inferenceExtension",
    "llmdRouter",
    "certManager",
    "agentgateway",
]


class AddonsConfig(StrictModel):
    preinstalled: list[AddOnName] = Field(default_factory=list, max_length=16)
    """Add-ons already installed on an existing cluster (`cloud: existing`, or `cluster.create: false`):
    prometheusOperator, keda, leaderWorkerSet, kserve, gatewayApi, inferenceExtension, llmdRouter, certManager (with
    Gateway API support), agentgateway. On such a cluster the program installs no add-on; it looks up each needed
    add-on's CRDs during `pulumi preview` and fails there, naming the add-on and its install command, when one is
    missing. Must stay empty on a cluster the program creates (it installs what the stack needs)."""

    @field_validator("preinstalled")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        repeated = sorted({name for name in v if v.count(name) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed twice; list each add-on once")
        return v
