"""A run to and from S3 against the same run on local files: wall time of each (the ratio is the cost of the object
store, here moto's server on 127.0.0.1, so latency is nearly nil), how many S3 file operations the run made, and what
a boto3 client costs to build: what Beam 2.77 paid on every operation before pipeline/storage.py shared one client.

    .venv/bin/python bench/object_store.py [--files N] [--repeats R]
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

WARCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "warc")
FILES = ["dolma_sample-0000.warc.gz", "dolma_sample-0001.warc.gz", "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz",
         "cc_whirlwind_CC-MAIN-2024-22.warc.gz"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    import boto3
    from apache_beam.io.aws import s3io
    from apache_beam.io.aws.clients.s3 import boto3_client
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.job.run import run

    client = boto3.client("s3")
    client.create_bucket(Bucket="bench")
    folder = tempfile.mkdtemp(prefix="object_store_bench_")
    for name in FILES[:args.files]:
        shutil.copy(os.path.join(WARCS, name), folder)
        client.upload_file(os.path.join(WARCS, name), "bench", f"in/{name}")

    operations = [0]
    make_io = s3io.S3IO.__init__

    def counted(self, *a, **kw):
        operations[0] += 1
        make_io(self, *a, **kw)

    s3io.S3IO.__init__ = counted
    local_s, s3_s = [], []
    try:
        for i in range(args.repeats):
            started = time.perf_counter()
            run(["--input", os.path.join(folder, "*.warc.gz"), "--output", os.path.join(folder, f"out{i}"), "--quiet"])
            local_s.append(time.perf_counter() - started)
            operations[0] = 0
            started = time.perf_counter()
            run(["--input", "s3://bench/in/*.warc.gz", "--output", f"s3://bench/out{i}", "--quiet"])
            s3_s.append(time.perf_counter() - started)
    finally:
        s3io.S3IO.__init__ = make_io
        shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    for _ in range(10):
        boto3_client.Client(options=PipelineOptions([]))
    client_s = (time.perf_counter() - started) / 10
    server.stop()
    local, s3 = min(local_s), min(s3_s)
    print(f"{args.files} WARC file(s), best of {args.repeats}: local {local:.1f} s, S3 {s3:.1f} s "
          f"(ratio {s3 / local:.2f}); {operations[0]} S3 file operations in the S3 run; a boto3 client costs "
          f"{client_s * 1000:.0f} ms to build: {operations[0] * client_s:.1f} s more per run with a client per operation")


if __name__ == "__main__":
    main()
