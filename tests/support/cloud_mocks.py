"""`run_in_mocks` for the cloud layer's tests: keeps what the function returned on the evaluation.

The provider look-ups the cloud layer makes (`aws.eks.get_cluster`, the default VPC's subnets,
`gcp.container.get_cluster`) are answered by offline_plan.mock_runtime itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from offline_plan.mock_runtime import MOCK_CLUSTER_SG, MOCK_SUBNETS, Evaluation, run_in_mocks  # noqa: F401 (re-exported for tests)


def run_cloud(fn: Callable[[], Any], stack: str = "test") -> Evaluation:
    """Run `fn` under mocks; its return value is kept on `.result`, its look-ups on `.calls_made`."""
    box: dict[str, Any] = {}

    def body():
        box["result"] = fn()

    evaluation = run_in_mocks(body, stack=stack)
    evaluation.result = box.get("result")  # type: ignore[attr-defined]
    evaluation.calls_made = evaluation.calls  # type: ignore[attr-defined]
    return evaluation


def one(evaluation: Evaluation, type_token: str, name_part: str = ""):
    """The single recorded resource of a type whose name contains `name_part`."""
    found = [r for r in evaluation.of_type(type_token) if name_part in r.name]
    assert len(found) == 1, f"expected one {type_token} named *{name_part}*, got {[r.name for r in found]}"
    return found[0]
