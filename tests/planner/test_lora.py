"""LoRA adapters: pinned in the config, read from their own adapter_config.json, sized, mirrored by
the same verified path as the base weights, and served with flags derived from them."""

from __future__ import annotations

import dataclasses

import pytest

import stack_config as cfg
from common.engine import LORA_MAX_RANKS
from components.model_store.store import MirrorSource, model_store_args, volume_size_gib
from components.serving import engine_args
from planner import plan, sizing
from planner.hub import HubError, load_adapter_metadata
from planner.lora import adapter_problems, lora_buffer_bytes, smallest_allowed_rank
from planner.model_arch import ModelArch, SizingError
from tests.support.adapter_fixtures import CHAT, DORA, FIXTURES, HUGE_RANK, SQL, fixture_loader, offline_cache
from tests.support.model_plans import LLAMA_8B, metadata_loader, stack
from tests.support.stack_variants import ADAPTERS, DEV_ADAPTERS, variant

MIB = 1024**2


def plans(models, **kwargs):
    return plan.build_plans(
        stack(models, **kwargs), metadata_loader(), source="Pulumi.test.yaml", load_adapter=fixture_loader
    )


def plan_problems(models) -> list[str]:
    with pytest.raises(plan.PlanError) as err:
        plans(models)
    return err.value.problems


def llama_arch() -> ModelArch:
    [p] = plans([LLAMA_8B])
    return ModelArch.from_hf_config(p.metadata.config)


# --- the flags come from the adapters' own configs -------------------------------------------------


def test_flags_follow_the_largest_rank_and_the_number_of_adapters():
    [p] = plans([{**LLAMA_8B, "adapters": [SQL, CHAT]}])
    lora = p.lora
    # SQL has r 16; CHAT has r 8 with rank_pattern v_proj 64: the largest rank anywhere decides.
    assert [a.rank for a in lora.adapters] == [16, 64]
    assert (lora.max_lora_rank, lora.max_loras, lora.max_cpu_loras) == (64, 2, 2)
    argv = engine_args.serve_args(p)
    i = argv.index("--lora-modules")
    assert argv[i + 1 : i + 3] == [
        f"llama-sql=/models/{SQL['repo']}/{SQL['revision']}",
        f"llama-chat=/models/{CHAT['repo']}/{CHAT['revision']}",
    ]
    for flag, value in (("--max-loras", "2"), ("--max-lora-rank", "64"), ("--max-cpu-loras", "2")):
        assert argv[argv.index(flag) + 1] == value
    assert "--enable-lora" in argv
    # A model without adapters gets no LoRA flag at all.
    [plain] = plans([LLAMA_8B])
    assert plain.lora is None and not any(a.startswith("--") and "lora" in a for a in engine_args.serve_args(plain))


@pytest.mark.parametrize("rank, allowed", [(1, 1), (2, 8), (8, 8), (9, 16), (300, 320), (512, 512), (513, None)])
def test_the_rank_rounds_up_to_a_value_vllm_accepts(rank, allowed):
    assert smallest_allowed_rank(rank) == allowed
    assert allowed is None or allowed in LORA_MAX_RANKS


def test_a_rank_too_large_a_dora_adapter_and_a_missing_one_are_config_errors_naming_the_key(monkeypatch, tmp_path):
    # The missing adapter is looked for offline in an empty cache: otherwise the planner asks the Hub,
    # which on a machine without network retries for seconds, and on one with network answers that
    # the repo does not exist (a message without the download command).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    found = plan_problems(
        [
            {
                **LLAMA_8B,
                "adapters": [
                    SQL,
                    HUGE_RANK,
                    DORA,
                    {"name": "gone", "repo": "llm-serving-fixtures/absent", "revision": "5" * 40},
                ],
            }
        ]
    )
    assert any(
        p.startswith(
            "Pulumi.test.yaml: models[0].adapters[1] (llm-serving-fixtures/llama-8b-huge-rank): "
            "rank 1024 is above the largest --max-lora-rank vLLM 0.32.0 accepts (512)"
        )
        for p in found
    ), found
    assert any("models[0].adapters[2]" in p and "use_dora is set: vLLM does not support DoRA" in p for p in found), (
        found
    )
    [missing] = [p for p in found if "models[0].adapters[3]" in p]
    # The fix: where to put the adapter's config (the committed metadata, like a base model's).
    assert "hf download llm-serving-fixtures/absent adapter_config.json --revision 5555" in missing
    assert len(found) == 3 and not any("adapters[0]" in p for p in found)


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("revision", "main", "is a branch or tag; pin a 40-character commit SHA"),
        ("revision", "1111111", "is a short SHA"),
        ("repo", "not-a-repo", "is not a Hub repo id"),
        ("name", "Has Spaces", "is not a valid name"),
    ],
)
def test_an_unpinned_or_malformed_adapter_is_refused_naming_the_key(field, value, words):
    raw = {
        "cloud": "aws",
        "pools": [{"name": "l4", "gpu": "L4"}],
        "models": [{"repo": "a/b", "revision": "0" * 40, "pool": "l4", "adapters": [{**SQL, field: value}]}],
    }
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")
    [line] = err.value.problems
    assert line.startswith(f"Pulumi.test.yaml: models[0].adapters[0].{field}: ") and words in line


def test_adapter_names_are_unique_across_models_and_adapters_and_need_a_volume():
    raw = {
        "cloud": "aws",
        "pools": [{"name": "l4", "gpu": "L4", "maxNodes": 4}],
        "models": [
            {
                "repo": "a/b",
                "revision": "0" * 40,
                "pool": "l4",
                "name": "base",
                "adapters": [{**SQL, "name": "base"}, {**CHAT, "name": "twin"}],
            },
            {"repo": "a/c", "revision": "0" * 40, "pool": "l4", "name": "other", "adapters": [{**SQL, "name": "twin"}]},
        ],
        "modelStore": {"loadFrom": "bucket"},
    }
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")
    found = err.value.problems
    assert (
        "Pulumi.test.yaml: models[0].adapters[0].name: 'base' is already the name of models[0]; every model, "
        "adapter and alias needs a distinct name (clients choose one by it)" in found
    )
    assert any(
        p.startswith(
            "Pulumi.test.yaml: models[1].adapters[0].name: 'twin' is already the name of models[0].adapters[1]"
        )
        for p in found
    )
    assert any(
        p.startswith("Pulumi.test.yaml: models[0].adapters: vLLM loads LoRA adapters from a local folder")
        for p in found
    )
    raw["models"][0]["engine"] = "kserve"
    with pytest.raises(cfg.ConfigError, match="adapters apply to engine: vllm only"):
        cfg.parse_stack_config(raw, "Pulumi.test.yaml")


def test_adapter_configs_are_read_from_model_metadata_or_the_hf_cache():
    meta = load_adapter_metadata(SQL["repo"], SQL["revision"], metadata_root=FIXTURES)
    assert meta.config["r"] == 16 and meta.source.startswith(str(FIXTURES))
    with offline_cache() as cache:
        from_cache = load_adapter_metadata(CHAT["repo"], CHAT["revision"], metadata_root=FIXTURES / "nowhere")
        assert from_cache.source.startswith(str(cache)) and from_cache.config["rank_pattern"] == {"v_proj": 64}
        with pytest.raises(HubError, match=r"HF_HUB_OFFLINE is set and its adapter_config\.json is not in the"):
            load_adapter_metadata("llm-serving-fixtures/absent", "5" * 40, metadata_root=FIXTURES / "nowhere")


@pytest.mark.parametrize(
    "config, words",
    [
        ({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "bias": "all"}, "bias is 'all'"),
        ({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "init_lora_weights": "pissa"}, "init_lora_weights"),
        ({"r": 0, "lora_alpha": 16, "target_modules": ["q_proj"]}, "r is 0"),
        ({"r": 8, "target_modules": ["q_proj"]}, "lacks lora_alpha"),
        ({"peft_type": "IA3", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}, "LoRA adapters only"),
    ],
)
def test_what_vllm_would_refuse_to_load_is_refused_at_plan_time(config, words):
    assert any(words in p for p in adapter_problems(config))
    assert (
        adapter_problems({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], "init_lora_weights": "gaussian"})
        == []
    )


# --- the slots' memory comes out of the KV cache ---------------------------------------------------


def test_lora_slots_come_out_of_the_kv_cache_exactly():
    [plain] = plans([{**LLAMA_8B, "pool": "h100-one"}])
    [with_lora] = plans([{**LLAMA_8B, "pool": "h100-one", "adapters": [SQL, CHAT]}])
    lora = with_lora.sizing.lora_gib_per_gpu
    assert plain.sizing.lora_gib_per_gpu == 0
    assert with_lora.sizing.kv_cache_gib_per_gpu == pytest.approx(plain.sizing.kv_cache_gib_per_gpu - lora)
    assert with_lora.sizing.kv_cache_tokens < plain.sizing.kv_cache_tokens
    # Two slots of rank 64 on Llama-3.1-8B in bf16: per slot and rank unit 32 layers x (7 x 4096 +
    # (2 x 4096 + 2 x 1024) + 3 x 14336) + 2 x (128256 + 4096) elements (planner/lora.py).
    per_rank = 32 * (7 * 4096 + 2 * 4096 + 2 * 1024 + 3 * 14336) + 2 * (128256 + 4096)
    assert lora * 1024**3 == pytest.approx(2 * 64 * 2 * per_rank)
    assert 700 < lora * 1024 < 710  # MiB


def test_slot_memory_scales_with_slots_and_rank_and_is_sharded_by_tensor_parallelism():
    arch = llama_arch()
    one = lora_buffer_bytes(arch, tp=1, max_loras=1, max_lora_rank=16, dtype_bytes=2)
    assert lora_buffer_bytes(arch, tp=1, max_loras=4, max_lora_rank=16, dtype_bytes=2) == pytest.approx(4 * one)
    assert lora_buffer_bytes(arch, tp=1, max_loras=1, max_lora_rank=64, dtype_bytes=2) == pytest.approx(4 * one)
    # 88 MiB per rank-16 slot for an 8B model: 80 MiB for the decoder layers (the research notes'
    # "about 84 MB" from the same shapes) and 8 MiB for the embedding and LM head slots.
    assert one == 16 * 2 * (32 * 81920 + 2 * (128256 + 4096)) and 88 * MIB < one < 89 * MIB
    assert lora_buffer_bytes(arch, tp=2, max_loras=1, max_lora_rank=16, dtype_bytes=2) < one
    # A pipeline stage holds its layers' slots, and the embedding/head ones only at the ends.
    first = lora_buffer_bytes(arch, tp=1, max_loras=1, max_lora_rank=16, dtype_bytes=2, layers=16, last_stage=False)
    last = lora_buffer_bytes(arch, tp=1, max_loras=1, max_lora_rank=16, dtype_bytes=2, layers=16, first_stage=False)
    assert first + last == pytest.approx(one)
    assert lora_buffer_bytes(arch, tp=1, max_loras=0, max_lora_rank=16, dtype_bytes=2) == 0


def test_slot_memory_of_an_moe_model_is_not_guessed():
    moe = dataclasses.replace(llama_arch(), experts=8, experts_per_token=2, moe_intermediate=1024)
    with pytest.raises(SizingError, match="dense attention models only"):
        lora_buffer_bytes(moe, tp=1, max_loras=1, max_lora_rank=16, dtype_bytes=2)


def test_the_sizing_table_shows_the_adapters_and_their_memory():
    ev = variant(ADAPTERS)
    rows = {r["model"]: r for r in ev.outputs["sizing"]}
    assert rows["llama-3-1-8b-instruct"]["adapters"] == ["llama-sql", "llama-chat"]
    assert rows["llama-3-1-8b-instruct"]["maxLoraRank"] == 64 and rows["llama-3-1-8b-instruct"]["loraGiBPerGpu"] > 0.6
    assert rows["llama-3-3-70b-instruct"]["adapters"] == [] and rows["llama-3-3-70b-instruct"]["loraGiBPerGpu"] == 0


# --- mirrored by the same verified path as the base weights ---------------------------------------


def test_each_adapter_gets_its_own_verified_mirror_job_on_the_model_volume_and_servers_wait_for_it():
    ev = variant(DEV_ADAPTERS)
    jobs = {j["metadata"]["name"]: j for j in ev.kubernetes_objects if j["kind"] == "Job"}
    base_job = next(j for n, j in jobs.items() if n.startswith("llama-3-1-8b-instruct-mirror-"))
    adapter_job = jobs[f"llama-sql-mirror-{SQL['revision'][:12]}"]

    def container(job, name):
        pod = job["spec"]["template"]["spec"]
        return next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name)

    fetch, base_fetch = container(adapter_job, "fetch"), container(base_job, "fetch")
    # With a bucket, the verified copy is synced there too, under the adapter's own commit.
    assert f"{SQL['repo']}/{SQL['revision']}" in container(adapter_job, "sync")["command"][2]
    # The same script, image, file selection and volume; the adapter's own repo, commit and folder.
    assert fetch["image"] == base_fetch["image"]
    assert fetch["command"][:3] == base_fetch["command"][:3] == ["python3", base_fetch["command"][1], "fetch"]
    args = fetch["command"]
    assert args[args.index("--repo") + 1] == SQL["repo"] and args[args.index("--revision") + 1] == SQL["revision"]
    assert args[args.index("--local-dir") + 1] == f"/models/{SQL['repo']}/{SQL['revision']}"
    assert [a for a in args if a.startswith(("--include", "--exclude"))] == [
        a for a in base_fetch["command"] if a.startswith(("--include", "--exclude"))
    ]
    assert adapter_job["spec"]["template"]["spec"]["volumes"][0] == base_job["spec"]["template"]["spec"]["volumes"][0]
    labels = adapter_job["metadata"]["labels"]
    assert labels["llm-serving.io/adapter"] == "llama-sql" and labels["llm-serving.io/revision"] == SQL["revision"]
    # The server waits for both Jobs (the provider reports a Job created once it completed).
    [deployment] = [r for r in ev.resources if r.is_kubernetes_object and r.inputs.get("kind") == "Deployment"]
    # The mirror Jobs (the verification Job runs after the server instead).
    job_urns = {
        r.urn
        for r in ev.resources
        if r.is_kubernetes_object
        and r.inputs.get("kind") == "Job"
        and r.inputs["metadata"]["labels"].get("llm-serving.io/component") == "model-mirror"
    }
    assert len(job_urns) == 2
    assert job_urns <= set(deployment.dependencies)


def test_the_volume_holds_the_adapters_too():
    [p] = plans([{**LLAMA_8B, "adapters": [SQL, CHAT]}])
    args = model_store_args(
        p,
        cfg.ModelStoreConfig(),
        shared=type("S", (), {"namespace": "ns", "writer_service_account": "w", "reader_service_account": "r"})(),
        storage_class="rwx",
        bucket=None,
        hf_token=None,
    )
    assert [a.adapter for a in args.adapters] == ["llama-sql", "llama-chat"]
    assert isinstance(args.adapters[0], MirrorSource) and args.volume_bytes == p.weights_bytes + p.adapters_bytes
    assert p.adapters_bytes > 0
    assert volume_size_gib(args.volume_bytes, 1.25) >= volume_size_gib(p.weights_bytes, 1.25)


def test_sizing_ignores_lora_when_off():
    arch = llama_arch()
    req = sizing.SizingRequest(arch=arch, gpu_memory_gib=79.1, max_model_len=8192)
    assert sizing.size(req).lora_gib_per_gpu == 0
    assert (
        sizing.size(dataclasses.replace(req, lora_max_loras=1, lora_max_rank=8)).kv_cache_gib_per_gpu
        < sizing.size(req).kv_cache_gib_per_gpu
    )
