"""The hardware flows: what turns a registered block into Verilog, resources, a bitstream and
a table of ``docs/``.

:mod:`.elaboration` (a block's Verilog, cached), :mod:`.cache` (the content-addressed build
cache), :mod:`.synth` (Yosys resources), :mod:`.sweep`, :mod:`.sweep_cluster` and
:mod:`.sweep_table` (resources over a parameter grid, on local processes or a Dask cluster),
:mod:`.partition_sweep` (the systolic partition tables), :mod:`.bitstream` and
:mod:`.nextpnr_watch` (ECP5 place and route, stopped early when packing overfills),
:mod:`.results_table` (docs/results.md), :mod:`.docs` (the generated tables) and
:mod:`.lint_verilog` (Verilator lint of every block).
"""
