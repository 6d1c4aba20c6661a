"""The simulation library: what the CLI, the demos, the benches and the tests share to run
Amaranth blocks in cocotb on Verilator.

:mod:`.runner` (``run_cocotb``: elaborate, build, run, check that tests ran; raises
``SimulationError``), :mod:`.channel` (the job in, the reply out),
:mod:`.verilator` (the one list of warning waivers), :mod:`.knobs` (``NEARTRAIN_SEED``,
``NEARTRAIN_VECTORS``, ``WAVES``), :mod:`.stream` (stream drivers), :mod:`.tb` (``ClockedTB``,
``Scoreboard``), :mod:`.axi` (AXI fault models and a burst monitor), and the host devices of
the kernel families, :mod:`.devices` (one module per family, each a driver, its sessions and a
synchronous ``run_*`` API), whose sessions all run in the one cocotb module :mod:`.session`.
Nothing here imports ``testbenches/`` or the demos.
"""
