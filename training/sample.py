"""`refinery sample --run RUN --prompt TEXT`: continuations from a training run's latest checkpoint, the
first sanity check of a run (does it write words of the training data's languages, or noise?).

Plain autoregressive sampling: temperature, top-k, a seed (the same seed gives the same text); the
context is cropped to the model's seq_len. Runs on CPU unless --device cuda.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import torch

from common.settings import error_text
from training import checkpoint
from training.distributed import use_cpu_threads
from training.model import GPT, ModelConfig
from training.tokenizer import load_tokenizer


def load_model(run: str, device: torch.device) -> tuple[GPT, object, int]:
    """(model in eval mode, tokenizer, step) from RUN/checkpoints (latest.json, verified)."""
    state = checkpoint.load(os.path.join(run, "checkpoints"), asked_by=f"--run {run}")
    model = GPT(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    described = state.get("tokenizer", {"kind": "bytes"})
    tokenizer = load_tokenizer("bytes" if described.get("kind") == "bytes" else _tokenizer_path(run, described))
    return model.to(device).eval(), tokenizer, int(state["step"])


def _tokenizer_path(run: str, described: dict) -> str:
    path = described.get("path", "")
    if os.path.isfile(path):
        return path
    config = os.path.join(run, "train_config.json")  # a run folder moved with its token folder
    with open(config, encoding="utf-8") as fh:
        tokens = json.load(fh).get("tokens", "")
    return os.path.join(tokens, "tokenizer.json")


@torch.no_grad()
def generate(model: GPT, prompt_ids: list[int], new_tokens: int, temperature: float, top_k: int,
             generator: torch.Generator, stop_id: int | None = None) -> list[int]:
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=next(model.parameters()).device)
    for _ in range(new_tokens):
        logits = model(ids[:, -model.cfg.seq_len:])[0, -1].float().cpu()
        if temperature <= 0:
            nxt = int(torch.argmax(logits))
        else:
            logits = logits / temperature
            if 0 < top_k < logits.numel():
                cutoff = torch.topk(logits, top_k).values[-1]
                logits[logits < cutoff] = -float("inf")
            nxt = int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator))
        if nxt == stop_id:
            break
        ids = torch.cat([ids, torch.tensor([[nxt]], device=ids.device)], dim=1)
    return ids[0, len(prompt_ids):].tolist()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery sample", description="Continuations of a prompt from a "
                                "training run's latest checkpoint.")
    p.add_argument("--run", required=True, help="the --out folder of `refinery train` (has checkpoints/)")
    p.add_argument("--prompt", default="", help="text to continue (default: none, start from EOS)")
    p.add_argument("--num-samples", type=int, default=3, help="continuations to print (default: %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=200, help="tokens per continuation (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=0.8, help="0 picks the likeliest token (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=50, help="sample among the k likeliest tokens; 0: all "
                   "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same text (default: %(default)s)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to run the model "
                   "(default: %(default)s)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.device == "cpu":
        threads, why = use_cpu_threads()
        print(f"[sample] {threads} torch thread(s) ({why})", flush=True)
    try:
        model, tokenizer, step = load_model(a.run, torch.device(a.device))
    except (checkpoint.CheckpointError, OSError, ValueError, KeyError) as exc:
        print(f"refinery sample: error: {error_text(exc)}", file=sys.stderr)
        return 2
    prompt = tokenizer.encode(a.prompt) if a.prompt else [tokenizer.eos_id]
    generator = torch.Generator().manual_seed(a.seed)
    print(f"[sample] {a.run} at step {step}: {a.num_samples} continuation(s) of {a.prompt!r} "
          f"(temperature {a.temperature}, top-k {a.top_k}, seed {a.seed})")
    for i in range(a.num_samples):
        out = generate(model, prompt, a.max_new_tokens, a.temperature, a.top_k, generator, tokenizer.eos_id)
        print(f"--- sample {i + 1}\n{a.prompt}{tokenizer.decode(out)}")
    return 0
