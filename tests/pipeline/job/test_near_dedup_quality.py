"""Near-duplicate removal measured on a corpus with known Jaccard, and checked against a brute-force reference."""
import dataclasses
import json

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from datasketch import MinHash, MinHashLSH

from pipeline.job.globals.dedup import ExactDedup, NearDedup, SignDocuments
from pipeline.job.signed import Signed
from stages.dedup import DedupConfig, MinHasher, copy_rank, exact_key, jaccard, shingles
from stages.mix import approx_tokens
from stages.origin import NO_DATE
from tests import dedup_corpus
from tests.union_find import union_find_components


def run_near_dedup(docs, tmp_path, config=DedupConfig(), exact_first=False):
    """NearDedup in a real Beam pipeline (after ExactDedup, as a run wires them, with `exact_first`);
    returns (kept ids, {removed id: kept id}) of near dedup."""
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        signed = p | beam.Create(docs) | SignDocuments(config)
        if exact_first:
            kept, _ = signed | ExactDedup()
            kept, ledger = {"kept": kept, "signed": signed} | NearDedup(config)
        else:
            kept, ledger = signed | NearDedup(config)
        _ = kept | "KeptIds" >> beam.Map(lambda packed: Signed.unpack(packed).id) | "WriteKept" >> beam.io.WriteToText(str(tmp_path / "kept"))
        _ = (ledger | "Pairs" >> beam.Map(lambda d: json.dumps([d.id, d.detail.split(" ", 1)[1], str(d.reason)]))
             | "WriteLedger" >> beam.io.WriteToText(str(tmp_path / "ledger")))
    def read(prefix):
        return [line for f in sorted(tmp_path.glob(prefix + "*")) for line in f.read_text().splitlines()]

    removed = {}
    for line in read("ledger"):
        doc_id, kept_id, reason = json.loads(line)
        assert reason == "near_duplicate"
        removed[doc_id] = kept_id
    return set(read("kept")), removed


@pytest.fixture(scope="module")
def corpus():
    return dedup_corpus.build(seed=0)


def test_precision_and_recall_against_known_jaccard(corpus, tmp_path):
    kept, removed = run_near_dedup(corpus.docs, tmp_path)
    assert len(kept) + len(removed) == len(corpus.docs)  # nothing lost, nothing doubled
    true_dup = {d: corpus.jaccard_to_base[d] >= 0.8 for d in corpus.group}
    apart = {d: corpus.jaccard_to_base[d] < 0.5 for d in corpus.group}
    tp = fp = 0
    for doc_id, kept_id in removed.items():
        same_group = corpus.group[doc_id] == corpus.group[kept_id]
        if same_group and true_dup[doc_id] and true_dup[kept_id]:
            tp += 1
        elif not same_group or apart[doc_id] or apart[kept_id]:
            fp += 1  # a removal across groups, or of a variant edited down to Jaccard < 0.5
    groups = {}
    for doc_id, base in corpus.group.items():
        groups.setdefault(base, []).append(doc_id)
    should_remove = sum(max(sum(true_dup[d] for d in members) - 1, 0) for members in groups.values())
    precision, recall = tp / max(tp + fp, 1), tp / should_remove
    print(f"near-dedup on {len(corpus.docs)} docs: precision {precision:.3f} recall {recall:.3f} "
          f"(tp {tp}, fp {fp}, should remove {should_remove})")
    assert precision >= 0.95 and recall >= 0.90


def test_clusters_equal_brute_force_lsh_with_union_find(tmp_path):
    corpus = dedup_corpus.build(seed=1, n_random=400)  # overlapping samples too: a few thousand documents
    assert len(corpus.docs) >= 2000
    _, removed = run_near_dedup(corpus.docs, tmp_path)
    beam_clusters = {}
    for doc_id, kept_id in removed.items():
        beam_clusters.setdefault(kept_id, {kept_id}).add(doc_id)

    hasher, lsh, minhashes = MinHasher(), MinHashLSH(num_perm=112, params=(14, 8)), {}
    for doc in corpus.docs:
        sig = hasher.signature(shingles(doc.text))
        minhashes[doc.id] = MinHash(num_perm=112, seed=1, hashvalues=sig, scheme=MinHash(num_perm=112).scheme)
        lsh.insert(doc.id, minhashes[doc.id])
    candidate_pairs = [(doc_id, other) for doc_id, m in minhashes.items() for other in lsh.query(m)]
    reference = {}
    for doc_id, component in union_find_components(candidate_pairs).items():
        reference.setdefault(component, set()).add(doc_id)
    reference_clusters = sorted(sorted(c) for c in reference.values() if len(c) > 1)
    assert sorted(sorted(c) for c in beam_clusters.values()) == reference_clusters


def test_verification_drops_links_below_the_threshold(corpus, tmp_path):
    # with a loose band setting many grey-zone pairs become candidates; verification keeps only J >= 0.8 links
    loose = DedupConfig(bands=28, rows=4, verify=True, verify_threshold=0.8)
    _, removed = run_near_dedup(corpus.docs, tmp_path, loose)
    by_id = {d.id: d for d in corpus.docs}
    assert removed
    for doc_id, kept_id in removed.items():
        assert corpus.group[doc_id] == corpus.group[kept_id]
    low = [d for d, k in removed.items() if jaccard(shingles(by_id[d].text), shingles(by_id[k].text)) < 0.5]
    assert not low


def test_exact_copies_in_the_graph_and_band_passes_change_nothing(corpus, tmp_path):
    """Near dedup bands every document that entered exact dedup, exact copies too, in passes: it must
    decide as it would on exact dedup's survivors alone, in one pass."""
    # exact copies with the same words (shingles lowercase: an upper-cased ß would give other ones, NearDedup says so)
    copies = [dataclasses.replace(d, id=f"copy-{i}-{d.id}", text=d.text.replace(" ", "  ").lower())
              for i, d in enumerate(corpus.docs[::4])]
    docs = corpus.docs + copies
    survivors: dict[str, object] = {}

    def keep(d):  # what the job ranks copies by (no dates or canonicals here)
        return copy_rank((0, NO_DATE), approx_tokens(d.text), d.quality_score, len(d.text), d.id)

    for d in docs:
        key = exact_key(d.text)
        if key not in survivors or keep(d) < keep(survivors[key]):
            survivors[key] = d
    assert len({exact_key(d.text) for d in corpus.docs}) == len(survivors)  # the copies add no text
    one_pass = DedupConfig(bands_per_shuffle=14)
    expected = run_near_dedup(list(survivors.values()), tmp_path / "survivors", one_pass)
    got = run_near_dedup(docs, tmp_path / "passes", DedupConfig(bands_per_shuffle=5), exact_first=True)  # 5, 5, 4
    assert got == expected and expected[1]
