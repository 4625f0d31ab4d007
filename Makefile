# Two commands for a fresh machine: `make demo` and `make test` (both install into .venv first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_OUT ?= out/demo

.PHONY: install demo test test-fast docs-test browser slurm slurm-demo report-screenshot clean quality-model reference-lm toxicity-model cascade-check badword-exclusions thresholds cluster-demo dask-demo ablate-demo

$(STAMP): setup.py
	@echo "[make] installing into $(VENV) (~4 min the first time; later runs skip this)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the local CPU build. An unpinned torch pulls a multi-GB CUDA build.
	@echo "[make] 1/2 torch 2.13.0, CPU build"
	$(BIN)/pip install --quiet torch==2.13.0
	@echo "[make] 2/2 refinery and what it needs (Apache Beam, trafilatura, fastText, pyarrow, ...) and the test tools"
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	# 5 % of the documents held out as valid/ (validation loss while training)
	$(BIN)/refinery run --input 'data/warc/*.warc.gz' --output $(DEMO_OUT) --overwrite --row-group-rows 16 \
		--holdout-fraction 0.05
	# a short 2-rank DDP run (gloo on CPU, NCCL on a GPU) on the shards just written
	$(BIN)/refinery train --nproc-per-node 2 --data $(DEMO_OUT) --out $(DEMO_OUT)-train --overwrite \
		--size tiny --seq-len 128 --micro-batch 8 --steps 60 --log-every 10 --eval-every 20
	# what that run held in memory and sent between ranks, measured next to the calculators
	$(BIN)/refinery report memory --run $(DEMO_OUT)-train --out $(DEMO_OUT)-train/reports
	$(BIN)/refinery report parallel --run $(DEMO_OUT)-train --out $(DEMO_OUT)-train/reports
	@echo "Read the shards: $(BIN)/python -c \"import pyarrow.parquet as pq; print(pq.read_table('$(DEMO_OUT)/data'))\""
	@echo "See the run: $(DEMO_OUT)/report.html (any browser), $(DEMO_OUT)-train/curves.png; in the terminal:"
	@echo "  $(BIN)/refinery inspect $(DEMO_OUT) --reason gopher_too_few_words --sample 3"
	@echo "  $(BIN)/refinery sample --run $(DEMO_OUT)-train --prompt 'The '   (a first look at what the model learned)"

# The same job through Beam's portable Job API: a real job service and SDK worker pool, started inside
# a network namespace with only loopback (needs root or user namespaces), torn down afterwards.
cluster-demo: install
	$(BIN)/python -m pipeline.engines.local_cluster --environment external --timeout 900 -- \
		--input 'data/warc/*.warc.gz' --output out/cluster-demo --overwrite

# The job on a real distributed engine (docs/clusters.md): a Dask scheduler and 2 worker processes
# on 127.0.0.1 inside a loopback-only network namespace; the shards must equal the local runner's byte for byte.
dask-demo: install
	$(BIN)/refinery run --input 'data/warc/*.warc.gz' --output out/dask-demo-local --overwrite --quiet
	$(BIN)/python -m pipeline.engines.local_cluster --engine dask --timeout 900 --same-as out/dask-demo-local -- \
		--input 'data/warc/*.warc.gz' --output out/dask-demo --overwrite

# From data to model (docs/training.md "From data to model"): the bundled WARCs as two sources (the
# Wayback captures and the rest), 10 % held out for validation, an anneal split; then two mixtures, a quality
# threshold and an anneal phase compared by the validation loss of a tiny proxy, 3 seeds each (3 min 42 s in all on 2
# cores, 2026-12-03, 144 s of it training; ~25 min on a busy machine before training chose its threads from the idle
# cores).
ablate-demo: install
	$(BIN)/refinery run --input 'data/warc/[!c]*.warc.gz' --input data/warc/cc_whirlwind_CC-MAIN-2024-22.warc.gz \
		--source 'wayback=data/warc/copycat_*.warc.gz' --output out/pool --overwrite --row-group-rows 16 \
		--holdout-fraction 0.1 --anneal-fraction 0.3 --quiet \
		--anneal-min-quality 0.5 --anneal-max-page-share 0.15 --anneal-max-site-share 0.4  # a small pool: docs/quality.md
	$(BIN)/refinery ablate --pool out/pool --out out/ablate --tokens 400000 --seeds 3 \
		--set schedule=wsd --set decay_fraction=0.2 \
		--variant natural= --variant 'web-heavy=--mix web=0.6,wayback=0.4' \
		--variant 'quality-0.5=--min-quality 0.5' --variant 'anneal-0.2=--anneal-fraction 0.2'

test: install browser slurm
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# The unit tier: stages, tasks and hooks on rows in memory, no whole job or process (tests/tiers.py says which);
# the inner loop while changing code. `make test` runs it and the job tier.
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -m "not job"

# README.md and the docs/ pages it links to as a script (scripts/readme_check.py): their shell and Python blocks in
# order, in a folder of their own, training at a few steps (README_SMALL=0: the sizes as written); CI runs it after
# the suite.
docs-test: install
	$(BIN)/python scripts/readme_check.py

# Headless Chromium for the report's browser test (Debian package). Where it cannot be installed
# (no apt, no root), that one test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 \
		|| { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo -n); \
		     $$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 \
		     || { $$SUDO apt-get update -qq >/dev/null 2>&1 && $$SUDO apt-get install -y -qq chromium >/dev/null 2>&1; } \
		     || echo "chromium could not be installed: the browser test of report.html will skip"; }

# `refinery slurm` without a cluster: a one-node Slurm (slurmctld, slurmd, munged) started on this machine in a
# loopback-only network namespace, the demo's WARCs as a job array (4 files a task), phase 2 as a job depending on
# it, followed to the end; every daemon stops with it (pipeline/engines/local_slurm.py; needs root, as `make slurm`).
slurm-demo: install slurm
	$(BIN)/python -m pipeline.engines.local_slurm --files-per-task 4 --timeout 900 -- \
		--input 'data/warc/*.warc.gz' --output out/slurm-demo --overwrite --quiet

# Slurm and munge for the `refinery slurm` test (it starts them in a loopback-only network namespace and
# stops them); a machine without apt or root skips that test, naming what is missing.
slurm:
	@command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 \
		|| { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo -n); \
		     $$SUDO apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 \
		     || { $$SUDO apt-get update -qq >/dev/null 2>&1 && $$SUDO apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1; } \
		     || echo "slurm-wlm could not be installed: the Slurm test will skip"; }

# A picture of the demo's report.html next to it, with the browser test's own screenshot function (a later run leaves
# it in place; SCREENSHOT=docs/report.png refreshes the README's picture).
SCREENSHOT ?= $(DEMO_OUT)/report.png
report-screenshot: browser
	$(BIN)/python -m pipeline.reports.browser $(DEMO_OUT)/report.html $(SCREENSHOT)

# Rebuilds the bundled quality classifier from real pages (needs ../shared/data; see the script's docstring).
quality-model: install
	$(BIN)/python scripts/build_quality_model.py

# Rebuilds the bundled reference language models behind the quality signal lm_surprise (needs ../shared/data;
# deterministic, ~30 seconds).
reference-lm: install
	$(BIN)/python scripts/build_reference_lm.py

# Rebuilds the bundled toxicity classifier and its card (needs ../shared/data; deterministic, ~5 minutes).
toxicity-model: install
	$(BIN)/python scripts/build_toxicity_model.py

# The cascade extraction engine's check (stages/models/extract_cascade.json), fitted on trafilatura's 990
# annotated pages, with its two-fold-by-site measurements (needs ../shared/data; ~1 minute).
cascade-check: install
	$(BIN)/python scripts/build_cascade_check.py

# Per-language thresholds: rules calibrated on NTREX-128 news, language-ID thresholds also on FLORES-200
# train/dev and Tatoeba, 79 languages lid.176 cannot name included (needs ../shared/data; ~6 minutes).
thresholds: install
	$(BIN)/python scripts/build_thresholds.py

# Lists the LDNOOBW entries that are ordinary words of news/Wikipedia text (needs ../shared/data).
badword-exclusions: install
	$(BIN)/python scripts/build_badword_exclusions.py

clean:
	rm -rf $(VENV) out .pytest_cache *.egg-info
