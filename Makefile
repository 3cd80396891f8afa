# Quick start: `make demo` and `make test`. Each sets up what it needs in ./.venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP_TF := $(VENV)/.stamp-tf
STAMP_TEST := $(VENV)/.stamp-test

.PHONY: demo test test-fast bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_TF): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[tf]'
	touch $@

$(STAMP_TEST): pyproject.toml $(STAMP_TF)
	$(BIN)/python -m pip install --quiet -e '.[tf,test,pandas,migrate]'
	touch $@

demo: $(STAMP_TF)
	$(BIN)/tracebridge demo

test: $(STAMP_TEST)
	bash tests/viewers/setup.sh $(VENV)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP_TEST)
	$(BIN)/python -m pytest -q -m "not tf and not slow"

bench: $(STAMP_TEST)
	$(BIN)/python bench/bench_stepstats.py
	$(BIN)/python bench/bench_xspace.py
	$(BIN)/python bench/bench_capture.py
	$(BIN)/python bench/bench_html.py

clean:
	rm -rf $(VENV) tracebridge-demo bench/out
