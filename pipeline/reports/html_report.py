"""OUT/report.html: one self-contained page of what a run did (inline SVG, a few lines of JS, no network).

Built in the driver after the job from report.json's numbers and bounded samples of the run's own
Parquet (pipeline/reports/explore.py): the funnel, languages, record types; per drop reason the measured
values with the threshold, dropped pages next to kept pages closest to the threshold; score and
length distributions; dedup, PII, decontamination, mixing; time per stage. This module gathers the
numbers and draws the charts (pipeline/reports/svg.py); the page is the Jinja2 template
templates/report.html (autoescaped: text from the crawl never becomes markup). A table cell is a value,
{"url": URL} or {"snippet": TEXT, "n": CHARS}.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from pipeline.reports import explore, svg
from stages.quality_signals import RAMPS, cap

# What a drop reason measures, as `refinery calibrate` names it (stages/calibration.py), or a score column
# of the output: lets kept pages be measured the same way and shown next to the dropped ones.
REASON_MEASURE = {
    "lang_below_threshold": "langid.threshold",
    "gopher_too_few_words": "gopher_quality.min_words",
    "gopher_mean_word_length": "gopher_quality.min_mean_word_length",
    "gopher_alpha_words": "gopher_quality.min_alpha_words",
    "gopher_stop_words": "gopher_quality.min_stop_words",
    "top_ngram_chars": "gopher_repetition.max_top_ngram_chars.2",
    "dup_ngram_chars": "gopher_repetition.max_dup_ngram_chars.5",
    "fineweb_line_punct": "fineweb.min_line_punct",
    "fineweb_short_lines": "fineweb.max_short_lines",
    "fineweb_newline_ratio": "fineweb.max_newline_ratio",
    "c4_too_few_sentences": "c4.min_sentences",
    "bad_words": "bad_words.max_density",
    "quality_below_threshold": "quality_score",
    "toxic": "toxicity_score",
}


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("pipeline.reports", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    return env.get_template("report.html")


def _url(url: str | None) -> dict[str, Any]:
    return {"url": url}


def _snippet(text: str | None, n: int = 400) -> dict[str, Any]:
    return {"snippet": text, "n": n}


def _number(value) -> str:
    return "" if value is None else svg.number(value)


def _metric_threshold(key: str, lang: str | None, stages: Mapping[str, Any]) -> float | None:
    """The threshold `key` ("section.setting[.n]") that the run applies to a page of `lang`."""
    section, setting, *n = key.split(".")
    stage = stages.get(section)
    if stage is None:
        return None
    value = getattr(stage.config_for(lang), setting, None)
    if n and value is not None:
        value = dict(value).get(int(n[0]))
    return value if isinstance(value, (int, float)) else None


def _kept_measures(kept: Sequence[Mapping[str, Any]], stages: Mapping[str, Any]
                   ) -> list[tuple[Mapping[str, Any], dict[str, float]]]:
    """Each sampled kept page with what every rule measures on it (the rules' own functions, at the n-gram
    sizes the run applied to its language)."""
    from stages.calibration import measure

    repetition = stages.get("gopher_repetition")
    out = []
    for doc in kept:
        c = repetition.config_for(doc.get("lang")) if repetition is not None else None
        m = measure(doc["text"], doc.get("lang"), ngram_scale=c.ngram_scale if c else 1.0,
                    chars_per_word=c.chars_per_word if c else None)
        if doc.get("lang_score") is not None:
            m["langid.threshold"] = doc["lang_score"]
        for column in ("quality_score", "toxicity_score"):
            if doc.get(column) is not None:
                m[column] = doc[column]
        out.append((doc, m))
    return out


def _rule_stages(config) -> dict[str, Any]:
    """Rule stages of the run, built as the run built them (per-language thresholds included)."""
    from stages.table import stage_table

    out = {}
    for spec in stage_table():
        if spec.section and spec.runs == "document" and spec.is_enabled(config):
            try:
                out[spec.section] = spec.make(config)
            except Exception:  # a stage that cannot be built here (a model) has no rule thresholds to show
                continue
    return out


def _reason(sample: explore.ReasonSample, measured, stages) -> dict[str, Any]:
    metric = REASON_MEASURE.get(sample.reason)
    near = []
    if metric:
        for doc, m in measured:
            value = m.get(metric)
            limit = (sample.common_threshold if metric in ("quality_score", "toxicity_score")
                     else _metric_threshold(metric, doc.get("lang"), stages))
            if value is not None and limit is not None:
                near.append((abs(value - limit), value, limit, doc))
        near.sort(key=lambda t: t[0])
    chart = None
    if sample.values:
        distinct = len(sample.thresholds)
        note = f" ({distinct} thresholds: by language or n; commonest marked)" if distinct > 1 else ""
        series = {"dropped": sample.values}
        if near:
            series["kept (sample)"] = [v for _, v, _, _ in near]
        chart = Markup(svg.histogram(series, f"{sample.reason}: measured value{note}", metric or "value",
                                     threshold=sample.common_threshold, colors=(svg.PALETTE[1], svg.PALETTE[0])))
    return {"stage": sample.stage, "reason": sample.reason, "count": sample.count, "chart": chart,
            "dropped": [[_url(r.get("url") or r.get("file")), r.get("lang") or "", _number(r.get("value")),
                         _number(r.get("threshold")), r.get("detail") or "", _snippet(r.get("snippet"))]
                        for r in sample.examples],
            "near": [[_url(doc.get("url")), doc.get("lang") or "", svg.number(v), svg.number(t), _snippet(doc["text"])]
                     for _, v, t, doc in near[:3]]}


def _dedup(report: Mapping[str, Any], output: str, summary: explore.LedgerSummary) -> dict[str, Any] | None:
    d = report.get("dedup") or {}
    if "bands" not in d:
        return None
    config = report.get("config", {}).get("dedup", {})
    b, r = d["bands"], d["rows"]
    points = [(s / 100, 1 - (1 - (s / 100) ** r) ** b) for s in range(0, 101)]
    section = {
        "curve": Markup(svg.curve(points, f"P(candidate pair) for {b} bands x {r} rows", "Jaccard similarity", "P",
                                  marks=[config.get("threshold") or (1 / b) ** (1 / r)])),  # where P = 1/2, roughly
        "clusters": Markup(svg.bars([(k, [v]) for k, v in d.get("cluster_sizes", {}).items()], ["clusters"],
                                    "Clusters by size (documents)")),
        "rounds": None, "examples": []}
    if d.get("edges_per_round"):  # finished components leave the loop: the rounds carry fewer edges
        section["rounds"] = Markup(svg.bars([(f"round {i}", [n]) for i, n in enumerate(d["edges_per_round"])],
                                            ["edges"], f"Edges carried per component round (converged in "
                                            f"{d.get('rounds')})"))
    kept = explore.documents(output, list(summary.duplicates))
    for kept_id, removed in summary.duplicates.items():
        survivor = kept.get(kept_id)
        if survivor is None:
            continue
        # no similarity column: the ledger keeps a snippet of a removed copy, and a Jaccard against a cut
        # snippet is no bound of the documents' (it printed 0.03 for near-identical pages)
        rows = [["kept", _url(survivor.get("url")), _snippet(survivor["text"], 600)]]
        rows += [["removed", _url(row.get("url")), _snippet(row.get("snippet"), 600)] for row in removed]
        section["examples"].append(rows)
    return section


def render(report: Mapping[str, Any], output: str, config, kept_sample: int = 500) -> str:
    summary = explore.summarize_ledger(output)
    kept = explore.kept_sample(output, kept_sample)
    stages = _rule_stages(config)
    measured = _kept_measures(kept, stages) if kept else []
    funnel = report["funnel"]
    reasons = sorted(summary.reasons.values(), key=lambda s: -s.count)
    languages = sorted({*report["languages"], *(k for k in summary.languages if k)},
                       key=lambda k: -(report["languages"].get(k, 0) + summary.languages.get(k, 0)))[:20]
    tokens = [(f["stage"], [f.get("kept_tokens", 0)]) for f in funnel if f.get("kept_tokens")]
    charts = {
        "funnel": svg.bars([(f["stage"], [f["kept"], f["dropped"]]) for f in funnel], ["kept", "dropped"],
                           "Documents per stage", "docs"),
        "tokens": svg.bars(tokens, ["tokens"], "Tokens leaving each stage (UTF-8 bytes / 4)", "tokens") if tokens else "",
        "reasons": svg.bars([(f"{s.reason}", [s.count]) for s in reasons[:25]], ["dropped"], "Dropped by reason", "docs",
                            colors=svg.PALETTE[1:2]),  # drops in the funnel's dropped colour, not its kept one
        "languages": svg.bars([(k, [report["languages"].get(k, 0), summary.languages.get(k, 0)]) for k in languages],
                              ["kept", "dropped"], "Languages (after language ID)", "docs"),
        "records": svg.bars([(k, [v]) for k, v in report["warc_records_by_type"].items()], ["records"],
                            "WARC records by type") if report.get("warc_records_by_type") else ""}
    applied = report.get("langid_thresholds") or {}
    scores = explore.score_columns(output, ["quality_score", "toxicity_score", "lang_score"])
    signals = explore.score_columns(output, ["model_quality", *RAMPS], max_values=50000)
    return _template().render(
        report=report, status=report.get("status", "?"), engine=config.extract.engine, fallback=_fallback(report),
        charts={k: Markup(v) for k, v in charts.items()},
        langid_rows=[[lang, svg.number(applied[lang]["threshold"]), _number(applied[lang]["confident"]),
                      applied[lang]["from"]] for lang in languages if lang in applied],
        reasons=[_reason(s, measured, stages) for s in reasons],
        output_cards=_output_cards(scores, kept, config), quality=_quality(report, kept, scores.get("quality_score") or [], signals),
        rescued=_rescued(output), dedup=_dedup(report, output, summary), edits=_edits(report),
        optout=_optout(report), counts=_counts(report, output),
        times=_times(report.get("stage_times") or []))


def _fallback(report: Mapping[str, Any]) -> dict[str, int] | None:
    """For the cascade: how many pages went through trafilatura."""
    notes = next((f.get("notes", {}) for f in report["funnel"] if f["stage"] == "extract"), {})
    fell, kept = notes.get("cascade_fell_back_to_trafilatura", 0), notes.get("cascade_kept_resiliparse", 0)
    return {"fell": fell, "total": fell + kept} if fell + kept else None


def _output_cards(scores: Mapping[str, Sequence[float]], kept: Sequence[Mapping[str, Any]], config) -> list[dict]:
    chosen = {"quality_score": config.quality.threshold, "toxicity_score": config.toxicity.threshold}
    cards = [{"chart": Markup(svg.histogram({"documents": values}, f"{column} of kept documents", column,
                                            threshold=chosen.get(column))),
              "toxicity": (_toxicity_shares(values, chosen[column], config.toxicity.threshold_by_language)
                           if column == "toxicity_score" else None)}
             for column, values in scores.items() if values]
    if kept:
        cards.append({"chart": Markup(svg.histogram({"documents": [math.log10(max(len(d["text"]), 1)) for d in kept]},
                                                    f"Length of kept documents (sample of {len(kept)})",
                                                    "log10 characters")), "toxicity": None})
    return cards


def _toxicity_shares(values: Sequence[float], threshold: float | None, by_language: Sequence[str] = ()) -> dict[str, str]:
    """Under the toxicity histogram: what a threshold would drop of this output, so one is chosen knowingly
    (the model card gives precision and recall per language at the same thresholds)."""
    shares = " · ".join(f"≥ {t}: {sum(v >= t for v in values) / len(values):.1%}" for t in (0.5, 0.7, 0.9))
    chosen = f"threshold {threshold}: pages at or over it were dropped" if threshold is not None else \
        "no threshold: scored only (toxicity.threshold drops)"
    if by_language:
        chosen += f"; by language: {', '.join(by_language)}"
    return {"shares": shares, "chosen": chosen}


def _quality(report: Mapping[str, Any], kept: Sequence[Mapping[str, Any]], scores: Sequence[float],
             signals: Mapping[str, Sequence[float]]) -> dict | None:
    """Deciles of quality_score over the output, what the top and bottom deciles hold (the anneal split
    takes the top; a quality threshold cuts the bottom), what each signal did to the model's scores, and the
    anneal split's largest pages, sites and languages."""
    if not scores:
        return None
    ordered = sorted(scores)
    deciles = [ordered[min(int(q / 10 * len(ordered)), len(ordered) - 1)] for q in range(1, 10)]
    scored = sorted((d for d in kept if d.get("quality_score") is not None), key=lambda d: d["quality_score"])
    anneal = report.get("config", {}).get("anneal_fraction")
    shown = [(title, [[_url(d.get("url")), d.get("lang") or "", svg.number(round(d["quality_score"], 3)),
                       _snippet(d["text"])] for d in docs])
             for title, docs in (("Top decile", scored[::-1][:3]), ("Bottom decile", scored[:3]))
             if docs and len(scored) >= 10]
    cut = report.get("config", {}).get("anneal_min_quality", 0.8)
    return {"deciles": [svg.number(round(v, 3)) for v in deciles], "deciles_shown": shown,
            "signals": _signal_rows(signals, cut),
            "anneal": {"fraction": anneal, "min_quality": cut, "largest": _anneal_rows(report)} if anneal else None}


def _signal_rows(signals: Mapping[str, Sequence[float]], cut: float) -> list[list[str]]:
    """Per signal: its ramp, the share of pages it capped and zeroed, and how many pages the model alone
    scored at or over `cut` that this signal's cap took under it."""
    model = signals.get("model_quality") or []
    rows = []
    for name, (fine, junk) in RAMPS.items():
        values = signals.get(name) or []
        if not values:
            continue
        caps = [cap(name, v) for v in values]
        lowered = sum(1 for m, c in zip(model, caps) if m >= cut > m * c) if len(model) == len(values) else None
        rows.append([name, f"{svg.number(fine)} – {svg.number(junk)}", f"{sum(c < 1 for c in caps) / len(caps):.1%}",
                     f"{sum(c == 0 for c in caps) / len(caps):.1%}", "" if lowered is None else f"{lowered:,}"])
    return rows


def _anneal_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """The anneal split's largest page, site and language with their shares (report.json's anneal.largest)."""
    largest = report.get("anneal", {}).get("largest") or {}
    return [[kind, _url(top[0]["name"]) if kind == "page" else top[0]["name"], f"{top[0]['share']:.1%}"]
            for kind, top in largest.items() if top]


def _rescued(output: str) -> dict[str, Any] | None:
    shown, total = explore.rescued(output)
    if not total:
        return None
    return {"total": total, "rows": [[_url(r["url"]), r["lang"] or "", r["rescued"] or ""] for r in shown]}


def _edits(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The edit book's totals per stage, and paragraph dedup's most repeated paragraphs."""
    edits = report.get("edits") or {}
    if not edits:
        return None
    share = lambda e: "" if e.get("share_of_text") is None else f"{e['share_of_text']:.2%}"  # noqa: E731
    top = (edits.get("paragraph_dedup") or {}).get("most_repeated") or []
    return {"rows": [[stage, e["documents"], e["paragraphs"], e["chars"], share(e)] for stage, e in sorted(edits.items())],
            "top": [[t["documents"], _snippet(t["text"], 300), ", ".join(t["sites"])] for t in top]}


def _optout(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """What honouring opt-outs cost per signal and language (documents, tokens, share of the language's documents
    that reached the stage), and the licences kept pages state."""
    optout = report.get("optout")
    if not optout:
        return None
    kept = optout.get("kept_by_language") or {}
    removed_by_lang: dict[str, int] = {}
    for langs in optout["removed"].values():
        for lang, e in langs.items():
            removed_by_lang[lang] = removed_by_lang.get(lang, 0) + e["documents"]
    rows = [[reason, lang, e["documents"], e["tokens"],
             f"{e['documents'] / max(kept.get(lang, 0) + removed_by_lang[lang], 1):.2%}"]
            for reason, langs in optout["removed"].items() for lang, e in sorted(langs.items(), key=lambda kv: -kv[1]["documents"])]
    return {"rows": rows, "agents": len(optout["agents"]), "agent_list": optout["agent_list"],
            "licenses": [[k, v] for k, v in sorted(optout["licenses_kept"].items(), key=lambda kv: -kv[1])]}


def _counts(report: Mapping[str, Any], output: str) -> dict[str, Any] | None:
    counts: dict[str, Any] = {"pii": None, "decontamination": None, "mix": None}
    pii = explore.pii_totals(output)
    if pii:
        counts["pii"] = Markup(svg.bars(sorted(([k, [v]] for k, v in pii.items()), key=lambda kv: -kv[1][0]),
                                        ["placeholders"], "PII replaced, by kind"))
    notes = {f["stage"]: f.get("notes", {}) for f in report["funnel"]}
    decontam = report.get("decontamination", {})
    hits = {k.split(".", 1)[1]: v for k, v in notes.get("decontaminate", {}).items() if k.startswith("contaminated_docs.")}
    if decontam or hits:
        counts["decontamination"] = [[b, decontam.get(b, {}).get("items", ""), hits.get(b, 0)]
                                     for b in sorted({*decontam, *hits})]
    mix = report.get("mix")
    if mix:
        names = sorted({*mix["requested"], *mix["achieved"]})
        counts["mix"] = Markup(svg.bars([(k, [mix["requested"].get(k, 0), mix["achieved"].get(k, 0)]) for k in names],
                                        ["requested", "achieved"], "Mix: token shares"))
    return counts if any(counts.values()) else None


def _times(times: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    if not times:
        return None
    return {"chart": Markup(svg.bars([(t["stage"], [t["mean_ms"]]) for t in times], ["ms"],
                                     "Mean time per document (ms, one core)", "ms")),
            "rows": [[t["stage"], t["documents"], t["cpu_s"], t["mean_ms"], t["min_ms"], t["max_ms"],
                      t["docs_per_cpu_s"]] for t in times]}


def write(path: str, report: Mapping[str, Any], output: str, config) -> None:
    from pipeline.storage import write_atomically

    write_atomically(path, render(report, output, config).encode("utf-8"))
