# Two commands do everything on a fresh machine: `make run` and `make test` (both create .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PERFWH_HOME ?= $(CURDIR)/data
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
PORT ?= 3000

.PHONY: run test ui manifest validate bench lint clean-data help

help:
	@echo "make run       simulate a demo fleet if landing/ is empty, build everything, print the summary"
	@echo "make test      the whole test suite (no GPU, no network beyond loopback)"
	@echo "make ui        the Dagster UI on http://127.0.0.1:$(PORT)"
	@echo "make validate  dagster definitions validate -w workspace.yaml"
	@echo "make lint      ruff check and format check"
	@echo "make bench     benchmarks under bench/ (ratios against a baseline measured in the same run)"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

manifest: $(STAMP)
	cd dbt_project && ../$(BIN)/dbt parse --quiet --project-dir . --profiles-dir .

run: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/perfwh simulate --scenario demo --seed 7 --if-empty
	$(BIN)/perfwh build

test: $(STAMP)
	$(BIN)/python -m pytest -q

validate: manifest $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster definitions validate -w workspace.yaml

ui: manifest $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check perf_assets probes tests bench
	$(BIN)/ruff format --check perf_assets probes tests bench

bench: $(STAMP)
	$(BIN)/python bench/bench_changepoint.py
	$(BIN)/python bench/bench_ingest.py

clean-data:
	rm -rf data .dagster_home
