"""OUT/report.html: one self-contained page of what a run did (inline SVG, a few lines of JS, no network).

Built in the driver after the job from report.json's numbers and bounded samples of the run's own
Parquet (pipeline/reports/explore.py): the funnel, languages, record types; per drop reason the measured
values with the threshold, dropped pages next to kept pages closest to the threshold; score and
length distributions; dedup, PII, decontamination, mixing; time per stage.
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.reports import explore, svg

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
SCRIPT = """
window.__errors = [];
window.addEventListener('error', e => { window.__errors.push(String(e.message)); });
document.addEventListener('DOMContentLoaded', () => {
  const box = document.getElementById('filter');
  box.addEventListener('input', () => {
    const q = box.value.toLowerCase();
    document.querySelectorAll('section.reason').forEach(s => {
      s.style.display = s.dataset.reason.includes(q) || s.dataset.stage.includes(q) ? '' : 'none';
    });
  });
  document.body.dataset.ready = window.__errors.length ? 'errors' : '1';
});
"""
STYLE = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;line-height:1.4}
h1{margin-bottom:4px} h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
.grid{display:flex;flex-wrap:wrap;gap:16px} .card{border:1px solid #e3e3e3;border-radius:6px;padding:8px}
table{border-collapse:collapse;font-size:13px} td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;
vertical-align:top} th{background:#f6f6f6} .num{text-align:right;font-variant-numeric:tabular-nums}
.snippet{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;max-width:520px;max-height:9em;
overflow:auto;background:#fafafa;min-width:360px} .url{display:inline-block;max-width:300px;word-break:break-all} .ok{color:#2a7a2a} .bad{color:#b52020} .muted{color:#777}
"""


def _e(text) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
                                     for i, cell in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _url(url: str | None) -> str:
    return f'<span class="url">{_e(url)}</span>'


def _snippet(text: str | None, n: int = 400) -> str:
    return f'<div class="snippet">{_e((text or "")[:n])}</div>'


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
        scale = repetition.config_for(doc.get("lang")).ngram_scale if repetition is not None else 1.0
        m = measure(doc["text"], doc.get("lang"), ngram_scale=scale)
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


def _reason_section(sample: explore.ReasonSample, measured, stages) -> str:
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
    kept_values = [v for _, v, _, _ in near]
    parts = [f'<section class="reason" data-stage="{_e(sample.stage)}" data-reason="{_e(sample.reason)}">',
             f"<h3>{_e(sample.stage)} · {_e(sample.reason)} <span class='muted'>({sample.count:,} dropped)</span></h3>"]
    if sample.values:
        distinct = len(sample.thresholds)
        note = f" ({distinct} thresholds: by language or n; commonest marked)" if distinct > 1 else ""
        series = {"dropped": sample.values}
        if kept_values:
            series["kept (sample)"] = kept_values
        parts.append(svg.histogram(series, f"{sample.reason}: measured value{note}", metric or "value",
                                   threshold=sample.common_threshold, colors=(svg.PALETTE[1], svg.PALETTE[0])))
    rows = [[_url(r.get("url") or r.get("file")), _e(r.get("lang")), _e(svg.number(r["value"]) if r.get("value")
            is not None else ""), _e(svg.number(r["threshold"]) if r.get("threshold") is not None else ""),
             _e(r.get("detail")), _snippet(r.get("snippet"))] for r in sample.examples]
    parts.append("<h4>Dropped</h4>" + _table(["url / file", "lang", "value", "threshold", "detail", "text"], rows))
    if near:
        rows = [[_url(doc.get("url")), _e(doc.get("lang")), svg.number(v), svg.number(t), _snippet(doc["text"])]
                for _, v, t, doc in near[:3]]
        parts.append("<h4>Kept, closest to the threshold</h4>"
                     + _table(["url", "lang", "value", "threshold", "text"], rows))
    parts.append("</section>")
    return "".join(parts)


def _dedup_section(report: Mapping[str, Any], output: str, summary: explore.LedgerSummary) -> str:
    d = report.get("dedup") or {}
    if "bands" not in d:
        return ""
    config = report.get("config", {}).get("dedup", {})
    b, r = d["bands"], d["rows"]
    points = [(s / 100, 1 - (1 - (s / 100) ** r) ** b) for s in range(0, 101)]
    parts = ["<h2>Near-duplicates</h2><div class='grid'><div class='card'>",
             svg.curve(points, f"P(candidate pair) for {b} bands x {r} rows", "Jaccard similarity", "P",
                       marks=[config.get("threshold") or (1 / b) ** (1 / r)]),  # where P = 1/2, roughly
             "</div><div class='card'>",
             svg.bars([(k, [v]) for k, v in d.get("cluster_sizes", {}).items()], ["clusters"],
                      "Clusters by size (documents)"), "</div>"]
    if d.get("edges_per_round"):  # finished components leave the loop: the rounds carry fewer edges
        parts += ["<div class='card'>",
                  svg.bars([(f"round {i}", [n]) for i, n in enumerate(d["edges_per_round"])], ["edges"],
                           f"Edges carried per component round (converged in {d.get('rounds')})"), "</div>"]
    parts.append("</div>")
    kept = explore.documents(output, list(summary.duplicates))
    for kept_id, removed in summary.duplicates.items():
        survivor = kept.get(kept_id)
        if survivor is None:
            continue
        # no similarity column: the ledger keeps a snippet of a removed copy, and a Jaccard against a cut
        # snippet is no bound of the documents' (it printed 0.03 for near-identical pages)
        rows = [["kept", _url(survivor.get("url")), _snippet(survivor["text"], 600)]]
        rows += [["removed", _url(row.get("url")), _snippet(row.get("snippet"), 600)] for row in removed]
        parts.append(_table(["copy", "url", "text (removed copies: the ledger's snippet)"], rows))
    return "".join(parts)


def render(report: Mapping[str, Any], output: str, config, kept_sample: int = 500) -> str:
    summary = explore.summarize_ledger(output)
    kept = explore.kept_sample(output, kept_sample)
    stages = _rule_stages(config)
    measured = _kept_measures(kept, stages) if kept else []
    c = report["conservation"]
    status = report.get("status", "?")
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Refinery run report</title>"
             f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>",
             "<h1>Refinery run report</h1>",
             f"<p>Status <b class='{'ok' if status == 'ok' else 'bad'}'>{_e(status)}</b> · runner {_e(report['runner'])}"
             f" · {report['elapsed_s']} s · read {c['read']:,} = kept {c['kept']:,}"
             + (f" + held out {c['held_out']:,} (valid/)" if c.get("held_out") else "") + f" + ledger {c['ledger']:,} "
             f"(conservation {'holds' if c['holds'] else 'NOT checked' if c['holds'] is None else 'BROKEN'})</p>"]
    parts.append(f"<p>{_extraction_line(report, config)}</p>")
    for problem in report.get("problems", []):
        parts.append(f"<p class='bad'>{_e(problem)}</p>")
    funnel = report["funnel"]
    parts.append("<h2>Funnel</h2><div class='grid'><div class='card'>")
    parts.append(svg.bars([(f["stage"], [f["kept"], f["dropped"]]) for f in funnel], ["kept", "dropped"],
                          "Documents per stage", "docs"))
    tokens = [(f["stage"], [f.get("kept_tokens", 0)]) for f in funnel if f.get("kept_tokens")]
    if tokens:
        parts.append("</div><div class='card'>" + svg.bars(tokens, ["tokens"], "Tokens leaving each stage "
                                                                              "(UTF-8 bytes / 4)", "tokens"))
    reasons = sorted(summary.reasons.values(), key=lambda s: -s.count)
    parts.append("</div><div class='card'>" + svg.bars([(f"{s.reason}", [s.count]) for s in reasons[:25]],
                                                      ["dropped"], "Dropped by reason", "docs") + "</div></div>")
    languages = sorted({*report["languages"], *(k for k in summary.languages if k)},
                       key=lambda k: -(report["languages"].get(k, 0) + summary.languages.get(k, 0)))[:20]
    parts.append("<h2>Languages and records</h2><div class='grid'><div class='card'>")
    parts.append(svg.bars([(k, [report["languages"].get(k, 0), summary.languages.get(k, 0)]) for k in languages],
                          ["kept", "dropped"], "Languages (after language ID)", "docs"))
    if report.get("warc_records_by_type"):
        parts.append("</div><div class='card'>" + svg.bars(
            [(k, [v]) for k, v in report["warc_records_by_type"].items()], ["records"], "WARC records by type"))
    applied = report.get("langid_thresholds") or {}
    if applied:
        rows = [[_e(lang), svg.number(applied[lang]["threshold"]),
                 "" if applied[lang]["confident"] is None else svg.number(applied[lang]["confident"]),
                 _e(applied[lang]["from"])] for lang in languages if lang in applied]
        parts.append("</div><div class='card'><h3>Language-ID threshold applied</h3><p>Pages under the threshold are "
                     "dropped; between it and the confident score, CLD2 must not name another language.</p>"
                     + _table(["lang", "threshold", "confident", "from"], rows, numeric=(1, 2)))
    parts.append("</div></div>")
    parts.append("<h2>Why pages were dropped</h2><p>Filter: <input id='filter' placeholder='stage or reason'></p>")
    parts += [_reason_section(s, measured, stages) for s in reasons]
    parts.append("<h2>The output</h2><div class='grid'>")
    scores = explore.score_columns(output, ["quality_score", "toxicity_score", "lang_score"])
    chosen = {"quality_score": config.quality.threshold, "toxicity_score": config.toxicity.threshold}
    for column, values in scores.items():
        if values:
            parts.append("<div class='card'>" + svg.histogram({"documents": values}, f"{column} of kept documents",
                                                              column, threshold=chosen.get(column))
                         + _toxicity_shares(column, values, chosen.get(column)) + "</div>")
    if kept:
        parts.append("<div class='card'>" + svg.histogram(
            {"documents": [math.log10(max(len(d["text"]), 1)) for d in kept]},
            f"Length of kept documents (sample of {len(kept)})", "log10 characters") + "</div>")
    parts.append("</div>")
    parts.append(_quality_section(report, kept, scores.get("quality_score") or []))
    parts.append(_rescued_section(output))
    parts.append(_dedup_section(report, output, summary))
    parts.append(_counts_section(report, output))
    times = report.get("stage_times") or []
    if times:
        parts.append("<h2>Time per stage</h2>" + svg.bars([(t["stage"], [t["mean_ms"]]) for t in times], ["ms"],
                                                          "Mean time per document (ms, one core)", "ms"))
        parts.append(_table(["stage", "documents", "CPU s", "mean ms", "min ms", "max ms", "docs per CPU-s"],
                            [[t["stage"], t["documents"], t["cpu_s"], t["mean_ms"], t["min_ms"], t["max_ms"],
                              t["docs_per_cpu_s"]] for t in times], numeric=range(1, 7)))
    parts.append("</body></html>")
    return "".join(parts)


def _extraction_line(report: Mapping[str, Any], config) -> str:
    """Which engine extracted the pages and, for the cascade, how often it fell back to trafilatura."""
    notes = next((f.get("notes", {}) for f in report["funnel"] if f["stage"] == "extract"), {})
    fell, kept = notes.get("cascade_fell_back_to_trafilatura", 0), notes.get("cascade_kept_resiliparse", 0)
    through = f": {fell:,} of {fell + kept:,} pages through trafilatura" if fell + kept else ""
    return f"Extraction engine <b>{_e(config.extract.engine)}</b>{through}"


def _toxicity_shares(column: str, values: Sequence[float], threshold: float | None) -> str:
    """Under the toxicity histogram: what a threshold would drop of this output, so one is chosen knowingly
    (the model card gives precision and recall per language at the same thresholds)."""
    if column != "toxicity_score":
        return ""
    shares = " · ".join(f"≥ {t}: {sum(v >= t for v in values) / len(values):.1%}" for t in (0.5, 0.7, 0.9))
    chosen = f"threshold {threshold}: pages at or over it were dropped" if threshold is not None else \
        "no threshold: scored only (toxicity.threshold drops)"
    return (f"<p>Kept documents scoring {shares} ({chosen}); precision and recall per language at these thresholds: "
            "stages/models/README.md.</p>")


def _quality_section(report: Mapping[str, Any], kept: Sequence[Mapping[str, Any]], scores: Sequence[float]) -> str:
    """Deciles of quality_score over the output, and what the top and bottom deciles hold (the anneal split
    takes the top; a quality threshold cuts the bottom)."""
    if not scores:
        return ""
    ordered = sorted(scores)
    deciles = [ordered[min(int(q / 10 * len(ordered)), len(ordered) - 1)] for q in range(1, 10)]
    scored = sorted((d for d in kept if d.get("quality_score") is not None), key=lambda d: d["quality_score"])
    parts = ["<h2>Quality score</h2>", "<p>Deciles over the output: "
             + " · ".join(svg.number(round(v, 3)) for v in deciles) + "</p>"]
    anneal = report.get("config", {}).get("anneal_fraction")
    if anneal:
        parts.append(f"<p>The anneal split takes documents with quality_score ≥ "
                     f"{report['config'].get('anneal_min_quality')} up to {anneal:.0%} of the tokens.</p>")
    for title, docs in (("Top decile", scored[::-1][:3]), ("Bottom decile", scored[:3])):
        if docs and len(scored) >= 10:
            rows = [[_url(d.get("url")), _e(d.get("lang")), svg.number(round(d["quality_score"], 3)),
                     _snippet(d["text"])] for d in docs]
            parts.append(f"<h4>{title}</h4>" + _table(["url", "lang", "quality_score", "text"], rows))
    return "".join(parts)


def _rescued_section(output: str) -> str:
    shown, total = explore.rescued(output)
    if not total:
        return ""
    rows = [[_url(r["url"]), _e(r["lang"]), _e(r["rescued"])] for r in shown]
    return (f"<h2>Rescued by evidence</h2><p>{total:,} kept page(s) missed one n-gram repetition limit by less than "
            "<code>gopher_repetition.rescue_margin</code> and were kept on the quality model's score "
            "(<code>metadata.rescued</code>; <code>--set gopher_repetition.rescue_margin=none</code> drops them)"
            + (f"; the first {len(shown)}" if total > len(shown) else "") + ":</p>"
            + _table(["url", "lang", "rule, value > limit; quality score"], rows))


def _counts_section(report: Mapping[str, Any], output: str) -> str:
    parts = []
    pii = explore.pii_totals(output)
    if pii:
        parts.append("<div class='card'>" + svg.bars(sorted(([k, [v]] for k, v in pii.items()), key=lambda kv: -kv[1][0]),
                                                     ["placeholders"], "PII replaced, by kind") + "</div>")
    notes = {f["stage"]: f.get("notes", {}) for f in report["funnel"]}
    decontam = report.get("decontamination", {})
    hits = {k.split(".", 1)[1]: v for k, v in notes.get("decontaminate", {}).items() if k.startswith("contaminated_docs.")}
    if decontam or hits:
        rows = [[_e(b), decontam.get(b, {}).get("items", ""), hits.get(b, 0)] for b in sorted({*decontam, *hits})]
        parts.append("<div class='card'><b>Decontamination</b>" + _table(
            ["benchmark", "items loaded", "documents hit"], rows, numeric=(1, 2)) + "</div>")
    mix = report.get("mix")
    if mix:
        names = sorted({*mix["requested"], *mix["achieved"]})
        parts.append("<div class='card'>" + svg.bars([(k, [mix["requested"].get(k, 0), mix["achieved"].get(k, 0)])
                                                      for k in names], ["requested", "achieved"],
                                                     "Mix: token shares") + "</div>")
    return "<h2>PII, decontamination, mixing</h2><div class='grid'>" + "".join(parts) + "</div>" if parts else ""


def write(path: str, report: Mapping[str, Any], output: str, config) -> None:
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as fh:
        fh.write(render(report, output, config).encode("utf-8"))
