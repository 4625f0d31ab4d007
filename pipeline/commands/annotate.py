"""`refinery annotate`: label a sample of a run's documents with a model you run, then train on the labels.

    refinery annotate --endpoint http://127.0.0.1:8000/v1 --model NAME --data OUT --sample 2000 \\
        --out labels.jsonl [--train graded.ftz]

FineWeb-Edu's method: a strong model grades a sample with a fixed rubric (below), a small fastText model learns
the grades (`refinery train-quality --graded`), and the pipeline scores every page with it. The endpoint is any
OpenAI-compatible chat-completions server (vLLM, llama.cpp, TGI, a hosted API); the API key, if one is
needed, is read from the environment variable --api-key-env. Optional: nothing else in Refinery needs a network.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import pyarrow.compute as pc

from pipeline.reports import explore

RUBRIC = """You judge web pages as training text for a language model. Read the extract and score it
with this additive scale, one point per criterion met:
- 1 point: the text is mostly natural-language sentences, not menus, link lists, tables of numbers or
  keyword lists.
- 1 point: it is coherent: the sentences follow one topic and connect to each other.
- 1 point: it is well written: correct grammar and spelling, no machine-translation or spam patterns.
- 1 point: it informs: it explains, reports or argues something a reader could learn from.
- 1 point: it is substantial and self-contained: enough text to stand alone, no advertising or
  calls to buy, click or sign up dominating it.
Scores run from 0 to 5. Write one short sentence of justification, then the last line exactly as
"Score: N"."""
SCORE = re.compile(r"score\s*:\s*([0-5])\b", re.IGNORECASE)
MAX_CHARS = 4000  # of each document sent to the annotator: its head tells its quality, and tokens cost


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery annotate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--endpoint", required=True, help="base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="model name the endpoint serves")
    p.add_argument("--data", required=True, help="a `refinery run` output folder: its data/ shards are sampled")
    p.add_argument("--sample", type=int, default=1000, help="documents to annotate (a seeded random sample)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample")
    p.add_argument("--out", required=True, help="JSONL of {id, url, lang, text, score, reason}")
    p.add_argument("--train", metavar="MODEL", help="then train a graded quality model on the labels (.ftz)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key, if any")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    return p


def sample_documents(output: str, n: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of the output's original documents (one streaming pass)."""
    return explore.sample_rows(explore.dataset(output, explore.DATA), ["id", "url", "lang", "text"],
                               pc.field("epoch") == 0, n, seed)[0]


def grade(endpoint: str, model: str, text: str, api_key: str | None, timeout: float) -> tuple[int | None, str]:
    """(score 0-5 or None when the reply has none, the reply)."""
    body = json.dumps({"model": model, "temperature": 0, "max_tokens": 200, "messages": [
        {"role": "system", "content": RUBRIC}, {"role": "user", "content": text[:MAX_CHARS]}]}).encode("utf-8")
    request = urllib.request.Request(endpoint.rstrip("/") + "/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {api_key}"} if api_key else {})})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        reply = json.load(response)["choices"][0]["message"]["content"] or ""
    found = SCORE.findall(reply)
    return (int(found[-1]) if found else None), reply.strip()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    docs = sample_documents(args.data, args.sample, args.seed)
    if not docs:
        print(f"refinery annotate: error: {args.data} holds no documents (data/*.parquet of a run)", file=sys.stderr)
        return 2
    api_key = os.environ.get(args.api_key_env)
    labeled, unparsed = [], 0
    with open(args.out, "w", encoding="utf-8") as fh:
        for i, doc in enumerate(docs, 1):
            try:
                score, reply = grade(args.endpoint, args.model, doc["text"], api_key, args.timeout)
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as exc:
                print(f"refinery annotate: error: request {i} to {args.endpoint} failed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
                return 2
            if score is None:
                unparsed += 1
                continue
            row = {"id": doc["id"], "url": doc["url"], "lang": doc["lang"], "text": doc["text"], "score": score,
                   "reason": reply[:500]}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            labeled.append((doc["text"], score))
    counts = {g: sum(1 for _, s in labeled if s == g) for g in range(6)}
    print(f"annotated {len(labeled)} of {len(docs)} documents ({unparsed} replies without a score); grades: {counts}; "
          f"labels: {args.out}")
    if args.train:
        from stages.quality_train import train_graded

        card = train_graded(labeled, args.train, description=f"{len(labeled)} documents of {args.data} graded by "
                                                             f"{args.model} with pipeline/commands/annotate.py's rubric")
        m = card["held_out_metrics"]
        print(f"model: {args.train}; held-out mean absolute error {m['mean_absolute_error']:.3f} grades (n={m['n']})")
    return 0
