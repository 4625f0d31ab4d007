"""StageChain: the stages of the job on single documents, without Beam (scripts, benches)."""
from stages.chain import StageChain
from stages.extraction.extract import ExtractConfig, Extractor
from stages.langid import LanguageIdentifier
from stages.record import Document, Drop, RuleStage
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
    with StageChain([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier(), counting], timed=True) as chain:
        results = [chain(page) for page in pages]
        assert [d.id for d in chain.kept(pages)] == ["en"]
    kept, empty, bad = results
    assert isinstance(kept, Document) and kept.lang == "en" and EN[:40] in kept.text
    assert isinstance(empty, Drop) and empty.stage == "extract" and bad is pages[2]  # a reader's Drop passes untouched
    assert counting.seen == 2 and counting.calls == ["setup", "teardown"]  # only documents that got that far
    assert set(chain.seconds) == {"extract", "langid", "counting"}
