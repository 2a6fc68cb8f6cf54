# Two commands do everything on a fresh machine: `make run` and `make test` (both create .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The tests also need the spark extra (pyspark, dbt-spark: ~0.5 GB); `make run` does not.
SPARK_STAMP := $(VENV)/.installed-spark
export PERFWH_HOME ?= $(CURDIR)/data
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
PORT ?= 3000
# The UI listens on loopback only; set PERFWH_UI_HOST (e.g. to a host's address) to serve beyond it, behind auth.
PERFWH_UI_HOST ?= 127.0.0.1

.PHONY: run test browser ui manifest validate bench bench-traces bench-detectors hta-reference lint clean-data help

help:
	@echo "make run       simulate a demo fleet if landing/ is empty, build everything, print the summary"
	@echo "make test      the whole test suite (no GPU, no network beyond loopback)"
	@echo "make ui        the Dagster UI on http://$(PERFWH_UI_HOST):$(PORT) (loopback unless PERFWH_UI_HOST is set)"
	@echo "make validate  dagster definitions validate -w workspace.yaml"
	@echo "make lint      ruff check and format check"
	@echo "make bench     benchmarks under bench/ (ratios against a baseline measured in the same run)"
	@echo "make bench-traces / hta-reference   Kineto loading vs HTA; HTA's figures for the agreement tests"
	@echo "make bench-detectors   our change-point detector vs Apache Otava and ruptures PELT (F1, series/s)"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,probes]'
	touch $(STAMP)

$(SPARK_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $(SPARK_STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

manifest: $(STAMP)
	cd dbt_project && ../$(BIN)/dbt parse --quiet --project-dir . --profiles-dir .

run: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/perfwh simulate --scenario demo --seed 7 --if-empty
	$(BIN)/perfwh build

# Two pytest-xdist workers: each session-built fleet is built by one of them (tests/conftest.py). PYTEST_WORKERS=0 runs
# the suite in one process.
PYTEST_WORKERS ?= 2
test: $(STAMP) $(SPARK_STAMP) browser
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup

# Debian's chromium for the browser tests (installed with apt-get when missing and run as root).
browser:
	@.ci/ensure_chromium.sh

validate: manifest $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster definitions validate -w workspace.yaml

ui: manifest $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h $(PERFWH_UI_HOST) -p $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check perf_assets probes tests bench
	$(BIN)/ruff format --check perf_assets probes tests bench

bench: $(STAMP)
	$(BIN)/python bench/bench_changepoint.py
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_dcgm.py
	$(BIN)/python bench/bench_simulate.py

# Trace benchmarks need Holistic Trace Analysis in its own venv (never the project's).
HTA_VENV ?= /tmp/hta-venv
$(HTA_VENV)/bin/python:
	$(PYTHON) -m venv $(HTA_VENV)
	$(HTA_VENV)/bin/python -m pip install -q HolisticTraceAnalysis==0.5.0

bench-traces: $(STAMP) $(HTA_VENV)/bin/python
	PERFWH_HTA_PYTHON=$(HTA_VENV)/bin/python $(BIN)/python bench/bench_traces.py

hta-reference: $(HTA_VENV)/bin/python
	$(HTA_VENV)/bin/python bench/hta_agreement.py --out bench/hta_reference.json

# Detector benchmark: Apache Otava and ruptures each in a venv of their own under bench/.venvs (never the project's).
DETBENCH_VENVS := bench/.venvs
DETBENCH_OUT ?= /tmp/detbench/bench_detectors.json
$(DETBENCH_VENVS)/otava/.installed: bench/requirements-otava.txt
	test -x $(DETBENCH_VENVS)/otava/bin/python || $(PYTHON) -m venv $(DETBENCH_VENVS)/otava
	$(DETBENCH_VENVS)/otava/bin/python -m pip install -q -r bench/requirements-otava.txt
	touch $@

$(DETBENCH_VENVS)/ruptures/.installed: bench/requirements-ruptures.txt
	test -x $(DETBENCH_VENVS)/ruptures/bin/python || $(PYTHON) -m venv $(DETBENCH_VENVS)/ruptures
	$(DETBENCH_VENVS)/ruptures/bin/python -m pip install -q -r bench/requirements-ruptures.txt
	touch $@

bench-detectors: $(STAMP) $(DETBENCH_VENVS)/otava/.installed $(DETBENCH_VENVS)/ruptures/.installed
	PYTHONPATH=$(CURDIR) $(BIN)/python bench/bench_detectors.py --otava-python $(DETBENCH_VENVS)/otava/bin/python \
		--ruptures-python $(DETBENCH_VENVS)/ruptures/bin/python --out $(DETBENCH_OUT)

clean-data:
	rm -rf data .dagster_home
