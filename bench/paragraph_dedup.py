"""What paragraph dedup cuts from trafilatura's 990 annotated pages: the `with` snippets (text that must stay)
it removes, against the `without` snippets (boilerplate) that extraction let through and it removes.

    .venv/bin/python bench/paragraph_dedup.py [--data ../shared/data/html/trafilatura] [--min-chars 1 10 20 30 50]
                                              [--unit paragraph|span]
                                              [--ntrex ../shared/data/multilingual/ntrex128]

The pages are extracted with the run's default settings (4 processes), then counted and cut exactly as the
job does (stages/paragraphs.py: `cuts_in_memory` is the job's combiner on one machine; no quality score, so
the longest page owns a paragraph). The pages come from ~500 sites, a few pages per site: repetition
here is a site's template, the case paragraph dedup is for. `min_chars` is the only setting swept; its
default (30) was picked from this sweep, so NTREX-128 below is the check on data it was not chosen on.

Then, in 128 languages: NTREX-128's 123 news documents per language are distinct stories, so a line repeated
across them is rarely boilerplate; what the default cuts there, per language, bounds the harm to main text in
scripts and languages the 990 pages do not cover.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os

from stages.extraction.extract import ExtractConfig, extract_text
from stages.extraction.gold import DEFAULT_ROOT, _collapse, load_pages
from stages.paragraphs import ParagraphCut, ParagraphDedupConfig, cuts_in_memory
from stages.record import Document, Drop


def _extract(page) -> str:
    return extract_text(page.html, page.url, ExtractConfig().trafilatura_options()) or ""


def _present(snippets, text: str) -> set[int]:
    flat = _collapse(text)
    return {i for i, s in enumerate(snippets) if _collapse(s) and _collapse(s) in flat}


def ntrex(root: str, unit: str = "paragraph") -> None:
    """Per language, NTREX-128's documents counted and cut with the defaults: the share of text cut."""
    config = ParagraphDedupConfig(enabled=True, unit=unit)
    with open(os.path.join(root, "DOCUMENT_IDS.tsv"), encoding="utf-8") as fh:
        doc_of_line = fh.read().split("\n")
    total = cut_total = 0
    worst = []
    folder = os.path.join(root, "NTREX-128")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        texts: dict[str, list[str]] = {}
        for doc_id, line in zip(doc_of_line, lines):
            if doc_id:
                texts.setdefault(doc_id, []).append(line)
        docs = [Document(id=k, url="", source="ntrex", text="\n".join(v)) for k, v in texts.items()]
        cut = ParagraphCut(config, {h: o.owner_id for h, o in cuts_in_memory(docs, config).items()})
        chars = sum(len(d.text) for d in docs)
        removed = sum(len(d.text) - (0 if isinstance(r, Drop) else len(r.text)) for d in docs for r in [cut(d)])
        total, cut_total = total + chars, cut_total + removed
        worst.append((removed / chars, name.split(".")[1]))
    worst.sort(reverse=True)
    print(f"NTREX-128, {len(worst)} files of 123 distinct news documents: {cut_total:,} of {total:,} characters cut "
          f"({cut_total / total:.3%}); languages with any cut: {sum(1 for w, _ in worst if w)}; most: "
          + ", ".join(f"{lang} {w:.2%}" for w, lang in worst[:5]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--min-chars", type=int, nargs="+", default=[1, 10, 20, 30, 50])
    p.add_argument("--unit", choices=["paragraph", "span"], default="paragraph", help="what is counted (the setting)")
    p.add_argument("--ntrex", default=os.path.join(os.path.dirname(DEFAULT_ROOT), "..", "multilingual", "ntrex128"))
    args = p.parse_args()
    pages = load_pages(args.data)
    with concurrent.futures.ProcessPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        texts = list(pool.map(_extract, pages, chunksize=8))
    docs = [Document(id=f"{i:04d}", url=page.url, source="gold", text=text)
            for i, (page, text) in enumerate(zip(pages, texts)) if text]
    pages_of = {doc.id: pages[int(doc.id)] for doc in docs}
    with_in = {d.id: _present(pages_of[d.id].with_snippets, d.text) for d in docs}
    without_in = {d.id: _present(pages_of[d.id].without_snippets, d.text) for d in docs}
    n_with, n_without = sum(map(len, with_in.values())), sum(map(len, without_in.values()))
    chars = sum(len(d.text) for d in docs)
    print(f"{len(pages)} pages, {len(docs)} with text, {chars:,} characters; extracted text holds {n_with} 'with' "
          f"snippets and {n_without} leaked 'without' (boilerplate) snippets")
    print("| min_chars | repeated paragraphs | pages edited | pages dropped (>50 % cut) | characters cut "
          "| 'with' snippets cut from their page | ... and from every page | leaked boilerplate removed |")
    print("|---|---|---|---|---|---|---|---|")
    for min_chars in args.min_chars:
        config = ParagraphDedupConfig(enabled=True, min_chars=min_chars, unit=args.unit)
        owners = cuts_in_memory(docs, config)
        cut = ParagraphCut(config, {h: o.owner_id for h, o in owners.items()})
        edited = dropped = cut_chars = lost = removed = 0
        kept_texts = []
        for doc in docs:
            result = cut(doc)
            after = "" if isinstance(result, Drop) else result.text
            kept_texts.append(_collapse(after))
            dropped += isinstance(result, Drop)
            edited += not isinstance(result, Drop) and after != doc.text
            cut_chars += len(doc.text) - len(after)
            lost += len(with_in[doc.id] - _present(pages_of[doc.id].with_snippets, after))
            removed += len(without_in[doc.id] - _present(pages_of[doc.id].without_snippets, after))
        corpus = "\n".join(kept_texts)  # a snippet cut from one page may stay in the page that owns it
        gone = sum(_collapse(pages_of[d.id].with_snippets[i]) not in corpus for d in docs for i in with_in[d.id])
        print(f"| {min_chars} | {len(owners)} | {edited} | {dropped} | {cut_chars:,} ({cut_chars / chars:.2%}) "
              f"| {lost} ({lost / n_with:.2%}) | {gone} ({gone / n_with:.2%}) | {removed} ({removed / max(n_without, 1):.1%}) |")
    if os.path.isdir(args.ntrex):
        ntrex(args.ntrex, args.unit)


if __name__ == "__main__":
    main()
