"""The invented LoRA adapters of tests/fixtures/adapters, where the planner finds them.

The planner reads an adapter's adapter_config.json from model-metadata/ or the Hugging Face cache
(planner/hub.py). The fixtures are laid out as a cache (`models--<org>--<name>/snapshots/<commit>/`)
in a temporary folder that HF_HUB_CACHE points at, with HF_HUB_OFFLINE set, so a test evaluates the
real program exactly as a machine whose cache holds the adapters would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from planner.hub import load_adapter_metadata
from tests.support import paths

FIXTURES = paths.FIXTURES / "adapters"

SQL = {"name": "llama-sql", "repo": "llm-serving-fixtures/llama-8b-sql-lora", "revision": "1" * 40}
CHAT = {"name": "llama-chat", "repo": "llm-serving-fixtures/llama-8b-chat-lora", "revision": "2" * 40}
HUGE_RANK = {"name": "llama-huge", "repo": "llm-serving-fixtures/llama-8b-huge-rank", "revision": "3" * 40}
DORA = {"name": "llama-dora", "repo": "llm-serving-fixtures/llama-8b-dora", "revision": "4" * 40}


def fixture_loader(repo: str, revision: str):
    """An AdapterLoader reading the fixtures folder as if it were model-metadata/."""
    return load_adapter_metadata(repo, revision, metadata_root=FIXTURES)


def lay_out_cache(cache: Path) -> None:
    for config in FIXTURES.glob("*/*/*/adapter_config.json"):
        revision = config.parent.name
        org, name = config.parent.parent.parent.name, config.parent.parent.name
        snapshot = cache / f"models--{org}--{name}" / "snapshots" / revision
        snapshot.mkdir(parents=True, exist_ok=True)
        shutil.copy(config, snapshot / "adapter_config.json")


@contextlib.contextmanager
def offline_cache() -> Iterator[Path]:
    """HF_HUB_CACHE at a cache holding the fixture adapters, offline, for the duration."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_CACHE", "HF_HUB_OFFLINE")}
    with tempfile.TemporaryDirectory(prefix="llm-serving-hf-cache-") as tmp:
        lay_out_cache(Path(tmp))
        os.environ["HF_HUB_CACHE"], os.environ["HF_HUB_OFFLINE"] = tmp, "1"
        try:
            yield Path(tmp)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
