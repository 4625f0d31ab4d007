"""StageRunner: the one way stages run over documents (the job, plan, calibrate, scripts), without Beam."""
import collections

import pytest

from stages.extraction.extract import ExtractConfig, Extractor
from stages.langid import LanguageIdentifier
from stages.record import Document, Drop, RuleStage, StageEnvironmentError
from stages.runner import StageRunner, Step
from tests.conftest import SENTENCES_DIR

EN = " ".join((SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()[:12])


class Counting(RuleStage):
    """Counts what reaches it, and its setup/teardown calls."""

    name = "counting"

    def __init__(self):
        super().__init__(None)
        self.seen, self.calls = 0, []

    def setup(self):
        self.calls.append("setup")

    def teardown(self):
        self.calls.append("teardown")

    def evaluate(self, text, lang):
        self.seen += 1
        return None


def test_documents_pass_every_stage_and_the_first_drop_ends_their_way():
    html = f"<html><body><article><h1>River report</h1><p>{EN}</p></article></body></html>"
    pages = [Document(id="en", url="u", source="s", html=html),
             Document(id="empty", url="u", source="s", html="<html><body></body></html>"),
             Drop(id="bad", url="u", source="s", stage="warc", reason="read_error")]
    counting = Counting()
    with StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier(), counting]) as chain:
        results = [chain(page) for page in pages]
        assert [d.id for d in chain.kept(pages)] == ["en"]
    kept, empty, bad = results
    assert isinstance(kept, Document) and kept.lang == "en" and EN[:40] in kept.text
    assert isinstance(empty, Drop) and empty.stage == "extract" and bad is pages[2]  # a reader's Drop passes untouched
    assert counting.seen == 2 and counting.calls == ["setup", "teardown"]  # only documents that got that far
    assert set(chain.seconds) == {"extract", "langid", "counting"}


class NoDigits(RuleStage):
    name = "no_digits"

    def evaluate(self, text, lang):
        if "boom" in text:
            raise ValueError("boom")
        return ("has_digits", text[:10]) if any(c.isdigit() for c in text) else None


class Batched(NoDigits):
    """Like NoDigits, in batches (as the model stages); counts its batch calls."""

    name = "batched"

    def __init__(self):
        super().__init__(None)
        self.batches = []

    def process_batch(self, docs):
        self.batches.append(len(docs))
        return [self(doc) for doc in docs]


class Broken(RuleStage):
    name = "broken"

    def evaluate(self, text, lang):
        raise StageEnvironmentError("model missing")


def docs(*texts, source="web"):
    return [Document(id=f"d{i}", url=f"https://example.com/{i}", source=source, text=t) for i, t in enumerate(texts)]


def test_errors_become_drops_faults_are_injected_and_everything_is_counted():
    counts = collections.Counter()
    runner = StageRunner([Step(NoDigits(None), fail_urls=("example.com/3",))], count=lambda k, n=1: counts.update({k: n}))
    kept, drops = runner.run(docs("plain words", "year 2024", "boom", "fine"))
    assert [d.id for d in kept] == ["d0"]
    assert [(d.id, d.label) for d in drops] == [("d1", "has_digits"), ("d2", "error:ValueError"), ("d3", "error:ValueError")]
    assert counts["no_digits.in"] == 4 and counts["no_digits.kept"] == 1 and counts["no_digits.kept_tokens"] == 3
    assert counts["no_digits.drop.has_digits"] == 1 and counts["no_digits.drop.error:ValueError"] == 2
    with pytest.raises(StageEnvironmentError):  # a missing model fails the job with its cause, not a ledger full of errors
        StageRunner([Broken(None)]).run(docs("x"))


def test_batched_stages_get_the_chunk_and_a_failing_batch_is_retried_one_by_one():
    stage = Batched()
    kept, drops = StageRunner([stage]).run(docs("a", "b 1", "c"))
    assert stage.batches == [3] and [d.id for d in kept] == ["d0", "d2"] and [d.id for d in drops] == ["d1"]
    kept, drops = StageRunner([stage]).run(docs("a", "boom", "c"))  # process_batch raises: each alone
    assert [d.id for d in kept] == ["d0", "d2"] and drops[0].label == "error:ValueError"


def test_a_stage_for_some_sources_passes_the_others_by_and_extraction_sees_only_html():
    counts = collections.Counter()
    runner = StageRunner([Step(NoDigits(None), sources=frozenset({"books"}), html_only=True)],
                         count=lambda k, n=1: counts.update({k: n}))
    web, books = docs("web 1", "text 2"), docs("books 3", source="books")
    kept, drops = runner.run([*web, *books], from_html=[True, False, True])
    assert [d.text for d in kept] == ["web 1", "text 2"] and [d.id for d in drops] == ["d0"] and drops[0].source == "books"
    assert counts["no_digits.in"] == 2  # the text record did not enter: it has no HTML to extract
    assert counts["no_digits.note.not_for_source.web"] == 1


def test_chunks_are_bounded_by_count_and_characters_and_handed_on_when_full():
    from stages.runner import CHUNK, CHUNK_CHARS, chunks

    read = []

    def items(sizes):
        for i, size in enumerate(sizes):
            read.append(i)
            yield size

    by_count = list(chunks(items([1] * (2 * CHUNK + 3)), int))
    assert [len(c) for c in by_count] == [CHUNK, CHUNK, 3]
    by_chars = list(chunks(items([CHUNK_CHARS // 2, CHUNK_CHARS // 2, 1, CHUNK_CHARS, 5]), int))
    assert by_chars == [[CHUNK_CHARS // 2, CHUNK_CHARS // 2], [1, CHUNK_CHARS], [5]]
    read.clear()
    first = next(chunks(items([CHUNK_CHARS, 1, 1]), int))
    assert first == [CHUNK_CHARS] and read == [0]  # the next item is not read before the full chunk is run
    assert list(chunks(items([]), int)) == []


class Endless(RuleStage):
    """A stage that never returns on one kind of text, and swallows every Exception on the way (as careless
    plugin code does): the time limit still ends it."""

    name = "endless"

    def evaluate(self, text, lang):
        while "loop" in text:
            try:
                sum(range(1000))
            except Exception:
                pass
        return None


def test_a_stage_past_its_time_limit_ledgers_the_document_and_the_run_goes_on():
    import time

    counts = collections.Counter()
    runner = StageRunner([Step(Endless(None), timeout_s=0.3)], count=lambda k, n=1: counts.update({k: n}))
    started = time.monotonic()
    kept, drops = runner.run(docs("fine", "loop forever", "also fine"))
    assert time.monotonic() - started < 5
    assert [d.id for d in kept] == ["d0", "d2"]
    assert [(d.id, d.stage, d.label) for d in drops] == [("d1", "endless", "error:StageTimeout")]
    assert "endless took more than 0.3 s" in drops[0].detail
    assert counts["endless.note.timeout"] == 1 and counts["endless.drop.error:StageTimeout"] == 1
    kept, drops = runner.run(docs("fine again"))  # nothing left over from the raise: the next call is unharmed
    assert len(kept) == 1 and not drops


def test_a_stage_stuck_inside_one_c_call_ends_the_process_in_one_line(tmp_path):
    """time.sleep is one C call: the raise waits for it, so after 3x the limit the process ends, naming the
    stage and the document, instead of hanging."""
    import subprocess
    import sys

    from tests.conftest import REPO

    script = tmp_path / "stuck.py"
    script.write_text(
        "import time\n"
        "from stages.record import Document, RuleStage\n"
        "from stages.runner import StageRunner, Step\n"
        "class Stuck(RuleStage):\n"
        "    name = 'stuck'\n"
        "    def evaluate(self, text, lang):\n"
        "        time.sleep(60)\n"
        "StageRunner([Step(Stuck(None), timeout_s=0.2)]).run([Document(id='d7', url='http://h/p', source='web', "
        "text='x')])\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=30,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "stage stuck did not return in 0.6 s on document d7 (http://h/p)" in done.stderr
