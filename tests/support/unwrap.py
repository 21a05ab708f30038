"""Recorded inputs as the API server would receive them: each secret replaced by its value (a redacted
'<secret>' fails the schemas)."""

from __future__ import annotations

from offline_plan.mock_runtime import is_secret_value


def unwrap_secrets(value):
    """Raw inputs with each secret replaced by its value (a redacted '<secret>' fails schemas)."""
    if is_secret_value(value):
        return unwrap_secrets(value["value"])
    if isinstance(value, dict):
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value
