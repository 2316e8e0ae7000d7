# Everything a fresh machine needs: Python 3.11+ and make. The venv is created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lab bench clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "rolloutlab needs Python 3.11 or newer (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/rolloutlab demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Containers and cloud notebooks run as root, which JupyterLab refuses without --allow-root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP) data/rolloutlab.duckdb
	$(BIN)/jupyter lab notebooks/ $(ALLOW_ROOT)

data/rolloutlab.duckdb: | $(STAMP)
	$(BIN)/rolloutlab demo

bench: $(STAMP)
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/metrics.py
	$(BIN)/python bench/compare.py
	$(BIN)/python bench/endpoint.py
	$(BIN)/python bench/inspect_eval.py --repeat 2
	$(BIN)/python bench/inspect_eval.py --large
	$(BIN)/python bench/live.py
	$(BIN)/python bench/sweep.py
	$(BIN)/python bench/many_files.py
	$(BIN)/python bench/explorer.py
	$(BIN)/python bench/failure_modes.py
	$(BIN)/python bench/capture.py
	$(BIN)/python bench/capacity.py
	$(BIN)/python bench/lake.py
	$(BIN)/python bench/simulations.py

clean:
	rm -rf $(VENV) data/demo data/rolloutlab.duckdb data/rolloutlab.duckdb.wal
