"""Parquet text sources: every row read once, in order; oversized texts and row groups ledgered from Arrow
lengths and page headers, never decoded whole (real files written by pyarrow, several writer settings)."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stages.formats import PARQUET
from stages.parquet_pages import DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE, chunk_range, column_pages
from stages.record import Document, Drop, DropReason
from stages.textsource import TextSourceConfig, document_id, read_text_records


def read(path, **config):
    with open(path, "rb") as fh:
        return list(read_text_records(fh, source="s", filename="f", fmt=PARQUET, config=TextSourceConfig(**config)))


@pytest.mark.parametrize("version, stats", [("1.0", True), ("2.6", False)])
def test_page_headers_are_read_as_pyarrow_wrote_them(tmp_path, version, stats):
    path = tmp_path / "t.parquet"
    texts = [f"document {i} " * (i % 50 + 1) for i in range(5000)]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=2000, data_page_size=20_000,
                   data_page_version="2.0" if version == "2.6" else "1.0", write_statistics=stats, version=version)
    meta = pq.ParquetFile(path).metadata
    with open(path, "rb") as fh:
        groups = [column_pages(fh, *chunk_range(meta.row_group(g).column(0))) for g in range(meta.num_row_groups)]
    data_kind = DATA_PAGE_V2 if version == "2.6" else DATA_PAGE
    for g, pages in enumerate(groups):
        assert pages[0].kind == DICTIONARY_PAGE and {p.kind for p in pages[1:]} == {data_kind}
        assert sum(p.values for p in pages[1:]) == meta.row_group(g).num_rows
        assert sum(p.compressed for p in pages) <= meta.row_group(g).column(0).total_compressed_size
    rows = read(path)
    assert [r.text for r in rows] == texts


def test_texts_over_the_cap_are_found_from_arrow_lengths_dictionary_or_not(tmp_path):
    path = tmp_path / "d.parquet"
    text = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 1], pa.int32()), pa.array(["y" * 2000, "short text"]))
    pq.write_table(pa.table({"id": pa.array(range(4)), "text": text}), path)
    results = read(path, max_record_bytes=1000)
    assert [type(r) for r in results] == [Drop, Document, Drop, Document]
    assert results[0].reason is DropReason.TOO_LARGE and results[0].detail == "f row 1: 2000 bytes > 1000"
    assert [r.record_id for r in results if isinstance(r, Document)] == ["1", "3"]
    assert len({r.id for r in results}) == 4


def test_a_row_group_with_a_page_over_the_cap_is_ledgered_unread_and_the_next_one_is_read(tmp_path):
    path = tmp_path / "p.parquet"
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())]), use_dictionary=False) as writer:
        writer.write_table(pa.table({"text": ["z" * 60_000] * 3}))  # one group, one page of 180 KB
        writer.write_table(pa.table({"text": ["a small document", "another one"]}))
    results = read(path, max_parquet_page_bytes=100_000)
    assert [r.reason for r in results[:3]] == [DropReason.TOO_LARGE] * 3
    assert "row group 0 holds a page of" in results[0].detail and "(not decoded)" in results[0].detail
    assert [r.text for r in results[3:]] == ["a small document", "another one"]
    assert [r.id for r in results] == [document_id("s", "f", n) for n in range(5)]  # rows numbered across groups


def test_a_folder_written_by_datasets_reads_with_its_columns_named(tmp_path):
    """--text-column, --id-column, --url-column: a `datasets` export (Parquet or JSONL) with its own column names."""
    import datasets

    from pipeline.job.run import build_parser, config_from_args

    rows = {"content": ["A first text.", "A second one."], "doc_id": ["a-1", "a-2"], "link": ["https://x.example/1", ""]}
    ds = datasets.Dataset.from_dict(rows)
    ds.to_parquet(str(tmp_path / "set.parquet"))
    ds.to_json(str(tmp_path / "set.jsonl"))
    args = build_parser().parse_known_args(["--input", "x", "--output", "o", "--text-column", "content",
                                            "--id-column", "doc_id", "--url-column", "link"])[0]
    config = config_from_args(args).text
    for name, fmt in (("set.parquet", PARQUET), ("set.jsonl", "jsonl")):
        with open(tmp_path / name, "rb") as fh:
            docs = list(read_text_records(fh, source="hf", filename=name, fmt=fmt, config=config))
        assert [d.text for d in docs] == rows["content"] and [d.record_id for d in docs] == rows["doc_id"]
        assert [d.url for d in docs] == rows["link"]


def test_a_records_date_is_kept_as_source_date_in_every_form_a_set_writes_it(tmp_path):
    """FineWeb's `date` (ISO text with Z), Dolma's `created` (fractions; --date-column created), a Parquet
    timestamp column, Unix seconds: metadata.source_date, UTC, the evidence of origin paragraph dedup reads
    (stages/origin.py). What is not a date (a word, a boolean, a huge string) leaves no source_date."""
    import datetime
    import json

    from stages.origin import earliest_date, iso_utc

    assert iso_utc("2013-05-18T10:38:42Z") == "2013-05-18T10:38:42Z"
    assert iso_utc("2023-03-01T12:00:00.000+02:00") == "2023-03-01T10:00:00Z"
    assert iso_utc("2019-04-25") == "2019-04-25T00:00:00Z"
    assert iso_utc(0) == "1970-01-01T00:00:00Z"
    assert iso_utc(datetime.datetime(2020, 1, 2, 3, 4, 5)) == "2020-01-02T03:04:05Z"
    assert [iso_utc(v) for v in ("yesterday", True, "2" * 100, None, [2020])] == [None] * 5
    pq.write_table(pa.table({"text": ["A text.", "Another text."],
                             "date": pa.array([datetime.datetime(2014, 7, 1, 9, 30), None], pa.timestamp("ms"))}),
                   tmp_path / "set.parquet")
    docs = read(tmp_path / "set.parquet")
    assert [d.metadata.get("source_date") for d in docs] == ["2014-07-01T09:30:00Z", None]
    assert earliest_date("", docs[0].metadata) == "2014-07-01T09:30:00Z"
    (tmp_path / "dolma.jsonl").write_text(
        json.dumps({"id": "d1", "text": "A text.", "created": "2023-03-01T00:00:00.000Z"}) + "\n" +
        json.dumps({"id": "d2", "text": "Another text.", "created": "not a date"}) + "\n")
    with open(tmp_path / "dolma.jsonl", "rb") as fh:
        dolma = list(read_text_records(fh, source="s", filename="f", fmt="jsonl",
                                       config=TextSourceConfig(date_field="created")))
    assert [d.metadata.get("source_date") for d in dolma] == ["2023-03-01T00:00:00Z", None]
