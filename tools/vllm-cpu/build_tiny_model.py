"""Build a tiny random-weight Llama model directory that vLLM (CPU) can serve, fully offline.

    .venv-vllm/bin/python tools/vllm-cpu/build_tiny_model.py OUT_DIR [--seed N]

Writes config.json, model.safetensors, tokenizer.json, tokenizer_config.json (with a chat template),
special_tokens_map.json and generation_config.json: the files vLLM reads from a Hub repository.
The weights are random, so the text is nonsense; what the tests need is the real serving path
(tokenizer, chat template, scheduler, KV cache, streaming, metrics), not good answers.

Sizes: hidden 128 with 4 heads gives head_dim 32, a size vLLM's CPU attention kernels support
(they support 32, 64, 80, ... only; with head_dim 16 the server starts and then dies on the first
request). Two layers and a ~2000-token vocabulary keep the model about 2 MB.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from endpoint_tools.prompt_corpus import SENTENCES  # noqa: E402

VOCAB_SIZE = 2000
MAX_POSITIONS = 4096
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
# A minimal role-tagged template; vLLM renders it for /v1/chat/completions and /tokenize.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_tokenizer(out: pathlib.Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    # Byte-level BPE: any input text tokenizes (no <unk>), so prompts of any content work.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # The corpus is small, so it is repeated with variations to give the trainer merge statistics.
    corpus = list(SENTENCES) + [s.lower() for s in SENTENCES] + [s.upper() for s in SENTENCES]
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))

    special_map = {"bos_token": BOS, "eos_token": EOS, "unk_token": UNK, "pad_token": EOS}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        **special_map,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2) + "\n")
    return tokenizer


def build_model(out: pathlib.Path, tokenizer, seed: int) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    bos_id, eos_id = tokenizer.token_to_id(BOS), tokenizer.token_to_id(EOS)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=eos_id).save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(args.out_dir)
    build_model(args.out_dir, tokenizer, args.seed)
    print(f"tiny model written to {args.out_dir} (vocab {tokenizer.get_vocab_size()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
