"""Build a tiny random-weight PEFT LoRA adapter for the tiny model of build_tiny_model.py, offline.

    .venv-vllm/bin/python tools/vllm-cpu/build_tiny_lora.py MODEL_DIR OUT_DIR [--rank 8] [--seed N]

Writes adapter_config.json and adapter_model.safetensors in the PEFT layout vLLM 0.32 loads
(vllm/lora/peft_helper.py reads the config; the weights are named
`base_model.model.model.layers.<i>.self_attn.<q|v>_proj.lora_<A|B>.weight`, A of shape
(rank, in_features), B of shape (out_features, rank)), for the model's q_proj and v_proj. The
weights are random, so the adapter changes the nonsense the tiny model writes; what the tests need is
vLLM's real LoRA path: the flags the program derives from adapter_config.json, loading, /v1/models
listing the adapter, and completions under its name.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def build(model_dir: pathlib.Path, out: pathlib.Path, rank: int, seed: int) -> dict:
    import torch
    from safetensors.torch import save_file

    config = json.loads((model_dir / "config.json").read_text())
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    outputs = {"q_proj": config["num_attention_heads"] * head_dim, "v_proj": config["num_key_value_heads"] * head_dim}
    torch.manual_seed(seed)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for module, out_features in outputs.items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{prefix}.lora_A.weight"] = (torch.randn(rank, hidden) * 0.01).to(torch.bfloat16)
            tensors[f"{prefix}.lora_B.weight"] = (torch.randn(out_features, rank) * 0.01).to(torch.bfloat16)
    adapter_config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(model_dir),
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(outputs),
        "use_dora": False,
        "use_rslora": False,
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2) + "\n")
    return adapter_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=pathlib.Path)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = build(args.model_dir, args.out_dir, args.rank, args.seed)
    print(f"tiny LoRA adapter (rank {config['r']}, {', '.join(config['target_modules'])}) written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
