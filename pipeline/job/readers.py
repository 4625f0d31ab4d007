"""Reading an input file: its format is sniffed from its first bytes, then its records come from that
format's reader (the readers' table: each reader module declares `FORMATS`, stages/table.py `InputFormat`),
each with whether it was read as HTML; what cannot be read is one ledger row for the file. Plain Python: phase 1's task, Slurm's array tasks, `refinery plan`
and Beam's ReadSource (for `refinery calibrate`) call it alike."""
from __future__ import annotations

import functools
import time
from collections.abc import Iterator

from pipeline.counters import BYTES_READ, count, count_result, entered, note, of_reader, source_records
from pipeline.job.inputs import local_file_problem
from pipeline.storage import open_raw
from stages.extraction.warc import WarcConfig
from stages.formats import SNIFF_BYTES, ReadSettings, format_names, input_format, is_gzip
from stages.formats import SPEC as READ_SPEC
from stages.record import Document, Drop, DropReason, StageResult, stable_id
from stages.textsource import TextSourceConfig

READ_STAGE = READ_SPEC.name  # files that are no known format, or cannot be opened


class FileReader:
    """One input file in, its records out, each with whether it was read as HTML: WARC pages (HTML still
    to extract), JSONL/Parquet text records, and Drops for what cannot be read.

    The reader is chosen per file from its first bytes (stages/formats.py), so one glob may hold
    several formats; a file of none is one `read` ledger row. Readers undo gzip themselves.
    Files are named by their path below `root` (the inputs' common folder): ids, metadata and the
    ledger then do not depend on where the input tree lies (a laptop, a bucket, a CI clone).
    """

    def __init__(self, source: str, warc_config: WarcConfig, text_config: TextSourceConfig, max_payload_bytes: int,
                 root: str = "", sample_fraction: float = 1.0):
        self._source, self._settings = source, ReadSettings(warc_config, text_config, max_payload_bytes)
        self._root, self._sample_fraction = root, sample_fraction
        self.unsampled_cpu_s = 0.0  # process time spent reading records outside the sample (`refinery plan`)

    def read(self, full_path: str, size: int, cap: int | None = None) -> Iterator[tuple[StageResult, bool]]:
        """(record, read as HTML?) of the file at `full_path` (`size` bytes); with `cap`, at most that many
        (--limit), the rest unread."""
        path = full_path[len(self._root):] if self._root and full_path.startswith(self._root) else full_path
        problem = local_file_problem(full_path)
        if problem == "a folder":
            count(note(READ_STAGE, "directories_skipped"))  # `dir/*` also matches sub-folders
            return
        if problem:  # opening a FIFO blocks forever; a device never ends
            yield from self._file_error(path, problem)
            return
        try:
            with open_raw(full_path) as stream:
                head = stream.read(SNIFF_BYTES)
        except IsADirectoryError:
            count(note(READ_STAGE, "directories_skipped"))  # `dir/*` also matches sub-folders
            return
        except Exception as exc:  # unreadable (permissions, vanished): one row for the file
            yield from self._file_error(path, f"cannot open: {type(exc).__name__}: {exc}")
            return
        if not head:  # nothing to read: one row, so a source of empty files says why it yielded nothing
            yield from self._file_error(path, "empty file (0 bytes)")
            return
        fmt = input_format(path, head)
        if fmt is None:
            yield from self._file_error(path, f"not a {format_names()} file")
            return
        stage = fmt.stage
        reader_count = functools.partial(self._count_note, stage)
        with open_raw(full_path) as stream:
            records = fmt.read(stream, source=self._source, filename=path, gzipped=is_gzip(head),
                               settings=self._settings, count=reader_count)
            position, taken, clock = 0, 0, time.process_time()
            for result in records:
                if self._sample_fraction < 1 and not in_sample(result.id, self._sample_fraction):
                    count(note(stage, "not_sampled"))  # --sample-fraction: not part of this run
                    now = time.process_time()
                    self.unsampled_cpu_s += now - clock
                    clock = now
                    continue
                if cap is not None and taken >= cap:
                    count(note(stage, "limit_reached"))  # --limit: the rest of the input is not read
                    return
                taken += 1
                count(entered(stage))
                position = self._count_bytes(stream, position)
                if not (isinstance(result, Drop) and result.reason == DropReason.READ_ERROR):
                    count(source_records(self._source))
                count_result(stage, result)
                yield result, fmt.html
                if self._sample_fraction < 1:  # only a sample's reading is timed
                    clock = time.process_time()

        count(BYTES_READ, max(size - position, 0))  # the file's tail

    @staticmethod
    def _count_bytes(stream, position: int) -> int:
        """Input bytes consumed so far (progress, its ETA); streams that cannot tell are counted at the end."""
        try:
            now = stream.tell()
        except (OSError, AttributeError, ValueError):
            return position
        if now > position:
            count(BYTES_READ, now - position)
            return now
        return position

    def _file_error(self, path: str, detail: str):
        count(entered(READ_STAGE))
        doc = Document(id=stable_id(READ_STAGE, self._source, path), url="", source=self._source)
        drop = doc.drop(READ_STAGE, DropReason.READ_ERROR, f"{path}: {detail}"[:500])
        count_result(READ_STAGE, drop)
        yield drop, False

    @staticmethod
    def _count_note(stage: str, name: str) -> None:
        count(of_reader(stage, name))  # the reader's own names: warc.record.<type>, <stage>.note.<name>


def in_sample(doc_id: str, fraction: float) -> bool:
    """Is this record in a --sample-fraction sample? Decided by its id: the same records on every rerun."""
    return int(doc_id[-8:], 16) < fraction * 0x100000000 if len(doc_id) >= 8 else True
