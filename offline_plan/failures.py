"""Why an evaluation stopped: a problem of the stack file (exit 2, one line per problem naming the key)
or a defect of the program itself (exit 1, "internal error").

The program refuses what it cannot deploy by raising its own error types, or a ValueError from a
`raise` statement of its own; anything else (a KeyError, a TypeError, a ValueError from inside a
library or from unpacking) is a bug the user cannot fix by editing the stack file, and must not be
dressed as a config problem: the message says so and asks for a report.
"""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path

import pulumi
from pydantic import ValidationError

from common.untrusted import excerpt
from components.addons.crd_sources import MissingCrdSource
from offline_plan.mock_runtime import ROOT, MissingResourceError
from planner.hub import HubError
from planner.plan import PlanError
from stack_config.errors import ConfigError

# Errors the program raises to refuse a configuration, each phrased for the stack file's author.
CONFIG_PROBLEMS: tuple[type[BaseException], ...] = (
    ConfigError,
    ValidationError,
    PlanError,
    HubError,
    MissingCrdSource,
    MissingResourceError,
    pulumi.RunError,
)
ISSUES_HINT = "this is a defect of llm-serving, not of your stack file; please report it with the lines below"
# The program's own code: a ValueError raised by a `raise` statement here is a refusal it meant.
_VENDORED = ("venv", ".venv-vllm", "site-packages")


def _raised_deliberately(err: ValueError) -> bool:
    """The innermost frame is a `raise` statement in this repository's code."""
    tb = err.__traceback__
    if tb is None:  # constructed and handed over, never raised: treat as meant
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = Path(tb.tb_frame.f_code.co_filename)
    try:
        inside = path.resolve().is_relative_to(ROOT)
    except (OSError, ValueError):
        inside = False
    if not inside or any(part in _VENDORED for part in path.parts):
        return False
    return linecache.getline(str(path), tb.tb_lineno).lstrip().startswith("raise")


def is_internal(err: BaseException) -> bool:
    if isinstance(err, CONFIG_PROBLEMS):
        return False
    if isinstance(err, ValueError):
        return not _raised_deliberately(err)
    return True


def internal_error_lines(err: BaseException, limit: int = 6) -> list[str]:
    """The error and the last frames of where it happened: enough to file a report, bounded."""
    frames = traceback.extract_tb(err.__traceback__)[-limit:]
    lines = [f"internal error: {type(err).__name__}: {excerpt(str(err), 300)}", ISSUES_HINT]
    for frame in frames:
        try:
            where = Path(frame.filename).resolve().relative_to(ROOT)
        except (OSError, ValueError):
            where = Path(frame.filename)
        lines.append(f"  at {where}:{frame.lineno} in {frame.name}")
    return lines
