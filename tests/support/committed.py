"""The committed stacks (Pulumi.dev.yaml, Pulumi.prod.yaml) as the real program under the mock
runtime, evaluated once per test process.

An evaluation takes 1.5-6 s; about sixty tests and fixtures read one. Each caller gets its own deep
copy (about 10 ms), so a test that edits what it reads cannot change what another test sees.
"""

from __future__ import annotations

import copy
import functools

from offline_plan.mock_runtime import Evaluation, evaluate_stack

STACKS = ("dev", "prod")


@functools.cache
def _evaluated(stack: str) -> Evaluation:
    return evaluate_stack(stack)


def committed_stack(stack: str) -> Evaluation:
    """The committed stack `stack`, evaluated with its own file and nothing overridden."""
    return copy.deepcopy(_evaluated(stack))
