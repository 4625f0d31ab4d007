"""13-gram decontamination with real benchmark items pasted into real pages."""
import json

import pytest

from stages.decontam import (
    DecontamConfig,
    DecontaminationIndex,
    Decontaminator,
    normalize_words,
    read_benchmark,
    read_benchmarks,
)
from stages.record import Document, Drop, DropReason
from tests.conftest import HTML_DIR, TEST_DATA

BENCH = TEST_DATA / "benchmarks"


@pytest.fixture(scope="module")
def items():
    return read_benchmarks([str(BENCH / "gsm8k" / "test.jsonl"), str(BENCH / "nq_open" / "NQ-open.dev.jsonl"),
                            str(BENCH / "humaneval" / "HumanEval.jsonl.gz"), str(BENCH / "mmlu" / "test")])


@pytest.fixture(scope="module")
def index(items):
    return DecontaminationIndex(items)


@pytest.fixture(scope="module")
def page_text():
    from stages.extraction.extract import ExtractConfig, extract_text

    html = (HTML_DIR / "boingboing.net.millenials.html").read_text(encoding="utf-8")
    return extract_text(html, None, ExtractConfig().trafilatura_options())


def stage(index, **cfg):
    seen = []
    s = Decontaminator(index, DecontamConfig(**cfg))
    s.count = lambda name, n=1: seen.append(name)
    return s, seen


def paste(page, snippet):
    middle = len(page) // 2
    return page[:middle] + " " + snippet + " " + page[middle:]


def test_readers_know_the_common_layouts(items):
    by_benchmark = {}
    for item in items:
        by_benchmark.setdefault(item.benchmark, []).append(item)
    assert {b: len(v) for b, v in by_benchmark.items()} == {"gsm8k": 1319, "nq_open": 3610, "humaneval": 164,
                                                           "mmlu": 100 + 310 + 171}
    assert "#### " in by_benchmark["gsm8k"][0].text                      # question and answer both indexed
    assert by_benchmark["humaneval"][0].item_id == "HumanEval/0"
    mbpp = read_benchmark(str(BENCH / "mbpp" / "mbpp_first100.jsonl") + ":text")
    assert len(mbpp) == 100 and "def " not in mbpp[0].text               # field selection: prose only
    with pytest.raises(ValueError, match="none of the fields"):
        read_benchmark(str(BENCH / "gsm8k" / "test.jsonl") + ":nope")


def test_other_formats(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "set.json").write_text(json.dumps([{"prompt": "a b c d e f g h i"}]))
    pq.write_table(pa.table({"q": ["one two three four five six seven eight"]}), tmp_path / "set.parquet")
    (tmp_path / "set.txt").write_text("line one of the eval set here ok\n\nline two\n")
    assert read_benchmark(str(tmp_path / "set.json") + ":prompt")[0].text == "a b c d e f g h i"
    assert read_benchmark(str(tmp_path / "set.parquet") + ":q")[0].text.startswith("one two")
    assert len(read_benchmark(str(tmp_path / "set.txt"))) == 2


def test_pasted_gsm8k_problem_is_excised_and_the_page_kept(index, items, page_text):
    problem = next(i for i in items if i.benchmark == "gsm8k").text.split("\n")[0]
    doc = Document(id="p", url="u", source="web", text=paste(page_text, problem))
    s, seen = stage(index)
    out = s(doc)
    assert isinstance(out, Document)
    assert problem[:60] not in out.text and len(out.text) > len(page_text) * 0.6
    assert "contaminated_docs.gsm8k" in seen and "excised_docs" in seen
    (edit,) = out.edits  # the edit book: what was cut, and how much
    assert edit.stage == "decontaminate" and edit.paragraphs >= 1 and edit.chars == len(doc.text) - len(out.text)
    assert problem[:60] in edit.removed
    dropped = stage(index, policy="drop")[0](doc)
    assert isinstance(dropped, Drop) and dropped.reason is DropReason.CONTAMINATED and "gsm8k:" in dropped.detail
    assert s(Document(id="q", url="u", source="web", text=page_text)) .text == page_text  # clean page untouched


def test_twelve_words_do_not_match_thirteen_do(index, items, page_text):
    question = next(i for i in items if i.benchmark == "gsm8k" and len(normalize_words(i.text)) > 40).text
    words = question.split()
    s, _ = stage(index, policy="drop")
    twelve = Document(id="a", url="u", source="web", text=paste(page_text, " ".join(words[5:17])))
    thirteen = Document(id="b", url="u", source="web", text=paste(page_text, " ".join(words[5:18])))
    assert isinstance(s(twelve), Document)
    assert isinstance(s(thirteen), Drop)


def test_short_questions_match_whole_and_very_short_ones_are_skipped(index, items, page_text):
    short = next(i for i in items if i.benchmark == "nq_open" and len(normalize_words(i.text)) == 9)
    s, _ = stage(index, policy="drop")
    assert isinstance(s(Document(id="a", url="u", source="web", text=paste(page_text, short.text))), Drop)
    assert index.skipped["nq_open"] > 0  # < 8 words: too generic to call a match contamination


def test_many_matches_drop_the_document_and_short_fragments_go(index, items):
    problems = [i.text.split("\n")[0] for i in items if i.benchmark == "gsm8k"][:12]
    filler = "This paragraph is ordinary prose about gardening and the weather in spring. " * 6
    text = filler.join(problems)
    out = stage(index)[0](Document(id="m", url="u", source="web", text=text))
    assert isinstance(out, Drop) and "pieces" in out.detail


def test_gsm8k_train_barely_matches_the_test_index():
    test_index = DecontaminationIndex(read_benchmarks([str(BENCH / "gsm8k" / "test.jsonl")]))
    train = read_benchmarks([str(BENCH / "gsm8k" / "train_first1500.jsonl")])
    matching = [t for t in train if test_index.matches(t.text)]
    # a handful of train problems share a template sentence with a test problem; nothing more
    assert len(matching) <= len(train) * 0.01
    for t in matching:
        start, size, owner = test_index.matches(t.text)[0]
        shared = " ".join(normalize_words(t.text)[start:start + size])
        assert shared in " ".join(normalize_words(test_index.items[owner].text))


def test_index_is_compact(index):
    assert len(index) > 100_000
    assert index.nbytes() <= 12 * len(index)  # 8-byte hash + 4-byte owner per n-gram
