"""The endpoint tools' source, as the verification Job receives it.

The Job runs `python -m endpoint_tools.verify` from a plain Python image with these files mounted
at TOOLS_MOUNT_PATH. They are standard library only (tests/repo/test_layout.py), so no pip install
happens in the cluster; tests/components/verification/test_verification.py runs the ConfigMap's
copy in an empty folder to prove the list below is their whole import closure.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Relative paths, as Python imports them from TOOLS_MOUNT_PATH.
TOOL_FILES = (
    "common/__init__.py",
    "common/engine_metrics.py",
    "common/untrusted.py",
    "endpoint_tools/__init__.py",
    "endpoint_tools/openai_client.py",
    "endpoint_tools/kv_capacity.py",
    "endpoint_tools/golden.py",
    "endpoint_tools/smoke.py",
    "endpoint_tools/verify.py",
    # The load sweep (models[].verification.sweep) and its comparison with the plan's prediction.
    "endpoint_tools/expectation.py",
    "endpoint_tools/load_dist.py",
    "endpoint_tools/load_report.py",
    "endpoint_tools/loadtest.py",
    "endpoint_tools/prompt_corpus.py",
)
TOOLS_MOUNT_PATH = "/opt/llm-serving-verify"
ENTRY_MODULE = "endpoint_tools.verify"


def config_map_key(path: str) -> str:
    """A ConfigMap key cannot hold '/' (keys are [-._a-zA-Z0-9]+): common/untrusted.py -> common.untrusted.py."""
    return path.replace("/", ".", path.count("/"))


def tool_sources() -> dict[str, str]:
    """ConfigMap key -> the file's text, read from this checkout."""
    return {config_map_key(p): (ROOT / p).read_text(encoding="utf-8") for p in TOOL_FILES}


def volume_items() -> list[dict[str, str]]:
    """The configMap volume's items: each key back at its package path."""
    return [{"key": config_map_key(p), "path": p} for p in TOOL_FILES]
