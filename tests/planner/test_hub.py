"""planner.hub: reading a model's metadata at a pinned commit, offline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx2
import pytest
from huggingface_hub.errors import GatedRepoError

from planner import hub
from planner.hub import HubError, load_model_config, load_model_metadata
from tests.support import paths

FIXTURES = paths.FIXTURES / "model_configs"
PROJECT_METADATA = hub.DEFAULT_METADATA_ROOT

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "89abcdef0123456789abcdef0123456789abcdef"
LLAMA_8B_SHA = "0e9e39f249a16976918f6564b8830bc894c89659"
LLAMA_70B_SHA = "38ff4e01a70559264c95945aa04b900a11e68422"


@pytest.fixture(autouse=True)
def no_hub(monkeypatch, tmp_path):
    """Every test runs offline against an empty private cache unless it builds one."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def model_folder(tmp_path: Path, family: str, **files) -> Path:
    """A model folder holding a real fixture config.json plus the given extra JSON files."""
    folder = tmp_path / family
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes((FIXTURES / family / "config.json").read_bytes())
    for name, data in files.items():
        write_json(folder / name.replace("__", "."), data)
    return folder


# ---------------------------------------------------------------------------------------------
# Fixtures are real configs and each one is accounted for


FAMILIES = sorted(p.parent.name for p in FIXTURES.glob("*/config.json"))


def test_every_fixture_has_a_recorded_source():
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    missing = [family for family in FAMILIES if f"`{family}`" not in sources]
    assert FAMILIES and not missing, f"fixtures without a row in SOURCES.md: {missing}"


@pytest.mark.parametrize("family", FAMILIES)
def test_fixture_configs_parse_from_file_and_folder(family):
    from_file = load_model_config(str(FIXTURES / family / "config.json"))
    from_folder = load_model_config(str(FIXTURES / family))
    assert from_file == from_folder
    assert from_file["architectures"] and from_file["num_hidden_layers"] > 0


@pytest.mark.parametrize(
    "family, heads, kv_heads",
    [("llama-3.1-8b", 32, 8), ("llama-3.1-70b", 64, 8), ("qwen2.5-7b", 28, 4), ("qwen3-30b-a3b", 32, 4)],
)
def test_dense_and_moe_fixtures_are_grouped_query(family, heads, kv_heads):
    config = load_model_config(str(FIXTURES / family))
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (heads, kv_heads)


def test_family_specific_fields_survive_parsing():
    mixtral = load_model_config(str(FIXTURES / "mixtral-8x7b-v0.1"))
    assert (mixtral["num_local_experts"], mixtral["num_experts_per_tok"]) == (8, 2)
    gpt_oss = load_model_config(str(FIXTURES / "gpt-oss-20b"))
    assert gpt_oss["sliding_window"] == 128
    assert set(gpt_oss["layer_types"]) == {"sliding_attention", "full_attention"}
    assert len(gpt_oss["layer_types"]) == gpt_oss["num_hidden_layers"]
    fp8 = load_model_config(str(FIXTURES / "qwen3-30b-a3b-fp8"))
    assert fp8["quantization_config"]["quant_method"] == "fp8"
    assert fp8["quantization_config"]["weight_block_size"] == [128, 128]


# ---------------------------------------------------------------------------------------------
# Revisions and repo ids


@pytest.mark.parametrize("revision", ["main", "v1.0", "0e9e39f", "0E9E39F249A16976918F6564B8830BC894C89659", ""])
def test_branch_tag_or_short_revision_is_rejected_with_the_fix(revision):
    with pytest.raises(HubError, match="pin a 40-character commit SHA"):
        load_model_metadata("meta-llama/Llama-3.1-8B-Instruct", revision)


@pytest.mark.parametrize("repo_id", ["llama", "a/b/c", "/name", "org/"])
def test_malformed_repo_id_is_rejected(repo_id):
    with pytest.raises(HubError, match="<org>/<name>"):
        load_model_metadata(repo_id, SHA)


def test_revision_regex_is_exactly_forty_lowercase_hex():
    assert hub.REVISION_RE.match(LLAMA_8B_SHA)
    assert not hub.REVISION_RE.match(LLAMA_8B_SHA[:-1])
    assert not hub.REVISION_RE.match(LLAMA_8B_SHA + "0")


# ---------------------------------------------------------------------------------------------
# Local folders


def test_local_dir_reads_config_index_template_and_generation_config(tmp_path):
    folder = model_folder(
        tmp_path,
        "llama-3.1-8b",
        model__safetensors__index__json={"metadata": {"total_size": 16060522496}, "weight_map": {}},
        tokenizer_config__json={"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"},
        generation_config__json={"temperature": 0.6, "top_p": 0.9},
    )
    meta = load_model_metadata("meta-llama/Llama-3.1-8B", SHA, local_dir=folder)
    assert meta.config["hidden_size"] == 4096
    assert meta.weights_bytes == 16060522496
    assert meta.has_chat_template is True
    assert meta.generation_config == {"temperature": 0.6, "top_p": 0.9}
    assert meta.source == str(folder)
    assert (meta.repo_id, meta.revision) == ("meta-llama/Llama-3.1-8B", SHA)


def test_local_dir_wins_over_the_committed_folder(tmp_path):
    root = tmp_path / "metadata"
    committed = hub.metadata_dir("org/model", SHA, root)
    committed.mkdir(parents=True, exist_ok=True)
    (committed / "config.json").write_bytes((FIXTURES / "qwen2.5-7b" / "config.json").read_bytes())
    local = model_folder(tmp_path, "mixtral-8x7b-v0.1")
    meta = load_model_metadata("org/model", SHA, local_dir=local, metadata_root=root)
    assert meta.config["model_type"] == "mixtral"
    assert meta.source == str(local)


def test_local_dir_without_config_names_the_folder(tmp_path):
    with pytest.raises(HubError, match=f"{tmp_path}: no config.json"):
        load_model_metadata("org/model", SHA, local_dir=tmp_path)


def test_single_file_checkpoint_size_comes_from_the_file(tmp_path):
    folder = model_folder(tmp_path, "qwen2.5-7b")
    (folder / "model.safetensors").write_bytes(b"\0" * 1234)
    assert load_model_metadata("Qwen/Qwen2.5-7B", SHA, local_dir=folder).weights_bytes == 1234


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"tokenizer_config__json": {"chat_template": "{{ messages }}"}}, True),
        ({"tokenizer_config__json": {"bos_token": "<s>"}}, False),
        ({"tokenizer_config__json": {"chat_template": ""}}, False),
        ({"meta__json": {"has_chat_template": True}}, True),
        ({"meta__json": {"has_chat_template": False}}, False),
        ({}, None),
    ],
)
def test_chat_template_detection(tmp_path, files, expected):
    folder = model_folder(tmp_path, "llama-3.1-8b-instruct", **files)
    assert load_model_metadata("org/model", SHA, local_dir=folder).has_chat_template is expected


def test_chat_template_jinja_file_counts_as_a_template(tmp_path):
    folder = model_folder(tmp_path, "gpt-oss-20b", tokenizer_config__json={"bos_token": "<|startoftext|>"})
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    assert load_model_metadata("openai/gpt-oss-20b", SHA, local_dir=folder).has_chat_template is True


def test_malformed_json_is_a_one_line_error(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 4096,', encoding="utf-8")
    with pytest.raises(HubError, match=r"config.json: not valid JSON \(.* at line 1") as caught:
        load_model_metadata("org/model", SHA, local_dir=folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("bad", [0, -5, "16060522496", 1.5, True, None])
def test_nonsense_total_size_is_rejected(tmp_path, bad):
    folder = model_folder(tmp_path, "llama-3.1-8b", model__safetensors__index__json={"metadata": {"total_size": bad}})
    with pytest.raises(HubError, match="total_size must be a positive whole number"):
        load_model_metadata("org/model", SHA, local_dir=folder)


# ---------------------------------------------------------------------------------------------
# The committed model-metadata folder


COMMITTED = sorted(p.parent for p in PROJECT_METADATA.glob("*/*/*/config.json"))


def test_committed_metadata_folders_exist_with_sources():
    assert COMMITTED, "model-metadata/ holds no model"
    for folder in COMMITTED:
        assert hub.REVISION_RE.match(folder.name), f"{folder}: folder name is not a 40-hex commit"
        assert (folder / "SOURCE.md").is_file(), f"{folder}: no SOURCE.md"


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_committed_metadata_loads_by_repo_and_revision(folder):
    repo_id = f"{folder.parent.parent.name}/{folder.parent.name}"
    meta = load_model_metadata(repo_id, folder.name)
    assert meta.source == str(folder)
    assert meta.weights_bytes and meta.weights_bytes > 0
    assert meta.config["num_hidden_layers"] > 0


def llama_parameter_count(config: dict) -> int:
    hidden, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    per_layer = attention + 3 * hidden * config["intermediate_size"] + 2 * hidden
    embeddings = config["vocab_size"] * hidden * (1 if config["tie_word_embeddings"] else 2)
    return config["num_hidden_layers"] * per_layer + embeddings + hidden


@pytest.mark.parametrize(
    "repo_id, revision",
    [("meta-llama/Llama-3.1-8B-Instruct", LLAMA_8B_SHA), ("meta-llama/Llama-3.3-70B-Instruct", LLAMA_70B_SHA)],
)
def test_committed_weight_totals_match_the_config_in_bf16(repo_id, revision):
    # The published totals and the committed config.json must describe the same checkpoint: a bf16 Llama
    # stores two bytes per parameter and nothing else.
    meta = load_model_metadata(repo_id, revision)
    assert meta.config["torch_dtype"] == "bfloat16"
    assert meta.weights_bytes == 2 * llama_parameter_count(meta.config)


# ---------------------------------------------------------------------------------------------
# The Hugging Face cache, through huggingface_hub's own lookup


def fake_hf_cache(cache: Path, repo_id: str, revision: str, files: dict[str, object], absent=()) -> Path:
    """The layout huggingface_hub writes: blobs by hash, snapshot symlinks, refs and .no_exist markers."""
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo_dir / "blobs").mkdir()
    for name, data in files.items():
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        blob = repo_dir / "blobs" / hashlib.sha256(body).hexdigest()
        blob.write_bytes(body)
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(revision)
    for name in absent:
        marker = repo_dir / ".no_exist" / revision / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return snapshot


@pytest.fixture
def hub_calls(monkeypatch):
    """Record every call our module makes into huggingface_hub's download function, then run it for real."""
    calls = []
    real = hub.hf_hub_download

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(hub, "hf_hub_download", spy)
    return calls


def test_hf_cache_is_read_through_huggingface_hub(tmp_path, monkeypatch, hub_calls):
    cache = tmp_path / "hf-cache"
    config = json.loads((FIXTURES / "qwen3-30b-a3b" / "config.json").read_text())
    snapshot = fake_hf_cache(
        cache,
        "Qwen/Qwen3-30B-A3B",
        OTHER_SHA,
        {
            "config.json": config,
            "model.safetensors.index.json": {"metadata": {"total_size": 61064245248}, "weight_map": {}},
            "tokenizer_config.json": {"chat_template": "{{ messages }}"},
            "generation_config.json": {"top_k": 20},
        },
        absent=["chat_template.jinja"],
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    meta = load_model_metadata("Qwen/Qwen3-30B-A3B", OTHER_SHA, metadata_root=tmp_path / "no-metadata")
    assert meta.config == config
    assert meta.weights_bytes == 61064245248
    assert meta.has_chat_template is True
    assert meta.generation_config == {"top_k": 20}
    assert meta.source == str(snapshot)
    requested = [args[1] for args, _ in hub_calls]
    assert requested[:2] == ["config.json", "model.safetensors.index.json"]
    assert all(kwargs["revision"] == OTHER_SHA and kwargs["local_files_only"] for _, kwargs in hub_calls)
    assert all(kwargs["cache_dir"] == str(cache) for _, kwargs in hub_calls)


def test_hf_cache_knows_a_repo_without_chat_template(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    fake_hf_cache(
        cache,
        "mistralai/Mixtral-8x7B-v0.1",
        OTHER_SHA,
        {
            "config.json": json.loads((FIXTURES / "mixtral-8x7b-v0.1" / "config.json").read_text()),
            "model.safetensors.index.json": {"metadata": {"total_size": 93405585408}},
        },
        absent=["tokenizer_config.json", "chat_template.jinja"],
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    meta = load_model_metadata("mistralai/Mixtral-8x7B-v0.1", OTHER_SHA, metadata_root=tmp_path / "none")
    assert meta.has_chat_template is False
    assert meta.generation_config is None


def test_hf_cache_without_tokenizer_files_leaves_the_template_unknown(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    fake_hf_cache(
        cache,
        "org/model",
        OTHER_SHA,
        {"config.json": {"num_hidden_layers": 2, "architectures": ["X"]}},
        absent=["model.safetensors.index.json"],
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    meta = load_model_metadata("org/model", OTHER_SHA, metadata_root=tmp_path / "none")
    assert meta.has_chat_template is None
    assert meta.weights_bytes is None  # no index and the single file is not cached


def test_hf_cache_holds_another_revision_only(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache"
    fake_hf_cache(cache, "org/model", OTHER_SHA, {"config.json": {"num_hidden_layers": 2}})
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    # refs/main points at OTHER_SHA, but a pinned SHA must never be served from another commit.
    with pytest.raises(HubError, match=f"org/model@{SHA}: HF_HUB_OFFLINE is set"):
        load_model_metadata("org/model", SHA, metadata_root=tmp_path / "none")


def test_offline_and_missing_says_which_folder_and_command(tmp_path):
    root = tmp_path / "model-metadata"
    with pytest.raises(HubError) as caught:
        load_model_metadata("meta-llama/Llama-3.1-8B-Instruct", SHA, metadata_root=root)
    message = str(caught.value)
    assert "HF_HUB_OFFLINE is set" in message
    assert str(root / "meta-llama" / "Llama-3.1-8B-Instruct" / SHA) in message
    assert (
        f"`hf download meta-llama/Llama-3.1-8B-Instruct config.json model.safetensors.index.json --revision {SHA} "
        f"--local-dir model-metadata/meta-llama/Llama-3.1-8B-Instruct/{SHA}`"
    ) in message
    assert "\n" not in message


def gated_error(*_args, **_kwargs):
    request = httpx2.Request("HEAD", "https://huggingface.co/meta-llama/x/resolve/abc/config.json")
    raise GatedRepoError("gated", response=httpx2.Response(403, request=request))


def test_gated_repo_without_token_says_how_to_set_it(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "hf_hub_download", gated_error)
    with pytest.raises(HubError, match=r"gated: .*`pulumi config set --secret hfToken"):
        load_model_metadata("meta-llama/Llama-3.1-8B-Instruct", SHA, metadata_root=tmp_path)


def test_gated_repo_with_a_token_points_at_the_licence(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "hf_hub_download", gated_error)
    with pytest.raises(HubError, match="accept its licence"):
        load_model_metadata("meta-llama/Llama-3.1-8B-Instruct", SHA, token="hf_x", metadata_root=tmp_path)


# ---------------------------------------------------------------------------------------------
# load_model_config as the sizing CLI uses it


def test_load_model_config_from_repo_id_and_revision():
    config = load_model_config("meta-llama/Llama-3.1-8B-Instruct", LLAMA_8B_SHA)
    assert config["eos_token_id"] == [128001, 128008, 128009]


def test_load_model_config_repo_id_needs_a_revision():
    with pytest.raises(HubError, match="needs --revision"):
        load_model_config("meta-llama/Llama-3.1-8B-Instruct")


def test_load_model_config_missing_path(tmp_path):
    with pytest.raises(HubError, match="no such file or folder"):
        load_model_config(str(tmp_path / "nope" / "config.json"))


def test_load_model_config_folder_without_config(tmp_path):
    with pytest.raises(HubError, match=r"no config\.json in this folder"):
        load_model_config(str(tmp_path))
