"""The host devices: one module per kernel family, each the one host API of its simulated blocks.

Each module holds three things, after the model of Glasgow's applet interfaces (one host API
that the CLI, the simulation tests and the hardware tests all drive):

* the cocotb-side driver of its blocks (a class that owns the block's ports, memories and
  registers and offers a driver's operations as coroutines);
* its sessions: coroutines ``session(dut, job)`` that build the driver, do the job and return
  the reply, listed in the module's ``SESSIONS``;
* a synchronous ``run_*`` API, which runs one session in a simulation through
  :func:`run_session` and returns NumPy results (where a flow outside the block's own tests
  needs one: the top-k kernel's is :mod:`.smartssd`'s).

=========================  ======================================================================
:mod:`.updater`            ``*_updater`` kernels: :class:`~.updater.UpdaterDevice`, ``run_jobs``,
                           ``update``, ``statistics``, ``run_program``
:mod:`.topk`               ``topk_updater``: :class:`~.topk.TopKUpdaterDevice` (tests, :mod:`.smartssd`)
:mod:`.smartssd`           Smart-Infinity on N SmartSSDs: :class:`~.smartssd.SmartSSDArray` (the
                           host flow; golden models or ``topk_updater`` / ``*_updater`` served by
                           one simulation, :class:`~.smartssd.RtlDevices`)
:mod:`.smartssd_torch`     its ``torch.optim.Optimizer``, :class:`~.smartssd_torch.SmartInfinityOptimizer`
:mod:`.aggregate`          ``aggregation_pipeline`` and ``tiled_gemm``:
                           :class:`~.aggregate.AggregationDevice`, :class:`~.aggregate.GemmDevice`,
                           ``run_gemms``, ``run_aggregation``; the checked pipeline testbench
                           :class:`~.aggregate.AggregationTB`, ``run_graphs`` (the bench's)
:mod:`.runtime`            ``runtime_cluster``: :class:`~.runtime.FCsNHost` (the seed's Table 4.1),
                           ``run_cluster``; a node on a switch port, :class:`~.runtime.SwitchPort`
:mod:`.runtime_gcn`        a two-layer GCN on ``runtime_cluster`` with the GEMM unit: ``run_gcn``
:mod:`.runtime_sessions`   the runtime's checked sessions (beside the host API, which is long
                           enough alone): one ``runtime_node`` with the cluster played
                           (:class:`~.runtime_sessions.NodeTB`), a cluster job checked against the
                           golden protocol; ``measure_node``, ``measure_flood``
:mod:`.collective`         an all-reduce leaf on a switch port, :class:`~.collective.Leaf`, in
                           :class:`~.collective.AllReduceTB` and :class:`~.collective.TieredTB`,
                           ``measure_traffic``, ``run_program`` (a training loop through the GCU);
                           ``ring_cluster``: :class:`~.collective.RingTB`, ``measure_ring``
:mod:`.fp`                 FP units: :func:`~.fp.golden_binding`, :class:`~.fp.UnitTB`,
                           ``measure_issue_rate``
:mod:`.compress`           compress blocks: :class:`~.compress.CompressTB`,
                           :class:`~.compress.EngineTB`, :class:`~.compress.AxiDecompressorTB`,
                           ``run_scatter_throughput``, ``run_decompressor_traffic``
:mod:`.compress_dram`      ``topk_dram_scatter``: :class:`~.compress_dram.DramScatterTB`,
                           ``run_dram_scatter_traffic``
:mod:`.dlrm`               ``embedding_cache``: :class:`~.dlrm.CacheTB`, ``run_throughput``
:mod:`.dlrm_bag`           ``embedding_bag``: :class:`~.dlrm_bag.BagTB`, ``run_throughput``
:mod:`.bus`                the AXI DMA engines: :class:`~.bus.DmaTB`, :class:`~.bus.ReaderTB`,
                           :class:`~.bus.WriterTB`, ``run_throughput``
:mod:`.stream`             stream blocks: :class:`~.stream.StreamTB`, ``run_stream_check``
                           (``neartrain run``), ``run_throughput``
=========================  ======================================================================

The demos and ``neartrain run`` drive the simulator only through these devices; tests and
benches use their drivers inside their own cocotb tests, or their ``run_*``. The one cocotb module
that every ``run_*`` runs is :mod:`scripts.sim.session`: it dispatches the job to its named
session. Nothing here imports ``testbenches/`` or the demos.
"""

__all__ = ["SESSION_MODULE", "run_session"]

SESSION_MODULE = "scripts.sim.session"


def run_session(block, session, job=None, *, params=None, extra_env=None, internals=False, model_opt=None):
    """Run the session ``session`` (``"<family>.<name>"``) on ``block`` in one simulation.

    Parameters
    ----------
    block : str or type
        A registered block name (or a component class), as for
        :func:`scripts.sim.runner.run_cocotb`.
    session : str
        A key of :data:`scripts.sim.session.SESSIONS`, e.g. ``"aggregate.gemm"``.
    job : object, optional
        Any picklable argument, handed to the session coroutine.
    params : dict, optional
        The block's parameters.
    extra_env : dict, optional
        Knob overrides (``NEARTRAIN_VECTORS``, ``NEARTRAIN_SEED``) for this run.
    internals : bool, optional
        Build the whole design public, for a session that reads inside a submodule (as
        :func:`~scripts.sim.runner.run_cocotb`).
    model_opt : str, optional
        The model's C++ optimisation (as :func:`~scripts.sim.runner.run_cocotb`).

    Returns
    -------
    object
        What the session returned (pickled back from the simulation).

    Raises
    ------
    scripts.sim.runner.SimulationError
        If the session raised or failed an assertion.
    """
    from scripts.sim.runner import run_cocotb

    return run_cocotb(block, SESSION_MODULE, params=params, testcase="session",
                      job={"session": session, "job": job}, extra_env=extra_env,
                      internals=internals, model_opt=model_opt).reply
