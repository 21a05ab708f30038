"""The PodDisruptionBudget of one served model, whichever engine serves it.

Every pod of the model (Deployment replicas, LeaderWorkerSet leaders and workers, a KServe
predictor and its canary) carries the model label, so one budget over that label lets a drain or
a node upgrade take at most one pod, and so at most one replica with its minutes-long weight load,
at a time.
"""

from __future__ import annotations

from typing import Any

from common import contract


def model_disruption_budget(metadata: dict[str, Any], served_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {contract.LABEL_MODEL: served_name}}},
    }
