"""The job: `refinery run` from input files to shards, ledger, report and manifest.

Phase 1 (`prepare`) reads each input file and runs the per-document stages before the first global
one, writing a prepared part per file; phase 2 reads the parts' signatures for dedup (`dedup`,
`signatures`), finishes each part through the remaining stages and the mix (`finish`, `mix`,
`holdout`), and writes its shards (`output`). `run` matches inputs, builds and runs the Beam graph and
publishes; `schema` holds every record format; `transforms` the Beam adapters and counters.
"""
