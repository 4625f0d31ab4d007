"""`refinery annotate` against a chat-completions server on 127.0.0.1 (standing in for the model a user serves:
the thing under test is the command's sampling, protocol, parsing, label file and training, not a model)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pyarrow.parquet as pq
import pytest

from pipeline.commands.annotate import RUBRIC, main
from stages.quality import QualityConfig, QualityScorer


def rule(text: str) -> int | None:
    """The stand-in annotator's grade: the share of lines that end a sentence, on a 0-5 scale."""
    if "casino" in text.lower():
        return None  # a reply without a score: the command must skip it and say so
    lines = [line for line in text.splitlines() if line.strip()]
    return round(5 * sum(line.rstrip().endswith((".", "!", "?")) for line in lines) / max(len(lines), 1))


class Annotator(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Annotator.seen.append((self.path, self.headers.get("Authorization"), body))
        grade = rule(body["messages"][1]["content"])
        reply = f"Mostly prose.\nScore: {grade}" if grade is not None else "I cannot judge this page."
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = HTTPServer(("127.0.0.1", 0), Annotator)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Annotator.seen = []
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_annotate_grades_a_sample_and_trains_a_graded_model(demo_run, endpoint, tmp_path, monkeypatch, capsys):
    out, _ = demo_run
    monkeypatch.setenv("MY_KEY", "secret")
    labels, model = tmp_path / "labels.jsonl", tmp_path / "graded.ftz"
    args = ["--endpoint", endpoint, "--model", "judge-1", "--data", str(out), "--sample", "60", "--seed", "3",
            "--out", str(labels), "--api-key-env", "MY_KEY", "--train", str(model)]
    assert main(args) == 0
    rows = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    path, auth, body = Annotator.seen[0]
    assert len(Annotator.seen) == 60 and path == "/v1/chat/completions" and auth == "Bearer secret"
    assert body["model"] == "judge-1" and body["temperature"] == 0 and body["messages"][0]["content"] == RUBRIC
    skipped = sum(1 for _, _, b in Annotator.seen if rule(b["messages"][1]["content"]) is None)
    assert skipped > 0 and len(rows) == 60 - skipped
    assert f"annotated {len(rows)} of 60 documents ({skipped} replies without a score)" in capsys.readouterr().out
    kept = {r["id"]: r["text"] for r in pq.read_table(str(out / "data"), columns=["id", "text"]).to_pylist()}
    for row in rows:  # each label is the grade of that document's text
        assert row["text"] == kept[row["id"]] and row["score"] == rule(row["text"][:4000])
    scores = QualityScorer(QualityConfig(model=str(model))).score([r["text"] for r in rows])
    assert all(0.0 <= s <= 1.0 for s in scores)
    main(args[:-2] + ["--out", str(tmp_path / "again.jsonl")])  # the same seed samples the same documents
    assert [json.loads(x)["id"] for x in (tmp_path / "again.jsonl").read_text().splitlines()] == [r["id"] for r in rows]


def test_unreachable_endpoint_is_one_error_line(demo_run, tmp_path, capsys):
    out, _ = demo_run
    server = HTTPServer(("127.0.0.1", 0), Annotator)
    port = server.server_port
    server.server_close()  # nothing listens there now
    code = main(["--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m", "--data", str(out), "--sample", "2",
                 "--out", str(tmp_path / "l.jsonl"), "--timeout", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("refinery annotate: error: request 1 to") and err.count("\n") == 1
