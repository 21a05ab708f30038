"""Stage 1 of the path: what a Hub repo holds at one pinned commit.

The sizing engine needs three facts about a model before anything is deployed: its architecture
(config.json), how many bytes of weights it ships (the safetensors index's metadata.total_size) and
whether it can serve chat (a chat template). This module reads them, in this order of preference:

1. a local folder the caller names explicitly (a checkout, a mounted volume);
2. the project's committed folder ``model-metadata/<org>/<name>/<revision>/`` so that the offline
   plan, CI and the policy pack give the same answer on every machine without a token;
3. the Hugging Face cache, through huggingface_hub's own lookup;
4. the Hub itself (only when HF_HUB_OFFLINE is not set).

Only a 40-character commit SHA is accepted as a revision: a branch moves, and a deployment that was
sized for one commit and mirrors another is exactly the drift this project exists to prevent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import _CACHED_NO_EXIST, HfApi, constants, hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from common.untrusted import MAX_MODEL_CONFIG_BYTES, InputLimitError, NotJsonError, loads_json, read_regular_file

REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
# Hub ids are "<org>/<name>"; both parts start with an alphanumeric (huggingface_hub's own rule).
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_METADATA_ROOT = PROJECT_ROOT / "model-metadata"

CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_WEIGHTS_FILE = "model.safetensors"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
GENERATION_CONFIG_FILE = "generation_config.json"
# Project-only stand-ins, used in model-metadata/ where copying the real file would be wasteful:
# weights.json carries {"total_size": N, "source": "..."}, meta.json {"has_chat_template": bool}.
WEIGHTS_SUMMARY_FILE = "weights.json"
# A PEFT adapter repo's configuration: what the planner reads of a LoRA adapter (rank, targets).
ADAPTER_CONFIG_FILE = "adapter_config.json"
META_FILE = "meta.json"

HF_TOKEN_HINT = "set it with `pulumi config set --secret hfToken <token>`"


class HubError(Exception):
    """A model's metadata could not be read; the message says what to do about it."""


@dataclass(frozen=True)
class ModelMetadata:
    repo_id: str
    revision: str
    config: dict[str, Any]
    weights_bytes: int | None
    has_chat_template: bool | None
    source: str
    generation_config: dict[str, Any] | None = field(default=None, compare=False)


def validate_revision(revision: str) -> str:
    if not isinstance(revision, str) or not REVISION_RE.match(revision):
        raise HubError(
            f'revision "{revision}" is not a commit: pin a 40-character commit SHA '
            "(branches and tags move; find the SHA under the repo's 'Files and versions' history)"
        )
    return revision


def validate_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not REPO_ID_RE.match(repo_id):
        raise HubError(f'repo id "{repo_id}" is not of the form <org>/<name> (e.g. meta-llama/Llama-3.1-8B-Instruct)')
    return repo_id


def metadata_dir(repo_id: str, revision: str, metadata_root: Path = DEFAULT_METADATA_ROOT) -> Path:
    org, name = repo_id.split("/", 1)
    return Path(metadata_root) / org / name / revision


def download_command(repo_id: str, revision: str) -> str:
    return (
        f"hf download {repo_id} {CONFIG_FILE} {INDEX_FILE} --revision {revision} "
        f"--local-dir model-metadata/{repo_id}/{revision}"
    )


def load_model_metadata(
    repo_id: str,
    revision: str,
    *,
    token: str | None = None,
    local_dir: Path | None = None,
    metadata_root: Path = DEFAULT_METADATA_ROOT,
) -> ModelMetadata:
    validate_repo_id(repo_id)
    validate_revision(revision)
    if local_dir is not None:
        folder = Path(local_dir)
        if not (folder / CONFIG_FILE).is_file():
            raise HubError(
                f"{folder}: no {CONFIG_FILE} in the local folder given for {repo_id}; "
                "point local_dir at the model's folder"
            )
        return _read_folder(repo_id, revision, folder)
    committed = metadata_dir(repo_id, revision, metadata_root)
    if (committed / CONFIG_FILE).is_file():
        return _read_folder(repo_id, revision, committed)
    return _read_hub(repo_id, revision, token, committed)


def adapter_download_command(repo_id: str, revision: str) -> str:
    return (
        f"hf download {repo_id} {ADAPTER_CONFIG_FILE} --revision {revision} "
        f"--local-dir model-metadata/{repo_id}/{revision}"
    )


@dataclass(frozen=True)
class AdapterMetadata:
    repo_id: str
    revision: str
    config: dict[str, Any]
    source: str


def load_adapter_metadata(
    repo_id: str,
    revision: str,
    *,
    token: str | None = None,
    metadata_root: Path = DEFAULT_METADATA_ROOT,
) -> AdapterMetadata:
    """A LoRA adapter's adapter_config.json at a pinned commit: the committed model-metadata folder
    first, then the Hugging Face cache, then the Hub (unless HF_HUB_OFFLINE is set)."""
    validate_repo_id(repo_id)
    validate_revision(revision)
    committed = metadata_dir(repo_id, revision, metadata_root)
    if (committed / ADAPTER_CONFIG_FILE).is_file():
        path = committed / ADAPTER_CONFIG_FILE
        return AdapterMetadata(repo_id, revision, _read_json(path), str(path))
    fix = (
        f"populate {committed} with `{adapter_download_command(repo_id, revision)}` "
        "(and say where it came from in a SOURCE.md beside it)"
    )
    offline = _offline()
    try:
        with _quiet_retries():
            downloaded = hf_hub_download(
                repo_id,
                ADAPTER_CONFIG_FILE,
                revision=revision,
                token=token,
                cache_dir=_cache_dir(),
                local_files_only=offline,
            )
    except GatedRepoError:
        raise HubError(f"{repo_id} is gated: a Hugging Face token with access is needed; {HF_TOKEN_HINT}") from None
    except RepositoryNotFoundError:
        raise HubError(f"{repo_id} was not found on the Hub (or is private: {HF_TOKEN_HINT})") from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id} has no commit {revision}: check the SHA in the repo's history") from None
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: it must come first
        why = "HF_HUB_OFFLINE is set and" if offline else "the Hub is unreachable and"
        raise HubError(
            f"{repo_id}@{revision}: {why} its {ADAPTER_CONFIG_FILE} is not in the Hugging Face cache; {fix}"
        ) from None
    except EntryNotFoundError:
        raise HubError(f"{repo_id}@{revision} has no {ADAPTER_CONFIG_FILE}: it is not a PEFT adapter repo") from None
    except (OfflineModeIsEnabled, HfHubHTTPError, OSError) as exc:
        raise HubError(
            f"{repo_id}@{revision}: could not read {ADAPTER_CONFIG_FILE} from the Hub ({type(exc).__name__}); {fix}"
        ) from None
    return AdapterMetadata(repo_id, revision, _read_json(Path(downloaded)), str(downloaded))


def load_model_config(repo_id_or_path: str, revision: str | None = None) -> dict[str, Any]:
    """config.json for the sizing CLI: a path to config.json, a folder holding one, or a repo id + revision."""
    path = Path(repo_id_or_path)
    if path.is_file():
        return _read_json(path)
    if path.is_dir():
        if not (path / CONFIG_FILE).is_file():
            raise HubError(f"{path}: no {CONFIG_FILE} in this folder; pass the file itself or the model's folder")
        return _read_json(path / CONFIG_FILE)
    if REPO_ID_RE.match(repo_id_or_path) and not repo_id_or_path.endswith(".json"):
        if revision is None:
            raise HubError(f"{repo_id_or_path}: a Hub repo id needs --revision <40-character commit SHA>")
        return load_model_metadata(repo_id_or_path, revision).config
    raise HubError(f"{repo_id_or_path}: no such file or folder, and not a Hub repo id of the form <org>/<name>")


# ---------------------------------------------------------------------------------------------
# Folders (explicit local folder or the committed model-metadata folder)


def checkpoint_bytes_beside(config_path: str) -> int | None:
    """The checkpoint's bytes as the plan reads them (a safetensors index or weights.json in the folder
    of `config_path`, or its single weights file), so the sizing CLI given a model folder's config.json
    sizes the same weights as the plan; None when the folder lists no weights."""
    path = Path(config_path)
    folder = path if path.is_dir() else path.parent
    return _folder_weights_bytes(folder) if (folder / CONFIG_FILE).is_file() else None


def _read_folder(repo_id: str, revision: str, folder: Path) -> ModelMetadata:
    return ModelMetadata(
        repo_id=repo_id,
        revision=revision,
        config=_read_json(folder / CONFIG_FILE),
        weights_bytes=_folder_weights_bytes(folder),
        has_chat_template=_folder_chat_template(folder),
        source=str(folder),
        generation_config=_read_json(folder / GENERATION_CONFIG_FILE)
        if (folder / GENERATION_CONFIG_FILE).is_file()
        else None,
    )


def _folder_weights_bytes(folder: Path) -> int | None:
    for name in (INDEX_FILE, WEIGHTS_SUMMARY_FILE):
        if (folder / name).is_file():
            return _total_size(folder / name)
    single = folder / SINGLE_WEIGHTS_FILE
    return single.stat().st_size if single.is_file() else None


def _folder_chat_template(folder: Path) -> bool | None:
    if (folder / META_FILE).is_file():
        value = _read_json(folder / META_FILE).get("has_chat_template")
        if value is not None and not isinstance(value, bool):
            raise HubError(f"{folder / META_FILE}: has_chat_template must be true or false, got {value!r}")
        return value
    if (folder / CHAT_TEMPLATE_FILE).is_file():
        return True
    if (folder / TOKENIZER_CONFIG_FILE).is_file():
        return bool(_read_json(folder / TOKENIZER_CONFIG_FILE).get("chat_template"))
    # Neither file: a metadata-only folder says nothing about the tokenizer.
    return None


# ---------------------------------------------------------------------------------------------
# Hugging Face cache and Hub


def _offline() -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; reading it again here lets a process (or a
    # test) switch to offline mode after import and still never touch the network.
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is not None:
        return value.strip().upper() in {"1", "ON", "YES", "TRUE"}
    return bool(constants.HF_HUB_OFFLINE)


def _cache_dir() -> str | None:
    # Same reason as _offline(): honour HF_HUB_CACHE / HF_HOME as they are now, not at import time.
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


_UNKNOWN = object()  # "could not tell": offline and not cached


@contextlib.contextmanager
def _quiet_retries():
    """huggingface_hub logs every retry of an unreachable Hub as a warning; the HubError raised
    afterwards says what happened and how to fix it, in one line, so the retries stay quiet."""
    hub_logger = logging.getLogger("huggingface_hub")
    level = hub_logger.level
    hub_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub_logger.setLevel(level)


def _read_hub(repo_id: str, revision: str, token: str | None, committed: Path) -> ModelMetadata:
    offline = _offline()

    def fetch(filename: str, required: bool) -> Path | object | None:
        try:
            with _quiet_retries():
                downloaded = hf_hub_download(
                    repo_id,
                    filename,
                    revision=revision,
                    token=token,
                    cache_dir=_cache_dir(),
                    local_files_only=offline,
                )
            return Path(downloaded)
        except GatedRepoError:
            if token:
                raise HubError(
                    f"{repo_id} is gated and the token given has no access: "
                    "accept its licence on huggingface.co with that account"
                ) from None
            raise HubError(f"{repo_id} is gated: a Hugging Face token with access is needed; {HF_TOKEN_HINT}") from None
        except RepositoryNotFoundError:
            raise HubError(f"{repo_id} was not found on the Hub (or is private: {HF_TOKEN_HINT})") from None
        except RevisionNotFoundError:
            raise HubError(f"{repo_id} has no commit {revision}: check the SHA in the repo's history") from None
        except LocalEntryNotFoundError:
            # Offline (or no network) and not in the cache. The cache may know the file does not exist.
            if try_to_load_from_cache(repo_id, filename, cache_dir=_cache_dir(), revision=revision) is _CACHED_NO_EXIST:
                return None
            if required:
                raise HubError(_not_cached_message(repo_id, revision, committed, offline)) from None
            return _UNKNOWN
        except EntryNotFoundError:
            return None  # the repo has no such file at this commit
        except (OfflineModeIsEnabled, HfHubHTTPError, OSError) as exc:
            if required:
                raise HubError(
                    f"{repo_id}@{revision}: could not read {filename} from the Hub ({type(exc).__name__}); "
                    f"{_populate_hint(repo_id, revision, committed)}"
                ) from None
            return _UNKNOWN

    config_path = fetch(CONFIG_FILE, required=True)
    if not isinstance(config_path, Path):
        raise HubError(f"{repo_id}@{revision} has no {CONFIG_FILE}: it is not a Transformers model repo")
    index_path = fetch(INDEX_FILE, required=False)
    if isinstance(index_path, Path):
        weights_bytes: int | None = _total_size(index_path)
    elif index_path is None:
        weights_bytes = _single_file_size(repo_id, revision, token, offline)
    else:
        weights_bytes = None

    tokenizer_config = fetch(TOKENIZER_CONFIG_FILE, required=False)
    template_file = fetch(CHAT_TEMPLATE_FILE, required=False)
    if isinstance(template_file, Path):
        has_template: bool | None = True
    elif isinstance(tokenizer_config, Path) and _read_json(tokenizer_config).get("chat_template"):
        has_template = True
    elif tokenizer_config is _UNKNOWN or template_file is _UNKNOWN:
        has_template = None
    else:
        has_template = False

    generation = fetch(GENERATION_CONFIG_FILE, required=False)
    return ModelMetadata(
        repo_id=repo_id,
        revision=revision,
        config=_read_json(config_path),
        weights_bytes=weights_bytes,
        has_chat_template=has_template,
        source=str(config_path.parent),
        generation_config=_read_json(generation) if isinstance(generation, Path) else None,
    )


def _single_file_size(repo_id: str, revision: str, token: str | None, offline: bool) -> int | None:
    """A checkpoint small enough for one file has no index: its size is the file's size."""
    cached = try_to_load_from_cache(repo_id, SINGLE_WEIGHTS_FILE, cache_dir=_cache_dir(), revision=revision)
    if isinstance(cached, str) and os.path.isfile(cached):
        return os.path.getsize(cached)
    if offline:
        return None
    try:
        infos = HfApi(token=token).get_paths_info(repo_id, [SINGLE_WEIGHTS_FILE], revision=revision)
    except (HfHubHTTPError, OSError):
        return None
    sizes = [getattr(info, "size", None) for info in infos]
    return sizes[0] if sizes and isinstance(sizes[0], int) else None


def _not_cached_message(repo_id: str, revision: str, committed: Path, offline: bool) -> str:
    why = "HF_HUB_OFFLINE is set and" if offline else "the Hub is unreachable and"
    return (
        f"{repo_id}@{revision}: {why} it is not in the Hugging Face cache; "
        f"{_populate_hint(repo_id, revision, committed)}"
    )


def _populate_hint(repo_id: str, revision: str, committed: Path) -> str:
    return f"populate {committed} with `{download_command(repo_id, revision)}`"


# ---------------------------------------------------------------------------------------------
# JSON helpers


def _read_json(path: Path) -> dict[str, Any]:
    # Files from the Hub, the cache or a folder someone names: read within the shared limits
    # (regular files only, bounded size and nesting, no NaN), so a hostile config.json is an error.
    try:
        data = loads_json(read_regular_file(path, MAX_MODEL_CONFIG_BYTES), str(path), max_bytes=MAX_MODEL_CONFIG_BYTES)
    except NotJsonError as exc:
        raise HubError(f"{exc}; re-download the file") from None
    except InputLimitError as exc:
        raise HubError(str(exc)) from None
    if not isinstance(data, dict):
        raise HubError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _total_size(path: Path) -> int:
    data = _read_json(path)
    # The real index nests it under "metadata"; the project's weights.json keeps it at the top level.
    value = data.get("metadata", {}).get("total_size") if isinstance(data.get("metadata"), dict) else None
    if value is None:
        value = data.get("total_size")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or int(value) != value:
        raise HubError(f"{path}: metadata.total_size must be a positive whole number of bytes, got {value!r}")
    return int(value)
