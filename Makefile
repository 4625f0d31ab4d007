# Two commands for a fresh machine: `make demo` and `make test` (both install into .venv first).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO_OUT ?= out/demo

.PHONY: install demo test clean quality-model

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the local CPU build. An unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/refinery run --input 'data/warc/*.warc.gz' --output $(DEMO_OUT) --overwrite
	@echo "Read the shards: $(BIN)/python -c \"import pyarrow.parquet as pq; print(pq.read_table('$(DEMO_OUT)/data'))\""

test: install
	$(BIN)/python -m pytest

# Rebuilds the bundled quality classifier from real pages (needs ../shared/data; see the script's docstring).
quality-model: install
	$(BIN)/python scripts/build_quality_model.py

clean:
	rm -rf $(VENV) out .pytest_cache *.egg-info
