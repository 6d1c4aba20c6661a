"""The simulation library: what the CLI, the demos, the benches and the tests share to run
Amaranth blocks in cocotb on Verilator.

:mod:`.runner` (``run_cocotb``: elaborate, build, run, check that tests ran; raises
``SimulationError``), :mod:`.channel` (the job in, the reply out),
:mod:`.verilator` (the one list of warning waivers), :mod:`.knobs` (``NEARTRAIN_SEED``,
``NEARTRAIN_VECTORS``, ``WAVES``), :mod:`.stream` (stream drivers), :mod:`.tb` (``ClockedTB``,
``Scoreboard``), :mod:`.axi` (AXI fault models and a burst monitor), and the host-side device
models of the kernels: :mod:`.updater_device` (with its cocotb side: :mod:`.updater_driver` and
:mod:`.updater_job`) and :mod:`.topk_device`. Nothing here imports ``testbenches/``.
"""
