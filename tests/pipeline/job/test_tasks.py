"""The job's three tasks called directly, as a scheduler other than Beam would call them (a loop over the input
files, then over the parts): PrepareFile, FinishPart and WritePart on real WARC files, against the Beam job."""
import shutil

import pyarrow.parquet as pq
import pytest

from pipeline.counters import capture_counts
from pipeline.job.finish import EDITS, LEDGER, LEDGER_ROWS, SIGNATURE_FILES, STATS, Collected, drain
from pipeline.job.inputs import input_files, input_root
from pipeline.job.parts import file_part_key, finished_path, part_paths, read_rows
from pipeline.job.run import build_parser, config_from_args, run
from pipeline.job.signed import Decision
from pipeline.job.steps import make_steps, phase1_task, phase2_tasks
from stages.runner import Step
from tests.conftest import WARC_DIR

FILES = ("dolma_sample-0000.warc.gz", "jwarc_cc.warc.gz", "resiliparse_clipped.warc.gz")


def config_for(args):
    return config_from_args(build_parser().parse_known_args(args)[0])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tasks") / "in"
    folder.mkdir()
    for name in FILES:
        shutil.copy(WARC_DIR / name, folder / name)
    return folder


def prepared(config):
    """Phase 1 as a loop: (files, root, [PreparedPart])."""
    files = input_files(config)
    root = input_root([f.path for f in files])
    task, _ = phase1_task(config, root)
    task.setup()
    try:
        return files, root, [task.run(f) for f in files]
    finally:
        task.teardown()


def test_the_tasks_in_a_loop_write_the_jobs_shards(inputs, tmp_path):
    """Without global stages over signatures (dedup off), phase 1 and phase 2 as two plain loops write the shards
    the Beam job writes, byte for byte, and every record read is in a shard or a ledger row."""
    args = ["--input", str(inputs / "*.warc.gz"), "--no-dedup", "--quiet", "--holdout-fraction", "0.2"]
    job = run(args + ["--output", str(tmp_path / "job")])
    config = config_for(args + ["--output", str(tmp_path / "tasks")])
    files, root, parts = prepared(config)
    assert [p.reused for p in parts] == [False] * len(FILES)
    steps = make_steps(config, phase=2)
    assert all(isinstance(step, Step) for _, step in steps), "a transform over signatures: not for this loop"
    tasks = phase2_tasks(config, steps, {file_part_key(f, root): i for i, f in enumerate(files)}, deduplicated=False)
    outputs = Collected()
    for task in (tasks.finish, tasks.write):
        task.setup()
    try:
        finished = [drain(tasks.finish.run(p.key, decided=[]), outputs) for p in parts]
        written = [drain(tasks.write.run(p.key), outputs) for p in parts]
    finally:
        for task in (tasks.finish, tasks.write):
            task.teardown()
    assert [f.documents for f in finished] == [sum(1 for _ in read_rows(finished_path(config.output, p.key)))
                                               for p in parts]
    shard_rows, held_out = sum(w.rows for w in written), sum(w.held_out for w in written)
    assert (shard_rows, held_out) == (job["conservation"]["kept"], job["conservation"]["held_out"])
    assert shard_rows > 0 and not any(w.anneal_rows for w in written)
    read = sum(p.records for p in parts)
    assert read == job["conservation"]["read"]
    # conservation, from the tasks alone
    assert read == shard_rows + held_out + len(outputs[LEDGER_ROWS]) + len(outputs[LEDGER])
    assert held_out > 0  # the loop wrote the validation split too
    ours = sorted(p.relative_to(tmp_path / "tasks") for p in (tmp_path / "tasks").rglob("*.parquet")
                  if p.parent.name == "data")
    assert len(outputs[STATS]) + len(outputs["valid"]) == len(ours) and len(outputs[SIGNATURE_FILES]) == len(parts)
    theirs = sorted(p.relative_to(tmp_path / "job") for p in (tmp_path / "job").rglob("*.parquet")
                    if p.parent.name == "data")
    assert ours == theirs and ours
    for rel in ours:
        assert (tmp_path / "tasks" / rel).read_bytes() == (tmp_path / "job" / rel).read_bytes(), rel
    assert not outputs[EDITS]  # no stage that cuts text ran


def test_a_committed_part_is_reused_with_its_counts_and_a_damaged_one_is_written_again(inputs, tmp_path):
    config = config_for(["--input", str(inputs / "jwarc_cc.warc.gz"), "--output", str(tmp_path / "o")])
    with capture_counts() as first_counts:
        _, _, (first,) = prepared(config)
    with capture_counts() as again_counts:
        _, _, (again,) = prepared(config)
    assert not first.reused and again.reused
    assert (again.key, again.records, again.documents, again.ledger_rows) == (first.key, first.records,
                                                                               first.documents, first.ledger_rows)
    assert again_counts == first_counts and first.records == first.documents + first.ledger_rows > 0
    docs = part_paths(config.output, first.key)["docs.parquet"]
    with open(docs, "ab") as fh:
        fh.write(b"\0")  # the part no longer has the SHA-256 its marker committed
    _, _, (redone,) = prepared(config)
    assert not redone.reused and redone.documents == first.documents
    assert pq.read_table(docs).num_rows == first.documents


def test_finish_part_ledgers_dedups_decision_with_the_documents_fields(inputs, tmp_path):
    config = config_for(["--input", str(inputs / "dolma_sample-0000.warc.gz"), "--output", str(tmp_path / "o"),
                         "--no-dedup"])
    files, root, (part,) = prepared(config)
    ids = [row["id"] for row in read_rows(part_paths(config.output, part.key)["docs.parquet"], ["id"])]
    assert len(ids) >= 2
    tasks = phase2_tasks(config, make_steps(config, phase=2), {part.key: 0}, deduplicated=True)
    outputs = Collected()
    tasks.finish.setup()
    try:
        finished = drain(tasks.finish.run(part.key, [Decision(ids[0], part.key, "exact_dedup", "exact_duplicate",
                                                              "same text", kept_id=ids[1])], sizes={ids[1]: 2}),
                         outputs)
    finally:
        tasks.finish.teardown()
    drop = next(d for d in outputs[LEDGER] if d.id == ids[0])
    assert (drop.stage, drop.reason, drop.kept_id) == ("exact_dedup", "exact_duplicate", ids[1])
    assert drop.url and drop.lang  # ledgered with what the part knows of the document
    assert len(outputs[LEDGER_ROWS]) == part.ledger_rows
    assert finished.documents + finished.dropped == part.documents
    kept = {row["id"]: row for row in read_rows(finished_path(config.output, part.key), ["id", "cluster_size"])}
    assert ids[0] not in kept and kept[ids[1]]["cluster_size"] == 2
