"""The stage table is the one place a stage is declared: a new filter is one file in `stages/`,
and the job, the funnel, the ledger, the flags, the default config and the README follow."""
import ast
import importlib
import json
import os
import pathlib
import pkgutil
import shutil
import subprocess
import sys

import pyarrow.parquet as pq

from pipeline.commands import docs
from stages.table import specs_in
from tests.conftest import REPO

TOY_STAGE = '''"""A toy filter (added by tests/stages/test_table.py): drops pages shorter than `min_chars`."""
from dataclasses import dataclass
from typing import Optional, Tuple

from stages.record import RuleStage
from common.settings import check
from stages.table import StageSpec


@dataclass(frozen=True)
class ShortPagesConfig:
    """Short pages: a toy stage."""

    enabled: bool = True
    min_chars: int = 500          # pages with fewer characters are dropped

    def __post_init__(self):
        check(self.min_chars >= 0, "min_chars must be >= 0")


class ShortPages(RuleStage):
    name = "short_pages"

    def evaluate(self, text: str, lang: Optional[str]) -> Optional[Tuple[str, str]]:
        if len(text) < self.config.min_chars:
            return "too_short", f"{len(text)} < {self.config.min_chars} characters"
        return None


SPEC = StageSpec(name="short_pages", order=65, config=ShortPagesConfig, build=ShortPages,
                 about="drops pages under min_chars", reasons={"too_short": "fewer than `min_chars` characters"})
'''

SCORE_STAGE = '''"""A toy score (added by tests/stages/test_table.py): the share of a page's characters that are letters."""
from dataclasses import dataclass

from stages.record import Document, Stage
from stages.table import StageSpec


@dataclass(frozen=True)
class LetterShareConfig:
    """Letter share: a toy score column."""

    enabled: bool = True


class LetterShare(Stage):
    name = "letter_share"

    def __init__(self, config):
        self.config = config

    def __call__(self, doc: Document) -> Document:
        return doc.with_score("letter_share", sum(c.isalpha() for c in doc.text) / max(len(doc.text), 1))


SPEC = StageSpec(name="letter_share", order=66, config=LetterShareConfig, build=LetterShare,
                 about="scores the share of letters", reasons={})
'''
GLOBAL_STAGE = '''"""A toy global stage (added by tests/stages/test_table.py): at most `max_documents` of one input file, the best."""
from dataclasses import dataclass

from stages.grouped import GroupDrop, best_first
from stages.table import GLOBAL, StageSpec


@dataclass(frozen=True)
class CapPerFileConfig:
    """Cap per file: a toy global stage."""

    enabled: bool = True
    max_documents: int = 1000     # documents one input file may give the output


class CapPerFile:
    def __init__(self, config):
        self.config = config

    def group(self, record):
        return record.part

    def decide(self, group, records):
        for record in best_first(records)[self.config.max_documents:]:
            yield GroupDrop(record.id, "over_cap", f"{len(records)} documents in its file")


SPEC = StageSpec(name="cap_per_file", order=85, runs=GLOBAL, config=CapPerFileConfig, build=CapPerFile,
                 about="keeps the best max_documents of each file", reasons={"over_cap": "its file gave enough"})
'''
FORMAT_MODULE = '''"""A toy input format (added by tests/stages/test_table.py): a `#tsv` line, then URL<TAB>text lines."""
from stages.record import Document, stable_id
from stages.table import InputFormat


def sniff(path, head, inner):
    return 2 if inner.startswith(b"#tsv\\n") else 0


def read(stream, *, source, filename, gzipped, settings, count):
    for n, line in enumerate(stream.read().decode("utf-8").splitlines()[1:]):
        url, _, text = line.partition("\\t")
        yield Document(id=stable_id("tsv", source, filename, str(n)), url=url, source=source, text=text)


FORMATS = (InputFormat(name="tsv", stage="read_text", html=False, sniff=sniff, read=read),)
'''
SCORE_COLUMN = '    score_column("letter_share"),  # added by tests/stages/test_table.py\n'
EDIT_STAGE = '''"""A toy global stage that edits parts (added by tests/stages/test_table.py): a first line that several
documents open with stays in one of them (the smallest id) and is cut from the others."""
from dataclasses import dataclass

from stages.record import Document, Stage
from stages.table import GLOBAL, StageSpec


@dataclass(frozen=True)
class SharedFirstLineConfig:
    """Shared first lines: a toy global stage that edits parts."""

    enabled: bool = True
    min_documents: int = 2        # documents that open with the same line before it is cut


class FirstLineCut(Stage):
    name = "shared_first_line"

    def __init__(self, config):
        self.config, self.owners = config, {}  # line -> the id that keeps it (the job sets it per part)

    def __call__(self, doc: Document) -> Document:
        first, _, rest = doc.text.partition("\\n")
        owner = self.owners.get(first)
        return doc if owner is None or owner == doc.id else doc.replace(text=rest)


SPEC = StageSpec(name="shared_first_line", order=96, runs=GLOBAL, config=SharedFirstLineConfig,
                 job="pipeline.job.globals.shared_first_line:SharedFirstLineStage",
                 about="a first line many documents share stays in one", reasons={})
'''
EDIT_JOB = '''"""The job's side of stages/shared_first_line.py (added by tests/stages/test_table.py)."""
import apache_beam as beam

from pipeline.job.globals.base import PartEditing
from pipeline.job.part_hooks import PartEdit, PartHook
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.schema import part_value
from stages.runner import Step
from stages.shared_first_line import FirstLineCut


class FirstLines(beam.DoFn):
    def __init__(self, output):
        self._output = output

    def process(self, element):
        key, decided = element
        dropped = {d.id for d in decided}
        for row in read_rows(part_paths(self._output, key)["docs.parquet"], ["id", "text"]):
            if row["id"] not in dropped:
                yield part_value(row, "text").partition("\\n")[0], (1, row["id"])


class Owners(PartHook):
    def __init__(self, cut):
        self._cut = cut

    def begin(self, inputs):
        self._cut.owners = dict(inputs[1] or {})


class SharedFirstLine(PartEdit):
    name = "shared_first_line"

    def __init__(self, config):
        self._config, self.step = config, Step(FirstLineCut(config.shared_first_line))

    def hook(self):
        return Owners(self.step.stage)

    def counts(self, decided_by_part, file_index):
        least = self._config.shared_first_line.min_documents
        owners = (decided_by_part
                  | "FirstLines" >> beam.ParDo(FirstLines(self._config.output))
                  | "CountLines" >> beam.CombinePerKey(lambda found: (sum(n for n, _ in found), min(i for _, i in found)))
                  | "Shared" >> beam.Filter(lambda kv: kv[1][0] >= least)
                  | "Owner" >> beam.Map(lambda kv: (kv[0], kv[1][1]))
                  | "Owners" >> beam.combiners.ToDict())
        return decided_by_part.pipeline | "NoPerPart" >> beam.Create([]), owners


class SharedFirstLineStage(PartEditing):
    edit = SharedFirstLine
'''


def test_derived_files_are_up_to_date():
    """configs/default.yaml and the README's tables are generated: `python -m pipeline.commands.docs --write`."""
    assert docs.main(["--check"]) == 0


def test_every_reason_a_stage_module_uses_is_declared_by_its_spec():
    import stages

    for info in pkgutil.walk_packages(stages.__path__, prefix="stages."):
        module = importlib.import_module(info.name)
        specs = specs_in(module)
        if not specs:
            continue
        declared = set().union(*(spec.reasons for spec in specs))
        tree = ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))
        used = {node.attr.lower() for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name) and node.value.id == "DropReason"}
        assert used <= declared, (info.name, used - declared)


def test_a_new_filter_is_one_file(tmp_path):
    """Copy the code, add one stage module, and nothing else: it runs in the job at its place, is in
    the funnel and the ledger, has flags in --help, and a section in the generated default config and
    README tables. A stage that writes a score of its own is its file and one line of pipeline/job/schema.py:
    the score then crosses both phases of the job and is a column of the shards. A global stage that decides
    within groups of documents (stages/grouped.py) is one file too."""
    tree = tmp_path / "tree"
    for part in ("common", "stages", "pipeline", "configs"):
        shutil.copytree(REPO / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "docs").mkdir()
    shutil.copy(REPO / "docs" / "stages.md", tree / "docs" / "stages.md")
    (tree / "stages" / "short_pages.py").write_text(TOY_STAGE, encoding="utf-8")
    (tree / "stages" / "letter_share.py").write_text(SCORE_STAGE, encoding="utf-8")
    (tree / "stages" / "cap_per_file.py").write_text(GLOBAL_STAGE, encoding="utf-8")
    (tree / "stages" / "tsv_source.py").write_text(FORMAT_MODULE, encoding="utf-8")
    tsv = tmp_path / "pages.data"  # a name no reader knows: its first line decides
    tsv.write_text("#tsv\n" + "".join(f"https://tsv.example/{i}\tA short line {i}.\n" for i in range(3)),
                   encoding="utf-8")
    schema = (tree / "pipeline" / "job" / "schema.py").read_text(encoding="utf-8")
    anchor = "    Column(\"epoch\""
    assert schema.count(anchor) == 1
    (tree / "pipeline" / "job" / "schema.py").write_text(schema.replace(anchor, SCORE_COLUMN + anchor), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(tree))

    def python(*args):
        result = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    python("-m", "pipeline.commands.docs", "--write")
    default_yaml = (tree / "configs" / "default.yaml").read_text(encoding="utf-8")
    assert "short_pages:\n  enabled: true\n  min_chars: 500" in default_yaml
    readme = (tree / "docs" / "stages.md").read_text(encoding="utf-8")
    assert "| short_pages | document | `short_pages` | yes | drops pages under min_chars |" in readme
    assert "| short_pages | `too_short` | fewer than `min_chars` characters |" in readme

    help_text = python("-m", "pipeline.cli", "run", "--help")
    assert "--short-pages-min-chars" in help_text and "pages with fewer characters are dropped (default: 500)" in help_text

    out = tmp_path / "out"
    python("-m", "pipeline.cli", "run", "--input", str(REPO / "data" / "warc" / "dolma_sample-0000.warc.gz"),
           "--source", f"notes={tsv}", "--output", str(out), "--short-pages-min-chars", "3000", "--cap-per-file-max-documents", "2", "--quiet")
    report = json.loads((out / "report.json").read_text())
    names = [row["stage"] for row in report["funnel"]]
    assert names.index("gopher_quality") < names.index("short_pages") < names.index("quality")  # its order, 65
    dropped = next(row for row in report["funnel"] if row["stage"] == "short_pages")["dropped"]
    ledger = pq.read_table(out / "ledger").to_pylist()
    short = [row for row in ledger if row["stage"] == "short_pages"]
    assert dropped == len(short) > 0 and {row["reason"] for row in short} == {"too_short"}
    assert names.index("exact_dedup") < names.index("cap_per_file") < names.index("near_dedup")  # its order, 85
    capped = next(row for row in report["funnel"] if row["stage"] == "cap_per_file")
    over = [row for row in ledger if row["stage"] == "cap_per_file"]
    assert capped["in"] > 2 and capped["kept"] == 2 and capped["dropped"] == len(over) == capped["in"] - 2
    assert {row["reason"] for row in over} == {"over_cap"} and all(row["url"] for row in over)
    # the toy format's 3 records were read as text (a new input format is one file too)
    assert next(row for row in report["funnel"] if row["stage"] == "read_text")["in"] == 3
    assert {row["url"] for row in ledger if row["url"].startswith("https://tsv.example/")} == {
        f"https://tsv.example/{i}" for i in range(3)}  # too short for the recipe: each a ledger row
    assert report["conservation"]["holds"] is True and (out / "manifest.json").exists()
    shards = pq.read_table(out / "data")
    kept_text = shards.column("text").to_pylist()
    assert kept_text and min(len(t) for t in kept_text) >= 2900  # only PII placeholders change text after it
    assert shards.schema.field("letter_share").type == "float"
    shares = shards.column("letter_share").to_pylist()
    assert all(abs(share - sum(c.isalpha() for c in text) / len(text)) < 0.05  # PII placeholders come later
               for share, text in zip(shares, kept_text))


def test_a_global_stage_that_edits_parts_is_its_two_files(tmp_path):
    """A global stage that edits the documents it keeps, as paragraph dedup does, is its stage file (its spec names its
    `job`) and its job module in pipeline/job/globals/ (a GlobalStage whose `part_edit` is a PartEdit,
    pipeline/job/part_hooks.py: what it counts over all parts, its step and part hook in FinishPart): the graph, the
    tasks and their Beam adapters name no stage."""
    from tests.reliability.hostile import no_filters_config, prose, write_jsonl

    tree = tmp_path / "tree"
    for part in ("common", "stages", "pipeline", "configs"):
        shutil.copytree(REPO / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "stages" / "shared_first_line.py").write_text(EDIT_STAGE, encoding="utf-8")
    (tree / "pipeline" / "job" / "globals" / "shared_first_line.py").write_text(EDIT_JOB, encoding="utf-8")
    header = "Subscribe to our newsletter for the stories of the week."
    notes = write_jsonl(tmp_path / "notes.jsonl", [{"text": f"{header}\n{prose(i, 8)}"} for i in range(4)]
                        + [{"text": prose(9, 8)}])
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--input", str(notes), "--output", str(out),
                             "--config", str(no_filters_config(tmp_path / "config.yaml")), "--quiet"],
                            cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    names = [row["stage"] for row in report["funnel"]]
    assert names.index("near_dedup") < names.index("shared_first_line")  # its order, 96
    assert next(row for row in report["funnel"] if row["stage"] == "shared_first_line")["in"] == 5
    texts = pq.read_table(out / "data").column("text").to_pylist()
    assert len(texts) == 5 and sum(text.startswith(header + "\n") for text in texts) == 1
    assert sum(header in text for text in texts) == 1  # cut from the other three, kept in one
    assert report["conservation"]["holds"] is True
