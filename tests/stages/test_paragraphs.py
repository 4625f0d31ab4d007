"""Paragraph dedup's stage without Beam: what counts as the same paragraph, who keeps it, what is cut and
recorded, when a document is dropped instead, and that the counting does not depend on order."""
import itertools

import pytest

from common.settings import ConfigError
from stages.origin import origin_rank
from stages.paragraphs import (
    STAGE,
    TOO_MUCH_REPEATED,
    Owner,
    ParagraphCut,
    ParagraphDedupConfig,
    cuts_in_memory,
    join_kept,
    merge_owners,
    occurrence,
    paragraph_hash,
    paragraph_hashes,
    site_sample,
)
from stages.record import Document, Drop
from stages.runner import StageRunner

NOTICE = "We use cookies to improve your experience. By continuing you accept our cookie policy."
FOOTER = "Copyright Example Media Group. All rights reserved. Terms of use | Privacy"


def page(doc_id, own, quality=None, url=None):
    return Document(id=doc_id, url=url or f"https://example.org/{doc_id}", source="web",
                    text="\n".join([NOTICE, *own, FOOTER]), quality_score=quality)


def test_copies_that_differ_in_case_width_and_spacing_are_one_paragraph():
    same = ["We use cookies.   Accept", "WE USE COOKIES. ACCEPT", "ｗｅ use cookies. accept\t"]
    assert len({paragraph_hash(s, 1) for s in same}) == 1
    assert paragraph_hash("We use cookies. Accept 2023", 1) != paragraph_hash("We use cookies. Accept 2024", 1)
    assert paragraph_hash("short", 30) is None and paragraph_hashes("short\n\n" + NOTICE + "\n" + NOTICE,
                                                                         ParagraphDedupConfig()) == [paragraph_hash(NOTICE, 30)]


def test_the_best_document_keeps_a_repeated_paragraph_and_the_others_lose_it():
    config = ParagraphDedupConfig(enabled=True, max_removed_fraction=1.0)
    docs = [page("a", ["Alpha's own long paragraph about tides and the moon, written for this page."], quality=0.2),
            page("b", ["Bravo's own long paragraph about bread, yeast and the oven, written here."], quality=0.9),
            page("c", ["Charlie's own long paragraph on chess openings and endgames, only here."], quality=0.5)]
    owners = cuts_in_memory(docs, config)
    assert {o.owner_id for o in owners.values()} == {"b"} and all(o.documents == 3 for o in owners.values())
    cut = ParagraphCut(config, {h: o.owner_id for h, o in owners.items()})
    kept = {doc.id: cut(doc) for doc in docs}
    assert kept["b"] is docs[1]  # the owner is untouched, and records no edit
    for doc_id in ("a", "c"):
        result = kept[doc_id]
        assert result.text == docs[[d.id for d in docs].index(doc_id)].text.split("\n")[1]  # its own text stays
        (edit,) = result.edits
        assert (edit.stage, edit.paragraphs, edit.kept_in) == (STAGE, 2, ("b",))
        assert edit.chars == len(NOTICE) + len(FOOTER) + 2 and edit.removed == NOTICE + "\n" + FOOTER


def test_a_document_left_with_too_little_is_dropped_with_the_fraction_cut():
    config = ParagraphDedupConfig(enabled=True, max_removed_fraction=0.5)
    thin = page("thin", ["A short line of its own here."])
    full = page("full", ["A long paragraph of its own. " * 20])
    cut = ParagraphCut(config, {h: "other" for h in paragraph_hashes(NOTICE + "\n" + FOOTER, config)})
    dropped = cut(thin)
    assert isinstance(dropped, Drop) and (dropped.stage, dropped.reason) == (STAGE, TOO_MUCH_REPEATED)
    assert dropped.threshold == 0.5 and dropped.value == pytest.approx(1 - 29 / len(thin.text), abs=1e-3)
    assert isinstance(cut(full), Document)
    nothing_left = Document(id="x", url="u", source="web", text=NOTICE)
    assert isinstance(ParagraphCut(ParagraphDedupConfig(max_removed_fraction=1.0), cut.cuts)(nothing_left), Drop)


def test_cut_lines_take_their_blank_separators_with_them():
    lines = ["own one", "", "BOILER", "", "own two", "", "BOILER"]
    assert join_kept(lines, [line == "BOILER" for line in lines]) == "own one\n\nown two"
    assert join_kept(["BOILER", "", "own"], [True, False, False]) == "own"


def test_counting_gives_the_same_owner_and_sites_in_any_order():
    found = [occurrence(origin_rank("", {}, q, n, doc_id), part) for q, n, doc_id, part in [
        (0.5, 100, "d1", 0), (0.5, 300, "d2", 1), (0.9, 50, "d3", 1), (None, 900, "d4", 2), (0.9, 50, "d0", 3),
        (0.1, 10, "d5", 3), (0.1, 10, "d6", 4)]]
    results = {merge_owners(order) for order in itertools.permutations(found)}
    assert len(results) == 1
    (owner,) = results
    assert owner.owner_id == "d0" and owner.documents == 7 and owner.parts == frozenset(range(5))
    assert Owner.of(owner.plain()) == owner
    hosts = [f"site{i}.example" for i in range(9)]
    assert site_sample(hosts) == site_sample(reversed(hosts)) == site_sample(site_sample(hosts[:4]) + tuple(hosts[4:]))
    assert len(site_sample(hosts)) == 5


def test_the_stage_counts_what_it_cut_through_the_runner():
    counted = {}
    config = ParagraphDedupConfig(enabled=True, max_removed_fraction=1.0)
    docs = [page("a", ["Alpha's own long paragraph about tides and the moon, written for this page."]),
            page("b", ["Bravo's own long paragraph about bread, yeast and the oven, written here, longer."])]
    cut = ParagraphCut(config, {h: o.owner_id for h, o in cuts_in_memory(docs, config).items()})
    with StageRunner([cut], count=lambda name, n=1: counted.__setitem__(name, counted.get(name, 0) + n)) as runner:
        kept, drops = runner.run(docs)
    assert len(kept) == 2 and not drops
    assert counted[f"{STAGE}.note.documents_edited"] == 1 and counted[f"{STAGE}.note.paragraphs_removed"] == 2
    assert counted[f"{STAGE}.note.chars_seen"] == sum(len(d.text) for d in docs)


def test_settings_are_checked():
    for bad in ({"min_documents": 1}, {"min_chars": 0}, {"max_removed_fraction": 0.0}):
        with pytest.raises(ConfigError):
            ParagraphDedupConfig(**bad)


def test_span_mode_cuts_a_repeated_run_of_three_sentences_inside_a_paragraph():
    """C4's unit: a span of 3 sentences found in two documents stays in one; the sentences around it in the same
    paragraph stay, and sentences shared in shorter runs do not count."""
    config = ParagraphDedupConfig(enabled=True, unit="span", min_chars=10, max_removed_fraction=1.0)
    syndicated = "The council met on Monday. It approved the budget. The vote was close."
    a = Document(id="a", url="u", source="web", quality_score=0.9,
                 text=f"Local news from the north. {syndicated} More later today.\nA second paragraph of a's own.")
    b = Document(id="b", url="u", source="web", quality_score=0.1,
                 text=f"Our own opening sentence here. {syndicated}\nIt approved the budget. Something else entirely.")
    owners = cuts_in_memory([a, b], config)
    assert len(owners) == 1 and next(iter(owners.values())).owner_id == "a"
    cut = ParagraphCut(config, {h: o.owner_id for h, o in owners.items()})
    assert cut(a) is a
    edited = cut(b)
    assert edited.text == "Our own opening sentence here.\nIt approved the budget. Something else entirely."
    (edit,) = edited.edits
    assert edit.paragraphs == 3 and edit.removed.split("\n") == syndicated.replace(". ", ".\n").split("\n")
    assert paragraph_hashes("One. Two.", config) == []  # fewer sentences than a span: nothing to count
    cjk = ParagraphDedupConfig(enabled=True, unit="span", min_chars=1)
    assert len(paragraph_hashes("一句话。二句话。三句话！四句话。", cjk)) == 2  # sentences end at 。！？ too


def test_span_settings_are_checked():
    with pytest.raises(ConfigError):
        ParagraphDedupConfig(unit="sentence")
    with pytest.raises(ConfigError):
        ParagraphDedupConfig(unit="span", span_sentences=0)


def test_the_original_keeps_its_paragraphs_and_its_copies_lose_them():
    """A real news article (NTREX) and two copies the quality model might prefer: a syndicated copy whose page
    names the original as canonical, and a later repost. Evidence of origin decides; quality breaks ties only."""
    from stages.reference import ntrex_documents
    from tests.conftest import MULTILINGUAL_SAMPLE

    article = next(text for code, _, text in ntrex_documents(str(MULTILINGUAL_SAMPLE)) if code == "eng-GB")
    paragraphs = [line for line in article.splitlines() if len(line) > 60][:6]
    original = Document(id="z-original", url="https://news.example/story", source="web", quality_score=0.6,
                        text="\n".join(paragraphs), metadata={"warc_date": "2024-05-20T10:00:00Z",
                                                              "last_modified": "2019-03-01T08:00:00Z"})
    syndicated = Document(id="a-copy", url="https://portal.example/story-copy", source="web", quality_score=0.99,
                          text="\n".join(["A portal's own introduction to the story, written for its readers.",
                                           *paragraphs]),
                          metadata={"warc_date": "2024-05-01T10:00:00Z",
                                    "canonical_url": "https://www.news.example/story/"})
    repost = Document(id="b-repost", url="https://blog.example/p/1", source="web", quality_score=0.95,
                      text="\n".join(paragraphs[:3]), metadata={"warc_date": "2024-05-10T10:00:00Z"})
    config = ParagraphDedupConfig(enabled=True, max_removed_fraction=1.0)
    owners = cuts_in_memory([syndicated, repost, original], config)
    assert {o.owner_id for o in owners.values()} == {"z-original"}
    cut = ParagraphCut(config, {h: o.owner_id for h, o in owners.items()})
    assert cut(original).text == original.text
    assert cut(syndicated).text == "A portal's own introduction to the story, written for its readers."
    assert isinstance(cut(repost), Drop)  # nothing of its own left
    # with no dates and no canonical nothing says which is the original: a complete copy keeps the whole article
    # (stages.shared_text), never the repost that holds half of it, nor paragraph by paragraph
    plain = [d.replace(metadata={}) for d in (syndicated, repost, original)]
    assert {o.owner_id for o in cuts_in_memory(plain, config).values()} == {"a-copy"}
    excerpt = [d.replace(metadata={}, quality_score=0.99 if d is repost else 0.1) for d in (repost, original)]
    assert {o.owner_id for o in cuts_in_memory(excerpt, config).values()} == {"z-original"}


def test_evidence_of_origin_is_read_from_the_page():
    from stages.extraction.warc import read_warc
    from stages.origin import canonical_url, earliest_date, http_date, is_declared_copy
    from tests.conftest import HTML_DIR, WAYBACK

    html = (HTML_DIR / "salon.com.emissions.html").read_text(encoding="utf-8")
    assert canonical_url(html, "https://www.salon.com/x") == \
        "https://www.salon.com/2020/01/10/despite-everything-u-s-emissions-dipped-in-2019_partner/"
    assert canonical_url('<link href="/a/b" rel="canonical">', "https://x.example/c?d") == "https://x.example/a/b"
    assert canonical_url("<link rel=stylesheet href=s.css>" * 3, "https://x.example/") is None
    assert is_declared_copy("https://copy.example/1", "https://orig.example/1")
    assert not is_declared_copy("http://web.archive.org/web/20110102164421/http://www.orig.example:80/1",
                                "https://orig.example/1/")
    assert http_date("Wed, 21 Oct 2015 07:28:00 GMT") == "2015-10-21T07:28:00Z" and http_date("soon") is None
    with open(WAYBACK, "rb") as fh:  # a Wayback copy is as old as its capture, not as its fetch
        doc = next(d for d in read_warc(fh, source="web") if isinstance(d, Document))
    assert earliest_date(doc.url, doc.metadata) < "2013"


def test_a_document_that_keeps_a_paragraph_for_the_others_is_not_dropped_as_a_shred():
    """An original that also quotes two paragraphs of an earlier page loses more than half of its text to it, but
    its own paragraph was cut from its copy in its favour: dropping it would take that paragraph out of the
    corpus altogether."""
    own = "The original reporting of this page, which a later aggregator copied word for word into its post."
    quoted = ["A first paragraph this page quotes from an earlier source, at some length and in full.",
              "A second paragraph quoted from that earlier source, again at some length and in full here."]
    earlier = Document(id="earlier", url="https://source.example/a", source="web", text="\n".join(quoted),
                       metadata={"last_modified": "2018-01-01T00:00:00Z"})
    middle = Document(id="middle", url="https://news.example/b", source="web", text="\n".join([own, *quoted]),
                      metadata={"last_modified": "2019-01-01T00:00:00Z"})
    later = Document(id="later", url="https://aggregator.example/c", source="web",
                     text="\n".join(["An aggregator's own two lines about the story, written for its readers.",
                                      "A second line of its own, with what it thinks of the story and why.", own]),
                     metadata={"last_modified": "2020-01-01T00:00:00Z"})
    config = ParagraphDedupConfig(enabled=True)
    owners = {h: o.owner_id for h, o in cuts_in_memory([earlier, middle, later], config).items()}
    notes = []
    cut = ParagraphCut(config, owners)
    cut.count = lambda name, n=1: notes.append(name)
    kept = cut(middle)   # 2 of 3 paragraphs (about 65 % of its text) belong to the earlier page
    assert isinstance(kept, Document) and kept.text == own and "kept_as_owner" in notes
    assert cut(later).text.startswith("An aggregator's own")  # its copy of `own` is cut
    no_claim = ParagraphCut(config, {h: o for h, o in owners.items() if o != "middle"})
    assert isinstance(no_claim(middle), Drop)  # owning nothing, the same shred is dropped as before
