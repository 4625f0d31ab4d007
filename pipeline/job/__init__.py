"""The job: `refinery run` from input files to shards, ledger, report and manifest.

Phase 1 reads each input file (`readers`) and runs the per-document stages before the first global one,
writing a prepared part per file (`prepare`: the PrepareFile task; `parts`: the part store). Phase 2 reads
the parts' signatures for dedup (`signed`, `dedup`, `signatures`), finishes each part through the
remaining stages (`finish`: the FinishPart task) and writes its shards with the mix and the splits
(`finish`: the WritePart task; `mix`, `holdout`, `output`). The tasks are plain Python; `phases` adapts
them to Beam and `graph` wires the Beam graph; `run` matches inputs, runs the graph and publishes;
`schema` holds every record format; `transforms` the Beam transforms of single stages and readers.
Counting goes through pipeline/counters.py; files of the output through pipeline/storage.py.
"""
